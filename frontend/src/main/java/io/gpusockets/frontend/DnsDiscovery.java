package io.gpusockets.frontend;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;

/**
 * Backends found in DNS: {@code GPUSOCKETS_SERVER=dns://NAME:PORT} stands for one backend at every
 * address NAME has, as a Kubernetes headless Service answers with one A (or AAAA) record per ready pod.
 * <pre>
 *   dns-uri   = "dns://" name ":" port [ "?transport=" ( "tcp" | "tls" ) ]
 *   tcp (default): each address becomes tcp://ADDR:PORT (GPUSOCKETS_PSK_FILE as for any tcp:// backend)
 *   tls          : each address becomes tls://ADDR:PORT, and the backend's certificate must name NAME
 *                  (not ADDR): one certificate for the Service's name serves every pod
 * </pre>
 * Addresses come from the JDK resolver ({@link InetAddress#getAllByName}: /etc/hosts, then DNS, or the
 * file of {@code -Djdk.net.hosts.file}) and are sorted, IPv4 before IPv6, each by its bytes, so that
 * every client that sees the same set numbers the devices the same way whatever order DNS gave.
 * Resolution happens at each connect ({@link FrontendDrivers#connect}), never within a running driver:
 * CUDA fixes the device count once cuInit returned.
 */
public final class DnsDiscovery {
    public static final String SCHEME = "dns";
    private static final String PREFIX = SCHEME + "://";

    private DnsDiscovery() {
    }

    /** A parsed {@code dns://} URI: the name to resolve, the backends' port, the scheme each address gets. */
    public record Target(String name, int port, String transport) {
        /** The backend URI for one of {@link #name}'s addresses. */
        String uriFor(InetAddress address) {
            String host = address.getHostAddress();
            int scope = host.indexOf('%');
            if (scope >= 0) {
                host = host.substring(0, scope); // TransportUri takes no IPv6 zone; a Service's addresses have none
            }
            return transport + "://" + (address instanceof Inet4Address ? host : "[" + host + "]") + ":" + port;
        }

        @Override
        public String toString() {
            return PREFIX + name + ":" + port + (transport.equals("tcp") ? "" : "?transport=" + transport);
        }
    }

    /** Whether {@code uri} is a {@code dns://} URI (case-insensitive scheme). */
    public static boolean isDns(String uri) {
        return uri.regionMatches(true, 0, PREFIX, 0, PREFIX.length());
    }

    /** Parses {@code dns://NAME:PORT[?transport=tcp|tls]}; throws IllegalArgumentException naming what is wrong. */
    public static Target parse(String uri) {
        if (!isDns(uri)) {
            throw new IllegalArgumentException("not a dns:// URI: uri=" + uri);
        }
        URI u;
        try {
            u = new URI(uri);
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("malformed dns:// URI (expected dns://NAME:PORT): uri=" + uri + ": " + e.getMessage());
        }
        String name = u.getHost();
        if (name == null || name.isEmpty() || u.getPort() <= 0 || u.getPort() > 65535
                || (u.getRawPath() != null && !u.getRawPath().isEmpty()) || u.getRawUserInfo() != null || u.getRawFragment() != null) {
            throw new IllegalArgumentException("expected dns://NAME:PORT (a host name and a port 1..65535): uri=" + uri);
        }
        String transport = "tcp";
        String query = u.getRawQuery();
        if (query != null) {
            if (!query.regionMatches(true, 0, "transport=", 0, 10)) {
                throw new IllegalArgumentException("a dns:// URI takes only ?transport=tcp or ?transport=tls: uri=" + uri);
            }
            transport = query.substring(10).toLowerCase(Locale.ROOT);
            if (!transport.equals("tcp") && !transport.equals("tls")) {
                throw new IllegalArgumentException("transport must be tcp or tls: uri=" + uri);
            }
        }
        return new Target(name, u.getPort(), transport);
    }

    /**
     * The backend URIs behind {@code target} now, sorted; throws {@link UnknownHostException} naming
     * the name when it resolves to no address.
     */
    public static List<String> resolve(Target target) throws UnknownHostException {
        InetAddress[] found;
        try {
            found = InetAddress.getAllByName(target.name());
        } catch (UnknownHostException e) {
            throw new UnknownHostException(target + ": " + target.name() + " resolves to no address"
                    + " (is the headless Service there, with ready backend pods?)");
        }
        List<String> uris = new ArrayList<>();
        for (InetAddress a : sorted(found)) {
            String u = target.uriFor(a);
            if (!uris.contains(u)) {
                uris.add(u);
            }
        }
        if (uris.isEmpty()) {
            throw new UnknownHostException(target + ": " + target.name() + " resolves to no address");
        }
        return uris;
    }

    /** IPv4 before IPv6, then by the address bytes, unsigned. */
    static List<InetAddress> sorted(InetAddress[] addresses) {
        List<InetAddress> list = new ArrayList<>(Arrays.asList(addresses));
        list.sort(Comparator.<InetAddress>comparingInt(a -> a.getAddress().length)
                .thenComparing(InetAddress::getAddress, Arrays::compareUnsigned));
        return list;
    }
}
