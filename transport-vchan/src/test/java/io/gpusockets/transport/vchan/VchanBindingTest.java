package io.gpusockets.transport.vchan;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The libxenvchan binding against the real library (Debian libxenmisc4.17; .ci/run installs it). Without
 * Xen (no /dev/xen, no xenstore) connecting and listening must fail with a clear IOException, not crash.
 * Skipped, with the reason, only where the library is not installed.
 */
@Timeout(30)
class VchanBindingTest {
    private Libxenvchan lib;

    @BeforeEach
    void requireLibrary() {
        try {
            lib = Libxenvchan.load();
        } catch (IOException e) {
            Assumptions.abort("libxenvchan is not installed here: " + e.getMessage());
        }
    }

    @Test
    void loadsTheRealLibraryAndResolvesEverySymbolItUses() {
        assertTrue(Libxenvchan.LIBRARY_NAMES.contains(lib.libraryName), lib.libraryName);
        SymbolLookup l = SymbolLookup.libraryLookup(lib.libraryName, Arena.global());
        List<String> missing = Libxenvchan.SYMBOLS.stream().filter(s -> l.find(s).isEmpty()).toList();
        assertTrue(missing.isEmpty(), "missing symbols: " + missing);
        assertTrue(Libxenvchan.SYMBOLS.size() == 12, "the binding's symbol list");
    }

    @Test
    void connectWithoutXenFailsWithAClearIOException() {
        Assumptions.assumeFalse(Files.exists(Path.of("/dev/xen/evtchn")), "this machine runs Xen");
        TransportUri uri = TransportUri.parse("vchan://0/local/domain/0/data/gpusockets-test");
        IOException e = assertThrows(IOException.class, () -> new VchanTransport().connect(uri, Duration.ofSeconds(1)));
        assertTrue(e.getMessage().contains(uri.toString()) && e.getMessage().contains("libxenvchan_client_init failed"),
                e.getMessage());
    }

    @Test
    void listenWithoutXenFailsWithAClearIOException() {
        Assumptions.assumeFalse(Files.exists(Path.of("/dev/xen/evtchn")), "this machine runs Xen");
        TransportUri uri = TransportUri.parse("vchan://5/local/domain/0/data/gpusockets-test");
        IOException e = assertThrows(IOException.class, () -> new VchanTransport().listen(uri));
        assertTrue(e.getMessage().contains(uri.toString()) && e.getMessage().contains("libxenvchan_server_init failed"),
                e.getMessage());
    }
}
