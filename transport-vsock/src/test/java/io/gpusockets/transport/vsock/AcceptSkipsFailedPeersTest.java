package io.gpusockets.transport.vsock;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A peer whose connection cannot be set up after accept (e.g. it reset before its CID could be read) is
 * dropped and accept goes on with the next one: the failure is the peer's, not the listener's.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class AcceptSkipsFailedPeersTest {

    @Test
    void aPeerThatFailsItsSetUpIsDroppedAndTheNextOneAccepted(@TempDir Path dir) throws Exception {
        TransportUri uri = TransportUri.parse("fdunix://" + dir.resolve("l.sock"));
        int fd;
        try (Arena arena = Arena.ofConfined()) {
            fd = SocketCalls.listen(NativeSockets.AF_UNIX, SockAddr.unix(arena, uri.path()), "listen on " + uri);
        }
        AtomicInteger wrapped = new AtomicInteger();
        VsockTransport transport = new VsockTransport();
        try (NativeSocketListener listener = new NativeSocketListener(fd, uri, accepted -> {
            if (wrapped.getAndIncrement() == 0) {
                throw new IllegalStateException("peer without a name"); // the listener closes the descriptor
            }
            return NativeSocketConnection.of(accepted, s -> PeerInfo.of("second"));
        }, () -> { });
             Connection first = transport.connect(uri, Duration.ofSeconds(5));
             Connection second = transport.connect(uri, Duration.ofSeconds(5))) {
            try (Connection accepted = listener.accept()) {
                assertEquals("second", accepted.peer().description());
                second.write(ByteBuffer.allocate(4).putInt(0, 7));
                ByteBuffer got = ByteBuffer.allocate(4);
                accepted.readFully(got);
                assertEquals(7, got.getInt(0));
            }
        }
    }
}
