package io.gpusockets.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TestCertificates;
import io.gpusockets.protocol.transport.TlsOptions;
import io.gpusockets.protocol.transport.TransportOptions;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLSocket;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * tls:// beyond the conformance suite: each handshake failure (untrusted CA, wrong host name, expired,
 * untrusted or missing client certificate, plaintext on either end) is an exception with a message that
 * says what to fix, on both ends and within a bound; client certificates become the peer's identity; a peer
 * that dies without close_notify reads as the end of the stream between frames and as a cut within one.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TlsTransportTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(20);
    private static TestCertificates certs;
    private final TlsTransport tls = new TlsTransport();
    private final ExecutorService threads = Executors.newVirtualThreadPerTaskExecutor();

    @BeforeAll
    static void makeCertificates() throws IOException {
        certs = TestCertificates.get();
    }

    @AfterEach
    void stopThreads() {
        threads.shutdownNow();
    }

    /** The server end's first read: where an accepted connection reports how its handshake went. */
    private Future<Connection> acceptAndRead(Listener listener, ByteBuffer into) {
        return threads.submit(() -> {
            Connection s = listener.accept();
            try {
                s.readFully(into);
                return s;
            } catch (IOException e) {
                s.close();
                throw e;
            }
        });
    }

    private static Throwable failureOf(Future<?> f) throws Exception {
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS));
        return e.getCause();
    }

    /** Connects and, if the handshake let it, reads: a client-certificate refusal reaches the client as an alert. */
    private IOException clientFailure(TransportUri uri, TransportOptions options) {
        return assertThrows(IOException.class, () -> {
            try (Connection c = tls.connect(uri, TIMEOUT, options)) {
                c.write(ByteBuffer.allocate(1));
                c.readFully(ByteBuffer.allocate(1));
            }
        });
    }

    @Test
    void clientCertificateSubjectBecomesThePeersIdentity() throws Exception {
        try (Listener l = tls.listen(TransportUri.parse("tls://127.0.0.1:0"), certs.serverOptions(true, true))) {
            Future<Connection> server = acceptAndRead(l, ByteBuffer.allocate(3));
            try (Connection c = tls.connect(l.address(), TIMEOUT, certs.clientOptions(certs.clientKeyStore()))) {
                c.write(ByteBuffer.wrap(new byte[] {1, 2, 3}));
                try (Connection s = server.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                    assertEquals(Optional.of(TestCertificates.CLIENT_SUBJECT), s.peer().certificate());
                    assertEquals("tls", s.peer().transport());
                    assertTrue(s.peer().description().startsWith("tls://127.0.0.1:"), s.peer().description());
                }
            }
        }
    }

    /** The second connection of a client resumes its TLS session; the server must still know whose it is. */
    @Test
    void aClientConnectingAgainKeepsItsCertificateIdentity() throws Exception {
        try (Listener l = tls.listen(TransportUri.parse("tls://127.0.0.1:0"), certs.serverOptions(true, true))) {
            for (int i = 0; i < 3; i++) {
                Future<Connection> server = acceptAndRead(l, ByteBuffer.allocate(1));
                try (Connection c = tls.connect(l.address(), TIMEOUT, certs.clientOptions(certs.clientKeyStore()))) {
                    c.write(ByteBuffer.allocate(1));
                    try (Connection s = server.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                        assertEquals(Optional.of(TestCertificates.CLIENT_SUBJECT), s.peer().certificate(), "connection " + i);
                    }
                }
            }
        }
    }

    @Test
    void clientCertificatesAreOptionalUnlessRequired() throws Exception {
        try (Listener l = tls.listen(TransportUri.parse("tls://127.0.0.1:0"), certs.serverOptions(true, false))) {
            Future<Connection> server = acceptAndRead(l, ByteBuffer.allocate(1));
            try (Connection c = tls.connect(l.address(), TIMEOUT, certs.clientOptions(null))) {
                c.write(ByteBuffer.allocate(1));
                try (Connection s = server.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                    assertEquals(Optional.empty(), s.peer().certificate());
                }
            }
        }
    }

    @Test
    void serverSignedByACaTheClientDoesNotTrustFailsOnBothEnds() throws Exception {
        try (Listener l = tls.listen(TransportUri.parse("tls://127.0.0.1:0"), certs.serverOptions(false, false))) {
            Future<Connection> server = acceptAndRead(l, ByteBuffer.allocate(1));
            IOException client = clientFailure(l.address(), TransportOptions.NONE.with(TlsOptions.TRUST, certs.otherCaPem()));
            assertTrue(client.getMessage().contains(l.address().toString()), client.getMessage());
            assertTrue(client.getMessage().contains("not signed by a CA this end trusts"), client.getMessage());
            assertInstanceOf(SSLException.class, failureOf(server));
        }
    }

    @Test
    void aHostTheServerCertificateDoesNotNameFailsHostnameVerification() throws Exception {
        try (Listener l = tls.listen(TransportUri.parse("tls://0.0.0.0:0"), certs.serverOptions(false, false))) {
            int port = l.address().port();
            Future<Connection> refused = acceptAndRead(l, ByteBuffer.allocate(1));
            IOException e = clientFailure(TransportUri.parse("tls://127.0.0.2:" + port), certs.clientOptions(null));
            assertTrue(e.getMessage().contains("hostname verification"), e.getMessage());
            assertInstanceOf(SSLException.class, failureOf(refused));

            Future<Connection> byName = acceptAndRead(l, ByteBuffer.allocate(1));
            try (Connection c = tls.connect(TransportUri.parse("tls://localhost:" + port), TIMEOUT, certs.clientOptions(null))) {
                c.write(ByteBuffer.allocate(1));
                byName.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS).close();
            }
        }
    }

    /** dns:// discovery connects to an address and verifies the name it resolved (TlsOptions.SERVER_NAME). */
    @Test
    void aServerNameOptionIsVerifiedInsteadOfTheAddress() throws Exception {
        try (Listener l = tls.listen(TransportUri.parse("tls://0.0.0.0:0"), certs.serverOptions(false, false))) {
            int port = l.address().port();
            Future<Connection> byName = acceptAndRead(l, ByteBuffer.allocate(1));
            TransportOptions named = certs.clientOptions(null).with(TlsOptions.SERVER_NAME, "localhost");
            try (Connection c = tls.connect(TransportUri.parse("tls://127.0.0.2:" + port), TIMEOUT, named)) {
                c.write(ByteBuffer.allocate(1));
                byName.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS).close();
            }

            Future<Connection> refused = acceptAndRead(l, ByteBuffer.allocate(1));
            IOException e = clientFailure(TransportUri.parse("tls://127.0.0.1:" + port),
                    certs.clientOptions(null).with(TlsOptions.SERVER_NAME, "gpusockets-backend.example"));
            assertTrue(e.getMessage().contains("hostname verification"), e.getMessage());
            assertInstanceOf(SSLException.class, failureOf(refused));
        }
    }

    @Test
    void expiredClientCertificateIsRefusedOnBothEnds() throws Exception {
        assertClientCertificateRefused(certs.expiredClientKeyStore(), "validity");
    }

    /**
     * The server names the CAs it trusts in its CertificateRequest, and the JDK client then withholds a
     * certificate none of them signed: the server sees no certificate, and refuses.
     */
    @Test
    void clientCertificateFromAnUntrustedCaIsRefusedOnBothEnds() throws Exception {
        assertClientCertificateRefused(certs.strangerKeyStore(), "requires a client certificate");
    }

    @Test
    void clientWithoutACertificateIsRefusedWhenOneIsRequired() throws Exception {
        assertClientCertificateRefused(null, "requires a client certificate");
    }

    private void assertClientCertificateRefused(Path keyStore, String serverSays) throws Exception {
        try (Listener l = tls.listen(TransportUri.parse("tls://127.0.0.1:0"), certs.serverOptions(true, true))) {
            Future<Connection> server = acceptAndRead(l, ByteBuffer.allocate(1));
            IOException client = clientFailure(l.address(), certs.clientOptions(keyStore));
            assertInstanceOf(SSLException.class, client, client.toString());
            Throwable refusal = failureOf(server);
            assertInstanceOf(SSLException.class, refusal);
            assertTrue(refusal.getMessage().contains(serverSays), refusal.getMessage());
        }
    }

    @Test
    void plaintextClientOnATlsPortIsToldSoAndDisconnected() throws Exception {
        try (Listener l = tls.listen(TransportUri.parse("tls://127.0.0.1:0"), certs.serverOptions(false, false))) {
            Future<Connection> server = acceptAndRead(l, ByteBuffer.allocate(1));
            TransportUri plain = TransportUri.parse("tcp://" + l.address().rest());
            try (Connection c = Transports.connect(plain, TIMEOUT)) {
                c.write(ByteBuffer.allocate(32)); // a frame header, as a tcp:// frontend would send
                Throwable refusal = failureOf(server);
                assertTrue(refusal.getMessage().contains("does not speak TLS"), refusal.getMessage());
                // the plaintext end sees the connection end (after an alert it cannot parse), not a hang
                assertThrows(IOException.class, () -> {
                    while (true) {
                        c.readFully(ByteBuffer.allocate(1));
                    }
                });
            }
        }
    }

    @Test
    void tlsClientOnAPlaintextPortIsToldSo() throws Exception {
        try (Listener plain = Transports.listen(TransportUri.parse("tcp://127.0.0.1:0"))) {
            Future<?> server = threads.submit(() -> {
                try (Connection s = plain.accept()) {
                    s.write(ByteBuffer.allocate(32)); // a SERVER_HELLO-sized frame, in the clear
                    s.readFully(ByteBuffer.allocate(1 << 16));
                }
                return null;
            });
            IOException e = clientFailure(TransportUri.parse("tls://" + plain.address().rest()), certs.clientOptions(null));
            assertTrue(e.getMessage().contains("does not speak TLS"), e.getMessage());
            assertInstanceOf(IOException.class, failureOf(server));
        }
    }

    @Test
    void peerDeathWithoutCloseNotifyIsAnEndBetweenFramesAndACutWithinOne() throws Exception {
        for (int extra : new int[] {0, 5}) {
            try (Listener l = tls.listen(TransportUri.parse("tls://127.0.0.1:0"), certs.serverOptions(false, false))) {
                Future<Connection> server = acceptAndRead(l, ByteBuffer.allocate(8));
                // a JDK SSLSocket whose TCP socket is closed under it: no close_notify, as when a process dies
                Socket raw = new Socket();
                raw.connect(new InetSocketAddress("127.0.0.1", l.address().port()), 5000);
                SSLSocket s = (SSLSocket) TlsContexts.client(certs.clientOptions(null)).getSocketFactory()
                        .createSocket(raw, "127.0.0.1", l.address().port(), false);
                s.setEnabledProtocols(new String[] {"TLSv1.3"});
                OutputStream out = s.getOutputStream();
                out.write(new byte[8 + extra]);
                out.flush();
                try (Connection c = server.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                    raw.close();
                    IOException end = assertThrows(IOException.class, () -> c.readFully(ByteBuffer.allocate(10)));
                    assertEquals(extra == 0, end instanceof EOFException, end.toString());
                }
            }
        }
    }

    @Test
    void closeNotifyIsAnEndOfStreamAfterTheLastByte() throws Exception {
        try (Listener l = tls.listen(TransportUri.parse("tls://127.0.0.1:0"), certs.serverOptions(false, false))) {
            Future<Connection> server = acceptAndRead(l, ByteBuffer.allocate(4));
            Connection c = tls.connect(l.address(), TIMEOUT, certs.clientOptions(null));
            c.write(ByteBuffer.allocate(4));
            c.close();
            try (Connection s = server.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                assertThrows(EOFException.class, () -> s.readFully(ByteBuffer.allocate(1)));
            }
        }
    }

    @Test
    void listenerWithoutACertificateIsAUsageError() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> tls.listen(TransportUri.parse("tls://127.0.0.1:0")));
        assertTrue(e.getMessage().contains("--tls-key-store"), e.getMessage());
        IllegalArgumentException noCa = assertThrows(IllegalArgumentException.class, () -> tls.listen(
                TransportUri.parse("tls://127.0.0.1:0"), certs.serverOptions(false, false).with(TlsOptions.REQUIRE_CLIENT_CERTIFICATE, true)));
        assertTrue(noCa.getMessage().contains("--tls-client-ca"), noCa.getMessage());
    }

    @Test
    void wrongKeyStorePasswordNamesTheFile() throws Exception {
        Path wrong = java.nio.file.Files.createTempFile("wrong", ".pw");
        try {
            java.nio.file.Files.writeString(wrong, "not-the-password\n");
            IOException e = assertThrows(IOException.class, () -> tls.listen(TransportUri.parse("tls://127.0.0.1:0"),
                    certs.serverOptions(false, false).with(TlsOptions.KEY_STORE_PASSWORD_FILE, wrong)));
            assertTrue(e.getMessage().contains(certs.serverKeyStore().toString()), e.getMessage());
        } finally {
            java.nio.file.Files.delete(wrong);
        }
    }

    @Test
    void pkcs12TrustStoreWorksWithItsPasswordAndSaysSoWithout() throws Exception {
        TransportOptions noPassword = TransportOptions.NONE.with(TlsOptions.TRUST, certs.caTrustStore());
        IOException e = assertThrows(IOException.class, () -> tls.connect(TransportUri.parse("tls://127.0.0.1:1"), TIMEOUT, noPassword));
        assertTrue(e.getMessage().contains(TlsOptions.TRUST_PASSWORD_FILE.name()), e.getMessage());
        try (Listener l = tls.listen(TransportUri.parse("tls://127.0.0.1:0"), certs.serverOptions(false, false))) {
            Future<Connection> server = acceptAndRead(l, ByteBuffer.allocate(1));
            try (Connection c = tls.connect(l.address(), TIMEOUT, noPassword.with(TlsOptions.TRUST_PASSWORD_FILE, certs.passwordFile()))) {
                c.write(ByteBuffer.allocate(1));
                server.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS).close();
            }
        }
    }

    @Test
    void connectGivesUpWhenTheServerNeverAnswersTheHandshake() throws Exception {
        // a plain listener that accepts and stays silent: the TLS client waits for a ServerHello that never comes
        try (Listener silent = Transports.listen(TransportUri.parse("tcp://127.0.0.1:0"))) {
            Future<Connection> held = threads.submit(silent::accept);
            long start = System.nanoTime();
            IOException e = assertThrows(IOException.class, () -> tls.connect(
                    TransportUri.parse("tls://" + silent.address().rest()), Duration.ofMillis(500), certs.clientOptions(null)));
            Duration took = Duration.ofNanos(System.nanoTime() - start);
            assertInstanceOf(java.net.SocketTimeoutException.class, e, e.toString());
            assertTrue(e.getMessage().contains("did not complete within"), e.getMessage());
            assertTrue(took.compareTo(Duration.ofSeconds(10)) < 0, "took " + took);
            held.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS).close();
        }
    }

    @Test
    void tcpAndTlsAreDifferentSchemesOfTheSameModule() {
        assertInstanceOf(TlsTransport.class, Transports.forUri(TransportUri.parse("tls://127.0.0.1:1")));
        assertFalse(Transports.forUri(TransportUri.parse("tcp://127.0.0.1:1")) instanceof TlsTransport);
    }
}
