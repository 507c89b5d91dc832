package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_CONTEXT_IS_DESTROYED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.System.Logger.Level;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * cuStreamAddCallback and cuLaunchHostFunc: the caller's C function runs on the stream's own thread
 * once the work before it has completed, and work queued after it waits until it returns, so it
 * keeps its place in the stream as on a GPU. The function pointer is called through an FFM downcall.
 *
 * <p>On a capturing stream a host function becomes a host node of the graph (CUDA allows it; a stream
 * callback is refused there). As in CUDA, a stream callback runs exactly once, receiving the context's sticky error (or
 * CUDA_ERROR_CONTEXT_IS_DESTROYED while its context is being destroyed), while a host function is
 * skipped once the context has faulted.
 */
final class HostCallbacks {
    private static final System.Logger LOG = System.getLogger(HostCallbacks.class.getName());
    /** void (*CUstreamCallback)(CUstream hStream, CUresult status, void *userData), target first. */
    private static final MethodHandle STREAM_CALLBACK =
            Linker.nativeLinker().downcallHandle(FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, ADDRESS));
    /** void (*CUhostFn)(void *userData), target first. */
    private static final MethodHandle HOST_FN = Linker.nativeLinker().downcallHandle(FunctionDescriptor.ofVoid(ADDRESS));

    private final Contexts contexts;
    private final Streams streams;

    HostCallbacks(Contexts contexts, Streams streams) {
        this.contexts = contexts;
        this.streams = streams;
    }

    void addCallback(long hStream, MemorySegment callback, MemorySegment userData, int flags) {
        EmulatedContext c = contexts.active();
        EmulatedStream s = streams.resolve(hStream, c);
        checkFunction(callback, "callback");
        c.refuseInCapture(s, "cuStreamAddCallback");
        if (flags != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=" + flags + " must be 0");
        }
        MemorySegment fn = MemorySegment.ofAddress(callback.address());
        MemorySegment data = MemorySegment.ofAddress(userData.address());
        // The program's own handle goes back to it: 0 stays 0, as the real driver passes it.
        MemorySegment stream = MemorySegment.ofAddress(hStream);
        c.enqueue(s, null, () -> {
            int status = c.destroyed() ? CUDA_ERROR_CONTEXT_IS_DESTROYED : c.stickyError();
            try {
                STREAM_CALLBACK.invokeExact(fn, stream, status, data);
            } catch (Throwable t) {
                LOG.log(Level.WARNING, "stream callback failed", t);
            }
        }, "cuStreamAddCallback", true);
    }

    void launchHostFunc(long hStream, MemorySegment fn, MemorySegment userData) {
        EmulatedContext c = contexts.active();
        EmulatedStream s = streams.resolve(hStream, c);
        checkFunction(fn, "fn");
        // CUDA allows a host function in a capture: it becomes a host node (EmulatedContext.enqueue records it).
        MemorySegment target = MemorySegment.ofAddress(fn.address());
        MemorySegment data = MemorySegment.ofAddress(userData.address());
        c.enqueue(s, null, () -> {
            try {
                HOST_FN.invokeExact(target, data);
            } catch (Throwable t) {
                throw new IllegalStateException("host function failed: " + t, t);
            }
        }, "cuLaunchHostFunc");
    }

    private static void checkFunction(MemorySegment fn, String what) {
        if (HostSegments.isNull(fn) || !fn.isNative()) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + " is NULL");
        }
    }
}
