package io.gpusockets.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TestCertificates;
import io.gpusockets.protocol.transport.Transport;
import io.gpusockets.protocol.transport.TransportConformanceSuite;
import io.gpusockets.protocol.transport.TransportOptions;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The shared conformance suite over tls://, with client certificates required, as a multi-tenant backend runs it. */
class TlsConformanceTest extends TransportConformanceSuite {
    /**
     * A few handshakes before the suite: a cold JVM runs its first ones interpreted (over a second each on a
     * loaded two-core machine), and the suite's 64 concurrent connections would otherwise spend their
     * per-call budget on the JIT rather than on the transport.
     */
    @BeforeAll
    static void warmUpTheHandshake() throws Exception {
        TestCertificates certs = TestCertificates.get();
        Transport tls = configured(certs.serverOptions(true, true), certs.clientOptions(certs.clientKeyStore()));
        try (Listener l = tls.listen(TransportUri.parse("tls://127.0.0.1:0"))) {
            for (int i = 0; i < 20; i++) {
                CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
                    try {
                        return l.accept();
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                });
                try (Connection c = tls.connect(l.address(), Duration.ofSeconds(30)); Connection s = accepted.get()) {
                    c.write(ByteBuffer.allocate(1));
                    s.readFully(ByteBuffer.allocate(1));
                }
            }
        }
    }

    /** Bound on connect plus handshake in this suite, and on each of its 64 concurrent connections' round trip. */
    private static final Duration HANDSHAKE_BUDGET = Duration.ofSeconds(30);

    /** 64 concurrent handshakes with certificates on both sides: CPU-bound, seconds on a loaded two-core machine. */
    @Override
    protected Duration connectionSetUpBudget() {
        return HANDSHAKE_BUDGET;
    }

    @Override
    protected TransportUri listenUri() {
        return TransportUri.parse("tls://127.0.0.1:0");
    }

    @Override
    protected Transport transportFor(TransportUri uri) {
        try {
            TestCertificates certs = TestCertificates.get();
            return configured(certs.serverOptions(true, true), certs.clientOptions(certs.clientKeyStore()));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** tls:// whose plain connect and listen use these options, for the suite's calls. */
    static Transport configured(TransportOptions server, TransportOptions client) {
        TlsTransport tls = new TlsTransport();
        return new Transport() {
            @Override
            public Set<String> schemes() {
                return tls.schemes();
            }

            /**
             * The suite's connect timeout (5 s) bounds connect plus handshake here; 64 handshakes at once with
             * certificates on both sides are CPU-bound and take longer than that on a loaded two-core machine.
             */
            @Override
            public Connection connect(TransportUri uri, Duration timeout) throws IOException {
                return tls.connect(uri, timeout.compareTo(HANDSHAKE_BUDGET) < 0 ? HANDSHAKE_BUDGET : timeout, client);
            }

            @Override
            public Listener listen(TransportUri uri) throws IOException {
                return tls.listen(uri, server);
            }
        };
    }

    @Test
    void theServerSeesTheVerifiedClientCertificateAfterTheHandshake() throws Exception {
        Link link = link();
        link.client().send(0x0C0FFEE0, 0, 1, 1, ByteBuffer.allocate(10));
        receive(link.server());
        assertEquals(Optional.of(TestCertificates.CLIENT_SUBJECT), link.server().connection().peer().certificate());
        assertEquals("tls", link.server().connection().peer().transport());
        assertEquals(Optional.empty(), link.client().connection().peer().certificate(), "the server's certificate is not a tenant");
    }
}
