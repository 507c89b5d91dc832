package io.gpusockets.transport.vsock;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalInt;
import java.util.function.IntConsumer;

/**
 * Hands sockets from one process to another over an {@code fdunix://} connection (SCM_RIGHTS), through
 * this module's FFM socket layer: the backend's front process passes a frontend's socket to the worker
 * process that serves its session (isolation mode {@code process}), so that the frontend's bytes go
 * from the kernel straight into the worker, never through the front.
 *
 * <p>What it owns: nothing beyond the call. A received descriptor belongs to the caller until
 * {@link #adopt} makes it a {@link Connection}, or {@link #close} closes it.
 */
public final class DescriptorPassing {
    private DescriptorPassing() {
    }

    /** Whether {@code c} can carry descriptors (an fdunix:// connection of this module). */
    public static boolean canCarry(Connection c) {
        return c instanceof NativeSocketConnection n && n.peer().transport().equals(VsockTransport.FDUNIX);
    }

    /** Writes {@code msg} (a direct buffer) over {@code control}, the descriptors riding on its first bytes. */
    public static void send(Connection control, ByteBuffer msg, int... fds) throws IOException {
        carrier(control).writeWithDescriptors(msg, fds);
    }

    /**
     * Fills {@code dst} (a direct buffer) from {@code control}; descriptors that come with the bytes (at most
     * {@code maxFds} a message) go to {@code sink}, close-on-exec, the caller's to close.
     */
    public static void receive(Connection control, ByteBuffer dst, int maxFds, IntConsumer sink) throws IOException {
        carrier(control).readFullyCollecting(dst, maxFds, sink);
    }

    /** poll(2) events: the peer shut its writing side down (Linux), hang-up, error. */
    private static final short POLLRDHUP = 0x2000;
    private static final short POLLHUP = 0x10;
    private static final short POLLERR = 0x8;

    /**
     * Whether the stream socket {@code fd}'s peer has closed its end (or the socket failed), asked of the kernel
     * without reading: poll(2) with POLLRDHUP and no wait. Unlike a read, it sees the peer's close even while
     * unread bytes are queued ahead of it. False when poll fails ({@code fd} not open).
     */
    public static boolean hungUp(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            MemorySegment pfd = arena.allocate(8, 4);  // struct pollfd { int fd; short events; short revents; }
            pfd.set(JAVA_INT, 0, fd);
            pfd.set(java.lang.foreign.ValueLayout.JAVA_SHORT, 4, POLLRDHUP);
            if (NativeSockets.poll(state, pfd, 1, 0) <= 0) {
                return false;
            }
            short revents = pfd.get(java.lang.foreign.ValueLayout.JAVA_SHORT, 6);
            return (revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
        }
    }

    /** The socket under a vsock:// or fdunix:// connection, or empty for another kind. */
    public static OptionalInt descriptorOf(Connection c) {
        return c instanceof NativeSocketConnection n ? OptionalInt.of(n.descriptor()) : OptionalInt.empty();
    }

    /**
     * Lets go of a vsock:// or fdunix:// connection's descriptor without shutdown(2), after it was passed to
     * another process, which carries the connection on. Plain {@link Connection#close} would end it there too.
     */
    public static void detach(Connection c) {
        if (!(c instanceof NativeSocketConnection n)) {
            throw new IllegalArgumentException("not a connection of this module: " + c);
        }
        n.detach();
    }

