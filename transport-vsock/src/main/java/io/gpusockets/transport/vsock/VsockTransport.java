package io.gpusockets.transport.vsock;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.transport.Transport;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.Set;

/**
 * {@code vsock://CID:PORT} (AF_VSOCK) and {@code fdunix:///path} (AF_UNIX), both through the same FFM
 * socket layer ({@link NativeSockets}): no Java vsock library is needed, and the unix variant runs the
 * whole layer end to end on machines without vsock (DESIGN.md §7).
 *
 * <p>Connecting to CID 2 (the hypervisor host) is refused unless the system property
 * {@value #ALLOW_HOST_CID_PROP} is {@code true}: a frontend in a guest talks to a GPU domain by its own
 * CID, and a stray connection to the host is almost always a configuration mistake.
 *
 * <p>Peers: a vsock connection reports the peer's CID (getpeername) in {@link PeerInfo#cid()} and its
 * description; an fdunix connection reports the peer's uid (SO_PEERCRED) in {@link PeerInfo#uid()}.
 */
public final class VsockTransport implements Transport {
    static final String VSOCK = "vsock";
    static final String FDUNIX = "fdunix";
    public static final String ALLOW_HOST_CID_PROP = "gpusockets.vsock.allowHostCid";

    /** For {@link java.util.ServiceLoader}. */
    public VsockTransport() {
    }

    @Override
    public Set<String> schemes() {
        return Set.of(VSOCK, FDUNIX);
    }

    @Override
    public Connection connect(TransportUri uri, Duration timeout) throws IOException {
        Objects.requireNonNull(timeout, "timeout");
        return switch (uri.scheme()) {
            case VSOCK -> connectVsock(uri, timeout);
            case FDUNIX -> connectUnix(uri, timeout);
            default -> throw new IllegalArgumentException("not a vsock:// or fdunix:// address: uri=" + uri);
        };
    }

    @Override
    public Listener listen(TransportUri uri) throws IOException {
        return switch (uri.scheme()) {
            case VSOCK -> listenVsock(uri);
            case FDUNIX -> listenUnix(uri);
            default -> throw new IllegalArgumentException("not a vsock:// or fdunix:// address: uri=" + uri);
        };
    }

    private static Connection connectVsock(TransportUri uri, Duration timeout) throws IOException {
        VsockAddress a = VsockAddress.parse(uri);
        if (a.anyCid() || a.anyPort()) {
            throw new IllegalArgumentException("CID 'any' and port 0/'any' are for listening only: uri=" + uri);
        }
        if (a.cid() == SockAddr.VMADDR_CID_HOST && !Boolean.getBoolean(ALLOW_HOST_CID_PROP)) {
            throw new IOException("refusing to connect to CID 2 (the hypervisor host): uri=" + uri
                    + "; use the GPU domain's CID, or set -D" + ALLOW_HOST_CID_PROP + "=true if the backend really runs on the host");
        }
        int fd;
        try (Arena arena = Arena.ofConfined()) {
            fd = SocketCalls.connect(NativeSockets.AF_VSOCK, SockAddr.vsock(arena, a.cid(), a.port()), timeout,
                    "cannot connect to " + uri);
        }
        return NativeSocketConnection.of(fd, VsockTransport::vsockPeer);
    }

    private static Listener listenVsock(TransportUri uri) throws IOException {
        VsockAddress a = VsockAddress.parse(uri);
        long port = a.anyPort() ? SockAddr.VMADDR_ANY : a.port();
        int fd;
        try (Arena arena = Arena.ofConfined()) {
            fd = SocketCalls.listen(NativeSockets.AF_VSOCK, SockAddr.vsock(arena, a.cid(), port), "cannot listen on " + uri);
        }
        long boundPort;
        try {
            boundPort = SocketCalls.vsockName(fd, false)[1];
        } catch (IOException e) {
            closeFd(fd);
            throw e;
        }
        TransportUri bound = uri.withRest(VsockAddress.cidText(a.cid()) + ":" + boundPort);
        return new NativeSocketListener(fd, bound,
                accepted -> NativeSocketConnection.of(accepted, VsockTransport::vsockPeer), () -> { });
    }

    private static PeerInfo vsockPeer(SocketFd fd) {
        try {
            long[] name = SocketCalls.vsockName(fd.fd(), true);
            return PeerInfo.vsock(VSOCK + "://" + name[0] + ":" + name[1], name[0]);
        } catch (IOException e) {
            // a connected vsock socket always has a peer name; without one there is no identity to check
            throw new IllegalStateException("vsock peer without a name: " + e.getMessage(), e);
        }
    }

    private static Connection connectUnix(TransportUri uri, Duration timeout) throws IOException {
        int fd;
        try (Arena arena = Arena.ofConfined()) {
            fd = SocketCalls.connect(NativeSockets.AF_UNIX, unixAddress(arena, uri), timeout, "cannot connect to " + uri);
        }
        return NativeSocketConnection.of(fd, s -> unixPeer(s, uri));
    }

    private static Listener listenUnix(TransportUri uri) throws IOException {
        UnixSocketPath path = UnixSocketPath.prepare(uri);
        int fd;
        try (Arena arena = Arena.ofConfined()) {
            fd = SocketCalls.listen(NativeSockets.AF_UNIX, unixAddress(arena, uri), "cannot listen on " + uri);
        }
        UnixSocketPath.Bound file;
        try {
            file = path.bound();
        } catch (IOException e) {
            closeFd(fd);
            throw e;
        }
        return new NativeSocketListener(fd, uri, accepted -> NativeSocketConnection.of(accepted, s -> unixPeer(s, uri)),
                file::deleteIfStillOurs);
    }

    /** {@code address} is the listener's URI on both ends: an accepted unix peer has no address of its own. */
    private static PeerInfo unixPeer(SocketFd fd, TransportUri address) {
        OptionalInt uid = SocketCalls.peerUid(fd.fd());
        String who = uid.isPresent() ? "uid " + uid.getAsInt() : "uid unknown";
        return new PeerInfo(address + " (" + who + ")", uid);
    }

    private static MemorySegment unixAddress(Arena arena, TransportUri uri) {
        try {
            return SockAddr.unix(arena, uri.path());
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(e.getMessage() + ": uri=" + uri, e);
        }
    }

    private static void closeFd(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            SocketFd.closeQuietly(NativeSockets.newCallState(arena), fd);
        }
    }
}
