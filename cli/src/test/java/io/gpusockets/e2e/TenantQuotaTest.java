package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.tenant.Tenant;
import io.gpusockets.backend.tenant.TenantConfig;
import io.gpusockets.backend.tenant.TenantRegistry;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.PoolAttributeRequest;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import io.gpusockets.protocol.structs.MemoryProps;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two tenants, told apart by their PSK identities (each proven with a key of its own), on one backend
 * with the emulated device: alice has an 8 MiB device memory quota, bob none. Every allocation path is
 * charged to alice before the driver runs it, refused with CUDA_ERROR_OUT_OF_MEMORY past her quota
 * while bob is unaffected, and given back on free and at the session's end.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TenantQuotaTest {
    private static final long MIB = 1L << 20;

    @TempDir
    Path dir;
    private BackendServer server;
    private TenantRegistry tenants;
    private String address;
    /** Session-end warnings that a charge was missed by the release paths (SessionQuota.close). */
    private final List<String> missed = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final java.util.logging.Handler missedCharges = new java.util.logging.Handler() {
        @Override
        public void publish(java.util.logging.LogRecord r) {
            if (r.getMessage() != null && r.getMessage().contains("still charged")) {
                missed.add(r.getMessage());
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    };

    @BeforeEach
    void start() throws Exception {
        java.util.logging.Logger.getLogger("gpusockets.session").addHandler(missedCharges);
        Files.writeString(dir.resolve("alice.key"), "alice-key\n");
        Files.writeString(dir.resolve("bob.key"), "bob-key\n");
        writeConfig("8MiB", 2);
        tenants = new TenantRegistry(TenantConfig.read(dir.resolve("tenants.conf")));
        server = new BackendServer(DriverHost.initialise(new EmulatedDevice(), "emulated"),
                BackendSettings.fromSystemProperties(), tenants);
        address = server.listen(TransportUri.parse("tcp://127.0.0.1:0")).toString();
    }

    private void writeConfig(String aliceMemory, int aliceSessions) throws IOException {
        Files.writeString(dir.resolve("tenants.conf"), """
                [default]
                deny
                [tenant alice]
                match = psk:alice
                psk-file = alice.key
                memory = %s
                sessions = %d
                [tenant bob]
                match = psk:bob
                psk-file = bob.key
                """.formatted(aliceMemory, aliceSessions));
    }

    @AfterEach
    void stop() {
        server.close();
        java.util.logging.Logger.getLogger("gpusockets.session").removeHandler(missedCharges);
    }

    private RemoteCudaDriver connect(String identity) throws IOException {
        byte[] key = (identity + "-key").getBytes(StandardCharsets.UTF_8);
        return RemoteCudaDriver.connect(new FrontendConfig(List.of(address), Duration.ofSeconds(10), true, key, identity));
    }

    private Tenant alice() {
        return tenants.tenant("alice");
    }

    private static long allocResult(Cuda cu, long bytes, long[] out) {
        MemorySegment c = cu.cell();
        int r = cu.d.cuMemAlloc(c, bytes);
        out[0] = c.get(JAVA_LONG, 0);
        return r;
    }

    private static void expect(int expected, int got, String what) {
        assertEquals(CuResult.name(expected), CuResult.name(got), what);
    }

    private void awaitAliceHoldsNothing() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while ((alice().memoryUsed() != 0 || alice().sessions() != 0) && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(0, alice().memoryUsed(), "every byte back to the tenant at the session's end");
        assertEquals(0, alice().sessions());
        assertEquals(List.of(), missed, "every charge went back by its own release path");
    }

    @Test
    void quotaOverrunIsOutOfMemoryWhileAnotherTenantIsUnaffected() throws Exception {
        try (RemoteCudaDriver a = connect("alice"); RemoteCudaDriver b = connect("bob")) {
            Cuda ca = new Cuda(a), cb = new Cuda(b);
            ca.primaryContext();
            cb.primaryContext();
            long[] p = new long[1];
            long six = ca.alloc(6 * MIB);
            expect(CuResult.CUDA_ERROR_OUT_OF_MEMORY, (int) allocResult(ca, 4 * MIB, p), "alice past her 8 MiB");
            assertEquals(6 * MIB, alice().memoryUsed());
            assertEquals(1, alice().rejections().get("memory"));
            long big = cb.alloc(32 * MIB); // bob has no quota: alice's refusal is not his
            cb.put(big, new byte[] {1, 2, 3});

            // cuMemGetInfo shows each tenant its own view
            MemorySegment free = ca.cell(), total = ca.cell();
            Cuda.ok(a.cuMemGetInfo(free, total), "cuMemGetInfo(alice)");
            assertEquals(8 * MIB, total.get(JAVA_LONG, 0));
            assertEquals(2 * MIB, free.get(JAVA_LONG, 0));
            Cuda.ok(b.cuMemGetInfo(free, total), "cuMemGetInfo(bob)");
            assertTrue(total.get(JAVA_LONG, 0) > 8 * MIB, "bob sees the device: " + total.get(JAVA_LONG, 0));

            // a free gives the charge back
            Cuda.ok(a.cuMemFree(six), "cuMemFree");
            assertEquals(0, alice().memoryUsed());
            Cuda.ok((int) allocResult(ca, 8 * MIB, p), "alice's whole quota after the free");
        }
        awaitAliceHoldsNothing();
    }

    /**
     * Stream-ordered allocations a capture turns into graph memory nodes are charged when captured and stay
     * charged until the session ends: the driver keeps graph memory past the graph, so neither a captured
     * free nor destroying the graph gives it back. A captured free of an ordinary allocation moves its charge
     * to graph memory likewise (the graph may never run to free it).
     */
    @Test
    void graphMemoryIsChargedWhenCapturedAndHeldForTheSessionsLife() throws Exception {
        try (RemoteCudaDriver a = connect("alice")) {
            Cuda ca = new Cuda(a);
            ca.primaryContext();
            MemorySegment stream = ca.cell();
            Cuda.ok(a.cuStreamCreate(stream, 1), "cuStreamCreate");
            long s = stream.get(JAVA_LONG, 0);
            MemorySegment before = ca.cell();
            Cuda.ok(a.cuMemAllocAsync(before, 2 * MIB, s), "cuMemAllocAsync before the capture");
            Cuda.ok(a.cuStreamBeginCapture(s, 2), "begin (relaxed)");
            MemorySegment p = ca.cell();
            Cuda.ok(a.cuMemAllocAsync(p, 4 * MIB, s), "a graph memory node of 4 MiB");
            assertEquals(6 * MIB, alice().memoryUsed());
            Cuda.ok(a.cuMemFreeAsync(p.get(JAVA_LONG, 0), s), "its captured free");
            Cuda.ok(a.cuMemFreeAsync(before.get(JAVA_LONG, 0), s), "a captured free of the ordinary allocation");
            assertEquals(6 * MIB, alice().memoryUsed(), "captured frees give nothing back");
            expect(CuResult.CUDA_ERROR_OUT_OF_MEMORY, a.cuMemAllocAsync(ca.cell(), 4 * MIB, s), "graph memory past the quota");
            MemorySegment g = ca.cell();
            a.cuStreamEndCapture(s, g); // the refused allocation may have invalidated it: either way nothing comes back
            if (g.get(JAVA_LONG, 0) != 0) {
                Cuda.ok(a.cuGraphDestroy(g.get(JAVA_LONG, 0)), "cuGraphDestroy");
            }
            Cuda.ok(a.cuCtxSynchronize(), "cuCtxSynchronize");
            assertEquals(6 * MIB, alice().memoryUsed(), "held until the session ends");
            expect(CuResult.CUDA_ERROR_OUT_OF_MEMORY, a.cuMemAlloc(ca.cell(), 4 * MIB), "the quota stays taken");
        }
        awaitAliceHoldsNothing();
        assertTrue(missed.isEmpty(), "graph memory is given back at the end by rule, not as a missed charge: " + missed);
    }

    @Test
    void everyAllocationPathIsCharged() throws Exception {
        try (RemoteCudaDriver a = connect("alice")) {
            Cuda ca = new Cuda(a);
            ca.primaryContext();
            // cuMemAllocPitch: the driver's pitch times the rows
            MemorySegment dptr = ca.cell(), pitch = ca.cell();
            Cuda.ok(a.cuMemAllocPitch(dptr, pitch, 1000, 1024, 4), "cuMemAllocPitch");
            long pitched = pitch.get(JAVA_LONG, 0) * 1024;
            assertEquals(pitched, alice().memoryUsed());
            expect(CuResult.CUDA_ERROR_OUT_OF_MEMORY, a.cuMemAllocPitch(ca.cell(), ca.cell(), 8192, 1024, 4), "pitched past the quota");
            Cuda.ok(a.cuMemFree(dptr.get(JAVA_LONG, 0)), "cuMemFree(pitched)");
            assertEquals(0, alice().memoryUsed());

            // arrays: width x height x element bytes
            MemorySegment desc = ca.cell(ArrayDescriptor.SIZE);
            new ArrayDescriptor(1024, 1024, 0x20, 1).write(desc); // FLOAT, 1 channel: 4 MiB
            MemorySegment array = ca.cell();
            Cuda.ok(a.cuArrayCreate(array, desc), "cuArrayCreate");
            assertEquals(4 * MIB, alice().memoryUsed());
            new ArrayDescriptor(1024, 1024, 0x20, 2).write(desc); // 8 MiB more
            expect(CuResult.CUDA_ERROR_OUT_OF_MEMORY, a.cuArrayCreate(ca.cell(), desc), "an array past the quota");
            Cuda.ok(a.cuArrayDestroy(array.get(JAVA_LONG, 0)), "cuArrayDestroy");
            assertEquals(0, alice().memoryUsed());

            // stream-ordered allocation from the session's pool, whose release threshold stays the driver's 0: a
            // pool keeping freed memory would hold it past every charge (the value asked is remembered)
            MemorySegment pool = ca.cell(), threshold = ca.cell();
            Cuda.ok(a.cuDeviceGetDefaultMemPool(pool, 0), "cuDeviceGetDefaultMemPool");
            threshold.set(JAVA_LONG, 0, -1L);   // UINT64_MAX, as programs that never want memory back set it
            Cuda.ok(a.cuMemPoolSetAttribute(pool.get(JAVA_LONG, 0), PoolAttributeRequest.RELEASE_THRESHOLD, threshold), "threshold");
            threshold.set(JAVA_LONG, 0, 0);
            Cuda.ok(a.cuMemPoolGetAttribute(pool.get(JAVA_LONG, 0), PoolAttributeRequest.RELEASE_THRESHOLD, threshold), "threshold");
            assertEquals(-1L, threshold.get(JAVA_LONG, 0), "the program sees what it set");
            MemorySegment async = ca.cell();
            Cuda.ok(a.cuMemAllocAsync(async, 6 * MIB, 0), "cuMemAllocAsync");
            assertEquals(6 * MIB, alice().memoryUsed());
            expect(CuResult.CUDA_ERROR_OUT_OF_MEMORY, a.cuMemAllocAsync(ca.cell(), 4 * MIB, 0), "async past the quota");
            Cuda.ok(a.cuMemFreeAsync(async.get(JAVA_LONG, 0), 0), "cuMemFreeAsync");
            Cuda.ok(a.cuCtxSynchronize(), "cuCtxSynchronize");
            assertEquals(0, alice().memoryUsed());

            // VMM: cuMemCreate is charged until its last reference and its last mapping are gone
            MemorySegment prop = ca.cell(MemoryProps.ALLOCATION_PROP_SIZE).fill((byte) 0);
            prop.set(JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
            prop.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
            MemorySegment h = ca.cell(), va = ca.cell();
            Cuda.ok(a.cuMemCreate(h, 6 * MIB, prop, 0), "cuMemCreate");
            assertEquals(6 * MIB, alice().memoryUsed());
            expect(CuResult.CUDA_ERROR_OUT_OF_MEMORY, a.cuMemCreate(ca.cell(), 4 * MIB, prop, 0), "cuMemCreate past the quota");
            Cuda.ok(a.cuMemAddressReserve(va, 6 * MIB, 0, 0, 0), "cuMemAddressReserve");
            assertEquals(6 * MIB, alice().memoryUsed(), "an address reservation is no memory");
            Cuda.ok(a.cuMemMap(va.get(JAVA_LONG, 0), 6 * MIB, 0, h.get(JAVA_LONG, 0), 0), "cuMemMap");
            Cuda.ok(a.cuMemRelease(h.get(JAVA_LONG, 0)), "cuMemRelease");
            assertEquals(6 * MIB, alice().memoryUsed(), "still mapped: the driver still holds it");
            Cuda.ok(a.cuMemUnmap(va.get(JAVA_LONG, 0), 6 * MIB), "cuMemUnmap");
            assertEquals(0, alice().memoryUsed());
            Cuda.ok(a.cuMemAddressFree(va.get(JAVA_LONG, 0), 6 * MIB), "cuMemAddressFree");

            // a module: its globals and code, charged at its load (before the driver allocates them); given back when it is unloaded
            String small = JitLinkApiTest.HEAD + ".visible .global .align 4 .b8 small[1048576];\n";
            MemorySegment module = ca.cell();
            Cuda.ok(a.cuModuleLoadData(module, ca.arena.allocateFrom(small)), "cuModuleLoadData");
            long loaded = alice().memoryUsed();
            assertEquals(MIB + small.length(), loaded, "the global and the PTX text (its code)");
            MemorySegment g = ca.cell(), size = ca.cell();
            Cuda.ok(a.cuModuleGetGlobal(g, size, module.get(JAVA_LONG, 0), ca.arena.allocateFrom("small")), "small");
            Cuda.ok(a.cuModuleGetGlobal(g, size, module.get(JAVA_LONG, 0), ca.arena.allocateFrom("small")), "small again");
            assertEquals(loaded, alice().memoryUsed(), "asking for a global's address costs nothing more");
            String large = JitLinkApiTest.HEAD + ".visible .global .align 4 .b8 large[16777216];\n";
            expect(CuResult.CUDA_ERROR_OUT_OF_MEMORY, a.cuModuleLoadData(ca.cell(), ca.arena.allocateFrom(large)),
                    "a module whose globals pass the quota");
            Cuda.ok(a.cuModuleUnload(module.get(JAVA_LONG, 0)), "cuModuleUnload");
            assertEquals(0, alice().memoryUsed());

            // and what is still held when the session ends goes back with it
            ca.alloc(MIB);
            new ArrayDescriptor(256, 256, 0x20, 1).write(desc);
            Cuda.ok(a.cuArrayCreate(ca.cell(), desc), "cuArrayCreate");
            Cuda.ok(a.cuMemAllocAsync(ca.cell(), MIB, 0), "cuMemAllocAsync");
            Cuda.ok(a.cuMemCreate(ca.cell(), 2 * MIB, prop, 0), "cuMemCreate");
            assertTrue(alice().memoryUsed() >= 4 * MIB);
        }
        awaitAliceHoldsNothing();
    }

    @Test
    void sessionLimitRefusesAtTheHandshakeAndAReloadChangesLimitsWithoutDroppingSessions() throws Exception {
        try (RemoteCudaDriver a1 = connect("alice"); RemoteCudaDriver a2 = connect("alice")) {
            var refused = assertThrows(IOException.class, () -> connect("alice"));
            assertTrue(refused.getMessage().contains("tenant alice is at its limit of 2 session(s)"), refused.getMessage());
            var stranger = assertThrows(IOException.class, () -> RemoteCudaDriver.connect(new FrontendConfig(
                    List.of(address), Duration.ofSeconds(10), true, "bob-key".getBytes(StandardCharsets.UTF_8), "mallory")));
            assertTrue(stranger.getMessage().contains("authentication failed"), stranger.getMessage());

            Cuda ca = new Cuda(a1);
            ca.primaryContext();
            long[] p = new long[1];
            expect(CuResult.CUDA_ERROR_OUT_OF_MEMORY, (int) allocResult(ca, 12 * MIB, p), "12 MiB of 8");
            writeConfig("16MiB", 3);
            assertEquals(null, tenants.reload());
            Cuda.ok((int) allocResult(ca, 12 * MIB, p), "12 MiB of 16 after the reload, on the same session");
            try (RemoteCudaDriver a3 = connect("alice")) {
                assertEquals(1, new Cuda(a3).deviceCount());
            }
            Files.writeString(dir.resolve("tenants.conf"), "[tenant alice]\nmatch = psk:alice\nmemory = 1 lightyear\n");
            assertTrue(tenants.reload().contains("tenants.conf:3: memory = 1 lightyear"));
            assertEquals(16 * MIB, alice().limits().memoryBytes(), "a bad file leaves the rules in force");
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (alice().sessions() != 2 && System.nanoTime() < deadline) {
                Thread.sleep(10); // the third session's end runs on the backend after its client has gone
            }
            assertEquals(2, alice().sessions(), "both sessions ran through the reloads");
        }
        awaitAliceHoldsNothing();
    }
}