    /**
     * The one socket of this process whose SO_LINGER is on with {@code seconds}, or empty: how a JDK socket
     * channel's descriptor is found (the JDK does not tell it) after the caller set that linger value on it.
     * The caller makes sure no other socket has that value meanwhile.
     */
    public static OptionalInt findSocketByLinger(int seconds) throws IOException {
        OptionalInt found = OptionalInt.empty();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            MemorySegment linger = arena.allocate(8, 4);
            MemorySegment length = arena.allocate(JAVA_INT);
            for (int fd : openSockets()) {
                length.set(JAVA_INT, 0, 8);
                if (NativeSockets.getsockopt(state, fd, NativeSockets.SOL_SOCKET, NativeSockets.SO_LINGER, linger, length) == 0
                        && linger.get(JAVA_INT, 0) != 0 && linger.get(JAVA_INT, 4) == seconds) {
                    if (found.isPresent()) {
                        throw new IOException("two sockets with SO_LINGER " + seconds + ": fds " + found.getAsInt() + " and " + fd);
                    }
                    found = OptionalInt.of(fd);
                }
            }
        }
        return found;
    }

    /**
     * Makes a connected stream socket received from another process a {@link Connection} (non-blocking from
     * now on) that owns it; {@code peer} is what the sending process proved about the other end.
     */
    public static Connection adopt(int fd, PeerInfo peer) throws IOException {
        nonBlockingOrClose(fd, "received descriptor " + fd);
        return NativeSocketConnection.of(fd, s -> peer);
    }

    /** The process id at the other end of an fdunix:// connection (SO_PEERCRED), or empty. */
    public static OptionalInt peerPid(Connection c) {
        if (!(c instanceof NativeSocketConnection n)) {
            return OptionalInt.empty();
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            MemorySegment cred = arena.allocate(SockAddr.UCRED);
            MemorySegment length = arena.allocate(JAVA_INT);
            length.set(JAVA_INT, 0, (int) SockAddr.UCRED.byteSize());
            if (NativeSockets.getsockopt(state, n.descriptor(), NativeSockets.SOL_SOCKET, NativeSockets.SO_PEERCRED, cred,
                    length) < 0) {
                return OptionalInt.empty();
            }
            int pid = cred.get(JAVA_INT, SockAddr.UCRED_PID);
            return pid > 0 ? OptionalInt.of(pid) : OptionalInt.empty();
        }
    }

    /**
     * Two connected unix stream sockets (blocking, close-on-exec): one to keep, one to pass to another
     * process. The caller owns both.
     */
    public static int[] socketPair() throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            MemorySegment fds = arena.allocate(JAVA_INT, 2);
            if (NativeSockets.socketpair(state, NativeSockets.AF_UNIX, NativeSockets.SOCK_STREAM | NativeSockets.SOCK_CLOEXEC,
                    fds) < 0) {
                throw Errno.exception("socketpair", NativeSockets.errno(state));
            }
            return new int[] {fds.getAtIndex(JAVA_INT, 0), fds.getAtIndex(JAVA_INT, 1)};
        }
    }

    /** Closes a descriptor nobody adopted. */
    public static void close(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            SocketFd.closeQuietly(NativeSockets.newCallState(arena), fd);
        }
    }

    /** The listening socket under a vsock:// or fdunix:// listener of this module, or empty for another kind. */
    public static OptionalInt listenerDescriptor(io.gpusockets.protocol.transport.Listener l) {
        return l instanceof NativeSocketListener n ? OptionalInt.of(n.descriptor()) : OptionalInt.empty();
    }

    /**
     * The descriptor of this process's listening socket bound to {@code local} (what a JDK server channel's
     * getLocalAddress says: a {@link java.net.UnixDomainSocketAddress} or an {@link java.net.InetSocketAddress}), found
     * in /proc/self/fd by SO_ACCEPTCONN and getsockname(2): how a backend being taken over finds the socket of a
     * tcp:// or unix:// listener, whose descriptor the JDK does not tell. Empty when no such socket is open.
     */
    public static OptionalInt findListeningSocket(java.net.SocketAddress local) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            MemorySegment value = arena.allocate(JAVA_INT);
            MemorySegment length = arena.allocate(JAVA_INT);
            MemorySegment addr = arena.allocate(128, 8);
            for (int fd : openSockets()) {
                length.set(JAVA_INT, 0, 4);
                if (NativeSockets.getsockopt(state, fd, NativeSockets.SOL_SOCKET, NativeSockets.SO_ACCEPTCONN, value, length) != 0
                        || value.get(JAVA_INT, 0) == 0) {
                    continue;
                }
                length.set(JAVA_INT, 0, 128);
                addr.fill((byte) 0);
                if (NativeSockets.getsockname(state, fd, addr, length) == 0 && sameAddress(addr, length.get(JAVA_INT, 0), local)) {
                    return OptionalInt.of(fd);
                }
            }
        }
        return OptionalInt.empty();
    }

    /** Makes {@code fd} non-blocking; if that fails, closes it and throws naming {@code what} and the errno. */
    private static void nonBlockingOrClose(int fd, String what) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            int flags = NativeSockets.fcntl(state, fd, NativeSockets.F_GETFL, 0);
            if (flags < 0 || NativeSockets.fcntl(state, fd, NativeSockets.F_SETFL, flags | NativeSockets.O_NONBLOCK) < 0) {
                int errno = NativeSockets.errno(state);
                SocketFd.closeQuietly(state, fd);
                throw Errno.exception(what, errno);
            }
        }
    }

    /**
     * The descriptors of this process that are sockets now (from /proc/self/fd), for the searches above: one closed
     * meanwhile, or the directory's own descriptor, is left out.
     */
    private static java.util.List<Integer> openSockets() throws IOException {
        java.util.List<Integer> sockets = new java.util.ArrayList<>();
        try (DirectoryStream<Path> fds = Files.newDirectoryStream(Path.of("/proc/self/fd"))) {
            for (Path p : fds) {
                try {
                    int fd = Integer.parseInt(p.getFileName().toString());
                    if (Files.readSymbolicLink(p).toString().startsWith("socket:")) {
                        sockets.add(fd);
                    }
                } catch (NumberFormatException | IOException gone) {
                    // closed meanwhile, or the directory's own descriptor
                }
            }
        }
        return sockets;
    }

    /** Whether the sockaddr in {@code addr} ({@code n} bytes) is {@code local}. */
    private static boolean sameAddress(MemorySegment addr, int n, java.net.SocketAddress local) {
        int family = Short.toUnsignedInt(addr.get(java.lang.foreign.ValueLayout.JAVA_SHORT, 0));
        if (local instanceof java.net.UnixDomainSocketAddress u) {
            if (family != NativeSockets.AF_UNIX || n <= 2) {
                return false;
            }
            byte[] path = addr.asSlice(2, n - 2).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            int end = 0;
            while (end < path.length && path[end] != 0) {
                end++;
            }
            String bound = new String(path, 0, end, java.nio.charset.StandardCharsets.UTF_8);
            return !bound.isEmpty() && Path.of(bound).toAbsolutePath().normalize().equals(u.getPath().toAbsolutePath().normalize());
        }
        if (!(local instanceof java.net.InetSocketAddress in) || (family != NativeSockets.AF_INET && family != NativeSockets.AF_INET6)) {
            return false;
        }
        int port = Short.toUnsignedInt(Short.reverseBytes(addr.get(java.lang.foreign.ValueLayout.JAVA_SHORT, 2)));
        if (port != in.getPort()) {
            return false;
        }
        byte[] want = in.getAddress().getAddress();
        byte[] got = family == NativeSockets.AF_INET ? addr.asSlice(4, 4).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)
                : addr.asSlice(8, 16).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        if (java.util.Arrays.equals(want, got)) {
            return true;
        }
        // an IPv4 address on a dual-stack socket: ::ffff:a.b.c.d
        return want.length == 4 && got.length == 16 && java.util.Arrays.equals(want, java.util.Arrays.copyOfRange(got, 12, 16));
    }

    /** A new descriptor (close-on-exec) for the same socket as {@code fd}, which the caller owns. */
    public static int duplicate(int fd) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            int copy = NativeSockets.fcntl(state, fd, NativeSockets.F_DUPFD_CLOEXEC, 0);
            if (copy < 0) {
                throw Errno.exception("dup of descriptor " + fd, NativeSockets.errno(state));
            }
            return copy;
        }
    }

    /**
     * A listener over a listening socket received from another process (a backend that takes over another's tcp://
     * and unix:// listeners): it owns {@code fd} from now on and accepts through this module's socket layer, so its
     * connections are this module's too (they can be passed on to worker processes as they are). Peers are described
     * as the JDK transports describe them: unix, the listener's URI and the peer's uid (SO_PEERCRED); tcp, the peer's
     * address, with Nagle off. Closing it leaves a unix socket's file in place (the next listen on the path replaces
     * a stale one).
     */
    public static io.gpusockets.protocol.transport.Listener adoptListener(int fd, io.gpusockets.protocol.transport.TransportUri address)
            throws IOException {
        String scheme = address.scheme();
        if (!scheme.equals("unix") && !scheme.equals("tcp")) {
            close(fd);
            throw new IOException("a received listener must be tcp:// or unix://: " + address);
        }
        nonBlockingOrClose(fd, "received listener " + address);
        NativeSocketListener.Wrapper wrapper = scheme.equals("unix")
                ? accepted -> NativeSocketConnection.of(accepted, s -> {
                    OptionalInt uid = SocketCalls.peerUid(s.fd());
                    return new PeerInfo(address + " (" + (uid.isPresent() ? "uid " + uid.getAsInt() : "uid unknown") + ")", uid);
                })
                : accepted -> NativeSocketConnection.of(noDelay(accepted), s -> PeerInfo.of(tcpPeer(s.fd())));
        return new NativeSocketListener(fd, address, wrapper, () -> { });
    }

    /** Nagle off on an accepted TCP socket (as the JDK tcp:// transport sets it). */
    private static int noDelay(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment one = arena.allocate(JAVA_INT);
            one.set(JAVA_INT, 0, 1);
            NativeSockets.setsockopt(NativeSockets.newCallState(arena), fd, NativeSockets.IPPROTO_TCP, NativeSockets.TCP_NODELAY, one, 4);
        }
        return fd;
    }

    /** "tcp://HOST:PORT" of a connected TCP socket's peer (getpeername), or "tcp://unknown". */
    private static String tcpPeer(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment addr = arena.allocate(128, 8);
            MemorySegment length = arena.allocate(JAVA_INT);
            length.set(JAVA_INT, 0, 128);
            if (NativeSockets.getpeername(NativeSockets.newCallState(arena), fd, addr, length) != 0) {
                return "tcp://unknown";
            }
            int family = Short.toUnsignedInt(addr.get(java.lang.foreign.ValueLayout.JAVA_SHORT, 0));
            int port = Short.toUnsignedInt(Short.reverseBytes(addr.get(java.lang.foreign.ValueLayout.JAVA_SHORT, 2)));
            byte[] ip = family == NativeSockets.AF_INET ? addr.asSlice(4, 4).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)
                    : addr.asSlice(8, 16).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            String host = java.net.InetAddress.getByAddress(ip).getHostAddress();
            return "tcp://" + (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port;
        } catch (java.net.UnknownHostException e) {
            return "tcp://unknown";
        }
    }

    private static NativeSocketConnection carrier(Connection c) {
        if (!canCarry(c)) {
            throw new IllegalArgumentException("descriptors travel over fdunix:// connections only: " + c);
        }
        return (NativeSocketConnection) c;
    }
}
