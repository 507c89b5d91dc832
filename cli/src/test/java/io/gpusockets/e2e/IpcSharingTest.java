package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.ShareRegistry;
import io.gpusockets.backend.status.ServerSnapshot;
import io.gpusockets.backend.tenant.TenantConfig;
import io.gpusockets.backend.tenant.TenantRegistry;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.MemoryProps;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.transport.vsock.DescriptorPassing;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * IPC memory and event handles and shareable VMM handles between sessions of one tenant (issue 24 item 1), on the
 * emulated device: in isolation context (a backend in this JVM, which shows its registry, its tenants' charges and the
 * device's memory in use) and in isolation process (a backend process, each session a worker). Shareable handles carry a
 * memory between two sessions both ways in both modes and are charged once; another tenant's session, a forged token
 * and a stale one (its exporter ended) are refused; a session's live exports are bounded; a sharing session is refused
 * a checkpoint; IPC memory and events in isolation context are refused with the cause; in isolation process they go
 * through the driver's IPC handles (skipped while the emulated device has none), and the IPC memory of address-stable
 * sessions through the window route (the exporter's physical allocations, whose descriptors the front keeps).
 *
 * <p>Shareable handles go through the frontend as a program's would: a POSIX descriptor the frontend makes in this
 * process, or the 64-byte fabric handle (the token itself), which the forged-token cases alter. The C programs
 * {@code ipc_memory} and {@code ipc_shareable} (two processes through {@code libcuda.so.1}) run against a backend
 * process in isolation process, their child once as the same tenant and once as another ({@code --expect-refused}).
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class IpcSharingTest {
    private static final long SIZE = 2L << 20; // the emulated device's granularity
    private static final int POSIX_FD = MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    private static final int FABRIC = 8;

    @TempDir
    Path dir;
    private EmulatedDevice device;
    private BackendServer server;
    private Arena arena;
    private long monitor;

    @AfterEach
    void stop() {
        if (server != null) {
            server.close();
        }
        if (device != null && monitor != 0) {
            device.cuCtxDestroy(monitor);
        }
        if (arena != null) {
            arena.close();
        }
    }

    /** The tenants file: this uid's unix:// sessions are tenant "me", anything else (tcp://) is [default]. */
    private Path tenantsFile() throws Exception {
        return tenantsFile("");
    }

    /** As {@link #tenantsFile()}, with {@code extra} lines for tenant "me". */
    private Path tenantsFile(String extra) throws Exception {
        Path conf = dir.resolve("tenants.conf");
        Files.writeString(conf, "[default]\n\n[tenant me]\nmatch = uid:" + Files.getAttribute(dir, "unix:uid") + "\n" + extra);
        return conf;
    }

    /** A backend in this JVM (isolation context) listening on unix:// and tcp://; returns {unix, tcp}. */
    private String[] inProcess() throws Exception {
        return inProcess("");
    }

    private String[] inProcess(String extraForMe) throws Exception {
        TenantRegistry tenants = new TenantRegistry(TenantConfig.read(tenantsFile(extraForMe)));
        device = new EmulatedDevice();
        server = new BackendServer(DriverHost.initialise(device, "emulated"), BackendSettings.fromSystemProperties(), tenants);
        String unix = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
        String tcp = server.listen(TransportUri.parse("tcp://127.0.0.1:0")).toString();
        arena = Arena.ofShared();
        MemorySegment ctx = arena.allocate(8);
        Cuda.ok(device.cuCtxCreate(ctx, MemorySegment.NULL, 0, 0), "cuCtxCreate(monitor)");
        monitor = ctx.get(JAVA_LONG, 0);
        Cuda.ok(device.cuCtxPopCurrent(ctx), "cuCtxPopCurrent(monitor)");
        server.snapshot(); // status's own context, kept from then on
        return new String[] {unix, tcp};
    }

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

    private long tenantUsed(String name) {
        return server.snapshot().tenants().stream().filter(t -> t.name().equals(name))
                .mapToLong(ServerSnapshot.Tenant::memoryUsedBytes).findFirst().orElse(0);
    }

    private static RemoteCudaDriver connect(String address) throws Exception {
        return RemoteCudaDriver.connect(FrontendConfig.forServer(address));
    }

    // ---- the calls

    private static MemorySegment prop(Cuda cu, int handleTypes) {
        MemorySegment p = cu.cell(MemoryProps.ALLOCATION_PROP_SIZE).fill((byte) 0);
        p.set(JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
        p.set(JAVA_INT, 4, handleTypes);
        p.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
        p.set(JAVA_INT, 12, 0);
        return p;
    }

    private static long create(Cuda cu, int handleTypes) {
        MemorySegment out = cu.cell();
        Cuda.ok(cu.d.cuMemCreate(out, SIZE, prop(cu, handleTypes), 0), "cuMemCreate");
        return out.get(JAVA_LONG, 0);
    }

    /** Reserves, maps {@code memh} and sets read-write access for device 0; returns the address. */
    private static long map(Cuda cu, long memh) {
        MemorySegment out = cu.cell();
        Cuda.ok(cu.d.cuMemAddressReserve(out, SIZE, 0, 0, 0), "cuMemAddressReserve");
        long va = out.get(JAVA_LONG, 0);
        Cuda.ok(cu.d.cuMemMap(va, SIZE, 0, memh, 0), "cuMemMap");
        MemorySegment desc = cu.cell(12).fill((byte) 0);
        desc.set(JAVA_INT, 0, MemoryProps.LOCATION_TYPE_DEVICE);
        desc.set(JAVA_INT, 8, MemoryProps.ACCESS_READWRITE);
        Cuda.ok(cu.d.cuMemSetAccess(va, SIZE, desc, 1), "cuMemSetAccess");
        return va;
    }

    private static void unmap(Cuda cu, long va) {
        Cuda.ok(cu.d.cuMemUnmap(va, SIZE), "cuMemUnmap");
        Cuda.ok(cu.d.cuMemAddressFree(va, SIZE), "cuMemAddressFree");
    }

    /** cuMemExportToShareableHandle as POSIX_FILE_DESCRIPTOR: the descriptor the frontend made in this process. */
    private static int exportFd(RemoteCudaDriver d, long memh) {
        MemorySegment fd = Arena.ofAuto().allocate(8);
        Cuda.ok(d.cuMemExportToShareableHandle(fd, memh, POSIX_FD, 0), "cuMemExportToShareableHandle(POSIX fd)");
        return fd.get(JAVA_INT, 0);
    }

    /** cuMemImportFromShareableHandle of a descriptor: {result, handle}; the descriptor stays the caller's. */
    private static long[] importingFd(RemoteCudaDriver d, int fd) {
        MemorySegment out = Arena.ofAuto().allocate(8);
        int r = d.cuMemImportFromShareableHandle(out, MemorySegment.ofAddress(fd), POSIX_FD);
        return new long[] {r, out.get(JAVA_LONG, 0)};
    }

    private static long importedFd(RemoteCudaDriver d, int fd) {
        long[] r = importingFd(d, fd);
        Cuda.ok((int) r[0], "cuMemImportFromShareableHandle(POSIX fd)");
        return r[1];
    }

    /** cuMemExportToShareableHandle as FABRIC: the 64 bytes, which are the backend's token. */
    private static byte[] exportFabric(RemoteCudaDriver d, long memh) {
        MemorySegment token = Arena.ofAuto().allocate(64);
        Cuda.ok(d.cuMemExportToShareableHandle(token, memh, FABRIC, 0), "cuMemExportToShareableHandle(FABRIC)");
        return token.toArray(JAVA_BYTE);
    }

    /** cuMemImportFromShareableHandle of fabric handle bytes: {result, handle}. */
    private static long[] importingFabric(RemoteCudaDriver d, byte[] token) {
        MemorySegment out = Arena.ofAuto().allocate(8);
        MemorySegment t = Arena.ofAuto().allocate(64).copyFrom(MemorySegment.ofArray(token));
        int r = d.cuMemImportFromShareableHandle(out, t, FABRIC);
        return new long[] {r, out.get(JAVA_LONG, 0)};
    }

    private static long importedFabric(RemoteCudaDriver d, byte[] token) {
        long[] r = importingFabric(d, token);
        Cuda.ok((int) r[0], "cuMemImportFromShareableHandle(FABRIC)");
        return r[1];
    }

    private static void awaitTrue(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within 60 s: " + what);
            }
            Thread.sleep(20);
        }
    }

    // ---- isolation context (in this JVM)

    @Test
    void shareableHandlesCarryMemoryBetweenTwoSessionsOfOneTenantChargedOnceAndRefusedToAnotherTenant() throws Exception {
        String[] at = inProcess();
        long idle = deviceUsed();
        long tenantIdle = tenantUsed("me");
        RemoteCudaDriver a = connect(at[0]);
        RemoteCudaDriver b = connect(at[0]);
        Cuda ca = new Cuda(a), cb = new Cuda(b);
        ca.primaryContext();
        cb.primaryContext();
        long memh = create(ca, POSIX_FD);
        long charged = tenantUsed("me") - tenantIdle;
        assertTrue(charged >= SIZE, "the exporter's allocation is charged: " + charged);
        int fd = exportFd(a, memh);
        assertEquals(1, server.shares().count());
        long vaA = map(ca, memh);
        ca.put(vaA, new byte[] {1, 2, 3, 4});

        long theirs = importedFd(b, fd);
        long vaB = map(cb, theirs);
        assertArrayEquals(new byte[] {1, 2, 3, 4}, cb.get(vaB, 4), "the importer sees the exporter's memory");
        cb.put(vaB + 8, new byte[] {9, 8});
        assertArrayEquals(new byte[] {9, 8}, ca.get(vaA + 8, 2), "and the exporter the importer's writes");
        assertEquals(charged, tenantUsed("me") - tenantIdle, "an imported allocation is not charged again");

        // FABRIC: the handle is the token itself; the program sees the type it asked for
        long fab = create(ca, FABRIC);
        byte[] fabric = exportFabric(a, fab);
        long fabB = importedFabric(b, fabric);
        MemorySegment types = ca.cell(MemoryProps.ALLOCATION_PROP_SIZE);
        Cuda.ok(a.cuMemGetAllocationPropertiesFromHandle(types, fab), "cuMemGetAllocationPropertiesFromHandle");
        assertEquals(FABRIC, types.get(JAVA_INT, 4), "requestedHandleTypes as the program asked");
        byte[] forged = fabric.clone();
        forged[17] ^= 0x40;
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, importingFabric(b, forged)[0], "a forged token");
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, importingFabric(b, new byte[64])[0], "zeros");
        try (RemoteCudaDriver other = connect(at[1])) {
            new Cuda(other).primaryContext();
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, importingFabric(other, fabric)[0], "another tenant's fabric handle");
        }
        Cuda.ok(b.cuMemRelease(fabB), "cuMemRelease(imported)");
        Cuda.ok(a.cuMemRelease(fab), "cuMemRelease(fabric)");

        // an allocation made without a shareable type is not exported
        long plain = create(ca, MemoryProps.HANDLE_TYPE_NONE);
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuMemExportToShareableHandle(ca.cell(), plain, POSIX_FD, 0));
        Cuda.ok(a.cuMemRelease(plain), "cuMemRelease(plain)");

        // another tenant (tcp:// is [default]): refused as the driver refuses a handle it cannot open
        try (RemoteCudaDriver other = connect(at[1])) {
            new Cuda(other).primaryContext();
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, importingFd(other, fd)[0], "another tenant's descriptor");
        }

        // sharing sessions do not move: both are refused a checkpoint, naming the other
        CheckpointRefused refused = assertThrows(CheckpointRefused.class,
                () -> server.checkpoint(a.sessionId(), dir.resolve("a.img"), false, null));
        assertTrue(refused.getMessage().contains("checkpointed together")
                && refused.getMessage().contains(String.valueOf(b.sessionId())), refused.getMessage());
        assertThrows(CheckpointRefused.class, () -> server.checkpoint(b.sessionId(), dir.resolve("b.img"), false, null));

        // the exporter ends: its share goes (a token of it is stale), the importer's mapping stays as the driver keeps it
        Cuda.ok(a.cuMemRelease(memh), "cuMemRelease(exporter's)");
        a.close();
        awaitTrue(() -> server.shares().count() == 0, "the exporter's shares dropped with it");
        assertArrayEquals(new byte[] {1, 2, 3, 4}, cb.get(vaB, 4), "the importer's mapping outlives the exporter");
        try (RemoteCudaDriver late = connect(at[0])) {
            new Cuda(late).primaryContext();
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, importingFd(late, fd)[0], "a stale token");
        }
        DescriptorPassing.close(fd);
        unmap(cb, vaB);
        Cuda.ok(b.cuMemRelease(theirs), "cuMemRelease(imported)");
        b.close();
        awaitTrue(() -> deviceUsed() == idle, "device memory back to the baseline " + idle);
        awaitTrue(() -> tenantUsed("me") == tenantIdle, "the tenant's charge back to " + tenantIdle);
    }

    @Test
    void theOpenersEndReleasesWhatItImportedAndNoDeviceMemoryLeaks() throws Exception {
        String[] at = inProcess();
        long idle = deviceUsed();
        try (RemoteCudaDriver a = connect(at[0])) {
            Cuda ca = new Cuda(a);
            ca.primaryContext();
            long memh = create(ca, POSIX_FD);
            int fd = exportFd(a, memh);
            try (RemoteCudaDriver b = connect(at[0])) {
                Cuda cb = new Cuda(b);
                cb.primaryContext();
                map(cb, importedFd(b, fd)); // left mapped and held: the session's end lets go
            }
            DescriptorPassing.close(fd);
            awaitTrue(() -> server.snapshot().sessions().size() == 1, "the importer's session ended");
            // once the importer is gone the exporter may move again
            CheckpointRefused r = assertThrows(CheckpointRefused.class,
                    () -> server.checkpoint(a.sessionId(), dir.resolve("a.img"), false, null));
            assertTrue(!r.getMessage().contains("checkpointed together"), "only for what it lacks: " + r.getMessage());
        }
        awaitTrue(() -> server.shares().count() == 0, "the exporter's shares dropped");
        awaitTrue(() -> deviceUsed() == idle, "device memory back to the baseline " + idle);
    }

    @Test
    void ipcMemoryInIsolationContextMapsTheExportersOwnGranulesIntoTheOpenerWithAddressStableMemory() throws Exception {
        String[] at = inProcess("stable-addresses = on\n");
        long idle = deviceUsed();
        long tenantIdle = tenantUsed("me");
        RemoteCudaDriver a = connect(at[0]);
        Cuda ca = new Cuda(a);
        ca.primaryContext();
        long p = ca.alloc(3 << 20); // granules of its own (a quarter granule and up)
        ca.put(p, new byte[] {1, 2, 3});
        ca.put(p + (3 << 20) - 2, new byte[] {4, 5});
        MemorySegment handle = ca.cell(64);
        Cuda.ok(a.cuIpcGetMemHandle(handle, p), "cuIpcGetMemHandle");
        long small = ca.alloc(4096); // a block of a slab: its granule is shared with others
        long charged = tenantUsed("me") - tenantIdle;
        assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, a.cuIpcGetMemHandle(ca.cell(64), small), "a shared granule");
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuIpcGetMemHandle(ca.cell(64), p + 64), "not a base");
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuIpcGetEventHandle(ca.cell(64), ca.event()),
                "an event made without CU_EVENT_INTERPROCESS");

        RemoteCudaDriver b = connect(at[0]);
        Cuda cb = new Cuda(b);
        cb.primaryContext();
        MemorySegment opened = cb.cell();
        Cuda.ok(b.cuIpcOpenMemHandle(opened, handle, 1), "cuIpcOpenMemHandle");
        long q = opened.get(JAVA_LONG, 0);
        assertArrayEquals(new byte[] {1, 2, 3}, cb.get(q, 3), "the opener reads the exporter's allocation");
        assertArrayEquals(new byte[] {4, 5}, cb.get(q + (3 << 20) - 2, 2), "to its last byte");
        cb.put(q + 3, new byte[] {9});
        assertArrayEquals(new byte[] {1, 2, 3, 9}, ca.get(p, 4), "and the exporter the opener's writes");
        assertEquals(charged, tenantUsed("me") - tenantIdle, "an opened mapping is not charged");
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemsetD8(q + (3 << 20), (byte) 0, 1), "past the allocation");
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemFree(q), "cuMemFree refuses opened memory");
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuIpcGetMemHandle(cb.cell(64), q), "no re-export");
        try (RemoteCudaDriver other = connect(at[1])) {
            new Cuda(other).primaryContext();
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, other.cuIpcOpenMemHandle(new Cuda(other).cell(), handle, 0),
                    "another tenant");
        }
        CheckpointRefused refused = assertThrows(CheckpointRefused.class,
                () -> server.checkpoint(b.sessionId(), dir.resolve("b.img"), false, null));
        assertTrue(refused.getMessage().contains("checkpointed together"), refused.getMessage());

        Cuda.ok(b.cuIpcCloseMemHandle(q), "cuIpcCloseMemHandle");
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemsetD8(q, (byte) 0, 1), "closed: no range of the session");
        Cuda.ok(b.cuIpcOpenMemHandle(opened, handle, 0), "cuIpcOpenMemHandle (left open: the opener's end closes it)");
        long q2 = opened.get(JAVA_LONG, 0);
        Cuda.ok(a.cuMemFree(p), "cuMemFree (the exporter's)");
        assertEquals(0, server.shares().count(), "the free withdrew the export");
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuIpcOpenMemHandle(cb.cell(), handle, 0), "a withdrawn handle");
        assertArrayEquals(new byte[] {1, 2, 3, 9}, cb.get(q2, 4), "an open mapping keeps the memory, as the driver's does");
        b.close();
        a.close();
        awaitTrue(() -> server.shares().count() == 0, "the exporter's shares dropped");
        awaitTrue(() -> deviceUsed() == idle, "device memory back to the baseline " + idle);
        awaitTrue(() -> tenantUsed("me") == tenantIdle, "the tenant's charge back to " + tenantIdle);
    }

    @Test
    void ipcMemoryWithoutAddressStableMemoryIsRefusedWithTheCauseAndAnEventWithoutInterprocessAsTheDriverDoes() throws Exception {
        String[] at = inProcess();
        try (RemoteCudaDriver a = connect(at[0])) {
            Cuda ca = new Cuda(a);
            ca.primaryContext();
            long p = ca.alloc(4096);
            MemorySegment h = ca.cell(64);
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, a.cuIpcGetMemHandle(h, p));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuIpcGetEventHandle(h, ca.event()),
                    "an event made without CU_EVENT_INTERPROCESS");
            assertEquals(0, server.shares().count());
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuIpcOpenMemHandle(ca.cell(), h, 0), "a handle never issued");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuIpcOpenMemHandle(ca.cell(), h, 2), "Flags are checked first");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuIpcOpenEventHandle(ca.cell(), h), "a handle never issued");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuIpcCloseMemHandle(p), "no IPC memory was opened");
        }
    }

    /** CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS. */
    private static final int IPC_EVENT = 0x2 | 0x4;

    private static long ipcEvent(Cuda cu) {
        MemorySegment c = cu.cell();
        Cuda.ok(cu.d.cuEventCreate(c, IPC_EVENT), "cuEventCreate(disable timing, interprocess)");
        return c.get(JAVA_LONG, 0);
    }

    private static long nonBlocking(Cuda cu) {
        MemorySegment c = cu.cell();
        Cuda.ok(cu.d.cuStreamCreate(c, 1), "cuStreamCreate(non-blocking)");
        return c.get(JAVA_LONG, 0);
    }

    /** A stream of {@code cu}'s session held until {@link #open} writes 1 to {@code flag} (a 4-byte allocation). */
    private static long gated(Cuda cu, long flag) {
        Cuda.ok(cu.d.cuMemsetD32(flag, 0, 1), "clear the gate");
        long s = nonBlocking(cu);
        Cuda.ok(cu.d.cuStreamWaitValue32(s, flag, 1, 0), "held until the gate opens");
        return s;
    }

    private static void open(Cuda cu, long flag) {
        Cuda.ok(cu.d.cuStreamWriteValue32(nonBlocking(cu), flag, 1, 0), "open the gate");
    }

    @Test
    void ipcEventsInIsolationContextFollowTheLatestRecordingOfAnySessionOfTheTenantAndOutliveTheExporter() throws Exception {
        String[] at = inProcess();
        RemoteCudaDriver a = connect(at[0]);
        RemoteCudaDriver b = connect(at[0]);
        Cuda ca = new Cuda(a), cb = new Cuda(b);
        ca.primaryContext();
        cb.primaryContext();
        long mine = ipcEvent(ca);
        MemorySegment handle = ca.cell(64);
        Cuda.ok(a.cuIpcGetEventHandle(handle, mine), "cuIpcGetEventHandle");
        assertEquals(1, server.shares().count());
        assertEquals(1, server.snapshot().shares(), "status counts the live share");
        assertTrue(io.gpusockets.backend.status.StatusJson.write(server.snapshot()).contains("\"shares\":1,"));
        assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, a.cuIpcOpenEventHandle(ca.cell(), handle),
                "the exporter cannot open its own handle, as the driver refuses it in the exporting process");

        // A records its event behind a gate before B opens it: B's event follows that recording
        long gateA = ca.alloc(4);
        long heldA = gated(ca, gateA);
        Cuda.ok(a.cuEventRecord(mine, heldA), "cuEventRecord(A, held)");
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, a.cuEventQuery(mine), "held (and the pipelined record has run)");
        MemorySegment opened = cb.cell();
        Cuda.ok(b.cuIpcOpenEventHandle(opened, handle), "cuIpcOpenEventHandle");
        long theirs = opened.get(JAVA_LONG, 0);
        assertEquals(2, server.shares().eventStreams(), "one backend stream per member");
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, b.cuEventQuery(theirs), "B's event waits for A's recording");
        long waiting = cb.stream();
        Cuda.ok(b.cuStreamWaitEvent(waiting, theirs, 0), "cuStreamWaitEvent(B)");
        long after = cb.event();
        Cuda.ok(b.cuEventRecord(after, waiting), "cuEventRecord(behind the wait)");
        Cuda.ok(b.cuCtxGetDevice(cb.cell()), "a call awaiting its reply: the pipelined calls before it have run");
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, b.cuEventQuery(after), "B's stream waits for A's recording");
        open(ca, gateA);
        Cuda.ok(b.cuEventSynchronize(theirs), "cuEventSynchronize(B)");
        Cuda.ok(b.cuStreamSynchronize(waiting), "B's stream went on");
        Cuda.ok(b.cuEventQuery(after), "cuEventQuery(behind the wait)");

        // A records it again behind a new gate (B already opened): B sees the latest recording
        Cuda.ok(a.cuStreamSynchronize(heldA), "the first gate's stream");
        long heldA2 = gated(ca, gateA);
        Cuda.ok(a.cuEventRecord(mine, heldA2), "cuEventRecord(A, held again)");
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, a.cuEventQuery(mine));
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, b.cuEventQuery(theirs), "B's event follows A's latest recording");
        open(ca, gateA);
        Cuda.ok(b.cuEventSynchronize(theirs), "cuEventSynchronize(B, again)");

        // B records its event behind a gate of its own: A's follows
        long gateB = cb.alloc(4);
        long heldB = gated(cb, gateB);
        Cuda.ok(b.cuEventRecordWithFlags(theirs, heldB, 0), "cuEventRecordWithFlags(B, held)");
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, b.cuEventQuery(theirs));
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, a.cuEventQuery(mine), "A's event follows B's recording");
        open(cb, gateB);
        Cuda.ok(a.cuEventSynchronize(mine), "cuEventSynchronize(A)");

        // another tenant (tcp:// is [default]) is refused; sharing sessions do not move
        try (RemoteCudaDriver other = connect(at[1])) {
            new Cuda(other).primaryContext();
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, other.cuIpcOpenEventHandle(new Cuda(other).cell(), handle),
                    "another tenant's event handle");
        }
        CheckpointRefused refused = assertThrows(CheckpointRefused.class,
                () -> server.checkpoint(b.sessionId(), dir.resolve("b.img"), false, null));
        assertTrue(refused.getMessage().contains("checkpointed together"), refused.getMessage());
        assertThrows(CheckpointRefused.class, () -> server.checkpoint(a.sessionId(), dir.resolve("a.img"), false, null));

        // A records behind a gate, then ends with it shut: B keeps that last recording, then records and uses it alone
        Cuda.ok(b.cuCtxSynchronize(), "B idle");
        Cuda.ok(a.cuCtxSynchronize(), "A idle");
        long heldA3 = gated(ca, gateA);
        Cuda.ok(a.cuEventRecord(mine, heldA3), "cuEventRecord(A, held, before its end)");
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, a.cuEventQuery(mine));
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, b.cuEventQuery(theirs));
        a.close();
        awaitTrue(() -> server.shares().count() == 0, "the exporter's share dropped with it");
        awaitTrue(() -> server.shares().eventStreams() == 1, "the exporter's backend stream released with it");
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, cb.d.cuIpcOpenEventHandle(cb.cell(), handle), "a stale token");
        Cuda.ok(b.cuEventSynchronize(theirs), "B's event completes: A's end released A's held stream");
        long heldB2 = gated(cb, gateB);
        Cuda.ok(b.cuEventRecord(theirs, heldB2), "cuEventRecord(B alone)");
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, b.cuEventQuery(theirs), "B's event is an event of its own");
        open(cb, gateB);
        Cuda.ok(b.cuEventSynchronize(theirs), "cuEventSynchronize(B alone)");
        Cuda.ok(b.cuEventDestroy(theirs), "cuEventDestroy(opened)");
        assertEquals(0, server.shares().eventStreams(), "the opener's backend stream went with its event");
        b.close();
        awaitTrue(() -> server.snapshot().sessions().isEmpty(), "both sessions ended");
    }

    @Test
    void anOpenersEndLeavesTheShareAndTheExporterRecordsOnWithoutLeaks() throws Exception {
        String[] at = inProcess();
        try (RemoteCudaDriver a = connect(at[0])) {
            Cuda ca = new Cuda(a);
            ca.primaryContext();
            long mine = ipcEvent(ca);
            MemorySegment handle = ca.cell(64);
            Cuda.ok(a.cuIpcGetEventHandle(handle, mine), "cuIpcGetEventHandle");
            for (int i = 0; i < 2; i++) {
                try (RemoteCudaDriver b = connect(at[0])) {
                    Cuda cb = new Cuda(b);
                    cb.primaryContext();
                    Cuda.ok(b.cuIpcOpenEventHandle(cb.cell(), handle), "cuIpcOpenEventHandle (left open)");
                    Cuda.ok(b.cuIpcOpenEventHandle(cb.cell(), handle), "cuIpcOpenEventHandle (a second event)");
                    assertEquals(3, server.shares().eventStreams());
                }
                awaitTrue(() -> server.snapshot().sessions().size() == 1, "the opener's session ended");
                assertEquals(1, server.shares().eventStreams(), "the opener's streams went with it");
                long gate = ca.alloc(4);
                long held = gated(ca, gate);
                Cuda.ok(a.cuEventRecord(mine, held), "the exporter records on");
                assertEquals(CuResult.CUDA_ERROR_NOT_READY, a.cuEventQuery(mine));
                open(ca, gate);
                Cuda.ok(a.cuEventSynchronize(mine), "cuEventSynchronize(exporter)");
            }
            Cuda.ok(a.cuEventDestroy(mine), "cuEventDestroy(exported)");
            assertEquals(0, server.shares().count(), "the event's destroy withdrew its share");
            assertEquals(0, server.shares().eventStreams());
        }
        awaitTrue(() -> server.snapshot().sessions().isEmpty(), "the exporter ended");
        assertEquals(0, server.shares().eventStreams());
    }

    @Test
    void aSessionsLiveExportsAreBounded() throws Exception {
        String was = System.setProperty(ShareRegistry.MAX_PROPERTY, "2");
        String[] at;
        try {
            at = inProcess();
        } finally {
            if (was == null) {
                System.clearProperty(ShareRegistry.MAX_PROPERTY);
            } else {
                System.setProperty(ShareRegistry.MAX_PROPERTY, was);
            }
        }
        try (RemoteCudaDriver a = connect(at[0])) {
            Cuda ca = new Cuda(a);
            ca.primaryContext();
            long memh = create(ca, POSIX_FD);
            DescriptorPassing.close(exportFd(a, memh));
            DescriptorPassing.close(exportFd(a, memh));
            assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, a.cuMemExportToShareableHandle(ca.cell(), memh, POSIX_FD, 0));
            assertEquals(2, server.shares().count(), "the refused export left nothing behind");
            Cuda.ok(a.cuMemRelease(memh), "cuMemRelease");
            assertEquals(0, server.shares().count(), "the allocation's release withdrew its exports (no token keeps"
                    + " memory alive that its tenant no longer pays for)");
            long e1 = ipcEvent(ca), e2 = ipcEvent(ca), e3 = ipcEvent(ca);
            Cuda.ok(a.cuIpcGetEventHandle(ca.cell(64), e1), "cuIpcGetEventHandle(1)");
            Cuda.ok(a.cuIpcGetEventHandle(ca.cell(64), e2), "cuIpcGetEventHandle(2)");
            assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, a.cuIpcGetEventHandle(ca.cell(64), e3), "IPC events count too");
            assertEquals(2, server.shares().count());
            assertEquals(2, server.shares().eventStreams(), "the refused export's stream went at once");
        }
        awaitTrue(() -> server.shares().count() == 0, "the session's end dropped its exports");
    }

    // ---- isolation process (a backend process, each session a worker)

    @Test
    void shareableHandlesCrossBetweenWorkerProcessesOfOneTenantAndAreRefusedToAnother() throws Exception {
        try (BackendProcess bp = BackendProcess.startWithStatus("--isolation", "process", "--idle-workers", "2",
                "--tenants", tenantsFile().toString());
             RemoteCudaDriver a = RemoteCudaDriver.connect(bp.unix());
             RemoteCudaDriver b = RemoteCudaDriver.connect(bp.unix())) {
            Cuda ca = new Cuda(a), cb = new Cuda(b);
            ca.primaryContext();
            cb.primaryContext();
            long memh = create(ca, POSIX_FD);
            int fd = exportFd(a, memh);
            long vaA = map(ca, memh);
            ca.put(vaA, new byte[] {5, 6, 7});
            long theirs = importedFd(b, fd);
            long vaB = map(cb, theirs);
            assertArrayEquals(new byte[] {5, 6, 7}, cb.get(vaB, 3), "the memory crossed from worker to worker");
            cb.put(vaB + 3, new byte[] {8});
            assertArrayEquals(new byte[] {5, 6, 7, 8}, ca.get(vaA, 4), "both ways");
            // sharing sessions do not move: the front refuses their checkpoint (gpusockets checkpoint), naming the other
            for (RemoteCudaDriver d : java.util.List.of(a, b)) {
                CheckpointNativeTest.Result ck = CheckpointNativeTest.cli("checkpoint", String.valueOf(d.sessionId()), "--to",
                        dir.resolve("s" + d.sessionId() + ".img").toString(), "--socket", bp.adminSocket().toString());
                assertTrue(ck.exit() != 0 && (ck.out() + ck.err()).contains("checkpointed together"), ck.out() + ck.err());
            }
            try (RemoteCudaDriver other = RemoteCudaDriver.connect(bp.tcp())) {
                new Cuda(other).primaryContext();
                assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, importingFd(other, fd)[0], "another tenant's descriptor");
            }
            bp.awaitLog("of another tenant", 10_000);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, importingFabric(b, new byte[64])[0], "a forged token");
            DescriptorPassing.close(fd);
            // an allocation released by its exporter: its worker withdraws the export (UNSHARE) and the token goes stale
            long gone = create(ca, POSIX_FD);
            int goneFd = exportFd(a, gone);
            Cuda.ok(a.cuMemRelease(gone), "cuMemRelease(exported, unmapped)");
            awaitTrue(() -> {
                long[] r = importingFd(b, goneFd);
                if (r[0] == CuResult.CUDA_SUCCESS) {
                    b.cuMemRelease(r[1]); // the front had not read the withdrawal yet
                }
                return r[0] == CuResult.CUDA_ERROR_INVALID_VALUE;
            }, "the released allocation's export withdrawn");
            DescriptorPassing.close(goneFd);
            // the exporter ends: the importer's worker keeps its mapping
            Cuda.ok(a.cuMemRelease(memh), "cuMemRelease");
            a.close();
            assertArrayEquals(new byte[] {5, 6, 7, 8}, cb.get(vaB, 4), "the importer's mapping outlives the exporter");
        }
    }

    @Test
    void ipcMemoryAndEventsCrossBetweenWorkerProcessesThroughTheDriversIpcHandles() throws Exception {
        try (BackendProcess bp = BackendProcess.start("--isolation", "process", "--idle-workers", "2",
                "--tenants", tenantsFile().toString());
             RemoteCudaDriver a = RemoteCudaDriver.connect(bp.unix());
             RemoteCudaDriver b = RemoteCudaDriver.connect(bp.unix())) {
            Cuda ca = new Cuda(a), cb = new Cuda(b);
            ca.primaryContext();
            cb.primaryContext();
            long p = ca.alloc(1 << 16);
            ca.put(p, new byte[] {4, 2});
            MemorySegment handle = ca.cell(64);
            int r = a.cuIpcGetMemHandle(handle, p);
            Assumptions.assumeTrue(r != CuResult.CUDA_ERROR_NOT_SUPPORTED,
                    "the emulated device has no IPC memory handles yet (its driver answered NOT_SUPPORTED)");
            Cuda.ok(r, "cuIpcGetMemHandle");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuIpcGetMemHandle(ca.cell(64), p + 16), "not an allocation's base");
            MemorySegment opened = cb.cell();
            Cuda.ok(b.cuIpcOpenMemHandle(opened, handle, 1), "cuIpcOpenMemHandle");
            long q = opened.get(JAVA_LONG, 0);
            assertArrayEquals(new byte[] {4, 2}, cb.get(q, 2), "the importer reads the exporter's allocation");
            cb.put(q + 2, new byte[] {7});
            assertArrayEquals(new byte[] {4, 2, 7}, ca.get(p, 3));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemFree(q), "opened IPC memory is not freed by cuMemFree");
            try (RemoteCudaDriver other = RemoteCudaDriver.connect(bp.tcp())) {
                new Cuda(other).primaryContext();
                assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, other.cuIpcOpenMemHandle(new Cuda(other).cell(), handle, 0));
            }
            MemorySegment again = cb.cell();
            Cuda.ok(b.cuIpcOpenMemHandle(again, handle, 0), "cuIpcOpenMemHandle (a second time)");
            assertEquals(q, again.get(JAVA_LONG, 0), "a second open answers the same pointer");
            Cuda.ok(b.cuIpcCloseMemHandle(q), "cuIpcCloseMemHandle (the first)");
            assertArrayEquals(new byte[] {4, 2, 7}, cb.get(q, 3), "still mapped for the second open");
            Cuda.ok(b.cuIpcCloseMemHandle(q), "cuIpcCloseMemHandle (the second)");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuIpcCloseMemHandle(q), "closed already");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemsetD8(q, (byte) 0, 1), "no longer a range of the session");
            // opened and left open: the session's end closes it
            Cuda.ok(b.cuIpcOpenMemHandle(again, handle, 0), "cuIpcOpenMemHandle (left open)");

            MemorySegment ev = ca.cell();
            Cuda.ok(a.cuEventCreate(ev, 0x2 | 0x4), "cuEventCreate(disable timing, interprocess)");
            MemorySegment eh = ca.cell(64);
            Cuda.ok(a.cuIpcGetEventHandle(eh, ev.get(JAVA_LONG, 0)), "cuIpcGetEventHandle");
            MemorySegment theirs = cb.cell();
            Cuda.ok(b.cuIpcOpenEventHandle(theirs, eh), "cuIpcOpenEventHandle");
            Cuda.ok(a.cuEventRecord(ev.get(JAVA_LONG, 0), 0), "cuEventRecord");
            Cuda.ok(b.cuEventSynchronize(theirs.get(JAVA_LONG, 0)), "cuEventSynchronize(opened)");
            Cuda.ok(b.cuEventDestroy(theirs.get(JAVA_LONG, 0)), "cuEventDestroy(opened)");
        }
    }

    /** Device memory in use as {@code d}'s session sees it (cuMemGetInfo: its worker's device, the tenant has no limit). */
    private static long used(Cuda cu) {
        MemorySegment free = cu.cell(), total = cu.cell();
        Cuda.ok(cu.d.cuMemGetInfo(free, total), "cuMemGetInfo");
        return total.get(JAVA_LONG, 0) - free.get(JAVA_LONG, 0);
    }

    /** Tenant "me"'s charged device memory, from the backend's status. */
    private static long tenantUsed(BackendProcess bp) {
        return StatusTest.list(StatusTest.statusJson(bp), "tenants").stream().filter(t -> "me".equals(t.get("name")))
                .mapToLong(t -> (Long) t.get("memoryUsedBytes")).findFirst().orElse(0);
    }

    @Test
    void ipcMemoryOfAddressStableSessionsCrossesBetweenWorkerProcessesAsTheirWindowsPhysicalMemory() throws Exception {
        try (BackendProcess bp = BackendProcess.startWithStatus("--isolation", "process", "--idle-workers", "2",
                "--stable-addresses", "--tenants", tenantsFile().toString())) {
            long tenantIdle = tenantUsed(bp);
            RemoteCudaDriver a = RemoteCudaDriver.connect(bp.unix());
            Cuda ca = new Cuda(a);
            ca.primaryContext();
            long one = ca.alloc(SIZE); // one granule
            long three = ca.alloc(5L << 20); // three granules of its own
            ca.put(one, new byte[] {1, 2, 3});
            ca.put(one + SIZE - 1, new byte[] {4});
            ca.put(three, new byte[] {5, 6});
            ca.put(three + (5L << 20) - 2, new byte[] {7, 8});
            MemorySegment h1 = ca.cell(64), h3 = ca.cell(64);
            Cuda.ok(a.cuIpcGetMemHandle(h1, one), "cuIpcGetMemHandle(one granule)");
            Cuda.ok(a.cuIpcGetMemHandle(h3, three), "cuIpcGetMemHandle(three granules)");
            long small = ca.alloc(4096); // a block of a slab: its granule is shared with others
            int r = a.cuIpcGetMemHandle(ca.cell(64), small);
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, r, "a shared granule");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuIpcGetMemHandle(ca.cell(64), three + 64), "not a base");
            long charged = tenantUsed(bp) - tenantIdle;
            assertTrue(charged >= SIZE + (5L << 20), "the exporter's allocations are charged: " + charged);
            long usedA = used(ca);

            RemoteCudaDriver b = RemoteCudaDriver.connect(bp.unix());
            Cuda cb = new Cuda(b);
            cb.primaryContext();
            long usedB = used(cb);
            MemorySegment opened = cb.cell();
            Cuda.ok(b.cuIpcOpenMemHandle(opened, h1, 1), "cuIpcOpenMemHandle(one granule)");
            long q1 = opened.get(JAVA_LONG, 0);
            Cuda.ok(b.cuIpcOpenMemHandle(opened, h3, 0), "cuIpcOpenMemHandle(three granules)");
            long q3 = opened.get(JAVA_LONG, 0);
            assertArrayEquals(new byte[] {1, 2, 3}, cb.get(q1, 3), "the opener reads the exporter's allocation");
            assertArrayEquals(new byte[] {4}, cb.get(q1 + SIZE - 1, 1), "to its last byte");
            assertArrayEquals(new byte[] {5, 6}, cb.get(q3, 2), "across granules");
            assertArrayEquals(new byte[] {7, 8}, cb.get(q3 + (5L << 20) - 2, 2), "to the last byte of the third granule");
            cb.put(q1 + 3, new byte[] {9});
            cb.put(q3 + (4L << 20), new byte[] {10, 11});
            Cuda.ok(b.cuCtxSynchronize(), "cuCtxSynchronize(opener)");
            assertArrayEquals(new byte[] {1, 2, 3, 9}, ca.get(one, 4), "the exporter sees the opener's write");
            assertArrayEquals(new byte[] {10, 11}, ca.get(three + (4L << 20), 2), "in its third granule too");
            assertEquals(charged, tenantUsed(bp) - tenantIdle, "an opened mapping is not charged: the memory is charged once");
            assertEquals(2, shares(bp));
            assertEquals(2, memoryFiles(bp), "the front keeps one descriptor of each export's physical allocation");
            assertEquals(usedA, used(ca), "the exporter's device memory is its own allocations'");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemsetD8(q3 + (5L << 20), (byte) 0, 1), "past the allocation");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemFree(q1), "cuMemFree refuses opened memory");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuIpcGetMemHandle(cb.cell(64), q1), "no re-export");
            try (RemoteCudaDriver other = RemoteCudaDriver.connect(bp.tcp())) {
                Cuda co = new Cuda(other);
                co.primaryContext();
                assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, other.cuIpcOpenMemHandle(co.cell(), h1, 0), "another tenant");
            }
            bp.awaitLog("of another tenant", 10_000);

            Cuda.ok(b.cuIpcCloseMemHandle(q1), "cuIpcCloseMemHandle(one granule)");
            Cuda.ok(b.cuIpcCloseMemHandle(q3), "cuIpcCloseMemHandle(three granules)");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuIpcCloseMemHandle(q1), "closed already");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemsetD8(q1, (byte) 0, 1), "closed: no range of the session");
            assertEquals(usedB, used(cb), "the closes gave back what the opens mapped");
            // opened again and left open: the opener's end closes it, and the exporter goes on
            Cuda.ok(b.cuIpcOpenMemHandle(opened, h3, 0), "cuIpcOpenMemHandle (left open)");
            long again = opened.get(JAVA_LONG, 0);
            assertArrayEquals(new byte[] {5, 6}, cb.get(again, 2));
            b.close();
            ca.put(three + 2, new byte[] {12});
            assertArrayEquals(new byte[] {5, 6, 12}, ca.get(three, 3), "the exporter is fine after the opener's end");
            assertEquals(usedA, used(ca), "and holds only its own allocations");
            Cuda.ok(a.cuMemFree(one), "cuMemFree (exported)");
            awaitTrue(() -> shares(bp) == 1 && memoryFiles(bp) == 1, "the free withdrew its export; the other stays");
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, a.cuIpcOpenMemHandle(ca.cell(), h3, 0),
                    "the exporter cannot open its own export (as the driver refuses it in the exporting process)");
            a.close();
            awaitTrue(() -> shares(bp) == 0, "the exporter's end dropped its exports");
            awaitTrue(() -> tenantUsed(bp) == tenantIdle, "the tenant's charge back to " + tenantIdle);
            awaitTrue(() -> memoryFiles(bp) == 0, "the front holds no descriptor of device memory any more");
        }
    }

    /** The backend's live shares (its status's "shares"). */
    private static long shares(BackendProcess bp) {
        return (Long) StatusTest.statusJson(bp).get("shares");
    }

    /**
     * The backend process's descriptors of memory files (the emulated device's physical memory: {@code /memfd:...}),
     * as its registry holds for window memory exported by a worker.
     */
    private static long memoryFiles(BackendProcess bp) {
        long n = 0;
        try (var fds = Files.list(Path.of("/proc", String.valueOf(bp.pid()), "fd"))) {
            for (Path f : fds.toList()) {
                try {
                    n += Files.readSymbolicLink(f).toString().startsWith("/memfd:") ? 1 : 0;
                } catch (java.io.IOException e) {
                    // closed meanwhile
                }
            }
        } catch (java.io.IOException e) {
            throw new AssertionError(e);
        }
        return n;
    }

    // ---- two real processes through libcuda.so.1 (frontend/native/tests/ipc_memory.c, ipc_shareable.c)

    @Test
    void theCProgramsShareMemoryAndAnEventBetweenTwoProcessesOfOneTenantAndAreRefusedToAnother() throws Exception {
        NativePrograms programs = NativePrograms.locate();
        String why = programs.cannotRun("the IPC programs");
        Assumptions.assumeTrue(why == null, why);
        Path work = Files.createDirectories(dir.resolve("programs"));
        try (BackendProcess bp = BackendProcess.start("--isolation", "process", "--idle-workers", "2",
                "--tenants", tenantsFile().toString())) {
            for (String name : java.util.List.of("ipc_memory", "ipc_shareable")) {
                Path exe = programs.build(name, work);
                java.util.Map<String, String> env = new java.util.HashMap<>(java.util.Map.of(
                        "LD_LIBRARY_PATH", programs.libDir.toString(),
                        "GPUSOCKETS_SERVER", bp.unix(),
                        "GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"),
                        "GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path")));
                NativePrograms.Run same = NativePrograms.run(java.util.List.of(exe.toString()), env, work, 180);
                assertEquals(0, same.exit(), () -> name + " (one tenant): " + same.stderrTail());
                assertTrue(same.stdout().startsWith(name + ": ok"), () -> name + ": " + same.stdout() + same.stderrTail());

                env.put("IPC_CHILD_SERVER", bp.tcp()); // the child over tcp:// is tenant [default]
                NativePrograms.Run other = NativePrograms.run(java.util.List.of(exe.toString(), "--expect-refused"), env, work, 180);
                assertEquals(0, other.exit(), () -> name + " (child of another tenant): " + other.stderrTail());
                assertTrue(other.stdout().startsWith(name + ": refused"), () -> name + ": " + other.stdout() + other.stderrTail());
            }
            bp.awaitLog("of another tenant", 10_000);
        }
    }
}
