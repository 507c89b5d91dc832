package io.gpusockets.transport.vsock;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;

/**
 * A {@link Connection} over a connected, non-blocking stream socket descriptor (AF_VSOCK or AF_UNIX).
 *
 * <p>Writers are serialized by a lock held across the whole gathering write (sendmsg with up to
 * {@link #MAX_IOV} buffers a call), so one call's bytes stay together even when the kernel takes them in
 * pieces; a write that fails part way has torn its unit, so the connection closes. Heap buffers go
 * through a native staging buffer (one for the reader, one for writers); direct buffers are handed to
 * the kernel where they lie.
 *
 * <p>Blocking is done by {@link FdWait} (a virtual thread parks without holding its carrier) until
 * {@link #platformThreadsOnly}; from then on the socket is in blocking mode and a read or write waits in
 * the kernel, one system call instead of a failed one, a poll and the call again. Either way
 * {@link #close()} (shutdown, then close once no call is in flight) unblocks readers and writers: a
 * recv blocked in the kernel returns 0 and a sendmsg fails once the socket is shut down. Interrupting a
 * thread does not cancel its read or write.
 */
final class NativeSocketConnection implements Connection {
    static final int MAX_IOV = 16;
    static final int STAGE_BYTES = 64 << 10;

    private final SocketFd fd;
    private final PeerInfo peer;
    private final ReentrantLock writeLock = new ReentrantLock();

    private final MemorySegment readState;
    private final MemorySegment readPoll;
    private final MemorySegment readStage;

    private final MemorySegment writeState;
    private final MemorySegment writePoll;
    private final MemorySegment writeStage;
    private final MemorySegment iov;
    private final MemorySegment msghdr;

    private NativeSocketConnection(int descriptor, Function<SocketFd, PeerInfo> peerOf) {
        Arena arena = Arena.ofShared();
        this.fd = new SocketFd(descriptor, arena::close);
        this.readState = NativeSockets.newCallState(arena);
        this.readPoll = arena.allocate(SockAddr.POLLFD);
        this.readStage = arena.allocate(STAGE_BYTES, 64);
        this.writeState = NativeSockets.newCallState(arena);
        this.writePoll = arena.allocate(SockAddr.POLLFD);
        this.writeStage = arena.allocate(STAGE_BYTES, 64);
        this.iov = arena.allocate(SockAddr.IOVEC, MAX_IOV);
        this.msghdr = arena.allocate(SockAddr.MSGHDR);
        msghdr.set(ADDRESS, SockAddr.MSG_IOV, iov);
        PeerInfo p;
        try {
            p = peerOf.apply(fd);
        } catch (RuntimeException e) {
            fd.close();
            throw e;
        }
        this.peer = p;
    }

    /** Takes ownership of a connected descriptor; {@code peerOf} asks the kernel who is at the other end. */
    static NativeSocketConnection of(int descriptor, Function<SocketFd, PeerInfo> peerOf) {
        return new NativeSocketConnection(descriptor, peerOf);
    }

    @Override
    public void write(ByteBuffer... srcs) throws IOException {
        writeLock.lock();
        try {
            if (!fd.acquire()) {
                throw closed();
            }
            try {
                writeAll(srcs);
            } catch (IOException e) {
                close();
                throw e;
            } finally {
                fd.release();
            }
        } finally {
            writeLock.unlock();
        }
    }

    private void writeAll(ByteBuffer[] srcs) throws IOException {
        int first = 0;
        while (true) {
            while (first < srcs.length && !srcs[first].hasRemaining()) {
                first++;
            }
            if (first == srcs.length) {
                return;
            }
            int count = gather(srcs, first);
            msghdr.set(JAVA_LONG, SockAddr.MSG_IOVLEN, count);
            long n = NativeSockets.sendmsg(writeState, fd.fd(), msghdr);
            if (n >= 0) {
                advance(srcs, first, n);
                continue;
            }
            int errno = NativeSockets.errno(writeState);
            if (errno != Errno.EAGAIN) {
                throw fd.isClosed() ? closed() : Errno.exception("write to " + peer.description(), errno);
            }
            if (FdWait.await(fd, NativeSockets.POLLOUT, writeState, writePoll, Long.MAX_VALUE) != FdWait.Outcome.READY) {
                throw closed();
            }
        }
    }

