package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.testing.FakeGpu;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A destroy or free on one lane against a call of another lane of the same session that checked
 * the same object and is inside the driver with it: the destroy waits for that call to return, a
 * call starting meanwhile is refused, and the driver never sees a freed pointer, a destroyed handle
 * or a destroyed context in use ({@link FakeGpu#misuses()}).
 */
class ConcurrentDestroyTest {
    /** How long a destroy is given to show that it waits (it must not finish while the user is held). */
    private static final long WAITS_MILLIS = 300;
    private static final long LIVENESS_SECONDS = 10;

    private final FakeGpu gpu = new FakeGpu();
    private final DispatchKit kit = new DispatchKit(gpu);
    private final ExecutorService lanes = Executors.newCachedThreadPool();
    private long ctx;

    @AfterEach
    void openAndStop() {
        CountDownLatch h = gpu.hold;
        if (h != null) {
            h.countDown();
        }
        lanes.shutdownNow();
    }

    /** A context made on lane 1 and current on lanes 1 to 4. */
    private void context() throws Exception {
        DispatchKit.Reply r = kit.call(1, "cuCtxCreate", 0, 0);
        assertEquals(CuResult.CUDA_SUCCESS, r.result());
        ctx = r.handle();
        for (int lane = 2; lane <= 4; lane++) {
            assertEquals(CuResult.CUDA_SUCCESS, kit.result(lane, "cuCtxSetCurrent", ctx));
        }
    }

    private Future<Integer> onLane(int lane, String name, Object... inputs) {
        Callable<Integer> call = () -> kit.result(lane, name, inputs);
        return lanes.submit(call);
    }

    /**
     * A lane keeps the handle entry of the context its last call ran in (Call.useContext); a context the
     * driver makes with the value of one destroyed before must be looked up afresh, not taken for the
     * destroyed one's entry (whose calls are refused).
     */
    @Test
    void aContextValueTheDriverReusesAfterADestroyIsLookedUpAfresh() throws Exception {
        gpu.reuseContextValues = true;
        DispatchKit.Reply first = kit.call(1, "cuCtxCreate", 0, 0);
        assertEquals(CuResult.CUDA_SUCCESS, first.result());
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuCtxGetDevice"));
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuCtxDestroy", first.handle()));
        DispatchKit.Reply second = kit.call(1, "cuCtxCreate", 0, 0);
        assertEquals(CuResult.CUDA_SUCCESS, second.result());
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuCtxGetDevice"), "the new context, not the destroyed one's entry");
        assertTrue(gpu.misuses().isEmpty(), gpu.misuses().toString());
    }

    /** Starts {@code name} on lane 2 and returns once it is inside the driver, held there. */
    private Future<Integer> heldInTheDriver(String name, Object... inputs) throws Exception {
        gpu.hold = new CountDownLatch(1);
        Future<Integer> user = onLane(2, name, inputs);
        assertTrue(gpu.held.tryAcquire(LIVENESS_SECONDS, TimeUnit.SECONDS), name + " never reached the driver");
        return user;
    }

    /** {@code destroy} must still be waiting while the user is held; then both finish, and the driver saw no misuse. */
    private void assertWaitsThenRuns(Future<Integer> user, Future<Integer> destroy) throws Exception {
        assertThrows(TimeoutException.class, () -> destroy.get(WAITS_MILLIS, TimeUnit.MILLISECONDS),
                "the destroy went ahead while another lane's call was inside the driver with what it destroys");
        gpu.hold.countDown();
        assertEquals(CuResult.CUDA_SUCCESS, user.get(LIVENESS_SECONDS, TimeUnit.SECONDS));
        assertEquals(CuResult.CUDA_SUCCESS, destroy.get(LIVENESS_SECONDS, TimeUnit.SECONDS));
        assertEquals(List.of(), gpu.misuses());
    }

    /** Waits until a destroy on another lane has marked {@code u} dying (it then waits for its users). */
    private static void awaitDying(Uses u) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(LIVENESS_SECONDS);
        while (!u.dying()) {
            assertTrue(System.nanoTime() < end, "the destroy never started");
            Thread.sleep(1);
        }
    }

    @Test
    void aFreeWaitsForACallUsingTheAllocationAndNewUsesAreRefused() throws Exception {
        context();
        long p = kit.call(1, "cuMemAlloc", 4096L).outs().getLong(0);
        Future<Integer> user = heldInTheDriver("cuMemsetD8", p, 7, 4096L);
        Future<Integer> free = onLane(3, "cuMemFree", p);
        awaitDying(kit.session.memory().allocationAt(p).uses);
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, kit.result(4, "cuMemsetD8", p + 16, 1, 16L),
                "a call on memory being freed must be refused before the driver");
        assertWaitsThenRuns(user, free);
        assertEquals(0, gpu.liveAllocations());
        assertEquals(0, kit.session.memory().allocationCount());
    }

    @Test
    void aStreamDestroyWaitsForASynchronizeOnTheStream() throws Exception {
        context();
        long stream = kit.call(1, "cuStreamCreate", 0).handle();
        long event = kit.call(1, "cuEventCreate", 0).handle();
        Future<Integer> sync = heldInTheDriver("cuStreamSynchronize", stream);
        Future<Integer> destroy = onLane(3, "cuStreamDestroy", stream);
        awaitDying(kit.session.handles().get(stream, ParamType.STREAM).uses);
        assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, kit.result(4, "cuEventRecord", event, stream));
        assertWaitsThenRuns(sync, destroy);
        assertEquals(0, gpu.liveStreams());
        assertEquals(0, kit.session.handles().count(ParamType.STREAM));
    }

    @Test
    void anEventDestroyWaitsForARecordOfIt() throws Exception {
        context();
        long event = kit.call(1, "cuEventCreate", 0).handle();
        Future<Integer> record = heldInTheDriver("cuEventRecord", event, 0L);
        Future<Integer> destroy = onLane(3, "cuEventDestroy", event);
        assertWaitsThenRuns(record, destroy);
        assertEquals(0, gpu.liveEvents());
    }

    @Test
    void aContextDestroyWaitsForACallRunningInItAndForCallsUsingWhatWasMadeInIt() throws Exception {
        context();
        long stream = kit.call(1, "cuStreamCreate", 0).handle();
        Future<Integer> running = heldInTheDriver("cuCtxSynchronize");
        Future<Integer> destroy = onLane(3, "cuCtxDestroy", ctx);
        awaitDying(kit.session.handles().get(ctx, ParamType.CTX).uses);
        assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, kit.result(4, "cuStreamSynchronize", stream),
                "a stream of a context being destroyed must be refused before the driver");
        assertWaitsThenRuns(running, destroy);
        assertEquals(0, gpu.liveContexts());
        assertEquals(0, kit.session.handles().count(ParamType.CTX));
        assertEquals(0, kit.session.handles().count(ParamType.STREAM));
    }

    @Test
    void aPrimaryResetWaitsForACallRunningInThePrimaryContext() throws Exception {
        DispatchKit.Reply primary = kit.call(1, "cuDevicePrimaryCtxRetain", 0);
        assertEquals(CuResult.CUDA_SUCCESS, primary.result());
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(2, "cuCtxSetCurrent", primary.handle()));
        Future<Integer> running = heldInTheDriver("cuCtxSynchronize");
        Future<Integer> reset = onLane(3, "cuDevicePrimaryCtxReset", 0);
        assertWaitsThenRuns(running, reset);
        assertEquals(0, gpu.liveContexts());
    }

    /** Only users of what is destroyed are waited for: a lane held in the driver does not hold up other lanes' work. */
    @Test
    void aLaneHeldInTheDriverHoldsUpNoUnrelatedCallNorDestroy() throws Exception {
        context();
        long stream = kit.call(1, "cuStreamCreate", 0).handle();
        long p = kit.call(1, "cuMemAlloc", 4096L).outs().getLong(0);
        Future<Integer> sync = heldInTheDriver("cuStreamSynchronize", stream);
        long event = kit.call(3, "cuEventCreate", 0).handle();
        assertEquals(CuResult.CUDA_SUCCESS, onLane(3, "cuEventDestroy", event).get(LIVENESS_SECONDS, TimeUnit.SECONDS));
        assertEquals(CuResult.CUDA_SUCCESS, onLane(4, "cuMemFree", p).get(LIVENESS_SECONDS, TimeUnit.SECONDS));
        long other = kit.call(3, "cuStreamCreate", 0).handle();
        assertEquals(CuResult.CUDA_SUCCESS, onLane(3, "cuStreamDestroy", other).get(LIVENESS_SECONDS, TimeUnit.SECONDS));
        assertFalse(sync.isDone());
        gpu.hold.countDown();
        assertEquals(CuResult.CUDA_SUCCESS, sync.get(LIVENESS_SECONDS, TimeUnit.SECONDS));
        assertEquals(List.of(), gpu.misuses());
    }
}
