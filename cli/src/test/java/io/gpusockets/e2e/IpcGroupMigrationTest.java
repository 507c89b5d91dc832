package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.server.Migration;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.MemorySegment;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Sessions that share IPC memory and events migrate together to another backend (issue 24 item 1,
 * {@link BackendServer#migrateGroup}): on backend A (emulated device, isolation context or shared) session E exports
 * a cuMemAlloc allocation (cuIpcGetMemHandle) that session I opens, and I exports an IPC event that E opens. Each alone
 * is refused a migration, naming its partner and the command that moves them together; one group that leaves the
 * partner out is refused too. Migrated together to backend B (its own emulated device), both frontends follow their
 * sessions there: I reads E's data through its old pointer, a write by either is seen by the other, E's opened event
 * follows I's recording, and the old token still opens the memory; nothing of them is left at A. From the command line
 * ({@code gpusockets migrate E I --to URI}) the same, between backend processes; a target that can restore only one
 * of them keeps neither; the sessions run on at the source. A backend's drain ({@link BackendServer#drainTo}) moves such
 * sessions as one group. A shareable VMM handle one imported from the other migrates with them (isolation context).
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class IpcGroupMigrationTest extends CheckpointTestSupport {
    private static final int SIZE = IpcGroupCheckpointTest.SIZE; // what shareMemory allocates

    @ParameterizedTest(name = "isolation {0}")
    @ValueSource(strings = {"context", "shared"})
    void sessionsSharingIpcMemoryAndAnEventMigrateTogetherAndGoOnSharingThem(String isolation) throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a); BackendServer serverB = server(b)) {
            if (isolation.equals("shared")) {
                serverA.shareContextsPerTenant();
                serverB.shareContextsPerTenant();
            }
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            serverB.acceptMigrations(true); // over unix, proven by this process's own uid
            try (RemoteCudaDriver de = RemoteCudaDriver.connect(unixA); RemoteCudaDriver di = RemoteCudaDriver.connect(unixA);
                 RemoteCudaDriver dx = RemoteCudaDriver.connect(unixA)) {
                Cuda[] cs = current(de, di, dx);
                Cuda ce = cs[0], ci = cs[1], cx = cs[2];
                IpcGroupCheckpointTest.Shared shared = IpcGroupCheckpointTest.shareMemory(de, ce, di, ci, new byte[] {1, 2, 3}, 1);
                long p = shared.exporter(), q = shared.opener();
                ce.put(p + SIZE - 2, new byte[] {4, 5});
                ci.put(q + 3, new byte[] {9});
                IpcGroupCheckpointTest.SharedEvent event = IpcGroupCheckpointTest.shareEvent(di, ci, de, ce);
                long e = de.sessionId(), i = di.sessionId(), x = dx.sessionId();
                String both = String.join(" ", Stream.of(e, i).sorted(Comparator.naturalOrder()).map(String::valueOf).toList());

                // alone, each is refused, naming the other and the command that moves them together
                for (long one : new long[] {e, i}) {
                    CheckpointRefused alone = assertThrows(CheckpointRefused.class,
                            () -> serverA.migrate(one, unixB, null, null));
                    assertTrue(alone.getMessage().contains("session(s) " + (one == e ? i : e))
                            && alone.getMessage().contains("gpusockets migrate " + both + " --to URI"), alone.getMessage());
                }
                CheckpointRefused left = assertThrows(CheckpointRefused.class,
                        () -> serverA.migrateGroup(List.of(e, x), unixB, null, null));
                assertTrue(left.getMessage().contains("session(s) " + i + ", which this migration does not name")
                        && left.getMessage().contains("gpusockets migrate " + String.join(" ", Stream.of(e, i, x)
                        .sorted(Comparator.naturalOrder()).map(String::valueOf).toList()) + " --to URI"), left.getMessage());
                assertEquals(0, serverB.sessions().size(), "a refused migration sends nothing");
                assertArrayEquals(new byte[] {1, 2, 3, 9}, ce.get(p, 4), "both run on at A");

                // the importer first: the order does not matter
                List<Migration.Result> r = serverA.migrateGroup(List.of(i, e), unixB, null, null);
                assertEquals(List.of(i, e), r.stream().map(Migration.Result::sessionId).toList());
                for (Migration.Result m : r) {
                    assertTrue(m.rounds().size() >= 2 && m.rounds().getLast().drained(), "pre-copy and final rounds: " + m);
                }
                assertTrue(r.get(1).bytes() >= SIZE, "the exporter's rounds carry the shared memory: " + r.get(1));
                assertTrue(r.get(0).bytes() < SIZE, "the importer's do not: " + r.get(0));
                assertEquals(1, serverA.migrations()[0], "one migration, done");
                assertEquals(2, serverB.sessions().size());
                assertEquals(2, serverB.shares().count(), "the memory and the event export are shares again at B");

                IpcGroupCheckpointTest.movedAndSharing(de, ce, di, ci, shared, event, unixB);

                assertEquals(2, serverB.resumesAccepted());
                while (serverA.sessions().stream().anyMatch(s -> s.id() != x)) {
                    Thread.sleep(10); // the moved sessions' threads remove them once released (bounded by the timeout)
                }
                assertEquals(0, serverA.shares().count(), "nothing of the group is shared at A any more");
                Cuda.ok(dx.cuCtxSynchronize(), "the session left out runs on at A");
                assertFalse(serverB.sessions().stream().anyMatch(s -> s.id() == x));
            }
        } finally {
            a.close();
            b.close();
        }
    }

    /**
     * A shareable VMM handle goes with a group migration too (isolation context): E's shareable allocation, mapped and
     * written, exported as a POSIX descriptor and imported and mapped by I, migrates with them; at B I reads E's data
     * through its old address, writes cross both ways, the old descriptor imports it again, and the importer's memory is
     * not carried twice.
     */
    @Test
    void sessionsSharingAShareableVmmHandleMigrateTogether() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a); BackendServer serverB = server(b)) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("va.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("vb.sock"))).toString();
            serverB.acceptMigrations(true);
            try (RemoteCudaDriver de = RemoteCudaDriver.connect(unixA); RemoteCudaDriver di = RemoteCudaDriver.connect(unixA)) {
                Cuda[] cs = current(de, di);
                Cuda ce = cs[0], ci = cs[1];
                long memh = IpcGroupCheckpointTest.createShareable(de, ce);
                long p = IpcGroupCheckpointTest.mapReadWrite(de, ce, memh);
                ce.put(p, new byte[] {1, 2, 3});
                MemorySegment fdCell = ce.cell();
                Cuda.ok(de.cuMemExportToShareableHandle(fdCell, memh, IpcGroupCheckpointTest.POSIX_FD, 0),
                        "cuMemExportToShareableHandle(POSIX fd)");
                int fd = fdCell.get(java.lang.foreign.ValueLayout.JAVA_INT, 0);
                long q = IpcGroupCheckpointTest.mapReadWrite(di, ci, IpcGroupCheckpointTest.importFd(di, ci, fd));
                ci.put(q + 3, new byte[] {9});
                long e = de.sessionId(), i = di.sessionId();

                List<Migration.Result> r = serverA.migrateGroup(List.of(i, e), unixB, null, null);
                assertTrue(r.get(1).bytes() >= IpcGroupCheckpointTest.VMM_SIZE, "the exporter's carry the memory: " + r.get(1));
                assertTrue(r.get(0).bytes() < IpcGroupCheckpointTest.VMM_SIZE, "the importer's do not: " + r.get(0));
                assertEquals(2, serverB.sessions().size());
                assertEquals(1, serverB.shares().count(), "the export is a share again at B");
                assertArrayEquals(new byte[] {1, 2, 3, 9}, ci.get(q, 4), "the importer reads through its old address");
                ce.put(p + 10, new byte[] {7});
                assertArrayEquals(new byte[] {7}, ci.get(q + 10, 1), "the exporter's write reaches the importer");
                ci.put(q + 11, new byte[] {8});
                assertArrayEquals(new byte[] {7, 8}, ce.get(p + 10, 2), "and the importer's the exporter");
                long again = IpcGroupCheckpointTest.importFd(di, ci, fd);
                long q2 = IpcGroupCheckpointTest.mapReadWrite(di, ci, again);
                assertArrayEquals(new byte[] {1, 2, 3, 9}, ci.get(q2, 4), "the old token imports it at B");
                assertEquals(unixB, di.backendUri(), "the importer's frontend followed its session to B");
            }
        } finally {
            a.close();
            b.close();
        }
    }

    /** A {@link Cuda} for each driver, its device's primary context current. */
    private static Cuda[] current(RemoteCudaDriver... drivers) {
        Cuda[] cs = new Cuda[drivers.length];
        for (int k = 0; k < drivers.length; k++) {
            cs[k] = new Cuda(drivers[k]);
            cs[k].primaryContext();
        }
        return cs;
    }

    /**
     * {@link BackendServer#drainTo} (the backend's {@code --drain-to}) moves sessions that share IPC memory as one group
     * and a session alone by itself: all three move, the importer reads the exporter's data through its old pointer at
     * B and the writes cross; before group migrations were drained together the pair was reported not moved.
     */
    @Test
    void drainToMovesSessionsThatShareTogether() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a); BackendServer serverB = server(b)) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            serverB.acceptMigrations(true);
            try (RemoteCudaDriver de = RemoteCudaDriver.connect(unixA); RemoteCudaDriver di = RemoteCudaDriver.connect(unixA);
                 RemoteCudaDriver dx = RemoteCudaDriver.connect(unixA)) {
                Cuda[] cs = current(de, di, dx);
                Cuda ce = cs[0], ci = cs[1], cx = cs[2];
                IpcGroupCheckpointTest.Shared shared = IpcGroupCheckpointTest.shareMemory(de, ce, di, ci, new byte[] {3, 1, 4}, 1);
                long p = shared.exporter(), q = shared.opener();
                long alone = cx.alloc(64);
                cx.put(alone, new byte[] {2, 7});

                BackendServer.Drain drain = serverA.drainTo(unixB, java.time.Duration.ofSeconds(120), 4);
                assertEquals(java.util.Map.of(), drain.notMoved(), "every session moved");
                assertEquals(java.util.Set.of(de.sessionId(), di.sessionId(), dx.sessionId()),
                        drain.moved().stream().map(Migration.Result::sessionId).collect(java.util.stream.Collectors.toSet()));
                assertEquals(3, serverB.sessions().size());
                assertEquals(1, serverB.shares().count(), "the memory export is a share again at B");
                assertArrayEquals(new byte[] {3, 1, 4}, ci.get(q, 3), "the importer reads through its old pointer at B");
                ci.put(q + 3, new byte[] {5});
                assertArrayEquals(new byte[] {3, 1, 4, 5}, ce.get(p, 4), "and its write reaches the exporter");
                assertArrayEquals(new byte[] {2, 7}, cx.get(alone, 2), "the session alone moved by itself");
                assertEquals(unixB, de.backendUri());
                assertEquals(unixB, di.backendUri());
                assertEquals(unixB, dx.backendUri());
            }
        } finally {
            a.close();
            b.close();
        }
    }

    /**
     * From the command line between backend processes (isolation context): {@code gpusockets migrate E I --to URI}
     * moves both (one alone is refused, naming the command); a target that can restore only one of them keeps neither,
     * and the programs run on at the source; then on from there to a backend in isolation process, which restores
     * them together in workers (a group from isolation process: IpcGroupMigrationProcessTest).
     */
    @Test
    void fromTheCommandLineTwoSessionsSharingMemoryMigrateTogetherAndATargetThatCannotTakeThemKeepsNeither() throws Exception {
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "context", "--resume-grace", "60");
             BackendProcess b = BackendProcess.startWithStatus("--isolation", "context", "--resume-grace", "60",
                     "--accept-migrations");
             BackendProcess one = BackendProcess.startWithStatus("--isolation", "context", "--resume-grace", "60",
                     "--accept-migrations", "--max-sessions", "1");
             RemoteCudaDriver de = RemoteCudaDriver.connect(a.unix()); RemoteCudaDriver di = RemoteCudaDriver.connect(a.unix())) {
            Cuda ce = new Cuda(de), ci = new Cuda(di);
            ce.primaryContext();
            ci.primaryContext();
            IpcGroupCheckpointTest.Shared shared = IpcGroupCheckpointTest.shareMemory(de, ce, di, ci, new byte[] {6, 7}, 0);
            long p = shared.exporter(), q = shared.opener();
            String e = String.valueOf(de.sessionId()), i = String.valueOf(di.sessionId());
            String admin = a.adminSocket().toString();
            String both = IpcGroupCheckpointTest.inOrder(e, i);

            CheckpointNativeTest.Result alone = CheckpointNativeTest.cli("migrate", i, "--to", b.unix(), "--socket", admin);
            assertEquals(1, alone.exit(), alone.out());
            assertTrue(alone.err().contains("gpusockets migrate " + both + " --to URI"), alone.err());

            // a target that restores one and refuses the other (room for one session) keeps neither
            CheckpointNativeTest.Result full = CheckpointNativeTest.cli("migrate", e, i, "--to", one.unix(), "--socket",
                    admin);
            assertEquals(1, full.exit(), full.out());
            assertTrue(full.err().contains("failed the migration") && full.err().contains("sessions"), full.err());
            assertEquals(List.of(), StatusTest.list(StatusTest.statusJson(one), "sessions"), "nothing left at the target");
            ci.put(q + 2, new byte[] {5});
            assertArrayEquals(new byte[] {6, 7, 5}, ce.get(p, 3), "both run on at A, still sharing");
            assertEquals(a.unix(), de.backendUri());

            CheckpointNativeTest.Result moved = CheckpointNativeTest.cli("migrate", e, i, "--to", b.unix(), "--socket",
                    admin);
            assertEquals(0, moved.exit(), () -> moved.out() + moved.err() + "\nA:\n" + String.join("\n", a.output())
                    + "\nB:\n" + String.join("\n", b.output()));
            assertTrue(moved.out().startsWith("{\"sessions\":[{\"session\":" + e + ","), moved.out());
            assertTrue(moved.err().contains("session " + e + " moved to " + b.unix())
                    && moved.err().contains("session " + i + " moved to " + b.unix()), moved.err());

            assertArrayEquals(new byte[] {6, 7, 5}, ci.get(q, 3), "the importer reads through its old pointer at B");
            ci.put(q + 3, new byte[] {8});
            assertArrayEquals(new byte[] {6, 7, 5, 8}, ce.get(p, 4), "and its write reaches the exporter");
            assertEquals(b.unix(), de.backendUri());
            assertEquals(b.unix(), di.backendUri());

            // on from B to a backend in isolation process, which restores them together, each in a worker of its own
            try (BackendProcess c = BackendProcess.startWithStatus("--isolation", "process", "--stable-addresses",
                    "--resume-grace", "60", "--accept-migrations")) {
                List<String> atB = StatusTest.list(StatusTest.statusJson(b), "sessions").stream()
                        .map(s -> String.valueOf(s.get("id"))).toList();
                assertEquals(2, atB.size(), atB::toString);
                List<String> args = new java.util.ArrayList<>(List.of("migrate"));
                args.addAll(atB);
                args.addAll(List.of("--to", c.unix(), "--socket", b.adminSocket().toString()));
                CheckpointNativeTest.Result on = CheckpointNativeTest.cli(args.toArray(String[]::new));
                assertEquals(0, on.exit(), () -> on.out() + on.err() + "\nC:\n" + String.join("\n", c.output()));
                assertArrayEquals(new byte[] {6, 7, 5, 8}, ci.get(q, 4), "the importer reads through its old pointer at C");
                ce.put(p, new byte[] {1});
                assertArrayEquals(new byte[] {1, 7, 5, 8}, ci.get(q, 4), "and the exporter's write reaches it");
                assertEquals(c.unix(), de.backendUri());
                assertEquals(c.unix(), di.backendUri());
            }
        }
    }
}