    /** Fills the iovec array from srcs[first..]: direct buffers in place, heap buffers copied into the stage. */
    private int gather(ByteBuffer[] srcs, int first) {
        int count = 0;
        long staged = 0;
        long entry = SockAddr.IOVEC.byteSize();
        for (int i = first; i < srcs.length && count < MAX_IOV; i++) {
            ByteBuffer b = srcs[i];
            int len = b.remaining();
            if (len == 0) {
                continue;
            }
            MemorySegment base;
            if (b.isDirect()) {
                base = MemorySegment.ofBuffer(b);
            } else {
                if (staged == STAGE_BYTES) {
                    break;
                }
                len = (int) Math.min(len, STAGE_BYTES - staged);
                base = writeStage.asSlice(staged, len);
                MemorySegment.copy(MemorySegment.ofBuffer(b), 0, base, 0, len);
                staged += len;
            }
            iov.set(ADDRESS, count * entry + SockAddr.IOV_BASE, base);
            iov.set(JAVA_LONG, count * entry + SockAddr.IOV_LEN, len);
            count++;
        }
        return count;
    }

    private static void advance(ByteBuffer[] srcs, int first, long written) {
        for (int i = first; i < srcs.length && written > 0; i++) {
            ByteBuffer b = srcs[i];
            int take = (int) Math.min(b.remaining(), written);
            b.position(b.position() + take);
            written -= take;
        }
    }

    @Override
    public void readFully(ByteBuffer dst) throws IOException {
        if (!fd.acquire()) {
            throw closed();
        }
        try {
            readLoop(dst, this::receive);
        } finally {
            fd.release();
        }
    }

    @Override
    public boolean readsSome() {
        return true;
    }

    @Override
    public int readSome(ByteBuffer dst) throws IOException {
        if (!dst.hasRemaining()) {
            throw new IllegalArgumentException("readSome needs room: " + dst);
        }
        if (!fd.acquire()) {
            throw closed();
        }
        try {
            while (true) {
                long n = receive(dst);
                if (n > 0) {
                    return (int) n;
                }
                if (n == 0) {
                    if (fd.isClosed()) {
                        throw closed();
                    }
                    return -1;
                }
                int errno = NativeSockets.errno(readState);
                if (errno != Errno.EAGAIN) {
                    throw fd.isClosed() ? closed() : Errno.exception("read from " + peer.description(), errno);
                }
                if (FdWait.await(fd, NativeSockets.POLLIN, readState, readPoll, Long.MAX_VALUE) != FdWait.Outcome.READY) {
                    throw closed();
                }
            }
        } finally {
            fd.release();
        }
    }

    /** One receive into a buffer: bytes taken (the buffer advanced), 0 at end of stream, -1 with errno in readState. */
    private interface Receive {
        long into(ByteBuffer dst) throws IOException;
    }

    /** Receives until {@code dst} is full, waiting for the socket when it has nothing; the caller holds {@link #fd}. */
    private void readLoop(ByteBuffer dst, Receive receive) throws IOException {
        int wanted = dst.remaining();
        while (dst.hasRemaining()) {
            long n = receive.into(dst);
            if (n > 0) {
                continue;
            }
            if (n == 0) {
                if (fd.isClosed()) {
                    throw closed();
                }
                int got = wanted - dst.remaining();
                if (got == 0) {
                    throw new EOFException("peer closed: " + peer.description());
                }
                throw new IOException("peer closed mid-read after " + got + " of " + wanted + " bytes: "
                        + peer.description());
            }
            int errno = NativeSockets.errno(readState);
            if (errno != Errno.EAGAIN) {
                throw fd.isClosed() ? closed() : Errno.exception("read from " + peer.description(), errno);
            }
            if (FdWait.await(fd, NativeSockets.POLLIN, readState, readPoll, Long.MAX_VALUE) != FdWait.Outcome.READY) {
                throw closed();
            }
        }
    }

