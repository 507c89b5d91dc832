package io.gpusockets.protocol.transport;

import java.io.Closeable;
import java.io.IOException;

/** A bound server endpoint. */
public interface Listener extends Closeable {

    /** Waits for the next peer. After {@link #close()} it throws an IOException. */
    Connection accept() throws IOException;

    /** The address clients connect to (with the real port when the listen URI asked for port 0). */
    TransportUri address();

    @Override
    void close();

    /**
     * The JDK channel under this listener, where it is a plain one (tcp://, unix://): a backend being taken over
     * finds the listening socket's descriptor through it, to pass it to the backend that takes over. Empty for
     * every other kind (and for tls://, whose connections need this process's TLS set-up).
     */
    default java.util.Optional<java.nio.channels.ServerSocketChannel> serverChannel() {
        return java.util.Optional.empty();
    }

    /**
     * Closes this listener but leaves its socket to another process that holds a copy of its descriptor (a backend
     * that takes this one over): no shutdown(2), and a unix socket's file stays where it is. As {@link #close()}
     * where the transport has nothing another process could go on with.
     */
    default void closeLeavingSocket() {
        close();
    }
}
