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
        try (AdminSocket a = AdminSocket.open(p, null, Snapshots::sample,
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
