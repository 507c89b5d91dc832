package io.gpusockets.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import org.junit.jupiter.api.Test;

class TransportsLookupTest {

    @Test
    void serviceLoaderFindsTheSocketTransportForBothSchemes() {
        var tcp = Transports.forUri(TransportUri.parse("tcp://127.0.0.1:1"));
        var unix = Transports.forUri(TransportUri.parse("unix:///tmp/x.sock"));
        assertInstanceOf(SocketTransport.class, tcp);
        assertSame(tcp, unix, "one provider instance serves both schemes");
        assertTrue(Transports.byScheme().keySet().containsAll(tcp.schemes()));
    }

    @Test
    void unknownSchemeIsReportedByNameWithWhatIsAvailable() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Transports.forUri(TransportUri.parse("carrier-pigeon://coop")));
        assertTrue(e.getMessage().contains("carrier-pigeon") && e.getMessage().contains("tcp, tls, unix"), e.getMessage());
    }
}
