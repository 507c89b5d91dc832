package io.gpusockets.transport.tcp;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousCloseException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;

/**
 * The reads and writes of accepted socket channels while virtual threads may be the ones asking
 * (handshakes), done on one platform thread of this process that selects over them.
 *
 * <p>Why: the JDK puts a socket channel's descriptor in non-blocking mode for good the first time a
 * virtual thread reads or writes it, blocking mode or not ({@code SocketChannelImpl.forcedNonBlocking}),
 * and from then on every blocking read on a platform thread that finds nothing costs a read that fails
 * with EAGAIN, a poll and the read again: two system calls more per call of a session, about a sixth of
 * a null call on a 2-core VM. A channel whose bytes only ever move on this thread (and, after
 * {@link #detach}, on platform threads) keeps its real blocking mode: a session's reader then waits in
 * one blocking read.
 *
 * <p>A channel here is in non-blocking mode. {@link #read} and {@link #write} hand the operation to the
 * reactor thread, which performs it once the channel is ready and completes the waiting caller (a
 * virtual thread parks without holding its carrier); the bytes are read or written by the reactor thread
 * into and out of the caller's buffers, never more than they hold. At most one read and one write per
 * channel are pending at a time (a connection's reader and its writers are each serialized above).
 * Closing the channel fails a pending operation with {@link AsynchronousCloseException}.
 */
final class ChannelReactor {
    private static final Object LOCK = new Object();
    private static ChannelReactor instance;

    private final Selector selector;
    private final Queue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    /**
     * Channels with an operation pending (reactor thread only): a channel closed meanwhile has its key
     * cancelled and dropped by the next selection without ever being ready, so its waiters are failed
     * from here.
     */
    private final java.util.Set<Pending> waiting = new java.util.HashSet<>();

    private ChannelReactor() throws IOException {
        this.selector = Selector.open();
        Thread.ofPlatform().daemon().name("gpusockets-channel-reactor").start(this::loop);
    }

    /** The process's reactor, started on first use; it runs as long as the process. */
    static ChannelReactor get() throws IOException {
        synchronized (LOCK) {
            if (instance == null) {
                instance = new ChannelReactor();
            }
            return instance;
        }
    }

    /** One operation waiting for its channel: a read into {@code dst} or a gathered write of {@code srcs}. */
    private static final class Op {
        final ByteBuffer dst;
        final ByteBuffer[] srcs;
        final int offset;
        final int length;
        final CompletableFuture<Long> done = new CompletableFuture<>();

        Op(ByteBuffer dst, ByteBuffer[] srcs, int offset, int length) {
            this.dst = dst;
            this.srcs = srcs;
            this.offset = offset;
            this.length = length;
        }
    }

    /** A channel's pending read and write (the key's attachment), touched on the reactor thread only. */
    private static final class Pending {
        final SocketChannel channel;
        Op read;
        Op write;

        Pending(SocketChannel channel) {
            this.channel = channel;
        }

        int interest() {
            return (read != null ? SelectionKey.OP_READ : 0) | (write != null ? SelectionKey.OP_WRITE : 0);
        }
    }

    /**
     * Reads into {@code dst} once {@code ch} has bytes: their count (at least 1 when {@code dst} has room),
     * or -1 at the end of the stream.
     */
    int read(SocketChannel ch, ByteBuffer dst) throws IOException {
        if (!dst.hasRemaining()) {
            return 0;
        }
        return (int) submit(ch, new Op(dst, null, 0, 0), true);
    }

    /** Writes from {@code srcs[offset..offset+length)} once {@code ch} has room: the bytes written (at least 1). */
    long write(SocketChannel ch, ByteBuffer[] srcs, int offset, int length) throws IOException {
        return submit(ch, new Op(null, srcs, offset, length), false);
    }

