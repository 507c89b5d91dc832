package io.gpusockets.protocol.transport;

import java.nio.file.Path;

/**
 * The {@link TransportOptions} keys of {@code tls://} (TLS 1.3 over TCP, served by the tcp transport
 * module). Files only, never secrets in memory or on a command line: a password is read from its file
 * (first line, surrounding white space stripped).
 *
 * <p>Certificate files: a key store is PKCS12 (a certificate chain and its private key, as
 * {@code keytool -genkeypair} makes it); a trust file is either PEM (one or more
 * {@code -----BEGIN CERTIFICATE-----} blocks) or a PKCS12 trust store, whose certificates need its
 * password ({@link #TRUST_PASSWORD_FILE}).
 */
public final class TlsOptions {
    private TlsOptions() {
    }

    /**
     * This end's certificate and private key (PKCS12). A listener needs it (the server certificate); a
     * client gives it to present a client certificate.
     */
    public static final TransportOptions.Key<Path> KEY_STORE = new TransportOptions.Key<>("tls.keyStore", Path.class);

    /** The file holding {@link #KEY_STORE}'s password (also its key's); absent: an empty password. */
    public static final TransportOptions.Key<Path> KEY_STORE_PASSWORD_FILE =
            new TransportOptions.Key<>("tls.keyStorePasswordFile", Path.class);

    /**
     * The certificates that vouch for the peer (PEM or PKCS12). A client verifies the server against them
     * (absent: the JDK's default CAs); a listener given them asks every client for a certificate and
     * verifies one that is presented (absent: it asks for none).
     */
    public static final TransportOptions.Key<Path> TRUST = new TransportOptions.Key<>("tls.trust", Path.class);

    /** The file holding the password of a PKCS12 {@link #TRUST} store. */
    public static final TransportOptions.Key<Path> TRUST_PASSWORD_FILE =
            new TransportOptions.Key<>("tls.trustPasswordFile", Path.class);

    /**
     * Client only: the DNS name the server's certificate must carry, in place of the URI's host (also
     * sent as SNI). dns:// discovery connects to each address of a name and verifies the name.
     */
    public static final TransportOptions.Key<String> SERVER_NAME = new TransportOptions.Key<>("tls.serverName", String.class);

    /** Listener only: refuse clients that present no certificate (needs {@link #TRUST}). Default false. */
    public static final TransportOptions.Key<Boolean> REQUIRE_CLIENT_CERTIFICATE =
            new TransportOptions.Key<>("tls.requireClientCertificate", Boolean.class);
}
