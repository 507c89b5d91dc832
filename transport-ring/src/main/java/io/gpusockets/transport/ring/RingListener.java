package io.gpusockets.transport.ring;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.net.BindException;
import java.net.ConnectException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;

/**
 * Accepts on the ring's unix socket and sets each client up: checks its uid, creates and maps the
 * shared file, sends its path, waits (at most {@link #HANDSHAKE_TIMEOUT_NANOS}) for the client's
 * acknowledgement, unlinks the file. A client that fails the set-up is logged and dropped; accept goes
 * on with the next.
 */
final class RingListener implements Listener {
    static final long HANDSHAKE_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(5);
    private static final System.Logger LOG = System.getLogger(RingListener.class.getName());
    static final int BACKLOG = 128;

    private final ServerSocketChannel server;
    private final RingAddress address;
    private final Object socketFileKey;
    private final Supplier<IdleStrategy> idle;
    private final AtomicBoolean closed = new AtomicBoolean();

    private RingListener(ServerSocketChannel server, RingAddress address, Object socketFileKey, Supplier<IdleStrategy> idle) {
        this.server = server;
        this.address = address;
        this.socketFileKey = socketFileKey;
        this.idle = idle;
    }

    static RingListener open(RingAddress address, Supplier<IdleStrategy> idle) throws IOException {
        removeIfStale(address);
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            server.bind(UnixDomainSocketAddress.of(address.socket()), BACKLOG);
            Object key = Files.readAttributes(address.socket(), BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).fileKey();
            return new RingListener(server, address, key, idle);
        } catch (IOException e) {
            server.close();
            throw new IOException("cannot listen on " + address.uri() + ": " + e.getMessage(), e);
        }
    }

    @Override
    public Connection accept() throws IOException {
        while (true) {
            SocketChannel channel = server.accept();
            try {
                return setUp(channel);
            } catch (IOException | RuntimeException e) {
                channel.close();
                if (closed.get()) {
                    throw new IOException("listener closed during a set-up: " + address.uri(), e);
                }
                LOG.log(Level.WARNING, "ring:// client dropped during set-up on " + address.uri() + ": " + e);
            }
        }
    }

    private Connection setUp(SocketChannel channel) throws IOException {
        OptionalInt uid = PeerCredentials.uidOf(channel);
        PeerCredentials.check(uid, address.uri().toString());
        long deadline = System.nanoTime() + HANDSHAKE_TIMEOUT_NANOS;
        channel.configureBlocking(false);
        SharedMapping mapping = SharedMapping.create(address.name(), address.capacity(), address.window());
        try {
            RingSetup.sendHello(channel, mapping.capacity(), mapping.windowBytes(), mapping.path(), deadline);
            RingSetup.receiveAck(channel, deadline);
        } catch (IOException | RuntimeException e) {
            mapping.close();
            throw e;
        } finally {
            mapping.unlink();
        }
        return new RingConnection(mapping, true, channel, peerInfo(address.uri(), uid), idle);
    }

    static PeerInfo peerInfo(TransportUri uri, OptionalInt uid) {
        String who = uid.isPresent() ? "uid " + uid.getAsInt() : "uid unknown";
        return new PeerInfo(uri + " (" + who + ")", uid);
    }

    @Override
    public TransportUri address() {
        return address.uri();
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        try {
            server.close();
        } catch (IOException ignored) {
            // the descriptor is released even when close reports an error
        }
        try {
            Path path = address.socket();
            if (Objects.equals(Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).fileKey(), socketFileKey)) {
                Files.deleteIfExists(path);
            }
        } catch (IOException ignored) {
            // already gone, or no longer ours
        }
    }

    /** A socket file nobody accepts on is left over from a dead listener; a live one is an error. */
    private static void removeIfStale(RingAddress address) throws IOException {
        Path path = address.socket();
        if (!Files.exists(path, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try (SocketChannel probe = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            probe.configureBlocking(false);
            probe.connect(UnixDomainSocketAddress.of(path));
        } catch (ConnectException refused) {
            Files.deleteIfExists(path);
            return;
        }
        throw new BindException("address in use, a listener accepts on it: uri=" + address.uri());
    }

    @Override
    public String toString() {
        return "RingListener[" + address.uri() + "]";
    }
}
