package io.gpusockets.protocol.transport;

import java.io.IOException;
import java.time.Duration;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.TreeMap;

/** Chooses a {@link Transport} by URI scheme among those on the class path. */
public final class Transports {
    private static volatile Map<String, Transport> bySchemeCache;

    private Transports() {
    }

    public static Map<String, Transport> byScheme() {
        Map<String, Transport> map = bySchemeCache;
        if (map == null) {
            map = new TreeMap<>();
            for (Transport t : ServiceLoader.load(Transport.class, Transports.class.getClassLoader())) {
                for (String s : t.schemes()) {
                    map.putIfAbsent(s, t);
                }
            }
            bySchemeCache = map = Map.copyOf(map);
        }
        return map;
    }

    public static Transport forUri(TransportUri uri) {
        Transport t = byScheme().get(uri.scheme());
        if (t == null) {
            throw new IllegalArgumentException("no transport for scheme '" + uri.scheme() + "' (available: "
                    + String.join(", ", new TreeMap<>(byScheme()).keySet()) + "): uri=" + uri);
        }
        return t;
    }

    public static Connection connect(TransportUri uri, Duration timeout) throws IOException {
        return forUri(uri).connect(uri, timeout);
    }

    public static Listener listen(TransportUri uri) throws IOException {
        return forUri(uri).listen(uri);
    }

    /** Connects with options for the transport (e.g. {@link TlsOptions}); others' keys are ignored. */
    public static Connection connect(TransportUri uri, Duration timeout, TransportOptions options) throws IOException {
        return forUri(uri).connect(uri, timeout, options);
    }

    /** Listens with options for the transport (e.g. {@link TlsOptions}); others' keys are ignored. */
    public static Listener listen(TransportUri uri, TransportOptions options) throws IOException {
        return forUri(uri).listen(uri, options);
    }
}
