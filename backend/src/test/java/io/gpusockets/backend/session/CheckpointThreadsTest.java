package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link CheckpointContents} moving contents to and from a file with several threads: the image is byte for byte the
 * one the single-threaded pipeline writes (mapped and positional writes alike), reads back with several threads into
 * the same bytes, and a damaged, truncated or failing move fails whole, naming the cause.
 */
class CheckpointThreadsTest {
    /** Bytes standing for the header, ahead of the contents (a restore reads the contents from where it ended). */
    private static final byte[] HEADER = "a header of some length, not a multiple of 8".getBytes();

    @TempDir
    Path dir;

    /** Device memory over a byte array from {@code base}; safe for several threads; records the chunks copied in. */
    private static final class Memory implements CheckpointContents.Device {
        final long base;
        final byte[] bytes;
        final List<long[]> copiedIn = Collections.synchronizedList(new ArrayList<>());
        final java.util.Set<String> threads = java.util.concurrent.ConcurrentHashMap.newKeySet();
        /** An address whose chunk fails to copy out, -1 for none. */
        long failAt = -1;

        Memory(long base, byte[] bytes) {
            this.base = base;
            this.bytes = bytes;
        }

        @Override
        public void copyOut(long address, MemorySegment to, int length, boolean pageLocked) throws IOException {
            threads.add(Thread.currentThread().getName());
            if (address == failAt) {
                throw new IOException(String.format("copying 0x%x+%d failed: CUDA_ERROR_ILLEGAL_ADDRESS", address, length));
            }
            MemorySegment.copy(bytes, (int) (address - base), to, ValueLayout.JAVA_BYTE, 0, length);
        }

        @Override
        public void copyIn(long address, MemorySegment from, int length, boolean pageLocked) {
            threads.add(Thread.currentThread().getName());
            MemorySegment.copy(from, ValueLayout.JAVA_BYTE, 0, bytes, (int) (address - base), length);
            copiedIn.add(new long[] {address, length});
        }
    }

    private static List<CheckpointImage.Range> ranges(long... baseSize) {
        List<CheckpointImage.Range> rs = new ArrayList<>();
        for (int i = 0; i < baseSize.length; i += 2) {
            rs.add(new CheckpointImage.Range(baseSize[i], baseSize[i + 1]));
        }
        return rs;
    }

    private static long total(List<CheckpointImage.Range> rs) {
        return rs.stream().mapToLong(CheckpointImage.Range::size).sum();
    }

