package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What the frontend answers without asking the backend: the API table's known entries (device
 * queries, asked in one batch) and each thread's current context. Every answer must equal the
 * backend's own, errors included, and change exactly when the backend's would.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LocalAnswersTest extends EmulatedBackendTest {
    /** CU_DEVICE_ATTRIBUTE_MAX of cuda.h 13.0. */
    private static final int ATTRIBUTE_MAX = 148;
    private static final int COMPUTE_MODE = 20;

    private static RemoteCudaDriver connect(String scheme, boolean localAnswers) throws IOException {
        return RemoteCudaDriver.connect(FrontendConfig.forServer(backend.address(scheme)).withLocalAnswers(localAnswers));
    }

    /** One call's CUresult and output bytes, for comparing two drivers. */
    private record Answer(int result, String output) {
    }

    private static Answer ask(Function<MemorySegment, Integer> call, int outBytes) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(Math.max(outBytes, 16));
            out.fill((byte) 0x5a);
            int r = call.apply(out);
            return new Answer(r, r == CuResult.CUDA_SUCCESS ? java.util.HexFormat.of().formatHex(out.toArray(JAVA_BYTE)) : "");
        }
    }

    /** Every device query of a runtime's start (and its bad inputs) through {@code d}, in order. */
    private static List<Answer> deviceQueries(RemoteCudaDriver d) {
        List<Answer> all = new ArrayList<>();
        all.add(ask(o -> d.cuDriverGetVersion(o), 4));
        all.add(new Answer(d.cuInit(0), ""));
        all.add(new Answer(d.cuInit(1), ""));
        all.add(ask(o -> d.cuDeviceGetCount(o), 4));
        for (int dev : new int[] {0, 1, -1, 64}) {
            all.add(ask(o -> d.cuDeviceGet(o, dev), 4));
            for (int attrib = -1; attrib <= ATTRIBUTE_MAX + 2; attrib++) {
                int a = attrib;
                all.add(ask(o -> d.cuDeviceGetAttribute(o, a, dev), 4));
            }
            for (int len : new int[] {256, 255, 13, 1, 0, -1}) {
                all.add(ask(o -> d.cuDeviceGetName(o, len, dev), Math.max(len, 0)));
            }
            for (int len : new int[] {13, 16, 32, 64, 12, 0}) {
                all.add(ask(o -> d.cuDeviceGetPCIBusId(o, len, dev), Math.max(len, 0)));
            }
            all.add(ask(o -> d.cuDeviceGetUuid(o, dev), 16));
            all.add(ask(o -> d.cuDeviceTotalMem(o, dev), 8));
            all.add(ask(o -> d.cuDeviceComputeCapability(o, o.asSlice(4), dev), 8));
            all.add(ask(o -> d.cuDeviceGetProperties(o, dev), 56));
        }
        return all;
    }

    @Test
    void knownAnswersEqualTheBackendsOwnErrorsIncluded() throws Exception {
        try (RemoteCudaDriver remote = connect("unix", false); RemoteCudaDriver local = connect("unix", true)) {
            List<Answer> direct = deviceQueries(remote);
            List<Answer> answered = deviceQueries(local);
            assertEquals(direct.size(), answered.size());
            for (int i = 0; i < direct.size(); i++) {
                assertEquals(direct.get(i), answered.get(i), "query " + i);
            }
            assertTrue(direct.stream().anyMatch(a -> a.result() == CuResult.CUDA_ERROR_INVALID_VALUE), "bad attribute ids are asked too");
            assertTrue(direct.stream().anyMatch(a -> a.result() == CuResult.CUDA_ERROR_INVALID_DEVICE), "bad devices are asked too");
            // Device 0's known queries (its ordinal, 147 attribute ids, name at 256, 4 PCI id lengths, UUID, total
            // memory, compute capability, properties) and the version, cuInit(0) and the count: 160 answers from one
            // batch; the rest (other devices, lengths and ids outside the lists) went to the backend as before.
            assertEquals(remote.roundTrips() - 160 + 1, local.roundTrips(), "round trips with local answers");
        }
    }

    @Test
    void knownQueriesNeedNoRoundTripButOthersDo() throws Exception {
        try (RemoteCudaDriver d = connect("tcp", true)) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            MemorySegment v = cu.cell();
            long before = d.roundTrips();
            for (int attrib = 0; attrib < ATTRIBUTE_MAX; attrib++) {
                if (attrib != COMPUTE_MODE) {
                    d.cuDeviceGetAttribute(v, attrib, 0);
                }
            }
            cu.deviceName();
            Cuda.ok(d.cuDeviceGetUuid(cu.cell(), 0), "cuDeviceGetUuid");
            Cuda.ok(d.cuDeviceTotalMem(v, 0), "cuDeviceTotalMem");
            assertEquals(0, d.roundTrips() - before, "all asked with cuInit's batch");
            d.cuDeviceGetAttribute(v, COMPUTE_MODE, 0);
            assertEquals(1, d.roundTrips() - before, "the compute mode can change while a program runs: asked each time");
            d.cuDeviceGetAttribute(v, ATTRIBUTE_MAX, 0);
            assertEquals(2, d.roundTrips() - before, "an id beyond cuda.h 13.0 goes to the backend");
        }
    }

    private static long current(RemoteCudaDriver d) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment c = a.allocate(8);
            c.set(JAVA_LONG, 0, -7);
            Cuda.ok(d.cuCtxGetCurrent(c), "cuCtxGetCurrent");
            return c.get(JAVA_LONG, 0);
        }
    }

    private static long create(RemoteCudaDriver d) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment c = a.allocate(8);
            Cuda.ok(d.cuCtxCreate(c, MemorySegment.NULL, 0, 0), "cuCtxCreate");
            return c.get(JAVA_LONG, 0);
        }
    }

    @Test
    void currentContextFollowsPushPopSetAndCreateOfTheThread() throws Exception {
        try (RemoteCudaDriver d = connect("unix", true)) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            assertEquals(0, current(d));
            long a = create(d);
            long trips = d.roundTrips();
            assertEquals(a, current(d), "create makes it current");
            assertEquals(trips, d.roundTrips(), "and known");
            long primary = cu.primaryContext(); // retain + set: replaces a on top
            assertEquals(primary, current(d));
            Cuda.ok(d.cuCtxPushCurrent(a), "push");
            assertEquals(a, current(d));
            trips = d.roundTrips();
            assertEquals(a, current(d));
            assertEquals(trips, d.roundTrips(), "a second get is answered here");
            MemorySegment popped = cu.cell();
            Cuda.ok(d.cuCtxPopCurrent(popped), "pop");
            assertEquals(a, popped.get(JAVA_LONG, 0));
            assertEquals(primary, current(d), "pop uncovers what lay below");
            Cuda.ok(d.cuCtxSetCurrent(0), "set NULL");
            assertEquals(0, current(d), "set NULL pops the only one");
            Cuda.ok(d.cuCtxPushCurrent(primary), "push");
            Cuda.ok(d.cuCtxPushCurrent(a), "push");
            assertEquals(a, current(d));
            Cuda.ok(d.cuCtxDestroy(a), "destroy pops it");
            assertEquals(primary, current(d));
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, d.cuCtxPushCurrent(a), "a destroyed context");
            assertEquals(primary, current(d), "a failed push changes nothing");
            Cuda.ok(d.cuDevicePrimaryCtxRelease(0), "release the last reference");
            assertEquals(0, current(d), "the primary context is gone");
        }
    }

    /** Runs {@code body} on a thread of its own and waits for it. */
    private static void onAnotherThread(Runnable body) throws Exception {
        CompletableFuture<Void> done = new CompletableFuture<>();
        Thread.ofPlatform().start(() -> {
            try {
                body.run();
                done.complete(null);
            } catch (Throwable t) {
                done.completeExceptionally(t);
            }
        });
        done.get(30, TimeUnit.SECONDS);
    }

    @Test
    void aContextDestroyedOnAnotherThreadIsNotAnsweredFromWhatThisThreadKnew() throws Exception {
        try (RemoteCudaDriver d = connect("unix", true)) {
            Cuda.ok(d.cuInit(0), "cuInit");
            long x = create(d);
            assertEquals(x, current(d));
            onAnotherThread(() -> Cuda.ok(d.cuCtxDestroy(x), "destroy on another thread"));
            long now = current(d);
            assertNotEquals(x, now, "the backend dropped it from this lane too");
            assertEquals(0, now);
        }
    }

    @Test
    void aPrimaryContextResetOrReleasedOnAnotherThreadIsNotAnsweredFromWhatThisThreadKnew() throws Exception {
        try (RemoteCudaDriver d = connect("tcp", true)) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            long primary = cu.primaryContext();
            assertEquals(primary, current(d));
            onAnotherThread(() -> Cuda.ok(d.cuDevicePrimaryCtxReset(0), "reset on another thread"));
            assertEquals(0, current(d), "reset destroyed it");

            primary = cu.primaryContext();
            assertEquals(primary, current(d));
            onAnotherThread(() -> Cuda.ok(d.cuDevicePrimaryCtxRelease(0), "release on another thread"));
            assertEquals(0, current(d), "its last release destroyed it");
        }
    }

    @Test
    void eachThreadKnowsOnlyItsOwnCurrentContext() throws Exception {
        try (RemoteCudaDriver d = connect("unix", true)) {
            Cuda.ok(d.cuInit(0), "cuInit");
            long a = create(d);
            assertEquals(a, current(d));
            long[] seen = new long[2];
            onAnotherThread(() -> {
                seen[0] = current(d);
                long b = create(d);
                seen[1] = current(d);
                Cuda.ok(d.cuCtxDestroy(b), "destroy");
            });
            assertEquals(0, seen[0], "a new thread has no current context");
            assertNotEquals(a, seen[1]);
            assertEquals(a, current(d), "another thread's create and destroy leave this thread's context alone");
        }
    }

    /**
     * The calls of a runtime-API program's start (static cudart 13, as traced: see shared/RUNTIME.md)
     * up to its first cudaMalloc, then ten runtime calls, each of which asks for the current context
     * first. Prints the round trips with and without local answers.
     */
    @Test
    void aRuntimeProgramsStartTakesAFewRoundTrips() throws Exception {
        long[] trips = new long[2];
        for (int on = 0; on < 2; on++) {
            try (RemoteCudaDriver d = connect("unix", on == 1)) {
                Cuda cu = new Cuda(d);
                MemorySegment v = cu.cell();
                Cuda.ok(d.cuDriverGetVersion(v), "cuDriverGetVersion");
                Cuda.ok(d.cuInit(0), "cuInit");
                Cuda.ok(d.cuDeviceGetCount(v), "cuDeviceGetCount");
                Cuda.ok(d.cuDeviceGet(v, 0), "cuDeviceGet");
                cu.deviceName();
                Cuda.ok(d.cuDeviceTotalMem(v, 0), "cuDeviceTotalMem");
                for (int attrib = 1; attrib <= 112; attrib++) {
                    d.cuDeviceGetAttribute(v, attrib, 0);
                }
                Cuda.ok(d.cuDeviceGetUuid(cu.cell(), 0), "cuDeviceGetUuid");
                // cudaMalloc: cuCtxGetCurrent, cuDevicePrimaryCtxRetain, (cuCtxSetCurrent), cuMemAlloc
                current(d);
                MemorySegment ctx = cu.cell();
                Cuda.ok(d.cuDevicePrimaryCtxRetain(ctx, 0), "retain");
                Cuda.ok(d.cuCtxSetCurrent(ctx.get(JAVA_LONG, 0)), "set");
                long p = cu.alloc(1 << 20);
                for (int i = 0; i < 10; i++) {
                    assertEquals(ctx.get(JAVA_LONG, 0), current(d));
                    Cuda.ok(d.cuMemsetD32(p, i, 1 << 18), "cuMemsetD32");
                }
                trips[on] = d.roundTrips();
            }
        }
        System.out.println("runtime start to first cudaMalloc plus 10 calls: " + trips[0] + " round trips asking the backend, "
                + trips[1] + " with local answers");
        assertTrue(trips[0] > 140, "every call asked: " + trips[0]);
        // batch, compute mode, retain, set, alloc (cuInit answered by the batch), 10 memsets, the first get
        assertTrue(trips[1] <= 17, "with local answers: " + trips[1]);
    }
}
