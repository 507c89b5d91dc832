package io.gpusockets.transport.tcp;

import io.gpusockets.protocol.transport.TlsOptions;
import io.gpusockets.protocol.transport.TransportOptions;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.Collections;
import java.util.Optional;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;

/**
 * Builds the JDK {@link SSLContext} of each end from {@link TlsOptions}: key store (PKCS12), trust (PEM
 * or PKCS12), whether client certificates are asked for. Every failure names the file and the option.
 */
final class TlsContexts {
    private TlsContexts() {
    }

    /** Whether a listener asks clients for a certificate: not at all, verified when presented, or required. */
    enum ClientAuth { NONE, WANT, NEED }

    /** The listener's context; its certificate ({@link TlsOptions#KEY_STORE}) is required. */
    static SSLContext server(TransportOptions options) throws IOException {
        if (options.get(TlsOptions.KEY_STORE).isEmpty()) {
            throw new IllegalArgumentException("a tls:// listener needs its certificate and key: option "
                    + TlsOptions.KEY_STORE + " (gpusockets backend --tls-key-store FILE.p12)");
        }
        clientAuth(options);
        return context(keyManagers(options), trustManagers(options).orElse(null));
    }

    /** The client's context: trust from {@link TlsOptions#TRUST} (else the JDK's CAs), a client certificate if given. */
    static SSLContext client(TransportOptions options) throws IOException {
        if (options.get(TlsOptions.REQUIRE_CLIENT_CERTIFICATE).orElse(false)) {
            throw new IllegalArgumentException(TlsOptions.REQUIRE_CLIENT_CERTIFICATE + " is a listener's option");
        }
        KeyManager[] keys = options.get(TlsOptions.KEY_STORE).isPresent() ? keyManagers(options) : null;
        return context(keys, trustManagers(options).orElse(null));
    }

    /** What a context made from {@code options} depends on: the options and each file's size and modification time. */
    static Object fingerprint(TransportOptions options) {
        java.util.List<Object> key = new java.util.ArrayList<>();
        key.add(options);
        for (TransportOptions.Key<Path> k : java.util.List.of(TlsOptions.KEY_STORE, TlsOptions.KEY_STORE_PASSWORD_FILE,
                TlsOptions.TRUST, TlsOptions.TRUST_PASSWORD_FILE)) {
            options.get(k).ifPresent(p -> {
                try {
                    key.add(Files.getLastModifiedTime(p));
                    key.add(Files.size(p));
                } catch (IOException e) {
                    key.add(e.toString()); // unreadable now: building the context reports it
                }
            });
        }
        return key;
    }

    static ClientAuth clientAuth(TransportOptions options) {
        boolean require = options.get(TlsOptions.REQUIRE_CLIENT_CERTIFICATE).orElse(false);
        if (options.get(TlsOptions.TRUST).isEmpty()) {
            if (require) {
                throw new IllegalArgumentException(TlsOptions.REQUIRE_CLIENT_CERTIFICATE + " needs the CA that signs client"
                        + " certificates: option " + TlsOptions.TRUST + " (gpusockets backend --tls-client-ca FILE)");
            }
            return ClientAuth.NONE;
        }
        return require ? ClientAuth.NEED : ClientAuth.WANT;
    }

    private static SSLContext context(KeyManager[] keys, TrustManager[] trust) throws IOException {
        try {
            SSLContext context = SSLContext.getInstance(TlsConnection.PROTOCOL);
            context.init(keys, trust, null);
            return context;
        } catch (GeneralSecurityException e) {
            throw new IOException("cannot set up TLS: " + e.getMessage(), e);
        }
    }