    /** The image the single-threaded pipeline writes: the header stand-in, the range count, the contents, the end mark. */
    private static byte[] serial(Memory device, List<CheckpointImage.Range> rs) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        bytes.write(HEADER);
        bytes.write(ByteBuffer.allocate(4).putInt(rs.size()).array());
        WritableByteChannel ch = Channels.newChannel(bytes);
        try (CheckpointContents contents = new CheckpointContents(null, 42, 0, null)) {
            assertEquals(total(rs), contents.write(ch, rs, device, CheckpointProgress.NONE, total(rs)));
        }
        CheckpointImage.writeEnd(ch);
        return bytes.toByteArray();
    }

    /** The same image written into {@code file} by {@code threads} workers, with {@code io} ("mapped" or "positional"). */
    private static byte[] parallel(Memory device, List<CheckpointImage.Range> rs, Path file, int threads, String io)
            throws IOException {
        String was = System.setProperty(CheckpointIo.IO_PROP, io);
        long[] reported = {0};
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
                StandardOpenOption.WRITE, StandardOpenOption.READ);
             CheckpointContents contents = new CheckpointContents(null, 42, 0, null, threads)) {
            ch.write(ByteBuffer.wrap(HEADER));
            ch.write(ByteBuffer.allocate(4).putInt(rs.size()).flip());
            assertEquals(total(rs), contents.write(ch, rs, device, (stage, done, t) -> reported[0] = done, total(rs),
                    threads));
            CheckpointImage.writeEnd(ch);
        } finally {
            restoreProperty(CheckpointIo.IO_PROP, was);
        }
        assertEquals(total(rs), reported[0], "progress reaches the total");
        return Files.readAllBytes(file);
    }

    /** Reads {@code file}'s contents (after the header stand-in) into {@code device} with {@code threads} workers. */
    private static long restore(Path file, Memory device, int threads) throws IOException {
        try (FileChannel ch = FileChannel.open(file);
             CheckpointContents contents = new CheckpointContents(null, 42, 0, null, threads)) {
            ch.position(HEADER.length);
            return contents.read(ch, CheckpointImage.VERSION, device, CheckpointProgress.NONE, 0, threads);
        }
    }

    private static void restoreProperty(String name, String was) {
        if (was == null) {
            System.clearProperty(name);
        } else {
            System.setProperty(name, was);
        }
    }

    private static void assertNoWorkersLeft() {
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            assertFalse(t.getName().startsWith("gpusockets-checkpoint-writer-42")
                    || t.getName().startsWith("gpusockets-restore-reader-42"), "a worker still runs: " + t.getName());
        }
    }

    /**
     * Ranges of several chunks with ragged sizes, written by four threads (mapped and positional), give the image the
     * single-threaded pipeline writes, byte for byte; restored by three threads, every byte comes back where it was,
     * each chunk once, and the work was spread over several threads.
     */
    @Test
    void anImageWrittenBySeveralThreadsIsTheSerialOneAndRestoresWithSeveralThreads() throws IOException {
        int c = CheckpointImage.CHUNK_BYTES;
        long a = 0x7f5a00400000L, b = a + 4L * c, d = b + 2L * c;
        List<CheckpointImage.Range> rs = ranges(a, 3L * c + 12345, b, c, d, c + 1);
        byte[] memory = new byte[(int) (d + c + 1 - a)];
        new Random(7).nextBytes(memory);
        Memory from = new Memory(a, memory);
        byte[] serial = serial(from, rs);
        for (String io : List.of("mapped", "positional")) {
            Path file = dir.resolve(io + ".img");
            from.threads.clear();
            assertArrayEquals(serial, parallel(from, rs, file, 4, io), io + ": the same image as one thread writes");
            assertTrue(from.threads.size() > 1, io + ": copied by several threads: " + from.threads);
            Memory back = new Memory(a, new byte[memory.length]);
            assertEquals(total(rs), restore(file, back, 3));
            assertTrue(back.threads.size() > 1, "restored by several threads: " + back.threads);
            assertEquals(4 + 1 + 2, back.copiedIn.size(), "each chunk once");
            for (CheckpointImage.Range r : rs) {
                int lo = (int) (r.base() - a), hi = lo + (int) r.size();
                assertArrayEquals(java.util.Arrays.copyOfRange(memory, lo, hi), java.util.Arrays.copyOfRange(back.bytes, lo, hi));
            }
        }
        assertNoWorkersLeft();
    }

    /**
     * Many ranges smaller than a chunk (one byte up to a few pages, and an empty one), more ranges than threads,
     * round-trip through several threads as they do through one.
     */
    @Test
    void rangesSmallerThanAChunkRoundTripThroughSeveralThreads() throws IOException {
        Random random = new Random(8);
        long base = 0x7f5a00000000L;
        List<Long> spec = new ArrayList<>();
        long at = base;
        for (int i = 0; i < 40; i++) {
            long size = i == 5 ? 0 : i % 7 == 0 ? 1 : 1 + random.nextInt(20000);
            spec.add(at);
            spec.add(size);
            at += size + 4096;
        }
        List<CheckpointImage.Range> rs = ranges(spec.stream().mapToLong(Long::longValue).toArray());
        byte[] memory = new byte[(int) (at - base)];
        random.nextBytes(memory);
        Memory from = new Memory(base, memory);
        Path file = dir.resolve("small.img");
        assertArrayEquals(serial(from, rs), parallel(from, rs, file, 3, "mapped"));
        Memory back = new Memory(base, new byte[memory.length]);
        assertEquals(total(rs), restore(file, back, 4));
        assertEquals(39, back.copiedIn.size(), "one chunk per range but the empty one");
        for (CheckpointImage.Range r : rs) {
            int lo = (int) (r.base() - base), hi = lo + (int) r.size();
            assertArrayEquals(java.util.Arrays.copyOfRange(memory, lo, hi), java.util.Arrays.copyOfRange(back.bytes, lo, hi));
        }
        // and an image the single thread wrote restores with several
        Path one = dir.resolve("serial.img");
        Files.write(one, serial(from, rs));
        Memory again = new Memory(base, new byte[memory.length]);
        assertEquals(total(rs), restore(one, again, 2));
        assertArrayEquals(back.bytes, again.bytes);
    }

    /** A flipped byte fails the restore with the chunk named, and that chunk never reaches the device. */
    @Test
    void aDamagedChunkFailsTheRestoreAndNeverReachesTheDevice() throws IOException {
        int c = CheckpointImage.CHUNK_BYTES;
        long a = 0x7f5a00400000L;
        List<CheckpointImage.Range> rs = ranges(a, 3L * c);
        byte[] memory = new byte[3 * c];
        new Random(9).nextBytes(memory);
        Path file = dir.resolve("damaged.img");
        byte[] image = parallel(new Memory(a, memory), rs, file, 2, "mapped");
        int second = HEADER.length + 4 + CheckpointImage.RANGE_BYTES + (CheckpointImage.CHUNK_FRAMING + c) + 4 + 100;
        image[second] ^= 1;
        Files.write(file, image);
        Memory back = new Memory(a, new byte[memory.length]);
        IOException e = assertThrows(IOException.class, () -> restore(file, back, 3));
        assertTrue(e.getMessage().contains("does not match its hash") && e.getMessage().contains("+" + c), e.getMessage());
        assertTrue(back.copiedIn.stream().noneMatch(x -> x[0] == a + c), "the damaged chunk was not copied in");
        assertNoWorkersLeft();
    }

    /** An image cut short (in a chunk, or before its end mark) fails the restore as truncated. */
    @Test
    void aTruncatedImageFailsTheRestore() throws IOException {
        int c = CheckpointImage.CHUNK_BYTES;
        long a = 0x7f5a00400000L;
        byte[] memory = new byte[2 * c + 5];
        new Random(10).nextBytes(memory);
        Path file = dir.resolve("cut.img");
        byte[] image = parallel(new Memory(a, memory), ranges(a, memory.length), file, 2, "positional");
        Files.write(file, java.util.Arrays.copyOf(image, image.length - CheckpointImage.END.length));
        IOException noEnd = assertThrows(IOException.class, () -> restore(file, new Memory(a, new byte[memory.length]), 2));
        assertTrue(noEnd.getMessage().contains("no end mark"), noEnd.getMessage());
        Files.write(file, java.util.Arrays.copyOf(image, image.length - CheckpointImage.END.length - 4 - 1000));
        IOException cut = assertThrows(IOException.class, () -> restore(file, new Memory(a, new byte[memory.length]), 2));
        assertTrue(cut.getMessage().contains("truncated"), cut.getMessage());
        assertNoWorkersLeft();
    }

    /** A chunk that cannot be copied off the device fails the whole checkpoint, naming it; no worker is left running. */
    @Test
    void aFailingCopyFailsTheCheckpointAndStopsEveryWorker() {
        int c = CheckpointImage.CHUNK_BYTES;
        long a = 0x7f5a00400000L;
        Memory from = new Memory(a, new byte[6 * c]);
        from.failAt = a + 2L * c;
        IOException e = assertThrows(IOException.class, () -> parallel(from, ranges(a, 6L * c), dir.resolve("f.img"), 3,
                "mapped"));
        assertTrue(e.getMessage().contains("CUDA_ERROR_ILLEGAL_ADDRESS"), e.getMessage());
        assertNoWorkersLeft();
    }

    /** A file open for writing only cannot be mapped: its contents are written with positional writes, the same image. */
    @Test
    void aFileThatCannotBeMappedIsWrittenWithPositionalWrites() throws IOException {
        long a = 0x7f5a00400000L;
        byte[] memory = new byte[CheckpointImage.CHUNK_BYTES + 777];
        new Random(11).nextBytes(memory);
        Memory from = new Memory(a, memory);
        List<CheckpointImage.Range> rs = ranges(a, memory.length);
        Path file = dir.resolve("write-only.img");
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
             CheckpointContents contents = new CheckpointContents(null, 42, 0, null, 2)) {
            ch.write(ByteBuffer.wrap(HEADER));
            ch.write(ByteBuffer.allocate(4).putInt(rs.size()).flip());
            assertEquals(total(rs), contents.write(ch, rs, from, CheckpointProgress.NONE, total(rs), 2));
            CheckpointImage.writeEnd(ch);
        }
        assertArrayEquals(serial(from, rs), Files.readAllBytes(file));
    }

    @Test
    void writesAreMappedFromFourThreadsUnlessChosenAndABadChoiceIsNamed() throws IOException {
        String was = System.clearProperty(CheckpointIo.IO_PROP);
        try {
            assertFalse(CheckpointIo.mappedWrites(2));
            assertTrue(CheckpointIo.mappedWrites(CheckpointIo.MAPPED_FROM_THREADS));
            System.setProperty(CheckpointIo.IO_PROP, "mapped");
            assertTrue(CheckpointIo.mappedWrites(2));
            System.setProperty(CheckpointIo.IO_PROP, "positional");
            assertFalse(CheckpointIo.mappedWrites(8));
            System.setProperty(CheckpointIo.IO_PROP, "fast");
            IOException e = assertThrows(IOException.class, () -> CheckpointIo.mappedWrites(8));
            assertTrue(e.getMessage().startsWith(CheckpointIo.IO_PROP + "=fast"), e.getMessage());
        } finally {
            restoreProperty(CheckpointIo.IO_PROP, was);
        }
    }

    @Test
    void theThreadCountDefaultsToEightOrTheCoresAndABadOneIsNamed() {
        assertEquals(2, CheckpointIo.threads(null, 2));
        assertEquals(8, CheckpointIo.threads(null, 16));
        assertEquals(1, CheckpointIo.threads("", 1));
        assertEquals(12, CheckpointIo.threads("12", 2));
        for (String bad : List.of("0", "65", "-1", "many")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> CheckpointIo.threads(bad, 4));
            assertTrue(e.getMessage().startsWith(CheckpointIo.THREADS_PROP + "=" + bad), e.getMessage());
        }
    }
}
