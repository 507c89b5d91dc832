package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Device-to-host copies through the double-buffered staging path, against an in-process backend on
 * the emulated device: every chunking edge, sync and async, and the cleanup of the staging buffers.
 * "pinned" runs the emulated device behind a driver that answers cuMemAllocHost/cuMemFreeHost (as
 * the real one does) and checks that no pinned buffer outlives, or is left to, its context.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CopyOutStagingTest {
    private static final int SMALL = 64 << 10;       // CopyCalls.SMALL_COPY_OUT
    private static final int RECEIVE_CHUNK = 1 << 20; // SessionLimits.DEFAULT.chunkBytes()
    private static final int STAGING = 4 << 20;       // the staging buffer and largest DATA frame
    private static final long[] SIZES = {0, 1, SMALL - 1, SMALL, SMALL + 1, 4 * SMALL + 4096 + 1,
            RECEIVE_CHUNK - 1, RECEIVE_CHUNK, RECEIVE_CHUNK + 1, STAGING - 1, STAGING, STAGING + 1,
            3L * STAGING + 7, 4L * RECEIVE_CHUNK + 3L * STAGING + 7};

    /** cuMemAllocHost/cuMemFreeHost over the emulated device, which has neither; records misuse. */
    static final class PinnedHost {
        final EmulatedDevice device = new EmulatedDevice();
        final Map<Long, Arena> live = new ConcurrentHashMap<>();
        final Map<Long, Long> contextOf = new ConcurrentHashMap<>();
        final Map<Long, Long> sizeOf = new ConcurrentHashMap<>();
        final AtomicInteger allocated = new AtomicInteger();
        final AtomicInteger freed = new AtomicInteger();
        final List<String> violations = java.util.Collections.synchronizedList(new ArrayList<>());
        /**
         * Host-to-device copies from pinned memory still in flight as the real driver would see them: the
         * device reads such a source by DMA after the call returns, until an event recorded behind it
         * (or a synchronisation) says it is done. Reusing or freeing a source before then is recorded as
         * a violation (the emulated device itself reads the source at once, so the data cannot show it).
         */
        final List<long[]> inFlight = new ArrayList<>();
        final Map<Long, List<long[]>> coveredBy = new ConcurrentHashMap<>();
        final AtomicInteger pinnedDmas = new AtomicInteger();

        final CudaDriver driver = (CudaDriver) Proxy.newProxyInstance(CudaDriver.class.getClassLoader(),
                new Class<?>[] {CudaDriver.class}, (proxy, m, args) -> switch (m.getName()) {
                    case "cuMemAllocHost" -> allocHost((MemorySegment) args[0], (Long) args[1]);
                    case "cuMemFreeHost" -> freeHost((MemorySegment) args[0]);
                    case "cuMemHostRegister" -> register((MemorySegment) args[0], (Long) args[1]);
                    case "cuMemHostUnregister" -> unregister((MemorySegment) args[0]);
                    case "cuMemcpyHtoDAsync" -> {
                        dmaFrom((MemorySegment) args[1], (Long) args[2]);
                        yield forward(m, args);
                    }
                    case "cuEventRecord" -> {
                        synchronized (inFlight) {
                            coveredBy.put((Long) args[0], new ArrayList<>(inFlight));
                        }
                        yield forward(m, args);
                    }
                    case "cuEventSynchronize" -> {
                        Object r = forward(m, args);
                        synchronized (inFlight) {
                            inFlight.removeAll(coveredBy.getOrDefault((Long) args[0], List.of()));
                        }
                        yield r;
                    }
                    case "cuStreamSynchronize", "cuCtxSynchronize" -> {
                        Object r = forward(m, args);
                        synchronized (inFlight) {
                            inFlight.clear();
                        }
                        yield r;
                    }
                    case "cuCtxDestroy" -> {
                        long ctx = (Long) args[0];
                        contextOf.forEach((p, c) -> {
                            if (c == ctx && live.containsKey(p)) {
                                violations.add("pinned buffer 0x" + Long.toHexString(p) + " left to cuCtxDestroy");
                            }
                        });
                        yield forward(m, args);
                    }
                    default -> forward(m, args);
                });

        /** Host ranges page-locked by cuMemHostRegister: base → size. */
        final Map<Long, Long> registered = new ConcurrentHashMap<>();
        final AtomicInteger registrations = new AtomicInteger();

        private int register(MemorySegment p, long size) {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment cell = a.allocate(8);
                if (device.cuCtxGetCurrent(cell) != CuResult.CUDA_SUCCESS || cell.get(JAVA_LONG, 0) == 0) {
                    violations.add("cuMemHostRegister with no current context");
                    return CuResult.CUDA_ERROR_INVALID_CONTEXT;
                }
            }
            for (var e : registered.entrySet()) {
                if (p.address() < e.getKey() + e.getValue() && e.getKey() < p.address() + size) {
                    violations.add("cuMemHostRegister of 0x" + Long.toHexString(p.address()) + ", already registered");
                    return CuResult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
                }
            }
            registered.put(p.address(), size);
            registrations.incrementAndGet();
            return CuResult.CUDA_SUCCESS;
        }

        private int unregister(MemorySegment p) {
            Long size = registered.remove(p.address());
            if (size == null) {
                violations.add("cuMemHostUnregister of 0x" + Long.toHexString(p.address()) + ", not registered");
                return CuResult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
            }
            synchronized (inFlight) {
                for (long[] r : inFlight) {
                    if (r[0] < p.address() + size && p.address() < r[1]) {
                        violations.add("cuMemHostUnregister of 0x" + Long.toHexString(p.address()) + " while a DMA from it may be in flight");
                    }
                }
            }
            return CuResult.CUDA_SUCCESS;
        }

        private void dmaFrom(MemorySegment src, long n) {
            long p = src.address();
            boolean pinned = sizeOf.entrySet().stream()
                    .anyMatch(e -> live.containsKey(e.getKey()) && p >= e.getKey() && p < e.getKey() + e.getValue())
                    || registered.entrySet().stream().anyMatch(e -> p >= e.getKey() && p < e.getKey() + e.getValue());
            if (!pinned) {
                return;
            }
            pinnedDmas.incrementAndGet();
            synchronized (inFlight) {
                for (long[] r : inFlight) {
                    if (p < r[1] && r[0] < p + n) {
                        violations.add("pinned source 0x" + Long.toHexString(p) + "+" + n + " reused while its DMA may be in flight");
                    }
                }
                inFlight.add(new long[] {p, p + n});
            }
        }

        private Object forward(java.lang.reflect.Method m, Object[] args) throws Throwable {
            try {
                return m.invoke(device, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        }

        private int allocHost(MemorySegment pp, long size) {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment cell = a.allocate(8);
                if (device.cuCtxGetCurrent(cell) != CuResult.CUDA_SUCCESS || cell.get(JAVA_LONG, 0) == 0) {
                    violations.add("cuMemAllocHost with no current context");
                    return CuResult.CUDA_ERROR_INVALID_CONTEXT;
                }
                Arena mem = Arena.ofShared();
                long p = mem.allocate(size, 4096).address();
                live.put(p, mem);
                contextOf.put(p, cell.get(JAVA_LONG, 0));
                sizeOf.put(p, size);
                pp.reinterpret(8).set(JAVA_LONG, 0, p);
                allocated.incrementAndGet();
                return CuResult.CUDA_SUCCESS;
            }
        }

        private int freeHost(MemorySegment p) {
            Arena mem = live.remove(p.address());
            synchronized (inFlight) {
                long base = p.address(), end = base + sizeOf.getOrDefault(base, 0L);
                for (long[] r : inFlight) {
                    if (r[0] < end && base < r[1]) {
                        violations.add("pinned buffer 0x" + Long.toHexString(base) + " freed while a DMA from it may be in flight");
                    }
                }
            }
            if (mem == null) {
                violations.add("cuMemFreeHost of 0x" + Long.toHexString(p.address()) + ", not live");
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            mem.close();
            freed.incrementAndGet();
            return CuResult.CUDA_SUCCESS;
        }

        long deviceFree() {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment ctx = a.allocate(8), free = a.allocate(8), total = a.allocate(8);
                Cuda.ok(device.cuCtxCreate(ctx, MemorySegment.NULL, 0, 0), "cuCtxCreate");
                Cuda.ok(device.cuMemGetInfo(free, total), "cuMemGetInfo");
                Cuda.ok(device.cuCtxDestroy(ctx.get(JAVA_LONG, 0)), "cuCtxDestroy");
                return free.get(JAVA_LONG, 0);
            }
        }
    }

    private static BackendServer server(PinnedHost h, boolean pinned, Path dir, String[] address) throws Exception {
        CudaDriver d = pinned ? h.driver : h.device;
        BackendServer s = new BackendServer(DriverHost.initialise(d, "emulated" + (pinned ? " (pinned host)" : "")),
                BackendSettings.fromSystemProperties());
        address[0] = s.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
        return s;
    }

    /** Waits (5 s at most) until the backend has no session left; fails if one stays. */
    static void awaitNoSessions(BackendServer s) throws InterruptedException {
        for (int i = 0; i < 500 && s.sessionCount() > 0; i++) {
            Thread.sleep(10);
        }
        assertEquals(0, s.sessionCount(), "session still open");
    }

    @ParameterizedTest(name = "pinned={0}")
    @ValueSource(booleans = {false, true})
    void everyChunkingEdgeComesBackIntactAndNothingIsLeftAllocated(boolean pinned) throws Exception {
        PinnedHost h = new PinnedHost();
        Path dir = Files.createTempDirectory("gpusockets-staging");
        String[] address = new String[1];
        try (BackendServer server = server(h, pinned, dir, address)) {
            long freeBefore = h.deviceFree();
            long max = SIZES[SIZES.length - 1];
            byte[] data = new byte[(int) max + 64];
            new Random(42).nextBytes(data);
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(address[0])) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long dptr = cu.alloc(data.length);
                cu.put(dptr, data);
                long stream = cu.stream();
                MemorySegment host = Arena.ofAuto().allocate(data.length + 16L);
                for (long n : SIZES) {
                    for (int mode = 0; mode < 3; mode++) { // sync, async on a stream, async on the default stream
                        int at = (int) (n % 13); // an unaligned source
                        host.fill((byte) 0x5A);
                        int r = mode == 0 ? d.cuMemcpyDtoH(host, dptr + at, n)
                                : d.cuMemcpyDtoHAsync(host, dptr + at, n, mode == 1 ? stream : 0);
                        assertEquals("CUDA_SUCCESS", CuResult.name(r), "size " + n + " mode " + mode);
                        if (mode > 0) {
                            Cuda.ok(d.cuStreamSynchronize(mode == 1 ? stream : 0), "cuStreamSynchronize");
                        }
                        byte[] expected = java.util.Arrays.copyOfRange(data, at, at + (int) n);
                        assertArrayEquals(expected, host.asSlice(0, n).toArray(JAVA_BYTE), "size " + n + " mode " + mode);
                        assertEquals((byte) 0x5A, host.get(JAVA_BYTE, n), "byte past the end written, size " + n);
                    }
                }
                // A copy running past the allocation is refused before anything is sent.
                int r = d.cuMemcpyDtoH(host, dptr + 1, data.length);
                assertEquals("CUDA_ERROR_INVALID_VALUE", CuResult.name(r));
            }
            awaitNoSessions(server);
            assertEquals(freeBefore, h.deviceFree(), "device memory left allocated after the session");
        } finally {
            Files.deleteIfExists(dir.resolve("b.sock"));
            Files.deleteIfExists(dir);
        }
        assertEquals(List.of(), h.violations);
        if (pinned) {
            assertTrue(h.allocated.get() >= 2 && h.allocated.get() <= 4, "pinned buffers made: " + h.allocated.get());
            assertEquals(h.allocated.get(), h.freed.get(), "pinned buffers freed");
            assertEquals(Map.of(), h.live);
        } else {
            assertEquals(0, h.allocated.get());
        }
        h.device.close();
    }

    @Test
    void pinnedBuffersGoBeforeTheirContextWhicheverWayItIsDestroyed() throws Exception {
        PinnedHost h = new PinnedHost();
        Path dir = Files.createTempDirectory("gpusockets-staging");
        String[] address = new String[1];
        byte[] data = new byte[3 * STAGING + 7];
        new Random(7).nextBytes(data);
        try (BackendServer server = server(h, true, dir, address);
             RemoteCudaDriver d = RemoteCudaDriver.connect(address[0])) {
            Cuda cu = new Cuda(d);
            MemorySegment host = Arena.ofAuto().allocate(data.length);
            for (int round = 0; round < 3; round++) {
                long ctx = 0;
                if (round == 0) {
                    MemorySegment c = cu.cell();
                    Cuda.ok(d.cuCtxCreate(c, MemorySegment.NULL, 0, 0), "cuCtxCreate");
                    ctx = c.get(JAVA_LONG, 0);
                } else {
                    cu.primaryContext();
                }
                long dptr = cu.alloc(data.length);
                cu.put(dptr, data);
                Cuda.ok(d.cuMemcpyDtoH(host, dptr, data.length), "cuMemcpyDtoH");
                assertArrayEquals(data, host.toArray(JAVA_BYTE));
                int made = h.allocated.get();
                assertTrue(h.live.size() >= 2, "pinned staging in use, round " + round);
                switch (round) {
                    case 0 -> Cuda.ok(d.cuCtxDestroy(ctx), "cuCtxDestroy");
                    case 1 -> Cuda.ok(d.cuDevicePrimaryCtxRelease(0), "cuDevicePrimaryCtxRelease");
                    default -> Cuda.ok(d.cuDevicePrimaryCtxReset(0), "cuDevicePrimaryCtxReset");
                }
                assertEquals(Map.of(), h.live, "pinned buffers left after round " + round);
                assertEquals(made, h.freed.get(), "round " + round);
            }
        } finally {
            Files.deleteIfExists(dir.resolve("b.sock"));
            Files.deleteIfExists(dir);
        }
        assertEquals(List.of(), h.violations);
        h.device.close();
    }
}
