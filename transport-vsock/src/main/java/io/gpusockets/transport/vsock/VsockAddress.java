package io.gpusockets.transport.vsock;

import io.gpusockets.protocol.transport.TransportUri;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A parsed {@code vsock://CID:PORT}. Grammar:
 * <pre>
 *   vsock-uri = "vsock://" cid ":" port
 *   cid       = "any" | u32           "any" (VMADDR_CID_ANY) for listening only
 *   port      = u32                   0 or "any" when listening = a free port (VMADDR_PORT_ANY)
 * </pre>
 * Numbers are decimal, 0..4294967295. CID 1 is this machine's loopback, CID 2 the hypervisor host.
 */
record VsockAddress(long cid, long port) {
    private static final Pattern FORM = Pattern.compile("(any|[0-9]{1,10}):(any|[0-9]{1,10})");

    static VsockAddress parse(TransportUri uri) {
        Matcher m = FORM.matcher(uri.rest());
        if (!uri.scheme().equals(VsockTransport.VSOCK) || !m.matches()) {
            throw new IllegalArgumentException("expected vsock://CID:PORT (CID a number or 'any'): uri=" + uri);
        }
        long cid = m.group(1).equals("any") ? SockAddr.VMADDR_ANY : Long.parseLong(m.group(1));
        long port = m.group(2).equals("any") ? SockAddr.VMADDR_ANY : Long.parseLong(m.group(2));
        if (cid > 0xFFFF_FFFFL || port > 0xFFFF_FFFFL) {
            throw new IllegalArgumentException("CID and port must be 0..4294967295: uri=" + uri);
        }
        return new VsockAddress(cid, port);
    }

    boolean anyCid() {
        return cid == SockAddr.VMADDR_ANY;
    }

    boolean anyPort() {
        return port == SockAddr.VMADDR_ANY || port == 0;
    }

    /** The text form of a CID as the URI grammar writes it. */
    static String cidText(long cid) {
        return cid == SockAddr.VMADDR_ANY ? "any" : Long.toString(cid);
    }
}
