package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_DEINITIALIZED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_CONTEXT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_DEVICE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_INITIALIZED;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;

import io.gpusockets.protocol.api.CuResult;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Driver state and contexts: whether cuInit ran, the live contexts, and each calling thread's
 * context stack, which behaves as CUDA's: cuCtxCreate and cuCtxPushCurrent push, cuCtxPopCurrent
 * pops, cuCtxSetCurrent replaces the top (NULL pops it), and destroying a context pops it only from
 * the calling thread's stack; other threads keep a dangling handle that fails with
 * CUDA_ERROR_INVALID_CONTEXT. The backend relies on this to give each lane its own current context.
 */
final class Contexts {
    /**
     * Device memory a context holds for itself in the footprint model (EmulatedMemory's reservations):
     * the driver's per-context structures with its limits at their defaults. A model: on an H200 a
     * context takes hundreds of MiB, which the backend measures on the real driver; small here so that
     * tests may make many contexts within the emulated device's budget.
     */
    static final long CONTEXT_BYTES = 64L << 10;

    private static final System.Logger LOG = System.getLogger(Contexts.class.getName());
    private final int deviceCount;
    private final Handles handles;
    private final EmulatedMemory memory;
    private final Modules modules;
    /** The device's stream-capture sequences, which every context's queuing consults. */
    final Captures captures = new Captures();
    private final Set<EmulatedContext> live = ConcurrentHashMap.newKeySet();
    private final AtomicInteger serial = new AtomicInteger();
    private final ThreadLocal<ArrayDeque<EmulatedContext>> stacks = ThreadLocal.withInitial(ArrayDeque::new);
    private volatile boolean initialized;
    private volatile boolean closed;
    private final FaultScope faultScope;
    /** Scope PROCESS: the error of the first kernel fault (0 until one) and what it was; guarded by this for writes. */
    private volatile int poisonCode = CUDA_SUCCESS;
    private volatile String poisonDetail;

    Contexts(int deviceCount, Handles handles, EmulatedMemory memory, Modules modules, FaultScope faultScope) {
        this.faultScope = faultScope;
        this.deviceCount = deviceCount;
        this.handles = handles;
        this.memory = memory;
        this.modules = modules;
    }

    void init(int flags) {
        if (closed) {
            throw new CudaError(CUDA_ERROR_DEINITIALIZED, "the emulated device was closed");
        }
        if (flags != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Flags=" + flags + " must be 0");
        }
        initialized = true;
    }

    void requireInit() {
        if (closed) {
            throw new CudaError(CUDA_ERROR_DEINITIALIZED, "the emulated device was closed");
        }
        if (!initialized) {
            throw new CudaError(CUDA_ERROR_NOT_INITIALIZED, "cuInit has not been called");
        }
    }

    void checkDevice(int dev) {
        requireInit();
        if (dev < 0 || dev >= deviceCount) {
            throw new CudaError(CUDA_ERROR_INVALID_DEVICE, "device=" + dev + " of " + deviceCount);
        }
    }

    /** The calling thread's current context. */
    EmulatedContext current() {
        requireInit();
        EmulatedContext c = stacks.get().peek();
        if (c == null) {
            throw new CudaError(CUDA_ERROR_INVALID_CONTEXT, "no context is current to the calling thread");
        }
        if (c.destroyed()) {
            throw new CudaError(CUDA_ERROR_INVALID_CONTEXT, "the current context " + c.name + " was destroyed");
        }
        return c;
    }

    /** The calling thread's current context, or null when none (or a destroyed one) is current. */
    EmulatedContext currentOrNull() {
        requireInit();
        EmulatedContext c = stacks.get().peek();
        return c == null || c.destroyed() ? null : c;
    }

    /** The current context, refusing new work once it has faulted. */
    EmulatedContext active() {
        EmulatedContext c = current();
        c.throwIfFaulted();
        return c;
    }

    /** The handle at the top of the calling thread's stack (maybe of a context destroyed elsewhere), or 0. */
    long currentHandle() {
        requireInit();
        EmulatedContext c = stacks.get().peek();
        return c == null ? 0 : c.handle;
    }

    EmulatedContext find(long handle) {
        requireInit();
        EmulatedContext c = handles.find(handle, EmulatedContext.class);
        if (c == null) {
            throw new CudaError(CUDA_ERROR_INVALID_CONTEXT, "ctx=0x" + Long.toHexString(handle) + " is not a live context");
        }
        return c;
    }

