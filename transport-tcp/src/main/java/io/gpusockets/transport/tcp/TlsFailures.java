package io.gpusockets.transport.tcp;

import java.security.cert.CertificateException;
import java.security.cert.CertificateExpiredException;
import java.security.cert.CertificateNotYetValidException;
import java.security.cert.CertPathValidatorException;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLHandshakeException;

/**
 * Handshake failures re-thrown with the peer and, where the cause is a common set-up mistake, what it
 * means: the JDK's messages name the check that failed, not the file or address to fix.
 */
final class TlsFailures {
    private TlsFailures() {
    }

    /** An SSLHandshakeException naming {@code peer}, with a hint when the cause is recognized. */
    static SSLHandshakeException handshake(String peer, SSLException e) {
        String hint = hint(e);
        SSLHandshakeException named = new SSLHandshakeException("TLS handshake with " + peer + " failed: "
                + e.getMessage() + (hint == null ? "" : " (" + hint + ")"));
        named.initCause(e);
        return named;
    }

    private static String hint(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            String m = String.valueOf(t.getMessage());
            if (t instanceof CertificateExpiredException || t instanceof CertificateNotYetValidException
                    || m.contains("validity check failed")) {
                return "a certificate is outside its validity period";
            }
            if (t instanceof CertificateException && (m.contains("No subject alternative") || m.contains("No name matching"))) {
                return "hostname verification: the server's certificate does not name the host of the address;"
                        + " connect by a name or IP address in its subject alternative names";
            }
            if (t instanceof CertPathValidatorException || m.contains("unable to find valid certification path")) {
                return "the peer's certificate is not signed by a CA this end trusts";
            }
            if (m.contains("Empty client certificate chain") || m.contains("certificate_required")) {
                return "the server requires a client certificate";
            }
            if (m.contains("Unsupported or unrecognized SSL message") || m.contains("Unrecognized SSL message")) {
                return "the peer does not speak TLS: a plaintext tcp:// peer on a tls:// port, or the reverse";
            }
            if (m.contains("No appropriate protocol") || m.contains("protocol_version")) {
                return "the peer does not offer TLS 1.3";
            }
        }
        return null;
    }
}