    private static KeyManager[] keyManagers(TransportOptions options) throws IOException {
        Path file = options.get(TlsOptions.KEY_STORE).orElseThrow();
        char[] password = password(options.get(TlsOptions.KEY_STORE_PASSWORD_FILE));
        KeyStore store = pkcs12(file, password, TlsOptions.KEY_STORE);
        try {
            if (Collections.list(store.aliases()).stream().noneMatch(a -> isKey(store, a))) {
                throw new IOException(TlsOptions.KEY_STORE + " " + file + " holds no private key");
            }
            KeyManagerFactory f = KeyManagerFactory.getInstance("PKIX");
            f.init(store, password);
            return f.getKeyManagers();
        } catch (GeneralSecurityException e) {
            throw new IOException("cannot use the key in " + TlsOptions.KEY_STORE + " " + file + ": " + e.getMessage(), e);
        }
    }

    private static Optional<TrustManager[]> trustManagers(TransportOptions options) throws IOException {
        Optional<Path> given = options.get(TlsOptions.TRUST);
        if (given.isEmpty()) {
            return Optional.empty();
        }
        Path file = given.get();
        byte[] bytes = read(file, TlsOptions.TRUST);
        KeyStore store;
        try {
            if (new String(bytes, 0, Math.min(bytes.length, 4096), StandardCharsets.US_ASCII).contains("-----BEGIN CERTIFICATE")) {
                store = KeyStore.getInstance("PKCS12");
                store.load(null, null);
                int i = 0;
                for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(new ByteArrayInputStream(bytes))) {
                    store.setCertificateEntry("ca-" + i++, c);
                }
            } else {
                // without its password a PKCS12 store still loads, unchecked, but shows no certificates: said below
                Optional<Path> passwordFile = options.get(TlsOptions.TRUST_PASSWORD_FILE);
                store = pkcs12(file, passwordFile.isPresent() ? password(passwordFile) : null, TlsOptions.TRUST);
            }
            if (Collections.list(store.aliases()).stream().noneMatch(a -> isCertificate(store, a))) {
                throw new IOException(TlsOptions.TRUST + " " + file + " holds no certificate (a PKCS12 trust store"
                        + " shows its certificates only with its password: " + TlsOptions.TRUST_PASSWORD_FILE + ")");
            }
            TrustManagerFactory f = TrustManagerFactory.getInstance("PKIX");
            f.init(store);
            return Optional.of(f.getTrustManagers());
        } catch (GeneralSecurityException e) {
            throw new IOException("cannot read certificates from " + TlsOptions.TRUST + " " + file + ": " + e.getMessage(), e);
        }
    }

    private static KeyStore pkcs12(Path file, char[] password, TransportOptions.Key<Path> option) throws IOException {
        try (InputStream in = new ByteArrayInputStream(read(file, option))) {
            KeyStore store = KeyStore.getInstance("PKCS12");
            store.load(in, password);
            return store;
        } catch (IOException | GeneralSecurityException e) {
            throw new IOException("cannot read " + option + " " + file + " as PKCS12: " + e.getMessage()
                    + (e.getCause() instanceof java.security.UnrecoverableKeyException ? " (wrong password?)" : ""), e);
        }
    }

    private static byte[] read(Path file, TransportOptions.Key<Path> option) throws IOException {
        try {
            return Files.readAllBytes(file);
        } catch (IOException e) {
            throw new IOException("cannot read " + option + " " + file + ": " + e, e);
        }
    }

    /** The first line of the file, white space stripped; no file: an empty password. */
    private static char[] password(Optional<Path> file) throws IOException {
        if (file.isEmpty()) {
            return new char[0];
        }
        String text;
        try {
            text = Files.readString(file.get());
        } catch (IOException e) {
            throw new IOException("cannot read the password file " + file.get() + ": " + e, e);
        }
        int nl = text.indexOf('\n');
        return (nl >= 0 ? text.substring(0, nl) : text).strip().toCharArray();
    }

    private static boolean isKey(KeyStore store, String alias) {
        try {
            return store.isKeyEntry(alias);
        } catch (GeneralSecurityException e) {
            return false;
        }
    }

    private static boolean isCertificate(KeyStore store, String alias) {
        try {
            return store.isCertificateEntry(alias) || store.getCertificate(alias) != null;
        } catch (GeneralSecurityException e) {
            return false;
        }
    }
}
