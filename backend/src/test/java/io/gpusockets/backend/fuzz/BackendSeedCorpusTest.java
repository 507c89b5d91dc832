package io.gpusockets.backend.fuzz;

import io.gpusockets.protocol.fuzz.SeedCorpusTest;
import java.io.IOException;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The committed seed corpora of {@link HandshakeFuzzTest} and {@link DispatcherFuzzTest} are what
 * {@link BackendSeeds} makes (rewritten with {@code -Dgpusockets.fuzz.writeSeeds=true}).
 */
class BackendSeedCorpusTest {
    static final Path RESOURCES = Path.of("src/test/resources/io/gpusockets/backend/fuzz");

    @Test
    void committedSeedsAreTheGeneratedOnes() throws IOException {
        SeedCorpusTest.check(RESOURCES.resolve("HandshakeFuzzTestInputs/handshake"), BackendSeeds.handshakes());
        SeedCorpusTest.check(RESOURCES.resolve("DispatcherFuzzTestInputs/dispatch"), BackendSeeds.scripts());
    }
}
