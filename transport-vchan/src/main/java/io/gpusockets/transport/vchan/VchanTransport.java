package io.gpusockets.transport.vchan;

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
import java.util.Set;

/**
 * {@code vchan://DOMID/PATH}: frames over libxenvchan's ring on Xen grant pages with an event channel
 * (DESIGN.md §7). DOMID is always the peer's domain: the server (GPU domain) listens for one guest, the
 * guest connects to the server's domain. See xen-config/README.md for the xenstore set-up.
 *
 * <p>The ring size per direction is {@value #RING_BYTES_PROP} (bytes, default 64 KiB); libxenvchan
 * rounds it up to a power of two of pages. Connect does not wait: libxenvchan_client_init fails at once
 * if the server has not published the vchan yet, so {@code timeout} is not used.
 */
public final class VchanTransport implements Transport {
    static final String VCHAN = "vchan";
    public static final String RING_BYTES_PROP = "gpusockets.vchan.ringBytes";
    static final long RING_BYTES_DEFAULT = 64 << 10;

    /** For {@link java.util.ServiceLoader}. */
    public VchanTransport() {
    }

    @Override
    public Set<String> schemes() {
        return Set.of(VCHAN);
    }

    @Override
    public Connection connect(TransportUri uri, Duration timeout) throws IOException {
        Objects.requireNonNull(timeout, "timeout");
        VchanAddress a = VchanAddress.parse(uri);
        Libxenvchan lib = Libxenvchan.load();
        MemorySegment ctrl;
        int errno;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = Libxenvchan.newCallState(arena);
            ctrl = lib.clientInit(state, a.domid(), arena.allocateFrom(a.xsPath()));
            errno = Libxenvchan.errno(state);
        }
        if (ctrl.equals(MemorySegment.NULL)) {
            throw new IOException("cannot connect to " + uri + ": libxenvchan_client_init failed ("
                    + EventWait.strerror(errno) + "); is this a Xen guest with /dev/xen/gntdev and /dev/xen/evtchn, and has domain "
                    + a.domid() + " published the vchan at " + a.xsPath() + "?");
        }
        Libxenvchan.clearBlocking(ctrl);
        return new VchanConnection(lib, ctrl, PeerInfo.of(uri + " (domain " + a.domid() + ")"));
    }

    @Override
    public Listener listen(TransportUri uri) throws IOException {
        VchanAddress a = VchanAddress.parse(uri);
        Libxenvchan lib = Libxenvchan.load();
        long ringBytes = Long.getLong(RING_BYTES_PROP, RING_BYTES_DEFAULT);
        // publish once now so that a missing Xen or a bad path fails at listen, not at the first accept
        lib.close(serverInit(lib, a, ringBytes, uri));
        return new VchanListener(lib, uri, a, ringBytes);
    }

    static MemorySegment serverInit(Libxenvchan lib, VchanAddress a, long ringBytes, TransportUri uri) throws IOException {
        MemorySegment ctrl;
        int errno;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = Libxenvchan.newCallState(arena);
            ctrl = lib.serverInit(state, a.domid(), arena.allocateFrom(a.xsPath()), ringBytes, ringBytes);
            errno = Libxenvchan.errno(state);
        }
        if (ctrl.equals(MemorySegment.NULL)) {
            throw new IOException("cannot listen on " + uri + ": libxenvchan_server_init failed ("
                    + EventWait.strerror(errno) + "); is this a Xen domain with /dev/xen/gntalloc and /dev/xen/evtchn, and may it write "
                    + a.xsPath() + " in xenstore?");
        }
        Libxenvchan.clearBlocking(ctrl);
        return ctrl;
    }
}
