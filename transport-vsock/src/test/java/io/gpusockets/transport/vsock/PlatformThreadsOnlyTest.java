package io.gpusockets.transport.vsock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link NativeSocketConnection#platformThreadsOnly} puts the socket in blocking mode (a platform reader
 * then waits in recv itself, not in a failed recv, a poll and the recv again); the conformance suite checks
 * that close() still unblocks such a reader and writer.
 */
@Timeout(30)
class PlatformThreadsOnlyTest {
    @TempDir
    Path dir;

    @Test
    void servedSocketIsInBlockingModeAndStillCarriesBytes() throws Exception {
        TransportUri uri = TransportUri.parse("fdunix://" + dir.resolve("s.sock"));
        try (Listener listener = Transports.listen(uri);
             Connection client = Transports.connect(uri, Duration.ofSeconds(5));
             Connection server = listener.accept()) {
            int fd = DescriptorPassing.descriptorOf(server).orElseThrow();
            assertNotEquals(0, flags(fd) & NativeSockets.O_NONBLOCK, "an accepted socket starts non-blocking");
            server.platformThreadsOnly();
            assertEquals(0, flags(fd) & NativeSockets.O_NONBLOCK, "served by platform threads: blocking mode");
            server.platformThreadsOnly(); // idempotent
            client.write(ByteBuffer.wrap(new byte[] {1, 2, 3}));
            ByteBuffer got = ByteBuffer.allocate(3);
            server.readFully(got);
            assertEquals(ByteBuffer.wrap(new byte[] {1, 2, 3}), got.flip());
            server.write(ByteBuffer.wrap(new byte[] {4}));
            ByteBuffer back = ByteBuffer.allocate(1);
            client.readFully(back);
            assertEquals(4, back.get(0));
        }
    }

    private static int flags(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            int flags = NativeSockets.fcntl(state, fd, NativeSockets.F_GETFL, 0);
            assertTrue(flags >= 0, "fcntl F_GETFL: " + Errno.describe(NativeSockets.errno(state)));
            return flags;
        }
    }
}
