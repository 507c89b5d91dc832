package io.gpusockets.backend.testing;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * C function pointers for cuStreamAddCallback and cuLaunchHostFunc, made with FFM upcall stubs, that
 * record each call (which function, stream, status, userData, thread, time). A callback whose
 * userData was {@link #holdUntil held} blocks until the test releases it, so a test can look at the
 * stream while the callback is in progress. Upcalls must not throw: the recording never does.
 */
public final class CallbackProbe {
    /** One call of a probe function; {@code stream} and {@code status} are -1 for a host function. */
    public record Invocation(boolean hostFunction, long stream, int status, long userData, String thread, long nanos) {
    }

    /** void (*CUstreamCallback)(CUstream, CUresult, void *). */
    public static final MemorySegment STREAM_CALLBACK;
    /** void (*CUhostFn)(void *). */
    public static final MemorySegment HOST_FN;

    private static final List<Invocation> CALLS = new CopyOnWriteArrayList<>();
    private static final Map<Long, CountDownLatch> HOLDS = new ConcurrentHashMap<>();

    static {
        try {
            var lookup = MethodHandles.lookup();
            STREAM_CALLBACK = Linker.nativeLinker().upcallStub(
                    lookup.findStatic(CallbackProbe.class, "streamCallback",
                            MethodType.methodType(void.class, MemorySegment.class, int.class, MemorySegment.class)),
                    FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, ADDRESS), Arena.global());
            HOST_FN = Linker.nativeLinker().upcallStub(
                    lookup.findStatic(CallbackProbe.class, "hostFunction", MethodType.methodType(void.class, MemorySegment.class)),
                    FunctionDescriptor.ofVoid(ADDRESS), Arena.global());
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private CallbackProbe() {
    }

    /** Calls whose userData is {@code userData} (tests use distinct values, so they may run in parallel). */
    public static List<Invocation> callsWith(long userData) {
        return CALLS.stream().filter(c -> c.userData() == userData).toList();
    }

    /** Callbacks with this userData block until {@link #release}; returns the latch to release. */
    public static CountDownLatch holdUntil(long userData) {
        CountDownLatch latch = new CountDownLatch(1);
        HOLDS.put(userData, latch);
        return latch;
    }

    public static void release(long userData) {
        CountDownLatch latch = HOLDS.remove(userData);
        if (latch != null) {
            latch.countDown();
        }
    }

    /** Waits until {@code count} calls with {@code userData} were recorded. */
    public static List<Invocation> awaitCalls(long userData, int count, long millis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (callsWith(userData).size() < count && System.nanoTime() < deadline) {
            Thread.sleep(2);
        }
        return callsWith(userData);
    }

    private static void streamCallback(MemorySegment stream, int status, MemorySegment userData) {
        record(false, stream.address(), status, userData.address());
    }

    private static void hostFunction(MemorySegment userData) {
        record(true, -1, -1, userData.address());
    }

    private static void record(boolean host, long stream, int status, long userData) {
        try {
            CALLS.add(new Invocation(host, stream, status, userData, Thread.currentThread().getName(), System.nanoTime()));
            CountDownLatch hold = HOLDS.get(userData);
            if (hold != null) {
                hold.await(30, TimeUnit.SECONDS);
            }
        } catch (Throwable t) {
            // never into native code
        }
    }
}
