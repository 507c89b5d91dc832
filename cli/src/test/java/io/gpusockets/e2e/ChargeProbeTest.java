package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.status.ServerSnapshot;
import io.gpusockets.backend.tenant.Tenant;
import io.gpusockets.backend.tenant.TenantConfig;
import io.gpusockets.backend.tenant.TenantRegistry;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.ChargeRule;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.LimitFootprint;
import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The rule that cannot be talked around, probed: a tenant is charged every byte the driver allocates on
 * its session's behalf, before the driver is asked. Each entry of the API table with a {@code charge=} rule
 * is made to allocate through a backend on the emulated device (whose footprint model counts what a GPU's
 * driver takes: contexts, module code, limits, arrays), as the {@code [default]} tenant of a tenants file
 * with {@code memory = 64MiB}, and the device memory in use (the device's own cuMemGetInfo, read in a
 * context of this test's) is compared with what the tenant was charged: the call must take device memory
 * (or the probe does not reach what it charges), the charge must cover it, and both must come back when
 * what it made is released. An entry with a rule and no probe here fails, so a newly charged entry must be
 * probed; an entry whose signature shows it allocates but has no rule fails the table's parse
 * ({@link ChargeRule#allocationSign}). The real driver's figures are the GPU pass's
 * ({@code scripts/gpu-pass-quota}).
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class ChargeProbeTest {
    private static final long MIB = 1L << 20;
    private static final long LIMIT = 64 * MIB;

    @TempDir
    Path dir;
    private EmulatedDevice device;
    private BackendServer server;
    private TenantRegistry tenants;
    private String address;
    private Arena arena;
    /** A context of the test's own on the device, for reading its memory in use. */
    private long monitor;
    /** Device memory in use with no session. */
    private long idle;

    @BeforeEach
    void start() throws Exception {
        Files.writeString(dir.resolve("tenants.conf"), "[default]\nmemory = 64MiB\n");
        tenants = new TenantRegistry(TenantConfig.read(dir.resolve("tenants.conf")));
        device = new EmulatedDevice();
        server = new BackendServer(DriverHost.initialise(device, "emulated"), BackendSettings.fromSystemProperties(), tenants);
        address = server.listen(io.gpusockets.protocol.transport.TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
        arena = Arena.ofShared();
        MemorySegment ctx = arena.allocate(8);
        Cuda.ok(device.cuCtxCreate(ctx, MemorySegment.NULL, 0, 0), "cuCtxCreate(monitor)");
        monitor = ctx.get(JAVA_LONG, 0);
        Cuda.ok(device.cuCtxPopCurrent(ctx), "cuCtxPopCurrent(monitor)");
        server.snapshot();   // status makes a context of its own to read the device with, kept from then on
        idle = deviceUsed();
    }

    @AfterEach
    void stop() {
        server.close();
        device.cuCtxDestroy(monitor);
        arena.close();
    }

    private Tenant tenant() {
        return tenants.tenant("default");
    }

    /** The tenant's row of the status board. */
    private ServerSnapshot.Tenant statusRow() {
        return server.snapshot().tenants().stream().filter(t -> t.name().equals("default")).findFirst().orElseThrow();
    }

    /** Device memory in use now, as the device itself counts it. */
    private long deviceUsed() {
        MemorySegment free = arena.allocate(8), total = arena.allocate(8), out = arena.allocate(8);
        Cuda.ok(device.cuCtxPushCurrent(monitor), "cuCtxPushCurrent(monitor)");
        try {
            Cuda.ok(device.cuMemGetInfo(free, total), "cuMemGetInfo(device)");
        } finally {
            device.cuCtxPopCurrent(out);
        }
        return total.get(JAVA_LONG, 0) - free.get(JAVA_LONG, 0);
    }

    private RemoteCudaDriver connect() throws Exception {
        return RemoteCudaDriver.connect(FrontendConfig.forServer(address));
    }

    /** A session with its first context (which is the price of a session, not charged) made and current. */
    private Cuda session(RemoteCudaDriver d) {
        Cuda cu = new Cuda(d);
        Cuda.ok(d.cuInit(0), "cuInit");
        MemorySegment ctx = cu.cell();
        Cuda.ok(d.cuCtxCreate(ctx, MemorySegment.NULL, 0, 0), "cuCtxCreate(the session's first)");
        return cu;
    }

    private interface Step {
        void run() throws Exception;
    }

    /** What one probe of an entry found: the device memory it took and what the tenant was charged. */
    private record Reading(long device, long charged) {
    }

    /**
     * Runs {@code make} (the entry's call) and {@code release}, and checks the device memory taken against the
     * charge: some was taken, the charge covers it, and both are back after the release.
     */
    private Reading probe(String entry, Step make, Step release) throws Exception {
        long device0 = deviceUsed(), charged0 = tenant().memoryUsed();
        make.run();
        long took = deviceUsed() - device0, charged = tenant().memoryUsed() - charged0;
        assertTrue(took > 0, entry + " took no device memory: the probe does not reach what the entry charges");
        assertTrue(charged >= took, entry + ": the device took " + took + " bytes, the tenant was charged " + charged);
        release.run();
        awaitBack(entry, device0, charged0);
        return new Reading(took, charged);
    }

    private void awaitBack(String what, long device0, long charged0) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while ((deviceUsed() != device0 || tenant().memoryUsed() != charged0) && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(device0, deviceUsed(), what + ": device memory back after the release");
        assertEquals(charged0, tenant().memoryUsed(), what + ": the charge back after the release");
    }

    /** A probe of one charged entry on a fresh session: {@code run} calls {@link #probe}. */
    private interface EntryProbe {
        void run(Cuda cu, RemoteCudaDriver d) throws Exception;
    }

    private static final String MODULE_PTX = """
            .version 8.0
            .target sm_80
            .address_size 64
            .visible .global .align 8 .b8 big[8388608];
            .const .align 4 .u32 table[1024];
            .visible .entry k(.param .u64 p) { ret; }
            """;

    /** Every entry with a charge= rule, and how it is made to allocate and to give back. */
    private Map<String, EntryProbe> probes() {
        return Map.ofEntries(
                Map.entry("cuCtxCreate", (cu, d) -> {
                    MemorySegment ctx = cu.cell();
                    probe("cuCtxCreate", () -> Cuda.ok(d.cuCtxCreate(ctx, MemorySegment.NULL, 0, 0), "cuCtxCreate"),
                            () -> Cuda.ok(d.cuCtxDestroy(ctx.get(JAVA_LONG, 0)), "cuCtxDestroy"));
                }),
                Map.entry("cuCtxCreate_v2", (cu, d) -> {
                    MemorySegment ctx = cu.cell();
                    probe("cuCtxCreate_v2", () -> Cuda.ok(d.cuCtxCreate_v2(ctx, 0, 0), "cuCtxCreate_v2"),
                            () -> Cuda.ok(d.cuCtxDestroy(ctx.get(JAVA_LONG, 0)), "cuCtxDestroy"));
                }),
                Map.entry("cuDevicePrimaryCtxRetain", (cu, d) -> probe("cuDevicePrimaryCtxRetain",
                        () -> Cuda.ok(d.cuDevicePrimaryCtxRetain(cu.cell(), 0), "cuDevicePrimaryCtxRetain"),
                        () -> Cuda.ok(d.cuDevicePrimaryCtxRelease(0), "cuDevicePrimaryCtxRelease"))),
                Map.entry("cuModuleLoadData", (cu, d) -> {
                    MemorySegment mod = cu.cell();
                    probe("cuModuleLoadData", () -> Cuda.ok(d.cuModuleLoadData(mod, cu.arena.allocateFrom(MODULE_PTX)), "load"),
                            () -> Cuda.ok(d.cuModuleUnload(mod.get(JAVA_LONG, 0)), "cuModuleUnload"));
                }),
                Map.entry("cuModuleLoadFatBinary", (cu, d) -> {
                    MemorySegment mod = cu.cell();
                    byte[] fatbin = fatbin(MODULE_PTX);
                    MemorySegment image = cu.cell(fatbin.length).copyFrom(MemorySegment.ofArray(fatbin));
                    probe("cuModuleLoadFatBinary", () -> Cuda.ok(d.cuModuleLoadFatBinary(mod, image), "load"),
                            () -> Cuda.ok(d.cuModuleUnload(mod.get(JAVA_LONG, 0)), "cuModuleUnload"));
                }),
                Map.entry("cuLibraryLoadData", (cu, d) -> {
                    MemorySegment lib = cu.cell();
                    probe("cuLibraryLoadData", () -> {
                        Cuda.ok(d.cuLibraryLoadData(lib, cu.arena.allocateFrom(MODULE_PTX), MemorySegment.NULL,
                                MemorySegment.NULL, 0, MemorySegment.NULL, MemorySegment.NULL, 0), "cuLibraryLoadData");
                        // the driver loads it into a context when it is used there
                        Cuda.ok(d.cuLibraryGetModule(cu.cell(), lib.get(JAVA_LONG, 0)), "cuLibraryGetModule");
                    }, () -> Cuda.ok(d.cuLibraryUnload(lib.get(JAVA_LONG, 0)), "cuLibraryUnload"));
                }),
                Map.entry("cuMemAlloc", (cu, d) -> {
                    MemorySegment p = cu.cell();
                    probe("cuMemAlloc", () -> Cuda.ok(d.cuMemAlloc(p, 4 * MIB), "cuMemAlloc"),
                            () -> Cuda.ok(d.cuMemFree(p.get(JAVA_LONG, 0)), "cuMemFree"));
                }),
                Map.entry("cuMemAllocManaged", (cu, d) -> {
                    MemorySegment p = cu.cell();
                    Reading r = probe("cuMemAllocManaged", () -> Cuda.ok(d.cuMemAllocManaged(p, 4 * MIB, 1), "cuMemAllocManaged"),
                            () -> Cuda.ok(d.cuMemFree(p.get(JAVA_LONG, 0)), "cuMemFree"));
                    assertTrue(r.charged() >= 4 * MIB, "the size asked is charged: " + r.charged());
                }),
                Map.entry("cuMemAllocPitch", (cu, d) -> {
                    MemorySegment p = cu.cell();
                    probe("cuMemAllocPitch", () -> Cuda.ok(d.cuMemAllocPitch(p, cu.cell(), 1000, 1024, 4), "cuMemAllocPitch"),
                            () -> Cuda.ok(d.cuMemFree(p.get(JAVA_LONG, 0)), "cuMemFree"));
                }),
                Map.entry("cuArrayCreate", (cu, d) -> {
                    MemorySegment desc = cu.cell(ArrayDescriptor.SIZE), array = cu.cell();
                    new ArrayDescriptor(1024, 1024, 0x20, 2).write(desc);   // FLOAT x 2: 8 MiB
                    probe("cuArrayCreate", () -> Cuda.ok(d.cuArrayCreate(array, desc), "cuArrayCreate"),
                            () -> Cuda.ok(d.cuArrayDestroy(array.get(JAVA_LONG, 0)), "cuArrayDestroy"));
                }),
                Map.entry("cuArray3DCreate", (cu, d) -> {
                    MemorySegment desc = cu.cell(Array3DDescriptor.SIZE), array = cu.cell();
                    // a layered cubemap of 2 layers: 12 faces of 256x256 FLOAT x 4 = 12 MiB, every face charged
                    new Array3DDescriptor(256, 256, 12, 0x20, 4, Array3DDescriptor.LAYERED | Array3DDescriptor.CUBEMAP).write(desc);
                    Reading r = probe("cuArray3DCreate", () -> Cuda.ok(d.cuArray3DCreate(array, desc), "cuArray3DCreate"),
                            () -> Cuda.ok(d.cuArrayDestroy(array.get(JAVA_LONG, 0)), "cuArrayDestroy"));
                    assertTrue(r.charged() >= 12 * MIB, "every face is charged: " + r.charged());
                }),
                Map.entry("cuMipmappedArrayCreate", (cu, d) -> {
                    MemorySegment desc = cu.cell(Array3DDescriptor.SIZE), mipmap = cu.cell();
                    // 512x512 FLOAT x 4 with all 10 levels: 4 MiB, 1 MiB, 256 KiB, ... (every level charged)
                    new Array3DDescriptor(512, 512, 0, 0x20, 4, 0).write(desc);
                    Reading r = probe("cuMipmappedArrayCreate", () -> Cuda.ok(d.cuMipmappedArrayCreate(mipmap, desc, 10), "cuMipmappedArrayCreate"),
                            () -> Cuda.ok(d.cuMipmappedArrayDestroy(mipmap.get(JAVA_LONG, 0)), "cuMipmappedArrayDestroy"));
                    assertTrue(r.charged() > 5 * MIB, "every level is charged: " + r.charged());
                }),
                Map.entry("cuMemAllocAsync", (cu, d) -> {
                    MemorySegment p = cu.cell();
                    probe("cuMemAllocAsync", () -> Cuda.ok(d.cuMemAllocAsync(p, 4 * MIB, 0), "cuMemAllocAsync"), () -> {
                        Cuda.ok(d.cuMemFreeAsync(p.get(JAVA_LONG, 0), 0), "cuMemFreeAsync");
                        Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                    });
                }),
                Map.entry("cuMemAllocFromPoolAsync", (cu, d) -> {
                    MemorySegment pool = cu.cell(), p = cu.cell();
                    Cuda.ok(d.cuDeviceGetDefaultMemPool(pool, 0), "cuDeviceGetDefaultMemPool");
                    probe("cuMemAllocFromPoolAsync", () -> Cuda.ok(d.cuMemAllocFromPoolAsync(p, 4 * MIB, pool.get(JAVA_LONG, 0), 0),
                            "cuMemAllocFromPoolAsync"), () -> {
                                Cuda.ok(d.cuMemFreeAsync(p.get(JAVA_LONG, 0), 0), "cuMemFreeAsync");
                                Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                            });
                }),
                Map.entry("cuMemCreate", (cu, d) -> {
                    MemorySegment prop = cu.cell(MemoryProps.ALLOCATION_PROP_SIZE).fill((byte) 0), h = cu.cell();
                    prop.set(JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
                    prop.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
                    probe("cuMemCreate", () -> Cuda.ok(d.cuMemCreate(h, 4 * MIB, prop, 0), "cuMemCreate"),
                            () -> Cuda.ok(d.cuMemRelease(h.get(JAVA_LONG, 0)), "cuMemRelease"));
                }),
                Map.entry("cuCtxSetLimit", (cu, d) -> {
                    // each limit that reserves memory, raised and set back to its default
                    long[][] raises = {{LimitFootprint.STACK_SIZE, 1024 + 64, 1024}, {LimitFootprint.MALLOC_HEAP_SIZE, 40 * MIB, 8 * MIB},
                        {LimitFootprint.PRINTF_FIFO_SIZE, 8650752 + 16 * MIB, 8650752}};
                    for (long[] r : raises) {
                        probe("cuCtxSetLimit(" + r[0] + ")", () -> Cuda.ok(d.cuCtxSetLimit((int) r[0], r[1]), "cuCtxSetLimit"),
                                () -> Cuda.ok(d.cuCtxSetLimit((int) r[0], r[2]), "cuCtxSetLimit(back)"));
                    }
                }),
                Map.entry("cuMemGetInfo", (cu, d) -> {
                    // the tenant's view shows every charge, not only allocations: here a module's
                    MemorySegment mod = cu.cell(), free = cu.cell(), total = cu.cell();
                    Cuda.ok(d.cuModuleLoadData(mod, cu.arena.allocateFrom(MODULE_PTX)), "cuModuleLoadData");
                    long used = tenant().memoryUsed();
                    assertTrue(used >= 8 * MIB, "the module's 8 MiB global is charged: " + used);
                    Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
                    assertEquals(LIMIT, total.get(JAVA_LONG, 0), "the tenant's total is its limit");
                    assertEquals(LIMIT - used, free.get(JAVA_LONG, 0), "free: the limit less everything charged");
                    assertEquals(used, statusRow().memoryUsedBytes(), "status shows the same");
                    Cuda.ok(d.cuModuleUnload(mod.get(JAVA_LONG, 0)), "cuModuleUnload");
                }));
    }

    /**
     * cuGraphAddMemAllocNode (issue 21) charges by its handler, as a captured cuMemAllocAsync does: the
     * node's size when the node is made (the driver reserves its address then), kept for the session's
     * life whatever frees it, and refused past the tenant's limit before the driver is asked.
     */
    @Test
    void aGraphMemoryAllocationNodeIsChargedWhenMadeAndKeptUntilTheSessionEnds() throws Exception {
        awaitBack("before the graph memory probe", idle, 0);
        try (RemoteCudaDriver d = connect()) {
            Cuda cu = session(d);
            long device0 = deviceUsed(), charged0 = tenant().memoryUsed();
            MemorySegment g = cu.cell(), node = cu.cell();
            Cuda.ok(d.cuGraphCreate(g, 0), "cuGraphCreate");
            MemorySegment p = cu.cell(120).fill((byte) 0);
            p.set(JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
            p.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
            p.set(JAVA_LONG, 104, 4 * MIB);
            Cuda.ok(d.cuGraphAddMemAllocNode(node, g.get(JAVA_LONG, 0), MemorySegment.NULL, 0, p), "cuGraphAddMemAllocNode");
            assertTrue(p.get(JAVA_LONG, 112) != 0, "the node's address comes back in its parameters");
            long took = deviceUsed() - device0, charged = tenant().memoryUsed() - charged0;
            assertTrue(charged >= 4 * MIB && charged >= took, "took " + took + ", charged " + charged);
            Cuda.ok(d.cuGraphDestroy(g.get(JAVA_LONG, 0)), "cuGraphDestroy");
            assertEquals(charged0 + charged, tenant().memoryUsed(), "graph memory stays charged for the session's life");
            MemorySegment g2 = cu.cell();
            Cuda.ok(d.cuGraphCreate(g2, 0), "cuGraphCreate");
            p.set(JAVA_LONG, 104, 2 * LIMIT);
            assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY,
                    d.cuGraphAddMemAllocNode(node, g2.get(JAVA_LONG, 0), MemorySegment.NULL, 0, p), "past the tenant's limit");
        }
        awaitBack("the graph memory session's end", idle, 0);
    }

    /** Every charged entry of the table, probed on a session of its own; one without a probe fails. */
    @TestFactory
    Stream<DynamicTest> everyChargedEntryTakesNoMoreDeviceMemoryThanItsTenantIsCharged() {
        Map<String, EntryProbe> probes = probes();
        List<DynamicTest> tests = new ArrayList<>();
        for (ApiFunction f : ApiTable.get().functions()) {
            if (f.charge() == ChargeRule.NONE) {
                continue;
            }
            EntryProbe p = probes.get(f.name());
            tests.add(DynamicTest.dynamicTest(f.name() + " (charge=" + f.charge().attribute() + ")", () -> {
                assertTrue(p != null, f.name() + " has charge=" + f.charge().attribute() + " but no probe in ChargeProbeTest: add one");
                awaitBack("before " + f.name() + " (the previous session's end)", idle, 0);
                try (RemoteCudaDriver d = connect()) {
                    p.run(session(d), d);
                }
                awaitBack(f.name() + "'s session end", idle, 0);
            }));
        }
        return tests.stream();
    }

    /**
     * Issue 20's probe: 14 modules of one 512 MiB {@code .global} array each, against a 64 MiB tenant on a
     * device of 8 GiB. Each load is refused before the driver allocates anything, and the tenant's figures
     * say so; modules that fit are charged at their load, before anyone asks for a global's address.
     */
    @Test
    void modulesWhoseGlobalsPassTheLimitAreRefusedBeforeTheDriverAllocates() throws Exception {
        long device0 = deviceUsed();
        try (RemoteCudaDriver d = connect()) {
            Cuda cu = session(d);
            long session0 = deviceUsed();
            for (int i = 0; i < 14; i++) {
                MemorySegment mod = cu.cell();
                int r = d.cuModuleLoadData(mod, cu.arena.allocateFrom(globalsPtx(i, 512 * MIB)));
                assertEquals(CuResult.name(CuResult.CUDA_ERROR_OUT_OF_MEMORY), CuResult.name(r), "module " + i);
            }
            assertEquals(session0, deviceUsed(), "the device allocated nothing");
            assertEquals(0, tenant().memoryUsed());
            assertEquals(14, tenant().rejections().get("memory"));
            MemorySegment free = cu.cell(), total = cu.cell();
            Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
            assertEquals(LIMIT, free.get(JAVA_LONG, 0));

            // 16 MiB each: three fit, the fourth does not; charged at the load, not when a global's address is asked
            List<Long> loaded = new ArrayList<>();
            int r = CuResult.CUDA_SUCCESS;
            while (r == CuResult.CUDA_SUCCESS && loaded.size() < 14) {
                MemorySegment mod = cu.cell();
                r = d.cuModuleLoadData(mod, cu.arena.allocateFrom(globalsPtx(loaded.size(), 16 * MIB)));
                if (r == CuResult.CUDA_SUCCESS) {
                    loaded.add(mod.get(JAVA_LONG, 0));
                }
            }
            assertEquals(CuResult.name(CuResult.CUDA_ERROR_OUT_OF_MEMORY), CuResult.name(r));
            assertEquals(3, loaded.size());
            long charged = tenant().memoryUsed();
            assertTrue(charged >= 48 * MIB && charged >= deviceUsed() - session0, charged + " bytes charged");
            MemorySegment g = cu.cell(), size = cu.cell();
            Cuda.ok(d.cuModuleGetGlobal(g, size, loaded.getFirst(), cu.arena.allocateFrom("big")), "cuModuleGetGlobal");
            assertEquals(16 * MIB, size.get(JAVA_LONG, 0));
            assertEquals(charged, tenant().memoryUsed(), "a global's address costs nothing more");
            Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
            assertEquals(LIMIT - charged, free.get(JAVA_LONG, 0), "cuMemGetInfo shows the modules");
            assertEquals(charged, statusRow().memoryUsedBytes(), "status shows the modules");
            for (long m : loaded) {
                Cuda.ok(d.cuModuleUnload(m), "cuModuleUnload");
            }
            assertEquals(0, tenant().memoryUsed());
            assertEquals(session0, deviceUsed());
        }
        awaitBack("the session's end", device0, 0);
    }

    /** PTX declaring one {@code .global} array of {@code bytes} named {@code big}, distinct per {@code n}. */
    static String globalsPtx(int n, long bytes) {
        return ".version 8.0\n.target sm_80\n.address_size 64\n.visible .global .align 8 .b8 big[" + bytes + "];\n"
                + ".visible .entry k" + n + "() { ret; }\n";
    }

    /**
     * A fatbin of one uncompressed compute_90 PTX entry (FatbinImage's layout): 16-byte header, a 0x40-byte
     * entry header, the NUL-terminated text padded to 8 bytes.
     */
    static byte[] fatbin(String ptx) {
        byte[] text = ptx.getBytes(StandardCharsets.UTF_8);
        int payload = (text.length + 1 + 7) & ~7;
        ByteBuffer b = ByteBuffer.allocate(16 + 0x40 + payload).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(0, 0xBA55ED50).putShort(4, (short) 1).putShort(6, (short) 16).putLong(8, 0x40 + payload);
        b.putShort(16, (short) 1).putShort(18, (short) 0x0101).putInt(16 + 4, 0x40).putLong(16 + 8, payload);
        b.putInt(16 + 0x1C, 90).putLong(16 + 0x28, 0x11);
        b.put(16 + 0x40, text);
        return b.array();
    }
}