    /**
     * Takes {@code ch} off the reactor's selector (it must have no operation pending), so that it can be
     * put in blocking mode; returns once the selector has let go of it.
     */
    void detach(SocketChannel ch) throws IOException {
        CompletableFuture<Long> done = new CompletableFuture<>();
        run(() -> {
            SelectionKey key = ch.keyFor(selector);
            if (key != null) {
                Pending p = (Pending) key.attachment();
                if (p.read != null || p.write != null) {
                    done.completeExceptionally(new IllegalStateException("detach with an operation pending on " + ch));
                    return;
                }
                key.cancel();
                try {
                    selector.selectNow(this::ready); // a cancelled key leaves the selector at its next selection
                } catch (IOException e) {
                    done.completeExceptionally(e);
                    return;
                }
            }
            done.complete(0L);
        });
        await(done);
    }

    private long submit(SocketChannel ch, Op op, boolean reading) throws IOException {
        run(() -> arm(ch, op, reading));
        return await(op.done);
    }

    /** {@code ch} was closed: an operation pending on it fails now rather than at the next selection. */
    void closed(SocketChannel ch) {
        run(this::failClosed);
    }

    private void run(Runnable task) {
        tasks.add(task);
        selector.wakeup();
    }

    private static long await(CompletableFuture<Long> f) throws IOException {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    interrupted = true; // as the connections promise: an interrupt does not cancel a read or write
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof IOException io) {
                        throw io;
                    }
                    if (e.getCause() instanceof RuntimeException re) {
                        throw re;
                    }
                    throw new IOException(e.getCause());
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    // ---- on the reactor thread

    private void arm(SocketChannel ch, Op op, boolean reading) {
        try {
            SelectionKey key = ch.keyFor(selector);
            if (key == null) {
                key = ch.register(selector, 0, new Pending(ch));
            }
            Pending p = (Pending) key.attachment();
            if (reading ? p.read != null : p.write != null) {
                op.done.completeExceptionally(new IllegalStateException("two " + (reading ? "reads" : "writes")
                        + " at once on " + ch));
                return;
            }
            // Try at once: most handshake reads find their bytes there already.
            if (progress(ch, op, reading)) {
                return;
            }
            if (reading) {
                p.read = op;
            } else {
                p.write = op;
            }
            waiting.add(p);
            key.interestOps(p.interest());
        } catch (ClosedChannelException | java.nio.channels.CancelledKeyException e) {
            op.done.completeExceptionally(new AsynchronousCloseException());
        } catch (IOException | RuntimeException e) {
            op.done.completeExceptionally(e);
        }
    }

    /** Does the operation if the channel lets it progress now; true when it is complete (or failed). */
    private static boolean progress(SocketChannel ch, Op op, boolean reading) {
        try {
            long n = reading ? ch.read(op.dst) : ch.write(op.srcs, op.offset, op.length);
            if (n == 0) {
                return false;
            }
            op.done.complete(n);
        } catch (IOException | RuntimeException e) {
            op.done.completeExceptionally(e);
        }
        return true;
    }

    private void ready(SelectionKey key) {
        Pending p = (Pending) key.attachment();
        if (!key.isValid()) {
            fail(p);
            return;
        }
        if (p.read != null && key.isReadable() && progress(p.channel, p.read, true)) {
            p.read = null;
        }
        if (p.write != null && key.isWritable() && progress(p.channel, p.write, false)) {
            p.write = null;
        }
        if (p.interest() == 0) {
            waiting.remove(p);
        }
        if (key.isValid()) {
            key.interestOps(p.interest());
        }
    }

    private void fail(Pending p) {
        for (Op op : new Op[] {p.read, p.write}) {
            if (op != null) {
                op.done.completeExceptionally(new AsynchronousCloseException());
            }
        }
        p.read = null;
        p.write = null;
        waiting.remove(p);
    }

    private void failClosed() {
        for (Pending p : java.util.List.copyOf(waiting)) {
            if (!p.channel.isOpen()) {
                fail(p);
            }
        }
    }

    private void loop() {
        while (true) {
            try {
                for (Runnable t; (t = tasks.poll()) != null; ) {
                    t.run();
                }
                selector.select(this::ready);
                failClosed();
            } catch (ClosedSelectorException e) {
                return;
            } catch (IOException | RuntimeException e) {
                // a selector failure is not a channel's: keep serving the others
                System.getLogger("gpusockets.transport").log(System.Logger.Level.WARNING, "channel reactor: " + e);
            }
        }
    }
}
