package io.gpusockets.transport.vchan;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A {@link Connection} over one libxenvchan channel: a byte pipe on Xen grant pages, framed above by the
 * same FrameChannel as every transport.
 *
 * <p>libxenvchan is not thread-safe, so every call on the channel runs under {@code ctrlLock}; none of
 * them blocks (the channel is non-blocking). Threads wait outside the lock by polling the event-channel
 * descriptor; the one that finds it readable consumes the event with libxenvchan_wait under the lock,
 * after re-checking readiness with a zero-timeout poll so that it never blocks there. Reader and writer
 * share one event channel, so an event one consumes may have been the other's wake-up: waiters poll in
 * slices ({@link #SLICE_MILLIS}, {@link #SHARED_SLICE_MILLIS} while both wait) and re-check the rings.
 */
final class VchanConnection implements Connection {
    static final int STAGE_BYTES = 64 << 10;
    static final int SLICE_MILLIS = 100;
    static final int SHARED_SLICE_MILLIS = 2;

    private final Libxenvchan lib;
    private final MemorySegment ctrl;
    private final PeerInfo peer;
    /** Freed by the GC once the connection is unreachable: a thread may still be between lock sections at close. */
    private final Arena arena = Arena.ofAuto();
    private final ReentrantLock ctrlLock = new ReentrantLock();
    private final ReentrantLock writeLock = new ReentrantLock();
    private final AtomicInteger waiting = new AtomicInteger();
    private final MemorySegment readStage = arena.allocate(STAGE_BYTES, 64);
    private final MemorySegment writeStage = arena.allocate(STAGE_BYTES, 64);
    private final EventWait readWait = new EventWait(arena);
    private final EventWait writeWait = new EventWait(arena);
    private final EventWait lockedCheck = new EventWait(arena);
    private final int eventFd;
    private volatile boolean closed;

    VchanConnection(Libxenvchan lib, MemorySegment ctrl, PeerInfo peer) {
        this.lib = lib;
        this.ctrl = ctrl;
        this.peer = peer;
        this.eventFd = lib.fdForSelect(ctrl);
    }

    @Override
    public void write(ByteBuffer... srcs) throws IOException {
        writeLock.lock();
        try {
            for (ByteBuffer src : srcs) {
                while (src.hasRemaining()) {
                    int len = Math.min(src.remaining(), STAGE_BYTES);
                    MemorySegment.copy(MemorySegment.ofBuffer(src), 0, writeStage, 0, len);
                    int n = writeSome(len);
                    if (n > 0) {
                        src.position(src.position() + n);
                    } else {
                        awaitEvent(writeWait);
                    }
                }
            }
        } catch (IOException e) {
            close();
            throw e;
        } finally {
            writeLock.unlock();
        }
    }

    private int writeSome(int len) throws IOException {
        ctrlLock.lock();
        try {
            checkOpen();
            if (lib.isOpen(ctrl) == 0) {
                throw new IOException("vchan peer closed: " + peer.description());
            }
            int n = lib.write(ctrl, writeStage, len);
            if (n < 0) {
                throw new IOException("vchan write failed: " + peer.description());
            }
            return n;
        } finally {
            ctrlLock.unlock();
        }
    }

    @Override
    public void readFully(ByteBuffer dst) throws IOException {
        int wanted = dst.remaining();
        while (dst.hasRemaining()) {
            int n;
            boolean open;
            ctrlLock.lock();
            try {
                checkOpen();
                open = lib.isOpen(ctrl) != 0; // asked first: data written before a close is still read below
                n = lib.read(ctrl, readStage, Math.min(dst.remaining(), STAGE_BYTES));
            } finally {
                ctrlLock.unlock();
            }
            if (n > 0) {
                dst.put(readStage.asSlice(0, n).asByteBuffer());
            } else if (n < 0) {
                throw new IOException("vchan read failed: " + peer.description());
            } else if (!open) {
                int got = wanted - dst.remaining();
                if (got == 0) {
                    throw new EOFException("vchan peer closed: " + peer.description());
                }
                throw new IOException("vchan peer closed mid-read after " + got + " of " + wanted + " bytes: " + peer.description());
            } else {
                awaitEvent(readWait);
            }
        }
    }

    /** Waits for the next event (or a slice), consuming it if it is there. */
    private void awaitEvent(EventWait wait) throws IOException {
        int others = waiting.getAndIncrement();
        try {
            if (wait.readable(eventFd, others > 0 ? SHARED_SLICE_MILLIS : SLICE_MILLIS)) {
                ctrlLock.lock();
                try {
                    checkOpen();
                    if (lockedCheck.readyNow(eventFd) && lib.await(ctrl) < 0) {
                        throw new IOException("vchan event channel failed: " + peer.description());
                    }
                } finally {
                    ctrlLock.unlock();
                }
            }
            checkOpen();
        } finally {
            waiting.decrementAndGet();
        }
    }

    private void checkOpen() throws IOException {
        if (closed) {
            throw new IOException("connection closed: " + peer.description());
        }
    }

    @Override
    public PeerInfo peer() {
        return peer;
    }

    /** Waiting threads notice within a slice; the channel is freed under the lock, so no call races it. */
    @Override
    public void close() {
        ctrlLock.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            lib.close(ctrl);
        } finally {
            ctrlLock.unlock();
        }
    }

    @Override
    public String toString() {
        return "VchanConnection[" + peer.description() + "]";
    }
}
