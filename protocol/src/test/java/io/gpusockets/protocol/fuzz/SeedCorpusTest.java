package io.gpusockets.protocol.fuzz;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The committed seed corpus of {@link WireDecoderFuzzTest} is what {@link WireSeeds} makes from the
 * current encoders (so a change of the wire format cannot leave the fuzzer starting from stale frames).
 * With {@code -Dgpusockets.fuzz.writeSeeds=true} it rewrites the seed files instead of checking them.
 */
public class SeedCorpusTest {
    static final Path INPUTS = Path.of("src/test/resources/io/gpusockets/protocol/fuzz/WireDecoderFuzzTestInputs");

    @Test
    void committedSeedsAreTheGeneratedOnes() throws IOException {
        check(INPUTS.resolve("frames"), WireSeeds.frames());
        check(INPUTS.resolve("requestCodecs"), WireSeeds.requestCodecs());
    }

    /** Checks (or with gpusockets.fuzz.writeSeeds, writes) {@code seeds} in {@code dir}. */
    public static void check(Path dir, Map<String, byte[]> seeds) throws IOException {
        boolean write = Boolean.getBoolean("gpusockets.fuzz.writeSeeds");
        for (Map.Entry<String, byte[]> e : seeds.entrySet()) {
            Path file = dir.resolve(e.getKey());
            if (write) {
                Files.createDirectories(dir);
                Files.write(file, e.getValue());
            } else {
                assertTrue(Files.isRegularFile(file), file + " missing: run with -Dgpusockets.fuzz.writeSeeds=true");
                assertArrayEquals(e.getValue(), Files.readAllBytes(file), file + " is stale: run with -Dgpusockets.fuzz.writeSeeds=true");
            }
        }
    }
}
