package io.gpusockets.transport.vchan;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The server end of {@code vchan://DOMID/PATH}. A vchan has exactly one client (the domain named in the
 * URI), so this listener serves one connection at a time: {@link #accept()} publishes a fresh vchan at
 * PATH (libxenvchan_server_init writes ring-ref and event-channel there) and waits until the client
 * domain connects; the next accept publishes the next one after the previous connection was handed out.
 */
final class VchanListener implements Listener {
    private final Libxenvchan lib;
    private final TransportUri address;
    private final VchanAddress vchan;
    private final long ringBytes;
    private final Object acceptLock = new Object();
    private final EventWait wait = new EventWait(Arena.ofAuto());
    private volatile boolean closed;

    VchanListener(Libxenvchan lib, TransportUri address, VchanAddress vchan, long ringBytes) {
        this.lib = lib;
        this.address = address;
        this.vchan = vchan;
        this.ringBytes = ringBytes;
    }

    @Override
    public Connection accept() throws IOException {
        synchronized (acceptLock) {
            if (closed) {
                throw closed();
            }
            MemorySegment ctrl = VchanTransport.serverInit(lib, vchan, ringBytes, address);
            boolean handedOver = false;
            try {
                int fd = lib.fdForSelect(ctrl);
                while (true) {
                    if (closed) {
                        throw closed();
                    }
                    int state = lib.isOpen(ctrl);
                    if (state == 1) {
                        handedOver = true;
                        return new VchanConnection(lib, ctrl,
                                PeerInfo.of(address + " (domain " + vchan.domid() + ")"));
                    }
                    if (state == 0) {
                        throw new IOException("vchan client of domain " + vchan.domid() + " closed before use: " + address);
                    }
                    if (wait.readable(fd, VchanConnection.SLICE_MILLIS) && wait.readyNow(fd)) {
                        lib.await(ctrl);
                    }
                }
            } finally {
                if (!handedOver) {
                    lib.close(ctrl);
                }
            }
        }
    }

    private IOException closed() {
        return new IOException("listener closed: " + address);
    }

    @Override
    public TransportUri address() {
        return address;
    }

    /** A thread in accept() notices within one poll slice and withdraws the published vchan. */
    @Override
    public void close() {
        closed = true;
    }
}
