package io.gpusockets.protocol.transport;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Certificates for tls:// tests, made by the JDK's {@code keytool} in a temporary directory when first
 * asked for (once per JVM, removed at exit), so that no private key is ever committed: a test CA, a server
 * certificate for 127.0.0.1 and localhost, a client certificate signed by the CA, an expired one,  and a
 * client certificate and a CA nobody trusts. Every store is PKCS12 with the password in {@link #passwordFile()}.
 */
public final class TestCertificates {
    /** The subject of {@link #clientKeyStore()}, as {@link PeerInfo#certificate()} reports it (RFC 2253). */
    public static final String CLIENT_SUBJECT = "CN=tenant-a,O=GPUsockets test";
    private static final String PASSWORD = "test-only-password";
    private static volatile TestCertificates made;

    private final Path dir;

    private TestCertificates(Path dir) {
        this.dir = dir;
    }

    /** The certificates of this JVM, made on first use. */
    public static synchronized TestCertificates get() throws IOException {
        if (made == null) {
            Path dir = Files.createTempDirectory("gpusockets-tls");
            Runtime.getRuntime().addShutdownHook(new Thread(() -> deleteTree(dir)));
            TestCertificates c = new TestCertificates(dir);
            c.make();
            made = c;
        }
        return made;
    }

    public Path passwordFile() {
        return dir.resolve("password");
    }

    /** The CA's certificate (PEM): trust for both ends. */
    public Path caPem() {
        return dir.resolve("ca.pem");
    }

    /** The same CA as a PKCS12 trust store (needs {@link #passwordFile()}). */
    public Path caTrustStore() {
        return dir.resolve("ca-trust.p12");
    }

    /** Server certificate and key, SAN IP 127.0.0.1 and DNS localhost, signed by the CA. */
    public Path serverKeyStore() {
        return dir.resolve("server.p12");
    }

    /** Client certificate and key, subject {@link #CLIENT_SUBJECT}, signed by the CA. */
    public Path clientKeyStore() {
        return dir.resolve("client.p12");
    }

    /** A client certificate signed by the CA whose validity ended yesterday. */
    public Path expiredClientKeyStore() {
        return dir.resolve("expired.p12");
    }

    /** A self-signed client certificate: no CA anybody trusts signed it. */
    public Path strangerKeyStore() {
        return dir.resolve("stranger.p12");
    }

    /** A CA that signed neither the server nor the client certificate. */
    public Path otherCaPem() {
        return dir.resolve("other-ca.pem");
    }

    /** Options for a tls:// listener with the server certificate; {@code clientCa} asks clients for certificates. */
    public TransportOptions serverOptions(boolean clientCa, boolean requireClientCertificate) {
        TransportOptions o = TransportOptions.NONE.with(TlsOptions.KEY_STORE, serverKeyStore())
                .with(TlsOptions.KEY_STORE_PASSWORD_FILE, passwordFile());
        if (clientCa) {
            o = o.with(TlsOptions.TRUST, caPem());
        }
        return requireClientCertificate ? o.with(TlsOptions.REQUIRE_CLIENT_CERTIFICATE, true) : o;
    }

    /** Options for a client that trusts the CA and presents {@code keyStore} (null: no certificate). */
    public TransportOptions clientOptions(Path keyStore) {
        TransportOptions o = TransportOptions.NONE.with(TlsOptions.TRUST, caPem());
        return keyStore == null ? o : o.with(TlsOptions.KEY_STORE, keyStore).with(TlsOptions.KEY_STORE_PASSWORD_FILE, passwordFile());
    }

    private void make() throws IOException {
        Files.writeString(passwordFile(), PASSWORD + "\n");
        keyPair("ca.p12", "ca", "CN=GPUsockets test CA", "-ext", "bc:c");
        keytool("-exportcert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", "-file", "ca.pem");
        keytool("-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore", "ca-trust.p12");
        keyPair("other-ca.p12", "ca", "CN=Some other CA", "-ext", "bc:c");
        keytool("-exportcert", "-rfc", "-alias", "ca", "-keystore", "other-ca.p12", "-file", "other-ca.pem");
        signed("server", "CN=localhost", "ca.p12", "ca.pem", "-ext", "san=ip:127.0.0.1,dns:localhost");
        signed("client", CLIENT_SUBJECT.replace(",", ", "), "ca.p12", "ca.pem");
        signed("expired", "CN=expired tenant", "ca.p12", "ca.pem", "-startdate", "-3d", "-validity", "1");
        keyPair("stranger.p12", "stranger", "CN=stranger"); // self-signed: no CA the server trusts vouches for it
    }

    /**
     * A key pair in {@code name}.p12 whose certificate {@code caStore} signs, the chain (certificate, then
     * the CA's) imported back as the key's.
     */
    private void signed(String name, String dname, String caStore, String caPem, String... gencertArgs) throws IOException {
        keyPair(name + ".p12", name, dname);
        keytool("-certreq", "-alias", name, "-keystore", name + ".p12", "-file", name + ".csr");
        List<String> gencert = new ArrayList<>(List.of("-gencert", "-rfc", "-alias", "ca", "-keystore", caStore,
                "-infile", name + ".csr", "-outfile", name + ".pem"));
        gencert.addAll(List.of(gencertArgs));
        keytool(gencert.toArray(String[]::new));
        Files.writeString(dir.resolve(name + "-chain.pem"),
                Files.readString(dir.resolve(name + ".pem")) + Files.readString(dir.resolve(caPem)));
        keytool("-importcert", "-noprompt", "-alias", name, "-file", name + "-chain.pem", "-keystore", name + ".p12");
    }

    private void keyPair(String store, String alias, String dname, String... extra) throws IOException {
        List<String> args = new ArrayList<>(List.of("-genkeypair", "-alias", alias, "-keyalg", "EC", "-groupname", "secp256r1",
                "-dname", dname, "-validity", "30", "-keystore", store));
        args.addAll(List.of(extra));
        keytool(args.toArray(String[]::new));
    }

    private void keytool(String... args) throws IOException {
        // a short-lived JVM each: C1 only and the serial collector halve its start on a busy machine
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "keytool").toString(),
                "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC"));
        cmd.addAll(List.of(args));
        cmd.addAll(List.of("-storetype", "PKCS12", "-storepass", PASSWORD));
        Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
        try {
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw new IOException("keytool " + String.join(" ", args) + " failed: " + out);
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", e);
        }
    }

    private static void deleteTree(Path dir) {
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        } catch (IOException ignored) {
            // a temp dir left behind
        }
    }
}
