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
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * Accepts on the ring's unix socket and sets each client up: checks its uid, creates and maps the
 * shared file, sends its path, waits (at most {@link #HANDSHAKE_TIMEOUT_NANOS}) for the client's
 * acknowledgement, unlinks the file. A client that fails the set-up is logged and dropped.
 *
 * <p>Set-ups run on threads of their own, at most {@link #MAX_SET_UPS} at once (counting those set up and
 * not yet taken by {@link #accept()}), so a peer that connects and never acknowledges holds up no one
 * else; a peer past that bound is closed at once. The listener's own thread accepts on the socket and
 * survives accept failures (descriptors running out) by retrying after a growing pause;
 * {@link #accept()} hands out the connections that are set up.
 */
final class RingListener implements Listener {
    static final long HANDSHAKE_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(5);
    private static final System.Logger LOG = System.getLogger(RingListener.class.getName());
    static final int BACKLOG = 128;
    /** Set-ups in progress plus connections set up and not yet taken: each holds a socket and a mapped file. */
    static final int MAX_SET_UPS = 64;
    private static final long LOG_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(10);
    private static final long POLL_MILLIS = 100;

    private final ServerSocketChannel server;
    private final RingAddress address;
    private final Object socketFileKey;
    private final Supplier<IdleStrategy> idle;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Semaphore setUps = new Semaphore(MAX_SET_UPS);
    private final LinkedBlockingQueue<Connection> ready = new LinkedBlockingQueue<>();
    /** Rate limit of the warnings: none before this nanoTime; those held back meanwhile are counted. */
    private final AtomicLong quietUntil = new AtomicLong(System.nanoTime() - 1);
    private final AtomicLong heldBack = new AtomicLong();

    private RingListener(ServerSocketChannel server, RingAddress address, Object socketFileKey, Supplier<IdleStrategy> idle) {
        this.server = server;
        this.address = address;
        this.socketFileKey = socketFileKey;
        this.idle = idle;
    }

    private RingListener start() {
        Thread.ofPlatform().daemon().name("gpusockets-ring-accept-" + address.name()).start(this::acceptLoop);
        return this;
    }

    static RingListener open(RingAddress address, Supplier<IdleStrategy> idle) throws IOException {
        removeIfStale(address);
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            server.bind(UnixDomainSocketAddress.of(address.socket()), BACKLOG);
            Object key = Files.readAttributes(address.socket(), BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).fileKey();
            return new RingListener(server, address, key, idle).start();
        } catch (IOException e) {
            server.close();
            throw new IOException("cannot listen on " + address.uri() + ": " + e.getMessage(), e);
        }
    }

    /** The next connection set up; waits for one. After {@link #close()} it throws. */
    @Override
    public Connection accept() throws IOException {
        while (!closed.get()) {
            Connection c;
            try {
                c = ready.poll(POLL_MILLIS, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException("interrupted waiting for a ring:// client on " + address.uri());
            }
            if (c != null) {
                setUps.release();
                return c;
            }
        }
        throw new IOException("listener closed: " + address.uri());
    }

    /** Accepts on the socket until closed, handing each peer to a set-up thread of its own. */
    private void acceptLoop() {
        long backoffMillis = 0;
        while (!closed.get()) {
            SocketChannel channel;
            try {
                channel = server.accept();
                backoffMillis = 0;
            } catch (IOException | RuntimeException e) {
                if (closed.get()) {
                    return;
                }
                // e.g. EMFILE: the peer waits in the backlog until descriptors are free again
                backoffMillis = Math.min(Math.max(10, backoffMillis * 2), 1000);
                warn("accept on " + address.uri() + " failed (" + e.getMessage() + "); retrying in " + backoffMillis + " ms");
                try {
                    Thread.sleep(backoffMillis);
                } catch (InterruptedException stop) {
                    return;
                }
                continue;
            }
            if (!setUps.tryAcquire()) {
                closeQuietly(channel);
                warn("ring:// client on " + address.uri() + " closed at once: " + MAX_SET_UPS + " set-ups in progress");
                continue;
            }
            try {
                Thread.ofPlatform().daemon().name("gpusockets-ring-setup").start(() -> setUpOne(channel));
            } catch (RuntimeException | OutOfMemoryError e) {
                setUps.release();
                closeQuietly(channel);
                warn("ring:// client on " + address.uri() + " dropped: no thread for its set-up (" + e + ")");
            }
        }
    }

    private void setUpOne(SocketChannel channel) {
        Connection c;
        try {
            c = setUp(channel);
        } catch (IOException | RuntimeException e) {
            closeQuietly(channel);
            setUps.release();
            if (!closed.get()) {
                warn("ring:// client dropped during set-up on " + address.uri() + ": " + e);
            }
            return;
        }
        ready.add(c);
        if (closed.get()) {
            drainReady();
        }
    }

    private void drainReady() {
        for (Connection c; (c = ready.poll()) != null; ) {
            c.close();
            setUps.release();
        }
    }

    private static void closeQuietly(SocketChannel channel) {
        try {
            channel.close();
        } catch (IOException ignored) {
            // the descriptor is released even when close reports an error
        }
    }

    /** A warning, at most one per {@link #LOG_INTERVAL_NANOS}; the next one written says how many were held back. */
    private void warn(String message) {
        long now = System.nanoTime();
        long until = quietUntil.get();
        if (now - until >= 0 && quietUntil.compareAndSet(until, now + LOG_INTERVAL_NANOS)) {
            long more = heldBack.getAndSet(0);
            LOG.log(Level.WARNING, more == 0 ? message : message + " (" + more + " more such warnings held back)");
        } else {
            heldBack.incrementAndGet();
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
        return new RingConnection(mapping, true, new LivenessSocket.Channel(channel), peerInfo(address.uri(), uid), idle);
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
        drainReady();
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
