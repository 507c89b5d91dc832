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
}