    /** One recv into dst; its result (bytes, 0 at end of stream, -1 with errno in readState). */
    private long receive(ByteBuffer dst) {
        if (dst.isDirect()) {
            long n = NativeSockets.recv(readState, fd.fd(), MemorySegment.ofBuffer(dst), dst.remaining());
            if (n > 0) {
                dst.position(dst.position() + (int) n);
            }
            return n;
        }
        long n = NativeSockets.recv(readState, fd.fd(), readStage, Math.min(dst.remaining(), STAGE_BYTES));
        if (n > 0) {
            dst.put(readStage.asSlice(0, n).asByteBuffer());
        }
        return n;
    }

    /**
     * Puts the socket in blocking mode (clears O_NONBLOCK): only platform threads use it from now on. The
     * mode belongs to the socket, not the descriptor, so a process this socket was passed to sees it too.
     */
    @Override
    public void platformThreadsOnly() throws IOException {
        if (!fd.acquire()) {
            throw closed();
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            int flags = NativeSockets.fcntl(state, fd.fd(), NativeSockets.F_GETFL, 0);
            if (flags < 0 || ((flags & NativeSockets.O_NONBLOCK) != 0
                    && NativeSockets.fcntl(state, fd.fd(), NativeSockets.F_SETFL, flags & ~NativeSockets.O_NONBLOCK) < 0)) {
                throw Errno.exception("blocking mode for " + peer.description(), NativeSockets.errno(state));
            }
        } finally {
            fd.release();
        }
    }

    /** The kernel says the peer has closed its end (poll POLLRDHUP), even with unread bytes queued. */
    @Override
    public boolean peerClosed() {
        return !fd.isClosed() && DescriptorPassing.hungUp(fd.fd());
    }

    /** The descriptor, for passing the socket on (it stays this connection's). */
    int descriptor() {
        return fd.fd();
    }

    /**
     * Writes every byte of {@code msg} as one unit, the descriptors {@code fds} riding on its first bytes
     * (SCM_RIGHTS); the receiver must read them with {@link #readFullyCollecting}.
     */
    void writeWithDescriptors(ByteBuffer msg, int[] fds) throws IOException {
        if (!msg.isDirect() || !msg.hasRemaining()) {
            throw new IllegalArgumentException("a direct buffer with bytes in it is needed: " + msg);
        }
        writeLock.lock();
        try (Arena arena = Arena.ofConfined()) {
            if (!fd.acquire()) {
                throw closed();
            }
            try {
                long space = SockAddr.CMSG_DATA + align8(4L * fds.length);
                MemorySegment control = arena.allocate(space, 8);
                control.set(JAVA_LONG, SockAddr.CMSG_LEN, SockAddr.CMSG_DATA + 4L * fds.length);
                control.set(java.lang.foreign.ValueLayout.JAVA_INT, SockAddr.CMSG_LEVEL, NativeSockets.SOL_SOCKET);
                control.set(java.lang.foreign.ValueLayout.JAVA_INT, SockAddr.CMSG_TYPE, NativeSockets.SCM_RIGHTS);
                for (int i = 0; i < fds.length; i++) {
                    control.set(java.lang.foreign.ValueLayout.JAVA_INT, SockAddr.CMSG_DATA + 4L * i, fds[i]);
                }
                MemorySegment hdr = arena.allocate(SockAddr.MSGHDR);
                MemorySegment one = arena.allocate(SockAddr.IOVEC);
                one.set(ADDRESS, SockAddr.IOV_BASE, MemorySegment.ofBuffer(msg));
                one.set(JAVA_LONG, SockAddr.IOV_LEN, msg.remaining());
                hdr.set(ADDRESS, SockAddr.MSG_IOV, one);
                hdr.set(JAVA_LONG, SockAddr.MSG_IOVLEN, 1);
                hdr.set(ADDRESS, SockAddr.MSG_CONTROL, control);
                hdr.set(JAVA_LONG, SockAddr.MSG_CONTROLLEN, space);
                while (true) {
                    long n = NativeSockets.sendmsg(writeState, fd.fd(), hdr);
                    if (n > 0) {
                        msg.position(msg.position() + (int) n);
                        break; // the descriptors went with these bytes; the rest is plain data
                    }
                    int errno = NativeSockets.errno(writeState);
                    if (n == 0 || errno != Errno.EAGAIN) {
                        throw fd.isClosed() ? closed() : Errno.exception("write to " + peer.description(), errno);
                    }
                    if (FdWait.await(fd, NativeSockets.POLLOUT, writeState, writePoll, Long.MAX_VALUE) != FdWait.Outcome.READY) {
                        throw closed();
                    }
                }
                writeAll(new ByteBuffer[] {msg});
            } catch (IOException e) {
                close();
                throw e;
            } finally {
                fd.release();
            }
        } finally {
            writeLock.unlock();
        }
    }

