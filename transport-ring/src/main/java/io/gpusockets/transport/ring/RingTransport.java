package io.gpusockets.transport.ring;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.Transport;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.net.ConnectException;
import java.net.SocketTimeoutException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.time.Duration;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.Set;
import java.util.function.Supplier;

/**
 * {@code ring://}: two processes on one host exchange bytes through a shared mapping holding two
 * single-producer/single-consumer rings ({@link RingDescriptor}), set up over a unix socket that then
 * serves as the liveness channel. Found by {@link io.gpusockets.protocol.transport.Transports} through
 * {@link java.util.ServiceLoader}.
 *
 * <p>Grammar:
 * <pre>
 *   ring-uri = "ring://" name [ "?" param *( "&amp;" param ) ]
 *   name     = 1*( ALPHA / DIGIT / "." / "_" / "-" )        not "." or ".."
 *   param    = "size=" 1*10DIGIT [ "k" / "m" / "g" ]        binary multiples, case-insensitive
 *   param    =/ "window=" ( "0" / 1*10DIGIT [ "k" / "m" / "g" ] )
 * </pre>
 * {@code size} is the capacity of each direction's ring: a power of two from 4 KiB to 1 GiB, default
 * 4 MiB or system property {@value RingAddress#SIZE_PROP_NAME}. The listener's size is the one used; a
 * client's is only validated. The set-up socket is {@code DIR/gpusockets-ring-NAME.sock}, DIR being
 * system property {@value RingAddress#DIR_PROP_NAME}, else java.io.tmpdir; client and listener must agree
 * on it. Example: {@code ring://backend-0?size=1m}.
 *
 * <p>{@code window} is the size of the {@link io.gpusockets.protocol.transport.SharedWindow} both sides
 * map beside the rings (large copies place their data there instead of streaming it through a ring):
 * 0, or a power of two from 4 KiB to 1 GiB; default 16 MiB or system property
 * {@value RingAddress#WINDOW_PROP_NAME}. The listener's choice is used. Pages are only backed once
 * touched, so an idle window costs no memory.
 *
 * <p>Peers must share our uid unless system property {@value PeerCredentials#PEER_UID_PROP_NAME} says
 * otherwise ({@code any}, or a number).
 */
public final class RingTransport implements Transport {
    static final String SCHEME = "ring";

    private final Supplier<IdleStrategy> idle;

    /** For {@link java.util.ServiceLoader}: a short spin unless the cores are oversubscribed, then futex ({@link BackoffIdleStrategy}). */
    public RingTransport() {
        this(BackoffIdleStrategy::new);
    }

    /** With another idle strategy; {@code idle} makes one per waiting role of each connection. */
    public RingTransport(Supplier<IdleStrategy> idle) {
        this.idle = Objects.requireNonNull(idle, "idle");
    }

    @Override
    public Set<String> schemes() {
        return Set.of(SCHEME);
    }

    @Override
    public Connection connect(TransportUri uri, Duration timeout) throws IOException {
        Objects.requireNonNull(timeout, "timeout");
        RingAddress address = RingAddress.of(uri);
        long deadline = System.nanoTime() + timeout.toNanos();
        if (!Files.exists(address.socket())) {
            throw new ConnectException("nobody listens on " + uri + " (no socket at " + address.socket() + ")");
        }
        SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX);
        SharedMapping mapping = null;
        try {
            try {
                channel.connect(UnixDomainSocketAddress.of(address.socket()));
            } catch (IOException e) {
                throw new ConnectException("cannot connect to " + uri + ": " + e.getMessage());
            }
            OptionalInt uid = PeerCredentials.uidOf(channel);
            PeerCredentials.check(uid, uri.toString());
            channel.configureBlocking(false);
            RingSetup.Hello hello = RingSetup.receiveHello(channel, deadline);
            mapping = SharedMapping.open(hello.path(), hello.capacity(), hello.window());
            RingSetup.sendAck(channel, deadline);
            return new RingConnection(mapping, false, new LivenessSocket.Channel(channel), RingListener.peerInfo(uri, uid), idle);
        } catch (IOException | RuntimeException e) {
            if (mapping != null) {
                mapping.close();
            }
            channel.close();
            if (e instanceof SocketTimeoutException) {
                throw new SocketTimeoutException("connect to " + uri + " timed out after " + timeout);
            }
            if (e instanceof IOException io && !String.valueOf(io.getMessage()).contains(uri.toString())) {
                throw new IOException("cannot connect to " + uri + ": " + io.getMessage(), io);
            }
            throw e;
        }
    }

    @Override
    public Listener listen(TransportUri uri) throws IOException {
        return RingListener.open(RingAddress.of(uri), idle);
    }
}