    /** A live handle of {@code type} (stream, event, module, library, kernel), else CUDA_ERROR_INVALID_HANDLE. */
    <T> T lookup(long handle, Class<T> type, String what) {
        requireInit();
        T t = handles.find(handle, type);
        if (t == null) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, what + "=0x" + Long.toHexString(handle) + " is not a live handle");
        }
        return t;
    }

    /** Creates a context on {@code dev} and pushes it on the calling thread's stack. */
    long create(int flags, int dev) {
        checkDevice(dev);
        if ((flags & ~0xFF) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=0x" + Integer.toHexString(flags));
        }
        throwIfPoisoned();
        long h = handles.issue();
        EmulatedContext c = new EmulatedContext(h, dev, flags, serial.incrementAndGet(), captures, this::faulted);
        memory.reserve(c, CONTEXT_BYTES);   // CUDA_ERROR_OUT_OF_MEMORY before the context exists
        handles.register(h, c);
        live.add(c);
        if (poisonCode != CUDA_SUCCESS) {
            c.poison(poisonCode, poisonDetail); // poisoned while it was being made
        }
        stacks.get().push(c);
        return h;
    }

    /**
     * A context faulted for the first time. In scope {@link FaultScope#PROCESS} a fault that CUDA documents as
     * ending the process's use of CUDA ({@link CuResult#poisonsProcess}) poisons the device: every live context
     * takes the error and no context can be made from now on.
     */
    private void faulted(EmulatedContext c, int code, String detail) {
        if (faultScope != FaultScope.PROCESS || !CuResult.poisonsProcess(code)) {
            return;
        }
        String why;
        synchronized (this) {
            if (poisonCode != CUDA_SUCCESS) {
                return;
            }
            why = "the emulated driver is poisoned (as the real driver's process is) by a kernel fault in " + c.name
                    + ": " + CuResult.name(code) + ": " + detail;
            poisonDetail = why;
            poisonCode = code;
        }
        LOG.log(System.Logger.Level.WARNING, why + "; every context takes the error, none can be made any more"
                + " (" + FaultScope.PROP_NAME + "=" + faultScope + ")");
        for (EmulatedContext other : live) {
            other.poison(code, why);
        }
    }

    /** Scope PROCESS after a fault: no new context, as the real driver's cuCtxCreate and primary retain answer. */
    void throwIfPoisoned() {
        int code = poisonCode;
        if (code != CUDA_SUCCESS) {
            throw new CudaError(code, poisonDetail);
        }
    }

    /** The error every context creation fails with since a kernel fault poisoned the device, or 0. */
    int poisonCode() {
        return poisonCode;
    }

    void destroy(long handle) {
        EmulatedContext c = find(handle);
        ArrayDeque<EmulatedContext> stack = stacks.get();
        if (stack.peek() == c) {
            stack.pop();   // as if cuCtxPopCurrent were called
        }
        destroy(c);
    }

    /** Waits for the context's queued work (long sleeps stop early), then frees all it owns. */
    private void destroy(EmulatedContext c) {
        if (!handles.remove(c.handle, c)) {
            return;   // another thread got here first
        }
        live.remove(c);
        List<EmulatedStream> streams = c.markDestroyed();
        for (EmulatedStream s : streams) {
            s.tail().join();
        }
        streams.forEach(EmulatedStream::destroy);
        for (Allocation a : memory.unmapAll(c)) {
            memory.release(a);
        }
        memory.releaseReservations(c);
        for (Map.Entry<Long, Object> e : c.owned.entrySet()) {
            if (handles.remove(e.getKey(), e.getValue()) && e.getValue() instanceof EmulatedEvent event) {
                event.released();   // an IPC event's shared cell
            }
        }
        c.owned.clear();
        modules.forget(c);
    }

    void push(long handle) {
        stacks.get().push(find(handle));
    }

    /** Pops the calling thread's current context. */
    EmulatedContext pop() {
        requireInit();
        ArrayDeque<EmulatedContext> stack = stacks.get();
        if (stack.isEmpty()) {
            throw new CudaError(CUDA_ERROR_INVALID_CONTEXT, "the calling thread's context stack is empty");
        }
        return stack.pop();
    }

    void set(long handle) {
        requireInit();
        EmulatedContext c = handle == 0 ? null : find(handle);
        ArrayDeque<EmulatedContext> stack = stacks.get();
        stack.poll();   // NULL just pops the top (a no-op on an empty stack)
        if (c != null) {
            stack.push(c);
        }
    }

    /** Device shutdown: every context goes; later calls answer CUDA_ERROR_DEINITIALIZED. */
    void close() {
        closed = true;
        for (EmulatedContext c : List.copyOf(live)) {
            destroy(c);
        }
    }
}
