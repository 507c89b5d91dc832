package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A checkpoint image read back as a migration's parts ({@link CheckpointImageParts}): the header up to the first
 * range, the device memory in pieces at multiples of the piece size from each range's base (whatever the image's
 * chunks), and a damaged image refused.
 */
class CheckpointImagePartsTest {
    @TempDir
    Path dir;

    private static final int PIECE = 1 << 20;

    /** What a read handed on. */
    private static final class Parts implements CheckpointImageParts.Sink {
        final ByteArrayOutputStream header = new ByteArrayOutputStream();
        final ByteArrayOutputStream arrays = new ByteArrayOutputStream();
        final List<long[]> pieces = new ArrayList<>();
        final ByteArrayOutputStream memory = new ByteArrayOutputStream();

        @Override
        public void header(ByteBuffer piece) {
            byte[] b = new byte[piece.remaining()];
            piece.get(b);
            header.writeBytes(b);
        }

        @Override
        public void memory(long address, MemorySegment bytes) {
            pieces.add(new long[] {address, bytes.byteSize()});
            memory.writeBytes(bytes.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
        }

        @Override
        public void arrays(ByteBuffer piece) {
            byte[] b = new byte[piece.remaining()];
            piece.get(b);
            arrays.writeBytes(b);
        }
    }

    @Test
    void anImageReadsBackAsTheHeaderAndItsMemoryInPiecesFromEachRangesBase() throws IOException {
        byte[] contents = new byte[CheckpointImage.CHUNK_BYTES * 2 + 1000 + 3000];
        new Random(7).nextBytes(contents);
        long base = 0x7f5a00400000L, a = CheckpointImage.CHUNK_BYTES * 2 + 1000, second = base + a + 24;
        CheckpointImageTest.ArrayDevice device = new CheckpointImageTest.ArrayDevice(base, new byte[contents.length + 24]);
        System.arraycopy(contents, 0, device.bytes, 0, (int) a);
        System.arraycopy(contents, (int) a, device.bytes, (int) a + 24, 3000);
        byte[] image = CheckpointImageTest.image(device, base, a, second, 3000);
        Path file = Files.write(dir.resolve("image"), image);

        Parts parts = new Parts();
        List<long[]> memory = CheckpointImageParts.read(file, PIECE, parts);
        assertEquals(2, memory.size());
        assertArrayEquals(new long[] {base, a}, memory.get(0));
        assertArrayEquals(new long[] {second, 3000}, memory.get(1));
        assertArrayEquals(contents, parts.memory.toByteArray(), "the memory, in order");
        for (long[] p : parts.pieces) {
            long from = p[0] < second ? base : second;
            assertEquals(0, (p[0] - from) % PIECE, "a piece at a multiple of its size from its range's base");
            assertTrue(p[1] <= PIECE && p[1] > 0);
        }
        assertEquals(1, parts.pieces.stream().filter(p -> p[0] >= second).count(), "one piece for the small range");
        byte[] header = parts.header.toByteArray();
        assertArrayEquals(java.util.Arrays.copyOf(image, header.length), header, "the header is the image's start");
        assertEquals(2, ByteBuffer.wrap(header, header.length - 4, 4).getInt(), "ending with the count of ranges");
        assertEquals(CheckpointImage.MEMORY, image[header.length], "the first range follows it");
        assertEquals(0, parts.arrays.size(), "no arrays");
    }

    @Test
    void aDamagedImageIsRefusedNamingWhat() throws IOException {
        byte[] contents = new byte[5000];
        new Random(8).nextBytes(contents);
        long base = 0x7f5a00400000L;
        byte[] image = CheckpointImageTest.image(new CheckpointImageTest.ArrayDevice(base, contents), base, contents.length);
        byte[] flipped = image.clone();
        flipped[flipped.length - 8 - 4 - 100] ^= 1; // a byte of the chunk's data
        IOException bad = assertThrows(IOException.class, () -> CheckpointImageParts.read(
                Files.write(dir.resolve("flipped"), flipped), PIECE, new Parts()));
        assertTrue(bad.getMessage().contains("does not match its hash"), bad.getMessage());
        byte[] end = image.clone();
        end[end.length - 1] = 'X';
        IOException noEnd = assertThrows(IOException.class, () -> CheckpointImageParts.read(
                Files.write(dir.resolve("end"), end), PIECE, new Parts()));
        assertTrue(noEnd.getMessage().contains("bad end mark"), noEnd.getMessage());
        IOException cut = assertThrows(IOException.class, () -> CheckpointImageParts.read(
                Files.write(dir.resolve("cut"), java.util.Arrays.copyOf(image, image.length - 20)), PIECE, new Parts()));
        assertTrue(cut.getMessage().contains("truncated"), cut.getMessage());
    }
}