    /**
     * As {@link #readFully}, with recvmsg: descriptors that come with the bytes (at most {@code maxFds} a
     * message; more are closed by the kernel and reported as an error) go to {@code sink}, close-on-exec.
     */
    void readFullyCollecting(ByteBuffer dst, int maxFds, java.util.function.IntConsumer sink) throws IOException {
        if (!dst.isDirect()) {
            throw new IllegalArgumentException("a direct buffer is needed: " + dst);
        }
        if (!fd.acquire()) {
            throw closed();
        }
        try (Arena arena = Arena.ofConfined()) {
            long space = SockAddr.CMSG_DATA + align8(4L * maxFds);
            MemorySegment control = arena.allocate(space, 8);
            MemorySegment hdr = arena.allocate(SockAddr.MSGHDR);
            MemorySegment one = arena.allocate(SockAddr.IOVEC);
            hdr.set(ADDRESS, SockAddr.MSG_IOV, one);
            hdr.set(JAVA_LONG, SockAddr.MSG_IOVLEN, 1);
            readLoop(dst, d -> {
                one.set(ADDRESS, SockAddr.IOV_BASE, MemorySegment.ofBuffer(d));
                one.set(JAVA_LONG, SockAddr.IOV_LEN, d.remaining());
                control.fill((byte) 0);
                hdr.set(ADDRESS, SockAddr.MSG_CONTROL, control);
                hdr.set(JAVA_LONG, SockAddr.MSG_CONTROLLEN, space);
                long n = NativeSockets.recvmsg(readState, fd.fd(), hdr);
                if (n > 0) {
                    d.position(d.position() + (int) n);
                    long controlLen = hdr.get(JAVA_LONG, SockAddr.MSG_CONTROLLEN);
                    if (controlLen >= SockAddr.CMSG_DATA
                            && control.get(java.lang.foreign.ValueLayout.JAVA_INT, SockAddr.CMSG_LEVEL) == NativeSockets.SOL_SOCKET
                            && control.get(java.lang.foreign.ValueLayout.JAVA_INT, SockAddr.CMSG_TYPE) == NativeSockets.SCM_RIGHTS) {
                        long count = (control.get(JAVA_LONG, SockAddr.CMSG_LEN) - SockAddr.CMSG_DATA) / 4;
                        for (long i = 0; i < count; i++) {
                            sink.accept(control.get(java.lang.foreign.ValueLayout.JAVA_INT, SockAddr.CMSG_DATA + 4 * i));
                        }
                    }
                    if ((hdr.get(java.lang.foreign.ValueLayout.JAVA_INT, SockAddr.MSG_FLAGS) & SockAddr.MSG_CTRUNC) != 0) {
                        throw new IOException("more than " + maxFds + " descriptors came from " + peer.description());
                    }
                }
                return n;
            });
        } finally {
            fd.release();
        }
    }

    /** Lets go of this process's descriptor without shutting the socket down: another process carries it on. */
    void detach() {
        fd.closeKeepingSocket();
    }

    private static long align8(long n) {
        return (n + 7) & ~7L;
    }

    private IOException closed() {
        return new IOException("connection closed: " + peer.description());
    }

    @Override
    public PeerInfo peer() {
        return peer;
    }

    @Override
    public void close() {
        fd.close();
    }

    @Override
    public String toString() {
        return "NativeSocketConnection[" + peer.description() + ", " + fd + "]";
    }
}
