package io.gpusockets.transport.ring;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import java.io.EOFException;
import java.lang.foreign.MemorySegment;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousCloseException;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * A {@link Connection} over a {@link SharedMapping}: writes go into one {@link ByteRing}, reads come out
 * of the other. The unix socket of the set-up stays open (non-blocking, nobody sends on it) as the
 * liveness channel ({@link LivenessSocket}): EOF on it means the peer process is gone, however it died.
 * The server's end can be handed to another process ({@link RingHandOff}), which carries it on from the
 * same shared counters.
 *
 * <p>Writers are serialized by a lock held across every piece of a write, so a write larger than the
 * ring still arrives whole between other writers' bytes. A write that fails part way has torn its unit,
 * so the connection closes. A thread waiting for data or room re-checks, at least every
 * {@link BackoffIdleStrategy#DEFAULT_SLEEP_NANOS} (its idle strategy's bound), whether this end was
 * closed, the peer set its closed flag, or the liveness socket reports EOF.
 *
 * <p>Interrupting a thread blocked in {@link #write} or {@link #readFully} closes the connection, as
 * JDK channels do.
 */
final class RingConnection implements Connection {
    /** How often a waiting thread polls the liveness socket. */
    static final long LIVENESS_CHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    private static final long CLOSE_GRACE_MILLIS = 2_000;

    private final SharedMapping mapping;
    private final ByteRing out;
    private final ByteRing in;
    private final LivenessSocket liveness;
    private final long ownClosedOffset;
    private final long peerClosedOffset;
    private final PeerInfo peer;
    private final ReentrantLock readLock = new ReentrantLock();
    private final ReentrantLock writeLock = new ReentrantLock();
    private final IdleStrategy readIdle;
    private final IdleStrategy writeIdle;
    private final AtomicBoolean closed = new AtomicBoolean();
    /** Set once the shared window was handed out: from then on its taker unmaps it, not close(). */
    private final AtomicBoolean windowTaken = new AtomicBoolean();
    private volatile boolean peerGone;
    private volatile long lastLivenessCheck = System.nanoTime();

    RingConnection(SharedMapping mapping, boolean server, LivenessSocket liveness, PeerInfo peer, Supplier<IdleStrategy> idle) {
        this.mapping = mapping;
        this.out = mapping.ring(server ? RingDescriptor.SERVER_TO_CLIENT : RingDescriptor.CLIENT_TO_SERVER);
        this.in = mapping.ring(server ? RingDescriptor.CLIENT_TO_SERVER : RingDescriptor.SERVER_TO_CLIENT);
        this.liveness = liveness;
        this.ownClosedOffset = server ? RingDescriptor.SERVER_CLOSED_OFFSET : RingDescriptor.CLIENT_CLOSED_OFFSET;
        this.peerClosedOffset = server ? RingDescriptor.CLIENT_CLOSED_OFFSET : RingDescriptor.SERVER_CLOSED_OFFSET;
        this.peer = peer;
        this.readIdle = idle.get();
        this.writeIdle = idle.get();
    }

    @Override
    public void write(ByteBuffer... srcs) throws IOException {
        long total = 0;
        for (ByteBuffer src : srcs) {
            total += src.remaining();
        }
        long sent = 0;
        writeLock.lock();
        try {
            ensureOpen();
            if (peerGone()) {
                throw new IOException("peer closed: " + peer.description());
            }
            IdleStrategy idle = writeIdle;
            idle.reset();
            while (sent < total) {
                long n = out.write(srcs);
                if (n > 0) {
                    sent += n;
                    idle.reset();
                    continue;
                }
                ensureOpen();
                if (peerGone()) {
                    throw new IOException("peer closed after " + sent + " of " + total + " bytes of a write: "
                            + peer.description());
                }
                checkInterrupt();
                idle.idle(out.spaceBell(), out.headWordSeen());
            }
        } catch (IOException e) {
            if (sent > 0 && sent < total) {
                close();
            }
            throw e;
        } finally {
            writeLock.unlock();
        }
    }

    @Override
    public void readFully(ByteBuffer dst) throws IOException {
        int wanted = dst.remaining();
        readLock.lock();
        try {
            ensureOpen();
            IdleStrategy idle = readIdle;
            idle.reset();
            while (dst.hasRemaining()) {
                int n = in.read(dst);
                if (n > 0) {
                    idle.reset();
                    continue;
                }
                if (n < 0) {
                    close();
                    throw new IOException("corrupt record in the shared ring from " + peer.description());
                }
                ensureOpen();
                if (peerGone()) {
                    // the peer published everything before it flagged or died: take what is left first
                    if (in.read(dst) != 0) {
                        continue;
                    }
                    int got = wanted - dst.remaining();
                    if (got == 0) {
                        throw new EOFException("peer closed: " + peer.description());
                    }
                    throw new IOException("peer closed mid-read after " + got + " of " + wanted + " bytes: "
                            + peer.description());
                }
                checkInterrupt();
                idle.idle(in.dataBell(), in.tailWordSeen());
            }
        } finally {
            readLock.unlock();
        }
    }

    @Override
    public PeerInfo peer() {
        return peer;
    }

    @Override
    public boolean peerClosed() {
        return closed.get() || peerGone();
    }

    /** The set-up socket, whose close by the peer means it is gone; not after a hand-over. */
    @Override
    public java.util.Optional<SocketChannel> livenessChannel() {
        return closed.get() ? java.util.Optional.empty() : liveness.channel();
    }

    /** This (server) end's shared file's descriptor, for a hand-over, or -1. */
    int mappingDescriptor() {
        return mapping.descriptor();
    }

    long capacity() {
        return mapping.capacity();
    }

    long windowBytes() {
        return mapping.windowBytes();
    }

    @Override
    public boolean hasSharedWindow() {
        return mapping.window() != null && !windowTaken.get() && !closed.get();
    }

    @Override
    public java.util.Optional<io.gpusockets.protocol.transport.SharedWindow> takeSharedWindow() {
        MemorySegment window = mapping.window();
        if (window == null || !windowTaken.compareAndSet(false, true)) {
            return java.util.Optional.empty();
        }
        if (closed.get()) {
            mapping.closeWindow();
            return java.util.Optional.empty();
        }
        return java.util.Optional.of(new io.gpusockets.protocol.transport.SharedWindow() {
            @Override
            public MemorySegment segment() {
                return window;
            }

            @Override
            public void release() {
                mapping.closeWindow();
            }
        });
    }

    /**
     * Sets this side's closed flag, wakes every sleeper on both rings (the peer's and ours), closes the
     * liveness socket, then unmaps once our own readers and writers have left (they notice within one
     * idle bound). Should one not leave in time, the mapping stays rather than be pulled from under it.
     */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        mapping.setClosedFlag(ownClosedOffset);
        wakeEveryone();
        liveness.close();
        unmapWhenIdle();
    }

    /**
     * After this end was handed to another process ({@link RingHandOff}): lets go of this process's copies (the
     * mapping, the file's and the socket's descriptors) without a sign to the peer, which goes on with the other
     * process. Nothing of this process may use the connection any more. Idempotent; no-op once closed.
     */
    void detach() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        liveness.close();
        unmapWhenIdle();
    }

    private void unmapWhenIdle() {
        mapping.closeDescriptor();
        boolean interrupted = false;
        boolean read = false;
        boolean write = false;
        try {
            read = readLock.tryLock(CLOSE_GRACE_MILLIS, TimeUnit.MILLISECONDS);
            write = read && writeLock.tryLock(CLOSE_GRACE_MILLIS, TimeUnit.MILLISECONDS);
            if (write) {
                mapping.close();
            }
            if (!windowTaken.getAndSet(true)) {
                mapping.closeWindow(); // never handed out: nobody else can be touching it
            }
        } catch (InterruptedException e) {
            interrupted = true;
        } finally {
            if (write) {
                writeLock.unlock();
            }
            if (read) {
                readLock.unlock();
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    private void wakeEveryone() {
        for (ByteRing ring : new ByteRing[] {out, in}) {
            ring.dataBell().wakeAll();
            ring.spaceBell().wakeAll();
        }
    }

    private void ensureOpen() throws IOException {
        if (closed.get()) {
            throw new AsynchronousCloseException();
        }
    }

    private void checkInterrupt() throws IOException {
        if (Thread.interrupted()) {
            close();
            throw new ClosedByInterruptException();
        }
    }

    /** Whether the peer closed (flag) or died (EOF on the liveness socket); sticky once true. */
    private boolean peerGone() {
        if (peerGone) {
            return true;
        }
        if (mapping.closedFlag(peerClosedOffset)) {
            return peerGone = true;
        }
        long now = System.nanoTime();
        if (now - lastLivenessCheck < LIVENESS_CHECK_NANOS) {
            return false;
        }
        lastLivenessCheck = now;
        if (liveness.peerGone()) {
            peerGone = true;
        }
        return peerGone;
    }

    @Override
    public String toString() {
        return "RingConnection[" + peer.description() + "]";
    }
}
