package io.gpusockets.transport.tcp;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.SocketTimeoutException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.time.Duration;

/**
 * Connects a socket channel with a deadline and hands it back in blocking mode.
 *
 * <p>Unix-domain channels have no socket adaptor, so {@code Socket.connect(address, timeout)} is not
 * available for them; both schemes use the same non-blocking connect and a {@link Selector} wait.
 *
 * <p>Linux answers a non-blocking unix connect to a listener whose backlog is full with EAGAIN at
 * once (there is no readiness event for "room in the backlog"; the JDK's own blocking connect behaves
 * the same on a virtual thread). So a saturated unix listener fails the connect immediately with an
 * IOException naming the URI rather than holding the caller until the timeout; TCP waits for the
 * listener's SYN handling up to the timeout.
 */
final class TimedConnect {
    private TimedConnect() {
    }

    static SocketChannel open(Endpoint endpoint, Duration timeout) throws IOException {
        SocketChannel channel = SocketChannel.open(endpoint.family());
        try {
            channel.configureBlocking(false);
            if (!channel.connect(endpoint.address())) {
                awaitConnected(channel, timeout);
            }
            channel.configureBlocking(true);
            return channel;
        } catch (IOException e) {
            channel.close();
            throw Failures.naming("cannot connect to", endpoint.uri(), e);
        }
    }

    /** Closing the selector deregisters the channel, which it must be before it can block again. */
    private static void awaitConnected(SocketChannel channel, Duration timeout) throws IOException {
        long deadline = System.nanoTime() + timeout.toNanos();
        try (Selector selector = Selector.open()) {
            channel.register(selector, SelectionKey.OP_CONNECT);
            while (!channel.finishConnect()) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new SocketTimeoutException("timed out after " + timeout.toMillis() + " ms");
                }
                if (Thread.currentThread().isInterrupted()) {
                    // select() returns at once while the interrupt flag is set: stop instead of spinning
                    throw new InterruptedIOException("interrupted");
                }
                selector.select(Math.ceilDiv(left, 1_000_000L));
                selector.selectedKeys().clear();
            }
        }
    }
}
