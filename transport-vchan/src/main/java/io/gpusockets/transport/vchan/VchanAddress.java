package io.gpusockets.transport.vchan;

import io.gpusockets.protocol.transport.TransportUri;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A parsed {@code vchan://DOMID/PATH}. Grammar:
 * <pre>
 *   vchan-uri = "vchan://" domid "/" path
 *   domid     = 0..32751              the PEER's domain id (DOMID_FIRST_RESERVED = 0x7FF0)
 *   path      = xenstore path, absolute once "/" is put back, e.g. local/domain/0/data/gpusockets
 * </pre>
 * So {@code vchan://0/local/domain/0/data/gpusockets} connects a guest to the server that dom0 set up at
 * /local/domain/0/data/gpusockets, and a server listening on {@code vchan://5/local/domain/0/data/gpusockets}
 * admits only domain 5: libxenvchan grants the ring to exactly that domain.
 */
record VchanAddress(int domid, String xsPath) {
    static final int DOMID_FIRST_RESERVED = 0x7FF0;
    private static final Pattern FORM = Pattern.compile("([0-9]{1,5})(/[A-Za-z0-9_./@:-]+)");

    static VchanAddress parse(TransportUri uri) {
        Matcher m = FORM.matcher(uri.rest());
        if (!uri.scheme().equals(VchanTransport.VCHAN) || !m.matches() || m.group(2).contains("//") || m.group(2).endsWith("/")) {
            throw new IllegalArgumentException("expected vchan://DOMID/XENSTORE-PATH: uri=" + uri);
        }
        int domid = Integer.parseInt(m.group(1));
        if (domid >= DOMID_FIRST_RESERVED) {
            throw new IllegalArgumentException("domid out of range 0.." + (DOMID_FIRST_RESERVED - 1) + ": uri=" + uri);
        }
        return new VchanAddress(domid, m.group(2));
    }
}
