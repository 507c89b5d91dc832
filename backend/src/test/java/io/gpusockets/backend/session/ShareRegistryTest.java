package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.CuResult;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The front's registry of IPC and shareable handles: tokens, tenants, bounds, and what a session's end drops. */
class ShareRegistryTest {
    private static byte[] driverBytes(int seed) {
        byte[] b = new byte[ShareRegistry.DRIVER_BYTES];
        Arrays.fill(b, (byte) seed);
        return b;
    }

    @Test
    void aSessionOfTheSameTenantGetsTheDriverBytesAndTheSize() throws Exception {
        ShareRegistry r = new ShareRegistry(8);
        byte[] token = r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(7), 4096, -1);
        assertEquals(ShareRegistry.TOKEN_BYTES, token.length);
        ShareRegistry.Found f = r.lookup(2, "alice", ShareRegistry.KIND_MEMORY, token);
        assertArrayEquals(driverBytes(7), f.driverBytes());
        assertEquals(4096, f.size());
        assertEquals(1, f.exporter());
        assertEquals(-1, f.fd());
        assertEquals(1, r.count());
    }

    @Test
    void anotherTenantsForgedStaleAndWrongKindTokensAreRefusedAsInvalidValue() throws Exception {
        ShareRegistry r = new ShareRegistry(8);
        byte[] token = r.share(1, "alice", ShareRegistry.KIND_EVENT, driverBytes(1), 0, -1);
        ShareRegistry.Refused other = assertThrows(ShareRegistry.Refused.class,
                () -> r.lookup(3, "bob", ShareRegistry.KIND_EVENT, token));
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, other.result());
        assertTrue(other.getMessage().contains("another tenant"), other.getMessage());
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, assertThrows(ShareRegistry.Refused.class,
                () -> r.lookup(2, "alice", ShareRegistry.KIND_MEMORY, token)).result(), "wrong kind");
        byte[] forged = token.clone();
        forged[20] ^= 1; // the secret
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, assertThrows(ShareRegistry.Refused.class,
                () -> r.lookup(2, "alice", ShareRegistry.KIND_EVENT, forged)).result());
        byte[] trailing = token.clone();
        trailing[63] = 1;
        assertThrows(ShareRegistry.Refused.class, () -> r.lookup(2, "alice", ShareRegistry.KIND_EVENT, trailing));
        assertThrows(ShareRegistry.Refused.class, () -> r.lookup(2, "alice", ShareRegistry.KIND_EVENT, new byte[64]));
        assertThrows(ShareRegistry.Refused.class, () -> r.lookup(2, "alice", ShareRegistry.KIND_EVENT, new byte[3]));
        assertNotNull(r.lookup(2, "alice", ShareRegistry.KIND_EVENT, token));
        r.sessionEnded(1);
        assertEquals(0, r.count());
        assertThrows(ShareRegistry.Refused.class, () -> r.lookup(2, "alice", ShareRegistry.KIND_EVENT, token), "stale");
    }

    @Test
    void theExportingSessionCannotOpenItsOwnIpcHandle() throws Exception {
        ShareRegistry r = new ShareRegistry(8);
        byte[] token = r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(1), 64, -1);
        assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, assertThrows(ShareRegistry.Refused.class,
                () -> r.lookup(1, "alice", ShareRegistry.KIND_MEMORY, token)).result());
    }

    @Test
    void aSessionsLiveSharesAreBoundedAndItsEndGivesTheRoomBack() throws Exception {
        ShareRegistry r = new ShareRegistry(2);
        r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(1), 64, -1);
        r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(2), 64, -1);
        ShareRegistry.Refused past = assertThrows(ShareRegistry.Refused.class,
                () -> r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(3), 64, -1));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, past.result());
        assertTrue(past.getMessage().contains(ShareRegistry.MAX_PROPERTY), past.getMessage());
        r.share(2, "alice", ShareRegistry.KIND_MEMORY, driverBytes(4), 64, -1); // another session's room is its own
        r.sessionEnded(1);
        assertEquals(1, r.count());
        r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(5), 64, -1);
    }

    @Test
    void sessionsThatShareAreRefusedAMoveUntilOneOfThemEnds() throws Exception {
        ShareRegistry r = new ShareRegistry(8);
        byte[] token = r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(1), 64, -1);
        assertNull(r.movingRefusal(1, "checkpointed"), "an export nobody opened does not hold the session");
        r.lookup(2, "alice", ShareRegistry.KIND_MEMORY, token);
        String exporter = r.movingRefusal(1, "checkpointed");
        assertNotNull(exporter);
        assertTrue(exporter.contains("session(s) 2") && exporter.contains("checkpointed together"), exporter);
        assertTrue(r.movingRefusal(2, "migrated").contains("session(s) 1"));
        r.sessionEnded(2);
        assertNull(r.movingRefusal(1, "checkpointed"));
    }

    @Test
    void aGroupIsEverySessionLinkedBySharesAndAnExportRestoredUnderItsTokenNeedsItsMemory() throws Exception {
        ShareRegistry r = new ShareRegistry(8);
        byte[] one = r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(1), 64, -1);
        byte[] three = r.share(3, "alice", ShareRegistry.KIND_MEMORY, driverBytes(3), 64, -1);
        r.share(5, "alice", ShareRegistry.KIND_MEMORY, driverBytes(5), 64, -1);
        r.lookup(2, "alice", ShareRegistry.KIND_MEMORY, one);
        r.lookup(2, "alice", ShareRegistry.KIND_MEMORY, three);
        r.lookup(4, "alice", ShareRegistry.KIND_MEMORY, three);
        assertEquals(java.util.Set.of(1L, 2L, 3L, 4L), r.group(java.util.Set.of(1L)), "1-2, 2-3, 3-4: one group");
        assertEquals(java.util.Set.of(5L), r.group(java.util.Set.of(5L)), "an export nobody opened links nobody");
        assertEquals(java.util.Set.of(2L), r.partners(1));
        assertTrue(r.movingRefusal(4, "checkpointed").contains("gpusockets checkpoint 1 2 3 4 --to DIR"),
                r.movingRefusal(4, "checkpointed"));
        java.util.List<String> notCarried = new java.util.ArrayList<>();
        assertEquals(java.util.List.of(), r.carried(1, notCarried), "the driver's IPC memory is not carried");
        assertTrue(notCarried.get(0).contains("IPC memory handle of the driver opened by session(s) 2"), notCarried.toString());
        assertThrows(ShareRegistry.Refused.class, () -> r.restore(9, "alice", 77, new byte[16], 64, null, 0),
                "a restored export without its memory");
    }

    @Test
    void anExportRestoredUnderItsOldTokenOpensAgainAndNewTokensStepOverItsId() throws Exception {
        ShareRegistry r = new ShareRegistry(8);
        byte[] first = r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(1), 64, -1);
        long id = ShareRegistry.idOf(first);
        byte[] secret = new byte[16];
        Arrays.fill(secret, (byte) 7);
        int[] fds = io.gpusockets.transport.vsock.DescriptorPassing.socketPair();
        io.gpusockets.transport.vsock.DescriptorPassing.close(fds[1]);
        r.restore(9, "alice", id + 1, secret, 4096,
                new ShareRegistry.Window(16, java.util.List.of(new ShareRegistry.Piece(0, 8192, fds[0]))), 0x7f0000000010L);
        byte[] old = ShareRegistry.tokenOf(id + 1, ShareRegistry.KIND_MEMORY, secret);
        ShareRegistry.Found f = r.lookup(2, "alice", ShareRegistry.KIND_MEMORY, old);
        assertEquals(9, f.exporter());
        assertEquals(4096, f.size());
        assertEquals(16, f.window().start());
        ShareRegistry.closeAll(f.window());
        assertEquals(java.util.Set.of(2L), r.partners(9), "the opener is linked to the restored exporter");
        assertThrows(ShareRegistry.Refused.class, () -> r.lookup(3, "bob", ShareRegistry.KIND_MEMORY, old), "another tenant");
        int[] more = io.gpusockets.transport.vsock.DescriptorPassing.socketPair();
        io.gpusockets.transport.vsock.DescriptorPassing.close(more[1]);
        ShareRegistry.Refused taken = assertThrows(ShareRegistry.Refused.class, () -> r.restore(8, "alice", id + 1, secret,
                64, new ShareRegistry.Window(0, java.util.List.of(new ShareRegistry.Piece(0, 64, more[0]))), 0),
                "its descriptor closed with the refusal");
        assertTrue(taken.getMessage().contains("in use in this backend by session 9"), taken.getMessage());
        assertEquals(id + 2, ShareRegistry.idOf(r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(2), 64, -1)),
                "a new token steps over the restored one's id");
        r.sessionEnded(9);
        assertThrows(ShareRegistry.Refused.class, () -> r.lookup(2, "alice", ShareRegistry.KIND_MEMORY, old));
    }

    /**
     * A shareable VMM handle: carried by a group checkpoint only where asked (isolation context and shared), restored
     * under its old token with a descriptor that imports again, its descriptor closed when refused (an id in use, no
     * descriptor) and when its exporter ends.
     */
    @Test
    void aShareableVmmHandleIsCarriedWhereAskedAndRestoredUnderItsOldToken() throws Exception {
        ShareRegistry r = new ShareRegistry(8);
        int[] exported = pair();
        byte[] token = r.share(1, "alice", ShareRegistry.KIND_VMM, null, 4096, exported[0], null, 0x77);
        ShareRegistry.Found opened = r.lookup(2, "alice", ShareRegistry.KIND_VMM, token);
        io.gpusockets.transport.vsock.DescriptorPassing.close(opened.fd());
        java.util.List<String> notCarried = new java.util.ArrayList<>();
        assertEquals(java.util.List.of(), r.carried(1, notCarried), "isolation process: not carried");
        assertTrue(notCarried.get(0).contains("shareable VMM handle opened by session(s) 2"), notCarried.toString());
        notCarried.clear();
        java.util.List<ShareRegistry.Carried> carried = r.carried(1, notCarried, true);
        assertEquals(java.util.List.of(), notCarried);
        assertEquals(1, carried.size());
        ShareRegistry.Carried c = carried.get(0);
        assertEquals(java.util.List.of((long) ShareRegistry.KIND_VMM, 0x77L, 4096L),
                java.util.List.of((long) c.kind(), c.address(), c.size()));
        assertEquals(java.util.Set.of(2L), c.openers());

        ShareRegistry restored = new ShareRegistry(8);
        int[] again = pair();
        restored.restoreVmm(9, "alice", c.id(), c.secret(), 4096, again[0], 0x99);
        ShareRegistry.Found f = restored.lookup(3, "alice", ShareRegistry.KIND_VMM, token);
        assertEquals(java.util.List.of(9L, 4096L), java.util.List.of(f.exporter(), f.size()));
        assertTrue(f.fd() >= 0, "a descriptor to import");
        io.gpusockets.transport.vsock.DescriptorPassing.close(f.fd());
        int[] taken = pair();
        assertThrows(ShareRegistry.Refused.class, () -> restored.restoreVmm(8, "alice", c.id(), c.secret(), 4096, taken[0],
                0x98), "the id is in use");
        assertTrue(closed(taken), "the refused share's descriptor is closed");
        assertThrows(ShareRegistry.Refused.class, () -> restored.restoreVmm(8, "alice", c.id() + 1, c.secret(), 4096, -1,
                0x98), "no descriptor");
        restored.sessionEnded(9);
        assertTrue(closed(again), "the exporter's end closes it");
        r.sessionEnded(1);
        for (int[] p : new int[][] {exported, again, taken}) {
            io.gpusockets.transport.vsock.DescriptorPassing.close(p[1]);
        }
    }

    @Test
    void aShareWithoutWhatAnImporterNeedsIsRefused() {
        ShareRegistry r = new ShareRegistry(8);
        assertThrows(ShareRegistry.Refused.class, () -> r.share(1, "a", ShareRegistry.KIND_MEMORY, new byte[3], 64, -1));
        assertThrows(ShareRegistry.Refused.class, () -> r.share(1, "a", ShareRegistry.KIND_VMM, null, 64, -1));
        assertThrows(ShareRegistry.Refused.class, () -> r.share(1, "a", (byte) 9, driverBytes(1), 64, -1));
    }

    @Test
    void anExporterLettingGoOfAnObjectWithdrawsItsSharesOnly() throws Exception {
        ShareRegistry r = new ShareRegistry(8);
        byte[] a = r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(1), 64, -1, null, 0x1000);
        byte[] again = r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(1), 64, -1, null, 0x1000);
        byte[] b = r.share(1, "alice", ShareRegistry.KIND_MEMORY, driverBytes(2), 64, -1, null, 0x2000);
        r.withdraw(2, ShareRegistry.KIND_MEMORY, 0x1000); // another session's object of that value: nothing of 1's goes
        r.withdraw(1, ShareRegistry.KIND_EVENT, 0x1000); // another kind
        assertEquals(3, r.count());
        r.withdraw(1, ShareRegistry.KIND_MEMORY, 0x1000);
        assertEquals(1, r.count());
        assertThrows(ShareRegistry.Refused.class, () -> r.lookup(2, "alice", ShareRegistry.KIND_MEMORY, a));
        assertThrows(ShareRegistry.Refused.class, () -> r.lookup(2, "alice", ShareRegistry.KIND_MEMORY, again));
        assertNotNull(r.lookup(2, "alice", ShareRegistry.KIND_MEMORY, b));
    }

    /** A socket pair: [0] to hand to the registry, [1] to see it closed ({@link #closed}). */
    private static int[] pair() throws Exception {
        return io.gpusockets.transport.vsock.DescriptorPassing.socketPair();
    }

    /** Whether the other end of {@code pair} was closed (the registry let go of it). */
    private static boolean closed(int[] pair) {
        return io.gpusockets.transport.vsock.DescriptorPassing.hungUp(pair[1]);
    }

    private static ShareRegistry.Window window(long start, long[] sizes, int[]... pairs) {
        java.util.List<ShareRegistry.Piece> pieces = new java.util.ArrayList<>();
        long at = 0;
        for (int i = 0; i < sizes.length; i++) {
            pieces.add(new ShareRegistry.Piece(at, sizes[i], pairs[i][0]));
            at += sizes[i];
        }
        return new ShareRegistry.Window(start, pieces);
    }

    @Test
    void windowMemoryMustBePiecesOneAfterAnotherHoldingTheAllocation() {
        java.util.function.Function<java.util.List<ShareRegistry.Piece>, ShareRegistry.Window> at0 =
                p -> new ShareRegistry.Window(0, p);
        assertNull(ShareRegistry.windowProblem(at0.apply(java.util.List.of(new ShareRegistry.Piece(0, 4096, -1),
                new ShareRegistry.Piece(4096, 8192, -1))), 12288));
        assertNull(ShareRegistry.windowProblem(new ShareRegistry.Window(100, java.util.List.of(
                new ShareRegistry.Piece(0, 4096, -1))), 3996), "an allocation inside the span");
        assertNotNull(ShareRegistry.windowProblem(at0.apply(java.util.List.of()), 1), "no pieces");
        assertNotNull(ShareRegistry.windowProblem(at0.apply(java.util.List.of(new ShareRegistry.Piece(0, 4096, -1),
                new ShareRegistry.Piece(8192, 4096, -1))), 4096), "a gap");
        assertNotNull(ShareRegistry.windowProblem(at0.apply(java.util.List.of(new ShareRegistry.Piece(4096, 4096, -1))),
                4096), "not from offset 0");
        assertNotNull(ShareRegistry.windowProblem(at0.apply(java.util.List.of(new ShareRegistry.Piece(0, 0, -1))), 1),
                "an empty piece");
        assertNotNull(ShareRegistry.windowProblem(at0.apply(java.util.List.of(new ShareRegistry.Piece(0, Long.MAX_VALUE, -1),
                new ShareRegistry.Piece(Long.MAX_VALUE, Long.MAX_VALUE, -1))), 1), "a span past a long");
        assertNotNull(ShareRegistry.windowProblem(at0.apply(java.util.List.of(new ShareRegistry.Piece(0, 4096, -1))), 4097),
                "an allocation larger than the span");
        assertNotNull(ShareRegistry.windowProblem(new ShareRegistry.Window(4096, java.util.List.of(
                new ShareRegistry.Piece(0, 4096, -1))), 1), "starting past the span");
        assertNotNull(ShareRegistry.windowProblem(at0.apply(java.util.List.of(new ShareRegistry.Piece(0, 4096, -1))), 0),
                "an empty allocation");
    }

    @Test
    void aSharedWindowOfAWrongShapeIsRefusedAndItsDescriptorsClosed() throws Exception {
        ShareRegistry r = new ShareRegistry(8);
        int[] a = pair(), b = pair();
        ShareRegistry.Window gap = new ShareRegistry.Window(0, java.util.List.of(new ShareRegistry.Piece(0, 4096, a[0]),
                new ShareRegistry.Piece(8192, 4096, b[0])));
        ShareRegistry.Refused refused = assertThrows(ShareRegistry.Refused.class,
                () -> r.share(1, "alice", ShareRegistry.KIND_MEMORY, null, 4096, -1, gap, 0x1000));
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, refused.result());
        assertTrue(closed(a) && closed(b), "the refused window's descriptors are closed");
        assertEquals(0, r.count());
    }

    @Test
    void aSessionsSharesHoldAtMostAsManyDescriptorsAsItMayHaveShares() throws Exception {
        ShareRegistry r = new ShareRegistry(4);
        int[] p1 = pair(), p2 = pair(), p3 = pair(), vmm = pair(), over = pair();
        r.share(1, "alice", ShareRegistry.KIND_MEMORY, null, 3 * 4096, -1,
                window(0, new long[] {4096, 4096, 4096}, p1, p2, p3), 0x1000);
        r.share(1, "alice", ShareRegistry.KIND_VMM, null, 4096, vmm[0]);
        assertEquals(2, r.countOf(1), "two shares, four descriptors");
        ShareRegistry.Refused full = assertThrows(ShareRegistry.Refused.class, () -> r.share(1, "alice",
                ShareRegistry.KIND_MEMORY, null, 4096, -1, window(0, new long[] {4096}, over), 0x2000));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, full.result());
        assertTrue(full.getMessage().contains("descriptors"), full.getMessage());
        assertTrue(closed(over), "the refused share's descriptor is closed");
        assertNotNull(r.share(2, "alice", ShareRegistry.KIND_MEMORY, driverBytes(1), 64, -1), "another session's room");
        r.withdraw(1, ShareRegistry.KIND_MEMORY, 0x1000);
        assertTrue(closed(p1) && closed(p2) && closed(p3), "a withdrawn window's descriptors are closed");
        int[] again = pair();
        assertNotNull(r.share(1, "alice", ShareRegistry.KIND_MEMORY, null, 4096, -1, window(0, new long[] {4096}, again),
                0x2000), "the withdrawal gave the room back");
        r.sessionEnded(1);
        assertTrue(closed(vmm) && closed(again), "the exporter's end closes what its shares held");
        for (int[] p : new int[][] {p1, p2, p3, vmm, over, again}) {
            io.gpusockets.transport.vsock.DescriptorPassing.close(p[1]);
        }
    }
}
