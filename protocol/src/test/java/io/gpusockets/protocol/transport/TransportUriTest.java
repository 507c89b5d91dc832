package io.gpusockets.protocol.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class TransportUriTest {

    @ParameterizedTest(name = "{0}")
    @CsvSource({
            "tcp://127.0.0.1:7070,   127.0.0.1,  7070",
            "tcp://localhost:0,      localhost,  0",
            "tcp://gpu-host.lan:65535, gpu-host.lan, 65535",
            "tcp://[::1]:7070,       ::1,        7070",
            "tcp://[fe80::1%eth0]:1, fe80::1%eth0, 1",
            "vsock://3:5000,         3,          5000",
            "vsock://any:5000,       any,        5000",
    })
    void splitsHostAndPort(String text, String host, int port) {
        TransportUri uri = TransportUri.parse(text);
        assertEquals(host, uri.host());
        assertEquals(port, uri.port());
    }

    @Test
    void lowerCasesTheSchemeAndKeepsTheRest() {
        TransportUri uri = TransportUri.parse("TCP://Host:1");
        assertEquals("tcp", uri.scheme());
        assertEquals("Host:1", uri.rest());
        assertEquals("tcp://Host:1", uri.toString());
    }

    @Test
    void unixAddressIsAnAbsolutePath() {
        assertEquals("/run/gpusockets/backend.sock", TransportUri.parse("unix:///run/gpusockets/backend.sock").path());
    }

    @Test
    void ringAndVchanKeepTheirAddressAsRest() {
        assertEquals("demo.ring-1_a", TransportUri.parse("ring://demo.ring-1_a").rest());
        TransportUri vchan = TransportUri.parse("vchan://7/local/domain/7/data/gpusockets");
        assertEquals("vchan", vchan.scheme());
        assertEquals("7/local/domain/7/data/gpusockets", vchan.rest());
    }

    @Test
    void valueSemanticsAndWithRest() {
        TransportUri a = TransportUri.parse("tcp://h:1");
        assertEquals(a, TransportUri.parse("TCP://h:1"));
        assertEquals(a.hashCode(), TransportUri.parse("TCP://h:1").hashCode());
        assertNotEquals(a, TransportUri.parse("tcp://H:1"));
        assertEquals(TransportUri.parse("tcp://h:2"), a.withRest("h:2"));
        assertEquals(a, TransportUri.parse(a.toString()));
    }

    @ParameterizedTest(name = "\"{0}\"")
    @ValueSource(strings = {"", "tcp", "tcp:/h:1", "tcp:h:1", "://h:1", "tcp://", "1tcp://h:1", "t p://h:1", "tc_p://h:1"})
    void rejectsTextThatIsNotSchemeSlashSlashRest(String text) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> TransportUri.parse(text));
        assertTrue(e.getMessage().contains("uri=" + text), e.getMessage());
    }

    @Test
    void rejectsNull() {
        assertThrows(NullPointerException.class, () -> TransportUri.parse(null));
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {
            "tcp://h", "tcp://h:", "tcp://h:x", "tcp://h:65536", "tcp://h:-1", "tcp://h:+80", "tcp://h:99999999999",
            "tcp://h:８０", "tcp://[::1]",
    })
    void rejectsBadPorts(String text) {
        TransportUri uri = TransportUri.parse(text);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, uri::port);
        assertTrue(e.getMessage().contains(text), e.getMessage());
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"tcp://:80", "tcp://[]:80", "tcp://::1:80", "tcp://[::1:80", "tcp://::1]:80", "tcp://h]:80"})
    void rejectsBadHosts(String text) {
        TransportUri uri = TransportUri.parse(text);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, uri::host);
        assertTrue(e.getMessage().contains(text), e.getMessage());
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"unix://relative/path.sock", "unix://~/x.sock"})
    void rejectsRelativeUnixPaths(String text) {
        assertThrows(IllegalArgumentException.class, TransportUri.parse(text)::path);
    }
}
