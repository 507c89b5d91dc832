package io.gpusockets.protocol.images;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;

/**
 * The zstd decoder on frames the reference zstd command line (1.5, {@code zstd -19}) wrote for
 * periodic text, where the first match uses one of the frame's initial repeat offsets (1, 4, 8);
 * nvcc's frames are covered by FatbinImageTest.
 */
class ZstdTest {
    static byte[] frame(String hex) {
        return HexFormat.of().parseHex(hex);
    }

    static void expands(String text, String hex) throws Zstd.Malformed {
        byte[] expected = text.getBytes(StandardCharsets.US_ASCII);
        assertArrayEquals(expected, Zstd.decompress(frame(hex), expected.length), text.substring(0, 8));
    }

    @Test
    void expandsFramesWhoseMatchesUseTheInitialRepeatOffsets() throws Zstd.Malformed {
        expands("abcd".repeat(50), "28b52ffd20c85d00002061626364010041d42502");          // offset 4
        expands("wxyz1234".repeat(50), "28b52ffd6090007d0000407778797a31323334010085d5cb05"); // offset 8
        expands("q".repeat(100), "28b52ffd24643d00000871010020054247647f82");             // offset 1, with checksum
    }

    @Test
    void refusesAFrameOfAnotherSizeOrCutShort() {
        String hex = "28b52ffd20c85d00002061626364010041d42502";
        assertThrows(Zstd.Malformed.class, () -> Zstd.decompress(frame(hex), 199));
        assertThrows(Zstd.Malformed.class, () -> Zstd.decompress(frame(hex), 201));
        for (int cut = 0; cut < hex.length(); cut += 2) {
            String shorter = hex.substring(0, cut);
            assertThrows(Zstd.Malformed.class, () -> Zstd.decompress(frame(shorter), 200), "cut at " + cut / 2);
        }
    }
}
