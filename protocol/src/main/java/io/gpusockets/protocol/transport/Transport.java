package io.gpusockets.protocol.transport;

import java.io.IOException;
import java.time.Duration;
import java.util.Set;

/**
 * A transport module's entry point, found by {@link Transports} through {@link java.util.ServiceLoader}
 * (META-INF/services/io.gpusockets.protocol.transport.Transport).
 */
public interface Transport {

    /** The URI schemes this transport serves, e.g. {@code tcp} and {@code unix}. */
    Set<String> schemes();

    /** Connects, giving up after {@code timeout} with an IOException that names the address. */
    Connection connect(TransportUri uri, Duration timeout) throws IOException;

    Listener listen(TransportUri uri) throws IOException;

    /**
     * Connects with {@code options} (see {@link TransportOptions}): a transport uses the keys it knows and
     * ignores the others. By default there are none to use.
     */
    default Connection connect(TransportUri uri, Duration timeout, TransportOptions options) throws IOException {
        return connect(uri, timeout);
    }

    /** Listens with {@code options}, as {@link #connect(TransportUri, Duration, TransportOptions)} connects. */
    default Listener listen(TransportUri uri, TransportOptions options) throws IOException {
        return listen(uri);
    }
}
