package io.gpusockets.cli.doctor;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A tls:// backend's files: the key store and its password file private, the store opening with that
 * password and holding a private key whose certificate is valid now (a warning within 30 days of its
 * end); the client CA file (PEM or PKCS12) parsing, with its certificates valid.
 */
final class TlsMaterial {
    private static final Duration SOON = Duration.ofDays(30);

    private TlsMaterial() {
    }

    static List<Check> check(Path keyStore, Path passwordFile, Path clientCa, Path clientCaPasswordFile, String user) {
        List<Check> out = new ArrayList<>();
        Check storeFile = SecretFiles.check("TLS key store (--tls-key-store)", keyStore, user, null);
        out.add(storeFile);
        char[] password = new char[0];
        if (passwordFile != null) {
            Check p = SecretFiles.check("TLS key store password (--tls-key-store-password-file)", passwordFile, user, null);
            out.add(p);
            password = firstLine(passwordFile);
        }
        if (storeFile.status() != Check.Status.FAIL) {
            out.add(keyStore(keyStore, password));
        }
        if (clientCa != null) {
            out.add(clientCa(clientCa, clientCaPasswordFile == null ? null : firstLine(clientCaPasswordFile)));
        }
        return out;
    }

    private static Check keyStore(Path file, char[] password) {
        String name = "TLS server certificate";
        KeyStore store;
        try (var in = Files.newInputStream(file)) {
            store = KeyStore.getInstance("PKCS12");
            store.load(in, password);
        } catch (Exception e) {
            return Check.fail(name, "cannot open " + file + " as PKCS12: " + e.getMessage(),
                    "check --tls-key-store-password-file (first line: the store's password); keytool -list -keystore " + file
                            + " shows what it holds");
        }
        try {
            for (String alias : Collections.list(store.aliases())) {
                if (store.isKeyEntry(alias) && store.getCertificate(alias) instanceof X509Certificate c) {
                    return validity(name, "alias " + alias + ", " + c.getSubjectX500Principal().getName(), c,
                            "make a new certificate for the key store (keytool -genkeypair ... or your CA)");
                }
            }
        } catch (Exception e) {
            return Check.fail(name, "cannot read " + file + ": " + e.getMessage(), "keytool -list -keystore " + file);
        }
        return Check.fail(name, file + " holds no private key with a certificate",
                "import the server's key and certificate: openssl pkcs12 -export -inkey key.pem -in cert.pem -out " + file);
    }

    private static Check clientCa(Path file, char[] password) {
        String name = "TLS client CA (--tls-client-ca)";
        try {
            byte[] bytes = Files.readAllBytes(file);
            List<X509Certificate> certs = new ArrayList<>();
            if (new String(bytes, 0, Math.min(bytes.length, 4096), StandardCharsets.US_ASCII).contains("-----BEGIN CERTIFICATE")) {
                for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(new ByteArrayInputStream(bytes))) {
                    certs.add((X509Certificate) c);
                }
            } else {
                KeyStore s = KeyStore.getInstance("PKCS12");
                s.load(new ByteArrayInputStream(bytes), password);
                for (String a : Collections.list(s.aliases())) {
                    if (s.getCertificate(a) instanceof X509Certificate c) {
                        certs.add(c);
                    }
                }
            }
            if (certs.isEmpty()) {
                return Check.fail(name, file + " holds no certificate", "put the CA's certificate in it (PEM), or give a PKCS12"
                        + " store's password with --tls-client-ca-password-file");
            }
            for (X509Certificate c : certs) {
                Check v = validity(name, c.getSubjectX500Principal().getName(), c, "replace the expired CA certificate in " + file);
                if (v.status() != Check.Status.OK) {
                    return v;
                }
            }
            return Check.ok(name, file + ": " + certs.size() + " certificate(s), valid now");
        } catch (Exception e) {
            return Check.fail(name, "cannot read " + file + ": " + e.getMessage(), "give PEM certificates or a PKCS12 store");
        }
    }

    private static Check validity(String name, String what, X509Certificate c, String renew) {
        Instant now = Instant.now();
        Instant end = c.getNotAfter().toInstant();
        if (now.isAfter(end)) {
            return Check.fail(name, what + " expired " + end, renew);
        }
        if (now.isBefore(c.getNotBefore().toInstant())) {
            return Check.fail(name, what + " is not valid before " + c.getNotBefore().toInstant(), "check this host's clock (timedatectl)");
        }
        if (now.plus(SOON).isAfter(end)) {
            return Check.warn(name, what + " expires " + end, renew + " before then");
        }
        return Check.ok(name, what + ", valid until " + end);
    }

    private static char[] firstLine(Path file) {
        try {
            String text = Files.readString(file);
            int nl = text.indexOf('\n');
            return (nl >= 0 ? text.substring(0, nl) : text).strip().toCharArray();
        } catch (IOException e) {
            return new char[0];
        }
    }
}
