package io.gpusockets.backend.status;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class AdminSocketTest {
    @TempDir
    Path dir;

    @Test
    void answersStatusWithTheSnapshotAsJsonOnASocketOnlyItsUserMayOpen() throws Exception {
        Path p = dir.resolve("admin.sock");
        try (AdminSocket a = AdminSocket.open(p, null, Snapshots::sample)) {
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(p)));
            String answer = ask(p, "status\n");
            assertEquals(StatusJson.write(Snapshots.sample()) + "\n", answer);
            assertTrue(ask(p, "shutdown\n").startsWith("error: unknown request 'shutdown'"));
            assertTrue(ask(p, "x".repeat(AdminSocket.MAX_REQUEST)).startsWith("error: request line longer than"));
        }
        assertFalse(Files.exists(p), "the socket file goes with the socket");
    }

    /** Actions that record what they were asked, report progress, and fail on a session id of 13 or a file named "bad". */
    static final class FakeActions implements AdminActions {
        final List<String> asked = new java.util.concurrent.CopyOnWriteArrayList<>();

        @Override
        public String checkpoint(long session, Path file, boolean stop, Progress progress) throws Exception {
            asked.add("checkpoint " + session + " " + stop + " " + file);
            if (session == 13) {
                throw new IllegalStateException("session 13 holds managed memory, which a checkpoint cannot capture");
            }
            progress.progress("drain", 1, 1);
            progress.progress("contents bytes", 4096, 8192);
            progress.progress("contents bytes", 8192, 8192);
            return "{\"session\":" + session + ",\"bytes\":8192}";
        }

        @Override
        public String restore(Path file, Progress progress) throws Exception {
            asked.add("restore " + file);
            if (file.getFileName().toString().equals("bad")) {
                throw new java.io.IOException("chunk 3 of allocation 0x7f0000000000: hash differs (the image is damaged)");
            }
            progress.progress("replay", 7, 7);
            return "{\"session\":42}";
        }

        @Override
        public String checkpointGroup(List<Long> sessions, List<Path> files, boolean stop, Progress progress) {
            asked.add("checkpoint-group " + sessions + " " + stop + " " + files);
            return "{\"sessions\":[]}";
        }

        @Override
        public String restoreGroup(List<Path> files, Progress progress) {
            asked.add("restore-group " + files);
            return "{\"sessions\":[5,6]}";
        }

        @Override
        public String migrateGroup(List<Long> sessions, String targetUri, String frontendUri, Progress progress) {
            asked.add("migrate-group " + sessions + " " + targetUri + " " + frontendUri);
            return "{\"sessions\":[]}";
        }

        @Override
        public String migrate(long session, String targetUri, String frontendUri, Progress progress) throws Exception {
            asked.add("migrate " + session + " " + targetUri + " " + frontendUri);
            if (session == 13) {
                throw new IllegalStateException("migration refused by tcp://b:7000: this backend does not accept migrations");
            }
            progress.progress("pre-copy", 1, 8);
            progress.progress("restore", 1, 1);
            return "{\"session\":" + session + ",\"rounds\":[]}";
        }

        @Override
        public String handOver(long session, Path targetAdmin, String frontendUri, Progress progress) {
            asked.add("hand-over " + session + " " + targetAdmin + " " + frontendUri);
            progress.progress("export", 3, 3);
            return "{\"session\":" + session + ",\"copiedBytes\":0}";
        }

        @Override
        public String handOverGroup(List<Long> sessions, Path targetAdmin, String frontendUri, Progress progress) {
            asked.add("hand-over-group " + sessions + " " + targetAdmin + " " + frontendUri);
            return "{\"sessions\":[]}";
        }

        @Override
        public String receiveHandOver(Path sourceSocket, String frontendUri, Progress progress) {
            asked.add("receive-hand-over " + sourceSocket + " " + frontendUri);
            return "{\"session\":7}";
        }
    }

    @Test
    void checkpointAndRestoreStreamProgressThenAnswerOkOrTheActionsError() throws Exception {
        Path p = dir.resolve("admin.sock");
        FakeActions actions = new FakeActions();
        try (AdminSocket a = AdminSocket.open(p, null, Snapshots::sample, actions)) {
            assertEquals("progress drain 1 1\nprogress contents_bytes 4096 8192\nprogress contents_bytes 8192 8192\n"
                    + "ok {\"session\":5,\"bytes\":8192}\n", ask(p, "checkpoint 5 stop /tmp/a dir/img\n"));
            assertEquals("progress drain 1 1\nprogress contents_bytes 4096 8192\nprogress contents_bytes 8192 8192\n"
                    + "ok {\"session\":6,\"bytes\":8192}\n", ask(p, "checkpoint 6 /tmp/../tmp/b\n"));
            assertEquals("error: session 13 holds managed memory, which a checkpoint cannot capture\n",
                    ask(p, "checkpoint 13 /tmp/c\n"));
            assertEquals("progress replay 7 7\nok {\"session\":42}\n", ask(p, "restore /tmp/img\n"));
            assertTrue(ask(p, "restore /tmp/bad\n").startsWith("error: chunk 3 of allocation 0x7f0000000000: hash differs"));
            assertEquals(List.of("checkpoint 5 true /tmp/a dir/img", "checkpoint 6 false /tmp/b", "checkpoint 13 false /tmp/c",
                    "restore /tmp/img", "restore /tmp/bad"), actions.asked);
            // refused before any action runs
            assertTrue(ask(p, "checkpoint 5 relative/img\n").startsWith("error: the file must be an absolute path"));
            assertTrue(ask(p, "checkpoint five /tmp/x\n").startsWith("error: not a session id: 'five'"));
            assertTrue(ask(p, "checkpoint 5\n").startsWith("error: usage: checkpoint SESSION [stop] FILE"));
            assertTrue(ask(p, "restore \n").startsWith("error: usage: restore FILE"));
            assertEquals(5, actions.asked.size(), "a refused request reaches no action");
        }
        try (AdminSocket a = AdminSocket.open(p, null, Snapshots::sample)) {
            assertEquals("error: this backend does not checkpoint, restore or migrate sessions\n", ask(p, "restore /tmp/img\n"));
        }
    }

    @Test
    void sessionsCheckpointedTogetherNameOneFilePerSessionTabApartAndARestoreTogetherNamesTheirFiles() throws Exception {
        Path p = dir.resolve("admin.sock");
        FakeActions actions = new FakeActions();
        try (AdminSocket a = AdminSocket.open(p, null, Snapshots::sample, actions)) {
            assertEquals("ok {\"sessions\":[]}\n", ask(p, "checkpoint 5,6 stop /tmp/g/session 5.ckpt\t/tmp/g/../g/s6\n"));
            assertEquals("ok {\"sessions\":[5,6]}\n", ask(p, "restore /tmp/g/session 5.ckpt\t/tmp/g/s6\n"));
            assertEquals(List.of("checkpoint-group [5, 6] true [/tmp/g/session 5.ckpt, /tmp/g/s6]",
                    "restore-group [/tmp/g/session 5.ckpt, /tmp/g/s6]"), actions.asked);
            assertTrue(ask(p, "checkpoint 5,6 /tmp/a\n").contains("(one file per session)"));
            assertTrue(ask(p, "checkpoint 5 /tmp/a\t/tmp/b\n").contains("(one file per session)"));
            assertTrue(ask(p, "checkpoint 5,x /tmp/a\t/tmp/b\n").startsWith("error: not a session id: 'x'"));
            assertTrue(ask(p, "restore /tmp/a\trelative\n").startsWith("error: the file must be an absolute path"));
            assertTrue(ask(p, "restore /tmp/a\t\n").startsWith("error: usage: restore FILE"));
            assertEquals(2, actions.asked.size(), "a refused request reaches no action");
        }
    }

    @Test
    void migrateStreamsProgressThenTheResultAndRefusesABadRequestBeforeAnyAction() throws Exception {
        Path p = dir.resolve("admin.sock");
        FakeActions actions = new FakeActions();
        try (AdminSocket a = AdminSocket.open(p, null, Snapshots::sample, actions)) {
            assertEquals("progress pre-copy 1 8\nprogress restore 1 1\nok {\"session\":5,\"rounds\":[]}\n",
                    ask(p, "migrate 5 tcp://b:7000\n"));
            assertEquals("progress pre-copy 1 8\nprogress restore 1 1\nok {\"session\":6,\"rounds\":[]}\n",
                    ask(p, "migrate 6 unix:///run/b.sock tcp://10.0.0.2:7000\n"));
            assertEquals("error: migration refused by tcp://b:7000: this backend does not accept migrations\n",
                    ask(p, "migrate 13 tcp://b:7000\n"));
            assertEquals(List.of("migrate 5 tcp://b:7000 null", "migrate 6 unix:///run/b.sock tcp://10.0.0.2:7000",
                    "migrate 13 tcp://b:7000 null"), actions.asked);
            assertTrue(ask(p, "migrate 5\n").startsWith("error: usage: migrate SESSION[,SESSION...] TARGET_URI [FRONTEND_URI]"));
            assertTrue(ask(p, "migrate 5 a b c\n").startsWith("error: usage: migrate SESSION[,SESSION...] TARGET_URI [FRONTEND_URI]"));
            assertTrue(ask(p, "migrate five tcp://b:7000\n").startsWith("error: not a session id: 'five'"));
            assertTrue(ask(p, "migrate 5  tcp://b:7000\n").startsWith("error: not a URI: ''"));
            assertTrue(ask(p, "migrate 5 tcp://b:7000\u0001\n").startsWith("error: not a URI: 'tcp://b:7000?'"));
            assertTrue(ask(p, "migrate 5 tcp://" + "b".repeat(AdminSocket.Request.MAX_URI) + "\n").startsWith("error: not a URI"));
            assertEquals(3, actions.asked.size(), "a refused request reaches no action");

            // sessions that share IPC memory migrate together: ids joined by commas, as a group checkpoint names them
            assertEquals("ok {\"sessions\":[]}\n", ask(p, "migrate 5,6 tcp://b:7000\n"));
            assertEquals("ok {\"sessions\":[]}\n", ask(p, "migrate 7,8,9 unix:///run/b.sock tcp://10.0.0.2:7000\n"));
            assertTrue(ask(p, "migrate 5,,6 tcp://b:7000\n").startsWith("error: not a session id: ''"));
            assertTrue(ask(p, "migrate " + "1,".repeat(AdminSocket.Request.MAX_GROUP) + "2 tcp://b:7000\n")
                    .startsWith("error: at most " + AdminSocket.Request.MAX_GROUP + " sessions together"));
            assertEquals(List.of("migrate-group [5, 6] tcp://b:7000 null",
                    "migrate-group [7, 8, 9] unix:///run/b.sock tcp://10.0.0.2:7000"), actions.asked.subList(3, 5));
            assertEquals(5, actions.asked.size(), "a refused request reaches no action");
        }
    }

    @Test
    void handOverVerbsReachTheirActionsAndABadRequestIsRefusedBeforeAnyAction() throws Exception {
        Path p = dir.resolve("admin.sock");
        FakeActions actions = new FakeActions();
        try (AdminSocket a = AdminSocket.open(p, null, Snapshots::sample, actions)) {
            assertEquals("progress export 3 3\nok {\"session\":5,\"copiedBytes\":0}\n", ask(p, "hand-over 5 /run/b/admin.sock\n"));
            assertEquals("ok {\"session\":6,\"copiedBytes\":0}\n", ask(p, "hand-over 6 /run/b/admin.sock unix:///run/b.sock\n")
                    .replaceFirst("progress export 3 3\n", ""));
            assertEquals("ok {\"session\":7}\n", ask(p, "receive-hand-over /tmp/h/s\n"));
            assertEquals("ok {\"sessions\":[]}\n", ask(p, "hand-over 5,6 /run/b/admin.sock\n"));
            assertEquals(List.of("hand-over 5 /run/b/admin.sock null", "hand-over 6 /run/b/admin.sock unix:///run/b.sock",
                    "receive-hand-over /tmp/h/s null", "hand-over-group [5, 6] /run/b/admin.sock null"), actions.asked);
            assertTrue(ask(p, "hand-over 5\n").startsWith("error: usage: hand-over SESSION[,SESSION...] TARGET_ADMIN_SOCKET"));
            assertTrue(ask(p, "hand-over 5,x /run/b.sock\n").startsWith("error: not a session id: 'x'"));
            assertTrue(ask(p, "hand-over 5 run/b.sock\n").startsWith("error: the socket must be an absolute path"));
            assertTrue(ask(p, "hand-over x /run/b.sock\n").startsWith("error: not a session id: 'x'"));
            assertTrue(ask(p, "receive-hand-over /a b c\n").startsWith("error: usage: receive-hand-over SOURCE_SOCKET"));
            assertTrue(ask(p, "receive-hand-over /a\u0001\n").startsWith("error: not one printable word"));
            assertEquals(4, actions.asked.size(), "a refused request reaches no action");
        }
        try (AdminSocket a = AdminSocket.open(p, null, Snapshots::sample, new AdminActions() {
            @Override
            public String checkpoint(long session, Path file, boolean stop, Progress progress) {
                return "{}";
            }

            @Override
            public String restore(Path file, Progress progress) {
                return "{}";
            }

            @Override
            public String migrate(long session, String targetUri, String frontendUri, Progress progress) {
                return "{}";
            }
        })) {
            assertEquals("error: this backend does not hand sessions over\n", ask(p, "hand-over 5 /run/b/admin.sock\n"));
        }
    }

    @Test
    void aCheckpointOutlastsTheDeadlineOfAStatusClient() throws Exception {
        Path p = dir.resolve("admin.sock");
        AdminActions slow = new AdminActions() {
            @Override
            public String checkpoint(long session, Path file, boolean stop, Progress progress) throws Exception {
                Thread.sleep((AdminSocket.DEADLINE_SECONDS + 1) * 1000L);
                return "{}";
            }

            @Override
            public String restore(Path file, Progress progress) {
                return "{}";
            }

            @Override
            public String migrate(long session, String targetUri, String frontendUri, Progress progress) {
                return "{}";
            }
        };
        try (AdminSocket a = AdminSocket.open(p, null, Snapshots::sample, slow)) {
            assertEquals("ok {}\n", ask(p, "checkpoint 1 /tmp/x\n"));
        }
    }

    @Test
    void anAdminGroupGetsTheSocketFileWithMode0660AndAnUnknownGroupIsAClearError() throws Exception {
        Path p = dir.resolve("admin.sock");
        String group = Files.readAttributes(dir, java.nio.file.attribute.PosixFileAttributes.class).group().getName();
        try (AdminSocket a = AdminSocket.open(p, group, Snapshots::sample)) {
            assertEquals("rw-rw----", PosixFilePermissions.toString(Files.getPosixFilePermissions(p)));
            assertEquals(group, Files.readAttributes(p, java.nio.file.attribute.PosixFileAttributes.class).group().getName());
            assertTrue(ask(p, "status\n").startsWith("{"));
        }
        IOException e = assertThrows(IOException.class, () -> AdminSocket.open(p, "no-such-group-gpusockets", Snapshots::sample));
        assertTrue(e.getMessage().contains("admin group no-such-group-gpusockets does not exist"), e.getMessage());
        assertFalse(Files.exists(p), "nothing is left behind");
    }

    @Test
    void aPeerTheCheckRefusesGetsARefusalAndNoStatus() throws Exception {
        Path p = dir.resolve("admin.sock");
        // the tests run as one user, allowed as the backend's own: a check that refuses it stands for another user
        try (AdminSocket a = AdminSocket.open(p, null, Snapshots::sample, null,
                peer -> "user " + peer.user().getName() + " is a stranger here")) {
            String answer = ask(p, "status\n");
            assertEquals("refused: user " + System.getProperty("user.name") + " is a stranger here\n", answer);
        }
    }

    @Test
    void replacesAStaleSocketFileButNotALiveOne() throws Exception {
        Path p = dir.resolve("admin.sock");
        AdminSocket first = AdminSocket.open(p, null, Snapshots::sample);
        IOException e = assertThrows(IOException.class, () -> AdminSocket.open(p, null, Snapshots::sample));
        assertTrue(e.getMessage().contains("in use"), e.getMessage());
        first.close();
        // a socket file with nobody behind it, as a killed backend leaves it
        try (var s = java.nio.channels.ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            s.bind(UnixDomainSocketAddress.of(p));
        }
        assertTrue(Files.exists(p));
        try (AdminSocket second = AdminSocket.open(p, null, Snapshots::sample)) {
            assertTrue(ask(p, "status\n").startsWith("{"));
        }
        Files.writeString(p, "not a socket");
        assertThrows(IOException.class, () -> AdminSocket.open(p, null, Snapshots::sample));
    }

    @Test
    void slowClientsHoldAtMostTheCapAndOnlyUntilTheDeadline() throws Exception {
        Path p = dir.resolve("admin.sock");
        try (AdminSocket a = AdminSocket.open(p, null, Snapshots::sample)) {
            List<SocketChannel> idle = new ArrayList<>();
            for (int i = 0; i < AdminSocket.MAX_CLIENTS; i++) {
                SocketChannel c = SocketChannel.open(UnixDomainSocketAddress.of(p));
                idle.add(c); // connected, never sends its request
            }
            Thread.sleep(300); // all taken by the server
            try (SocketChannel extra = SocketChannel.open(UnixDomainSocketAddress.of(p))) {
                assertEquals(-1, extra.read(ByteBuffer.allocate(16)), "one over the cap is closed at once");
            }
            long t0 = System.nanoTime();
            for (SocketChannel c : idle) {
                assertEquals(-1, c.read(ByteBuffer.allocate(16)), "a silent client is disconnected at its deadline");
                c.close();
            }
            long waited = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(waited < (AdminSocket.DEADLINE_SECONDS + 5) * 1000L, "waited " + waited + " ms");
            assertTrue(ask(p, "status\n").startsWith("{"), "served again once they are gone");
        }
    }

    static String ask(Path p, String request) throws IOException {
        try (SocketChannel c = SocketChannel.open(UnixDomainSocketAddress.of(p))) {
            c.write(ByteBuffer.wrap(request.getBytes(StandardCharsets.UTF_8)));
            var out = new java.io.ByteArrayOutputStream();
            ByteBuffer b = ByteBuffer.allocate(4096);
            while (c.read(b.clear()) >= 0) {
                out.write(b.array(), 0, b.position());
            }
            return out.toString(StandardCharsets.UTF_8);
        }
    }
}
