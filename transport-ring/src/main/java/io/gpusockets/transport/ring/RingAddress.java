package io.gpusockets.transport.ring;

import io.gpusockets.protocol.transport.TransportUri;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A parsed {@code ring://} address; the grammar is in {@link RingTransport}'s Javadoc.
 *
 * @param uri       the address as given
 * @param name      the ring's name
 * @param capacity  bytes of each ring, the listener's choice (a client's {@code size} is checked, not used)
 * @param window    bytes of the shared window, 0 for none; the listener's choice too
 * @param socket    where the listener's unix socket lives
 */
record RingAddress(TransportUri uri, String name, long capacity, long window, Path socket) {
    public static final String DIR_PROP_NAME = "gpusockets.ring.dir";
    public static final String SIZE_PROP_NAME = "gpusockets.ring.size";
    public static final String WINDOW_PROP_NAME = "gpusockets.ring.window";
    /** sun_path holds 108 bytes including the terminating NUL. */
    static final int MAX_SOCKET_PATH = 107;

    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9._-]+");
    private static final Pattern SIZE = Pattern.compile("([0-9]{1,10})([kKmMgG]?)");

    static RingAddress of(TransportUri uri) {
        if (!uri.scheme().equals(RingTransport.SCHEME)) {
            throw new IllegalArgumentException("not a ring:// address: uri=" + uri);
        }
        String rest = uri.rest();
        int query = rest.indexOf('?');
        String name = query < 0 ? rest : rest.substring(0, query);
        if (!NAME.matcher(name).matches() || name.equals(".") || name.equals("..")) {
            throw new IllegalArgumentException("ring name must match [A-Za-z0-9._-]+ (not . or ..): uri=" + uri);
        }
        long capacity = parseSize(System.getProperty(SIZE_PROP_NAME, String.valueOf(RingDescriptor.DEFAULT_CAPACITY)),
                SIZE_PROP_NAME, uri);
        String windowText = System.getProperty(WINDOW_PROP_NAME, String.valueOf(RingDescriptor.DEFAULT_WINDOW));
        if (query >= 0) {
            for (String param : rest.substring(query + 1).split("&", -1)) {
                if (param.startsWith("size=")) {
                    capacity = parseSize(param.substring(5), "size", uri);
                } else if (param.startsWith("window=")) {
                    windowText = param.substring(7);
                } else {
                    throw new IllegalArgumentException("unknown ring:// parameter (known: size, window): param=" + param
                            + " uri=" + uri);
                }
            }
        }
        long window = windowText.equals("0") ? 0 : parseSize(windowText, "window", uri);
        Path dir = Path.of(System.getProperty(DIR_PROP_NAME, System.getProperty("java.io.tmpdir")));
        Path socket = dir.resolve("gpusockets-ring-" + name + ".sock").toAbsolutePath();
        if (socket.toString().getBytes(StandardCharsets.UTF_8).length > MAX_SOCKET_PATH) {
            throw new IllegalArgumentException("socket path longer than " + MAX_SOCKET_PATH + " bytes (shorten the name or "
                    + DIR_PROP_NAME + "): path=" + socket + " uri=" + uri);
        }
        return new RingAddress(uri, name, capacity, window, socket);
    }

    /** {@code digits [k|m|g]}, binary multiples, a power of two within the descriptor's bounds. */
    static long parseSize(String text, String what, TransportUri uri) {
        Matcher m = SIZE.matcher(text);
        if (!m.matches()) {
            throw new IllegalArgumentException("bad ring size (digits with optional k, m or g): " + what + "=" + text + " uri=" + uri);
        }
        int shift = switch (m.group(2).toLowerCase(Locale.ROOT)) {
            case "k" -> 10;
            case "m" -> 20;
            case "g" -> 30;
            default -> 0;
        };
        long value = Long.parseLong(m.group(1));
        if (value > RingDescriptor.MAX_CAPACITY >> shift) {
            throw new IllegalArgumentException("ring size too large (at most " + RingDescriptor.MAX_CAPACITY + "): "
                    + what + "=" + text + " uri=" + uri);
        }
        long capacity = value << shift;
        try {
            RingDescriptor.checkCapacity(capacity);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(e.getMessage() + " " + what + "=" + text + " uri=" + uri);
        }
        return capacity;
    }
}
