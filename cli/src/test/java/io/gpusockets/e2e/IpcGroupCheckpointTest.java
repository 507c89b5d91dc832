package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.CheckpointResult;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.MemoryProps;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Sessions that share IPC memory are checkpointed and restored together (issue 24 item 1): on backend A (emulated
 * device, isolation context or shared, address-stable memory) session E exports a cuMemAlloc allocation by cuIpcGetMemHandle and
 * session I opens it; each alone is refused a checkpoint, naming the other; the two are checkpointed together with
 * stop, A is shut down and its device discarded, and backend B, on a new emulated device, restores both images. Both
 * programs resume: I reads E's data through its old pointer, a write by either is seen by the other, and the old token
 * still opens the memory; an IPC event I exported and E opened comes back as one share (E's event follows I's
 * recording, and the old token opens it again), and one E exported that nobody opened comes back too; the importer's
 * image alone is refused while its exporter is not restored there. A group checkpoint that leaves a partner out is
 * refused, naming it; so is one with what it does not carry (a shareable VMM allocation or a mapping that outlived
 * its exporter's), and the sessions run on. Shareable VMM handles go with the group too: the importer's handle is
 * imported again and mapped at its old address.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class IpcGroupCheckpointTest extends CheckpointTestSupport {
    static final int SIZE = 3 << 20; // granules of its own (a quarter granule and up)

    /** Memory one session exported by IPC and another opened: where each sees it, and the IPC handle. */
    record Shared(long exporter, long opener, MemorySegment handle) {
    }

    /**
     * E allocates {@link #SIZE} bytes, writes {@code head} at their start and exports them by IPC; I (its context made)
     * opens them with {@code flags}.
     */
    static Shared shareMemory(RemoteCudaDriver de, Cuda ce, RemoteCudaDriver di, Cuda ci, byte[] head, int flags) {
        long p = ce.alloc(SIZE);
        ce.put(p, head);
        MemorySegment handle = ce.cell(64);
        Cuda.ok(de.cuIpcGetMemHandle(handle, p), "cuIpcGetMemHandle");
        MemorySegment opened = ci.cell();
        Cuda.ok(di.cuIpcOpenMemHandle(opened, handle, flags), "cuIpcOpenMemHandle");
        return new Shared(p, opened.get(JAVA_LONG, 0), handle);
    }

    /** An IPC event one session exported and another opened: each one's event cell, and the IPC handle. */
    record SharedEvent(MemorySegment exporter, MemorySegment opener, MemorySegment handle) {
    }

    /** X makes an interprocess event (timing disabled) and exports it by IPC; O opens it. */
    static SharedEvent shareEvent(RemoteCudaDriver dx, Cuda cx, RemoteCudaDriver dopen, Cuda copen) {
        MemorySegment exported = cx.cell();
        Cuda.ok(dx.cuEventCreate(exported, 2 | 4), "cuEventCreate(DISABLE_TIMING | INTERPROCESS)");
        MemorySegment handle = cx.cell(64);
        Cuda.ok(dx.cuIpcGetEventHandle(handle, exported.get(JAVA_LONG, 0)), "cuIpcGetEventHandle");
        MemorySegment opened = copen.cell();
        Cuda.ok(dopen.cuIpcOpenEventHandle(opened, handle), "cuIpcOpenEventHandle");
        return new SharedEvent(exported, opened, handle);
    }

    /**
     * After a group of E (exporter of {@code shared}, {@link #SIZE} bytes starting {1, 2, 3, 9}, ending {4, 5}) and I
     * (its opener; exporter of {@code event}, which E opened) moved to {@code uri}: I reads E's data through its old
     * pointer to the last byte, writes cross both ways, both frontends follow to {@code uri}, E's opened event follows
     * I's recording, and the old token still opens the memory there.
     */
    static void movedAndSharing(RemoteCudaDriver de, Cuda ce, RemoteCudaDriver di, Cuda ci, Shared shared,
                                SharedEvent event, String uri) {
        long p = shared.exporter(), q = shared.opener();
        assertArrayEquals(new byte[] {1, 2, 3, 9}, ci.get(q, 4), "the importer reads through its old pointer");
        assertArrayEquals(new byte[] {4, 5}, ci.get(q + SIZE - 2, 2), "to the last byte");
        ce.put(p + 10, new byte[] {7});
        assertArrayEquals(new byte[] {7}, ci.get(q + 10, 1), "the exporter's write reaches the importer");
        ci.put(q + 11, new byte[] {8});
        assertArrayEquals(new byte[] {7, 8}, ce.get(p + 10, 2), "and the importer's the exporter");
        assertEquals(uri, de.backendUri(), "the exporter's frontend followed its session");
        assertEquals(uri, di.backendUri(), "and the importer's");
        Cuda.ok(di.cuEventRecord(event.exporter().get(JAVA_LONG, 0), 0), "cuEventRecord(I's event)");
        Cuda.ok(de.cuEventSynchronize(event.opener().get(JAVA_LONG, 0)), "E's opened event follows I's recording");
        MemorySegment again = ci.cell();
        Cuda.ok(di.cuIpcOpenMemHandle(again, shared.handle(), 0), "cuIpcOpenMemHandle of the old token");
        assertArrayEquals(new byte[] {1, 2, 3, 9}, ci.get(again.get(JAVA_LONG, 0), 4));
        Cuda.ok(di.cuIpcCloseMemHandle(again.get(JAVA_LONG, 0)), "cuIpcCloseMemHandle");
    }

    /** The sessions' ids in numeric order, space-separated: how a refusal names the group. */
    static String inOrder(String... ids) {
        return String.join(" ", java.util.Arrays.stream(ids).sorted(java.util.Comparator.comparingLong(Long::parseLong)).toList());
    }

    @ParameterizedTest(name = "isolation {0}")
    @ValueSource(strings = {"context", "shared"})
    void sessionsSharingIpcMemoryCheckpointTogetherAndGoOnSharingItInAnotherBackend(String isolation) throws Exception {
        Path sock = dir.resolve("g.sock");
        Path imageE = dir.resolve("e.ckpt"), imageI = dir.resolve("i.ckpt");
        EmulatedDevice a = new EmulatedDevice();
        BackendServer serverA = server(a);
        if (isolation.equals("shared")) {
            serverA.shareContextsPerTenant();
        }
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        EmulatedDevice b = new EmulatedDevice();
        try (RemoteCudaDriver de = RemoteCudaDriver.connect(uri); RemoteCudaDriver di = RemoteCudaDriver.connect(uri)) {
            Cuda ce = new Cuda(de);
            ce.primaryContext();
            Cuda ci = new Cuda(di);
            ci.primaryContext();
            Shared shared = shareMemory(de, ce, di, ci, new byte[] {1, 2, 3}, 1);
            long p = shared.exporter(), q = shared.opener();
            MemorySegment handle = shared.handle();
            ce.put(p + SIZE - 2, new byte[] {4, 5});
            ci.put(q + 3, new byte[] {9});
            assertArrayEquals(new byte[] {1, 2, 3, 9}, ce.get(p, 4), "shared before the checkpoint");
            long e = de.sessionId(), i = di.sessionId();

            // alone, each is refused, naming the other and how to move them together
            CheckpointRefused alone = assertThrows(CheckpointRefused.class,
                    () -> serverA.checkpoint(e, dir.resolve("alone.ckpt"), true, null));
            assertTrue(alone.getMessage().contains("session(s) " + i) && alone.getMessage().contains("together"),
                    alone.getMessage());
            assertThrows(CheckpointRefused.class, () -> serverA.checkpoint(i, dir.resolve("alone.ckpt"), true, null));
            assertFalse(Files.exists(dir.resolve("alone.ckpt")));

            MemorySegment event = ce.cell();
            Cuda.ok(de.cuEventCreate(event, 2 | 4), "cuEventCreate(DISABLE_TIMING | INTERPROCESS)");
            Cuda.ok(de.cuIpcGetEventHandle(ce.cell(64), event.get(JAVA_LONG, 0)),
                    "cuIpcGetEventHandle (nobody opens it: it comes back too)");

            // an IPC event the other way: I exports, E opens
            SharedEvent iToE = shareEvent(di, ci, de, ce);
            MemorySegment eventI = iToE.exporter(), eventHandle = iToE.handle(), eventE = iToE.opener();

            // the importer first: the order does not matter
            List<CheckpointResult> r = serverA.checkpointGroup(List.of(i, e), List.of(imageI, imageE), true, null);
            assertEquals(2, r.size());
            assertTrue(r.get(1).bytesWritten() > SIZE, "the exporter's image holds the shared contents");
            assertTrue(r.get(0).bytesWritten() < SIZE, "the importer's does not: " + r.get(0).bytesWritten());
            serverA.close();
            a.close();
            Files.deleteIfExists(sock);

            try (BackendServer serverB = server(b)) {
                if (isolation.equals("shared")) {
                    serverB.shareContextsPerTenant();
                }
                CheckpointRefused first = assertThrows(CheckpointRefused.class, () -> serverB.restore(imageI, null),
                        "the importer alone, its exporter not restored here");
                assertTrue(first.getMessage().contains("cannot be mapped again") && first.getMessage().contains("together"),
                        first.getMessage());
                assertEquals(0, serverB.sessions().size(), "a refused restore leaves nothing");
                assertEquals(List.of(i, e), serverB.restoreGroup(List.of(imageI, imageE), null));
                assertEquals(3, serverB.shares().count(), "the memory and the two event exports are back");
                assertEquals(3, serverB.shares().eventStreams(), "the opened event's share has its two members again, the"
                        + " unopened one its one");
                serverB.listen(TransportUri.parse("unix://" + sock));
                assertArrayEquals(new byte[] {1, 2, 3, 9}, ci.get(q, 4), "the importer reads through its old pointer");
                assertArrayEquals(new byte[] {4, 5}, ci.get(q + SIZE - 2, 2), "to the last byte");
                ce.put(p + 10, new byte[] {7});
                assertArrayEquals(new byte[] {7}, ci.get(q + 10, 1), "the exporter's write reaches the importer");
                ci.put(q + 11, new byte[] {8});
                assertArrayEquals(new byte[] {7, 8}, ce.get(p + 10, 2), "and the importer's the exporter");

                MemorySegment again = ci.cell();
                Cuda.ok(di.cuIpcOpenMemHandle(again, handle, 0), "cuIpcOpenMemHandle of the old token after the restore");
                long q2 = again.get(JAVA_LONG, 0);
                assertNotEquals(q, q2, "a mapping of its own");
                assertArrayEquals(new byte[] {1, 2, 3, 9}, ci.get(q2, 4), "the old token opens the restored memory");
                Cuda.ok(di.cuIpcCloseMemHandle(q2), "cuIpcCloseMemHandle");

                Cuda.ok(de.cuEventQuery(eventE.get(JAVA_LONG, 0)), "the opened event is E's under its old handle");
                Cuda.ok(di.cuEventRecord(eventI.get(JAVA_LONG, 0), 0), "cuEventRecord(I's event)");
                Cuda.ok(de.cuEventSynchronize(eventE.get(JAVA_LONG, 0)), "E's event follows I's recording");
                MemorySegment again2 = ce.cell();
                Cuda.ok(de.cuIpcOpenEventHandle(again2, eventHandle), "cuIpcOpenEventHandle of the old token after the restore");
                assertEquals(4, serverB.shares().eventStreams(), "a third member");
                Cuda.ok(de.cuEventDestroy(again2.get(JAVA_LONG, 0)), "cuEventDestroy");

                CheckpointRefused still = assertThrows(CheckpointRefused.class,
                        () -> serverB.checkpoint(i, dir.resolve("again.ckpt"), false, null));
                assertTrue(still.getMessage().contains("session(s) " + e), still.getMessage());
                assertEquals(2, serverB.resumesAccepted());
            }
        } finally {
            b.close();
        }
    }

    /**
     * From the command line between two backend processes (isolation context): {@code gpusockets checkpoint E I --to DIR
     * --stop} writes DIR/session-ID.ckpt for each (one alone is refused, saying how to name them together), the backend
     * is killed, and a new one on the same address restores both with {@code gpusockets restore FILE FILE} (or
     * {@code gpusockets backend --restore FILE --restore FILE}): the programs resume and share the memory as before. A
     * backend in isolation process refuses the importer's image without its exporter's, saying so.
     */
    @ParameterizedTest(name = "restored by {0}")
    @ValueSource(strings = {"gpusockets restore", "gpusockets backend --restore"})
    void fromTheCommandLineTwoSessionsCheckpointedTogetherResumeInANewBackendProcessStillSharing(String how) throws Exception {
        BackendProcess first = BackendProcess.startWithStatus("--isolation", "context", "--resume-grace", "120");
        BackendProcess second = null;
        try {
            String uri = first.unix();
            try (RemoteCudaDriver de = RemoteCudaDriver.connect(uri); RemoteCudaDriver di = RemoteCudaDriver.connect(uri)) {
                Cuda ce = new Cuda(de), ci = new Cuda(di);
                ce.primaryContext();
                ci.primaryContext();
                Shared shared = shareMemory(de, ce, di, ci, new byte[] {6, 7}, 0);
                long p = shared.exporter(), q = shared.opener();
                String e = String.valueOf(de.sessionId()), i = String.valueOf(di.sessionId());
                String admin = first.adminSocket().toString();

                CheckpointNativeTest.Result alone = CheckpointNativeTest.cli("checkpoint", i, "--to",
                        dir.resolve("alone.ckpt").toString(), "--stop", "--socket", admin);
                assertEquals(1, alone.exit());
                assertTrue(alone.err().contains("gpusockets checkpoint " + inOrder(e, i) + " --to DIR"), alone.err());
                CheckpointNativeTest.Result ck = CheckpointNativeTest.cli("checkpoint", e, i, "--to", dir.toString(),
                        "--stop", "--socket", admin);
                assertEquals(0, ck.exit(), () -> ck.out() + ck.err());
                Path imageE = dir.resolve("session-" + e + ".ckpt"), imageI = dir.resolve("session-" + i + ".ckpt");
                assertTrue(Files.size(imageE) > SIZE && Files.exists(imageI), ck.out());

                ProcessHandle.of(first.pid()).orElseThrow().destroyForcibly();
                assertTrue(first.awaitExit(30), "the killed backend did not exit");
                if (how.equals("gpusockets restore")) {
                    try (BackendProcess workers = BackendProcess.startWithStatus("--isolation", "process")) {
                        CheckpointNativeTest.Result no = CheckpointNativeTest.cli("restore", imageI.toString(), "--socket",
                                workers.adminSocket().toString());
                        assertEquals(1, no.exit(), no.out());
                        assertTrue(no.err().contains("restore the images of the sessions it shares with together"), no.err());
                    }
                    second = BackendProcess.startWithStatus("--isolation", "context", "--resume-grace", "120", "--listen", uri);
                    CheckpointNativeTest.Result rs = CheckpointNativeTest.cli("restore", imageI.toString(), imageE.toString(),
                            "--socket", second.adminSocket().toString());
                    assertEquals(0, rs.exit(), () -> rs.out() + rs.err());
                    assertTrue(rs.out().contains("\"sessions\":[" + i + "," + e + "]"), rs.out());
                } else { // the importer's image first: restored together, in any order
                    second = BackendProcess.startWithStatus("--isolation", "context", "--resume-grace", "120", "--listen", uri,
                            "--restore", imageI.toString(), "--restore", imageE.toString());
                    BackendProcess restoring = second;
                    assertTrue(second.output().stream().anyMatch(l -> l.contains("session " + i + " restored from")),
                            () -> String.join("\n", restoring.output()));
                }

                assertArrayEquals(new byte[] {6, 7}, ci.get(q, 2), "the importer reads through its old pointer");
                ci.put(q + 2, new byte[] {8});
                assertArrayEquals(new byte[] {6, 7, 8}, ce.get(p, 3), "and its write reaches the exporter");
            }
        } finally {
            first.close();
            if (second != null) {
                second.close();
            }
        }
    }

    static final int VMM_SIZE = 2 << 20; // one granule of the emulated device
    static final int POSIX_FD = MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

    /** cuMemCreate of {@link #VMM_SIZE} pinned bytes on device 0, shareable as a POSIX descriptor. */
    static long createShareable(RemoteCudaDriver d, Cuda cu) {
        MemorySegment prop = cu.cell(MemoryProps.ALLOCATION_PROP_SIZE).fill((byte) 0);
        prop.set(JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
        prop.set(JAVA_INT, 4, POSIX_FD);
        prop.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
        MemorySegment out = cu.cell();
        Cuda.ok(d.cuMemCreate(out, VMM_SIZE, prop, 0), "cuMemCreate");
        return out.get(JAVA_LONG, 0);
    }

    /** Reserves {@link #VMM_SIZE} bytes, maps {@code memh} there and sets read-write access for device 0; the address. */
    static long mapReadWrite(RemoteCudaDriver d, Cuda cu, long memh) {
        MemorySegment out = cu.cell();
        Cuda.ok(d.cuMemAddressReserve(out, VMM_SIZE, 0, 0, 0), "cuMemAddressReserve");
        long va = out.get(JAVA_LONG, 0);
        Cuda.ok(d.cuMemMap(va, VMM_SIZE, 0, memh, 0), "cuMemMap");
        MemorySegment desc = cu.cell(12).fill((byte) 0);
        desc.set(JAVA_INT, 0, MemoryProps.LOCATION_TYPE_DEVICE);
        desc.set(JAVA_INT, 8, MemoryProps.ACCESS_READWRITE);
        Cuda.ok(d.cuMemSetAccess(va, VMM_SIZE, desc, 1), "cuMemSetAccess");
        return va;
    }

    /** cuMemImportFromShareableHandle of the POSIX descriptor {@code fd} (the frontend's, in this process). */
    static long importFd(RemoteCudaDriver d, Cuda cu, int fd) {
        MemorySegment out = cu.cell();
        Cuda.ok(d.cuMemImportFromShareableHandle(out, MemorySegment.ofAddress(fd), POSIX_FD),
                "cuMemImportFromShareableHandle(POSIX fd)");
        return out.get(JAVA_LONG, 0);
    }

    /**
     * Shareable VMM handles go with a group checkpoint (isolation context and shared): E makes a shareable allocation,
     * maps and writes it and exports it as a POSIX descriptor; I imports it and maps it at its own address. A group that
     * leaves I out is refused, naming it; E and I are checkpointed together with stop (I's image does not hold the
     * memory), backend A is shut down, and backend B restores both (I's image alone first: refused, its exporter not
     * restored there). I reads E's data through its old address, writes cross both ways, the old descriptor imports the
     * memory again, and I's unmap and release work as before. In a third backend, I's image restored after E's alone is
     * refused: an import must name an export of a session restored with it.
     */
    @ParameterizedTest(name = "isolation {0}")
    @ValueSource(strings = {"context", "shared"})
    void sessionsSharingAShareableVmmHandleCheckpointTogetherAndTheImporterMapsItAgainAtItsAddress(String isolation)
            throws Exception {
        Path sock = dir.resolve("v.sock");
        Path imageE = dir.resolve("ve.ckpt"), imageI = dir.resolve("vi.ckpt");
        EmulatedDevice a = new EmulatedDevice();
        BackendServer serverA = server(a);
        if (isolation.equals("shared")) {
            serverA.shareContextsPerTenant();
        }
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        EmulatedDevice b = new EmulatedDevice();
        try (RemoteCudaDriver de = RemoteCudaDriver.connect(uri); RemoteCudaDriver di = RemoteCudaDriver.connect(uri)) {
            Cuda ce = new Cuda(de);
            ce.primaryContext();
            Cuda ci = new Cuda(di);
            ci.primaryContext();
            long memh = createShareable(de, ce);
            long p = mapReadWrite(de, ce, memh);
            ce.put(p, new byte[] {1, 2, 3});
            ce.put(p + VMM_SIZE - 2, new byte[] {4, 5});
            MemorySegment fdCell = ce.cell();
            Cuda.ok(de.cuMemExportToShareableHandle(fdCell, memh, POSIX_FD, 0), "cuMemExportToShareableHandle(POSIX fd)");
            int fd = fdCell.get(JAVA_INT, 0);
            long imported = importFd(di, ci, fd);
            long q = mapReadWrite(di, ci, imported);
            assertNotEquals(p, q, "the importer maps it at an address of its own");
            assertArrayEquals(new byte[] {1, 2, 3}, ci.get(q, 3), "the importer reads the exporter's data");
            ci.put(q + 3, new byte[] {9});
            assertArrayEquals(new byte[] {1, 2, 3, 9}, ce.get(p, 4), "shared before the checkpoint");
            long e = de.sessionId(), i = di.sessionId();

            CheckpointRefused left = assertThrows(CheckpointRefused.class, () -> serverA.checkpointGroup(List.of(e),
                    List.of(imageE), true, null));
            assertTrue(left.getMessage().contains("session(s) " + i) && left.getMessage().contains("together"),
                    left.getMessage());
            assertFalse(Files.exists(imageE));

            List<CheckpointResult> r = serverA.checkpointGroup(List.of(i, e), List.of(imageI, imageE), true, null);
            assertTrue(r.get(1).bytesWritten() > VMM_SIZE, "the exporter's image holds the shared contents");
            assertTrue(r.get(0).bytesWritten() < VMM_SIZE, "the importer's does not: " + r.get(0).bytesWritten());
            serverA.close();
            a.close();
            Files.deleteIfExists(sock);

            try (BackendServer serverB = server(b)) {
                if (isolation.equals("shared")) {
                    serverB.shareContextsPerTenant();
                }
                CheckpointRefused first = assertThrows(CheckpointRefused.class, () -> serverB.restore(imageI, null),
                        "the importer alone, its exporter not restored here");
                assertTrue(first.getMessage().contains("imported shareable VMM handle")
                        && first.getMessage().contains("together"), first.getMessage());
                assertEquals(0, serverB.sessions().size(), "a refused restore leaves nothing");
                assertEquals(List.of(i, e), serverB.restoreGroup(List.of(imageI, imageE), null));
                assertEquals(1, serverB.shares().count(), "the export is back under its token");
                serverB.listen(TransportUri.parse("unix://" + sock));
                assertArrayEquals(new byte[] {1, 2, 3, 9}, ci.get(q, 4), "the importer reads through its old address");
                assertArrayEquals(new byte[] {4, 5}, ci.get(q + VMM_SIZE - 2, 2), "to the last byte");
                ce.put(p + 10, new byte[] {7});
                assertArrayEquals(new byte[] {7}, ci.get(q + 10, 1), "the exporter's write reaches the importer");
                ci.put(q + 11, new byte[] {8});
                assertArrayEquals(new byte[] {7, 8}, ce.get(p + 10, 2), "and the importer's the exporter");

                long again = importFd(di, ci, fd); // the old token, through the frontend's descriptor
                long q2 = mapReadWrite(di, ci, again);
                assertArrayEquals(new byte[] {1, 2, 3, 9}, ci.get(q2, 4), "the old token imports the restored memory");
                Cuda.ok(di.cuMemUnmap(q2, VMM_SIZE), "cuMemUnmap (the second import)");
                Cuda.ok(di.cuMemRelease(again), "cuMemRelease (the second import)");

                Cuda.ok(di.cuMemUnmap(q, VMM_SIZE), "cuMemUnmap of the restored mapping");
                Cuda.ok(di.cuMemRelease(imported), "cuMemRelease of the restored import, under its old handle");
                assertNotEquals(CuResult.CUDA_SUCCESS, di.cuMemRelease(imported), "released once only (its handle id is gone)");
                assertArrayEquals(new byte[] {1, 2, 3, 9}, ce.get(p, 4), "the exporter's memory lives on");
                assertEquals(2, serverB.resumesAccepted());
            }

            // an image's import must name an export of a session restored with it, not any live export of the tenant
            EmulatedDevice c = new EmulatedDevice();
            try (BackendServer serverC = server(c)) {
                if (isolation.equals("shared")) {
                    serverC.shareContextsPerTenant();
                }
                serverC.restore(imageE, null);
                assertEquals(1, serverC.shares().count(), "the exporter alone is back with its export");
                CheckpointRefused foreign = assertThrows(CheckpointRefused.class, () -> serverC.restore(imageI, null));
                assertTrue(foreign.getMessage().contains("no export of another session restored with it"),
                        foreign.getMessage());
                assertEquals(1, serverC.sessions().size(), "the refused importer left nothing");
            } finally {
                c.close();
            }
        } finally {
            b.close();
        }
    }

    @Test
    void aGroupThatLeavesAPartnerOutOrHoldsWhatItDoesNotCarryIsRefusedAndRunsOn() throws Exception {
        EmulatedDevice a = new EmulatedDevice();
        try (BackendServer server = server(a)) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("r.sock"))).toString();
            try (RemoteCudaDriver de = RemoteCudaDriver.connect(uri); RemoteCudaDriver di = RemoteCudaDriver.connect(uri);
                 RemoteCudaDriver dx = RemoteCudaDriver.connect(uri)) {
                Cuda ce = new Cuda(de), ci = new Cuda(di), cx = new Cuda(dx);
                ce.primaryContext();
                ci.primaryContext();
                cx.primaryContext();
                long p = ce.alloc(SIZE);
                MemorySegment handle = ce.cell(64);
                Cuda.ok(de.cuIpcGetMemHandle(handle, p), "cuIpcGetMemHandle");
                Cuda.ok(di.cuIpcOpenMemHandle(ci.cell(), handle, 0), "cuIpcOpenMemHandle");
                long e = de.sessionId(), i = di.sessionId(), x = dx.sessionId();

                CheckpointRefused left = assertThrows(CheckpointRefused.class, () -> server.checkpointGroup(List.of(e, x),
                        List.of(dir.resolve("e.ckpt"), dir.resolve("x.ckpt")), true, null));
                assertTrue(left.getMessage().contains("session(s) " + i + ", which this checkpoint does not name"),
                        left.getMessage());

                long kept = ce.alloc(SIZE);
                MemorySegment keptHandle = ce.cell(64);
                Cuda.ok(de.cuIpcGetMemHandle(keptHandle, kept), "cuIpcGetMemHandle");
                Cuda.ok(di.cuIpcOpenMemHandle(ci.cell(), keptHandle, 0), "cuIpcOpenMemHandle");
                Cuda.ok(de.cuMemFree(kept), "cuMemFree (the exporter's: the opener's mapping outlives it)");
                CheckpointRefused outlived = assertThrows(CheckpointRefused.class, () -> server.checkpointGroup(
                        List.of(e, i), List.of(dir.resolve("e.ckpt"), dir.resolve("i.ckpt")), true, null));
                assertTrue(outlived.getMessage().contains("whose exporter freed the allocation"), outlived.getMessage());

                // a shareable VMM handle another session imported (FABRIC: the handle is the token)
                MemorySegment prop = ci.cell(MemoryProps.ALLOCATION_PROP_SIZE).fill((byte) 0);
                prop.set(JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
                prop.set(JAVA_INT, 4, 8); // CU_MEM_HANDLE_TYPE_FABRIC
                prop.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
                MemorySegment memh = ci.cell();
                Cuda.ok(di.cuMemCreate(memh, 2L << 20, prop, 0), "cuMemCreate");
                MemorySegment fabric = ci.cell(64);
                Cuda.ok(di.cuMemExportToShareableHandle(fabric, memh.get(JAVA_LONG, 0), 8, 0), "cuMemExportToShareableHandle");
                Cuda.ok(de.cuMemImportFromShareableHandle(ce.cell(), ce.cell(64).copyFrom(fabric), 8),
                        "cuMemImportFromShareableHandle");
                Cuda.ok(di.cuMemRelease(memh.get(JAVA_LONG, 0)), "cuMemRelease (the exporter's: the import outlives it)");
                CheckpointRefused vmm = assertThrows(CheckpointRefused.class, () -> server.checkpointGroup(List.of(e, i),
                        List.of(dir.resolve("e.ckpt"), dir.resolve("i.ckpt")), true, null));
                assertTrue(vmm.getMessage().contains("session " + e + "'s imported shareable VMM allocation whose exporter"
                        + " freed it"), vmm.getMessage());
                assertFalse(Files.exists(dir.resolve("e.ckpt")) || Files.exists(dir.resolve("i.ckpt")));

                ce.put(p, new byte[] {5}); // both run on
                assertEquals(CuResult.CUDA_SUCCESS, di.cuCtxSynchronize());
            }
        } finally {
            a.close();
        }
    }
}
