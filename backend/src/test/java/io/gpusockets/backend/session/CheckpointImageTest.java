package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.channels.WritableByteChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The checkpoint image's writer and reader ({@link CheckpointImage}), and the recorder's bookkeeping ({@link CheckpointRecorder}). */
class CheckpointImageTest {
    private static CheckpointImage.Header header(List<CheckpointRecorder.Record> records) {
        return header(records, List.of(new CheckpointImage.DeviceModel(0, "NVIDIA H100 80GB HBM3", 90)));
    }

    private static CheckpointImage.Header header(List<CheckpointRecorder.Record> records,
                                                 List<CheckpointImage.DeviceModel> devices) {
        return new CheckpointImage.Header(42, "default", Map.of(0, 0x7f5a00000000L), 0x2a000123L,
                new CheckpointImage.ResumeState(new byte[] {1, 2, 3}, "psk=;cert=;uid=0", 60, 5, Map.of(1, new long[] {9, 2}),
                        List.of(new ResumeLog.Kept(1, 8, List.of(new int[] {77, 1}), List.of(new byte[] {4, 5})))),
                new int[][] {{2, 0}}, Map.of(1, new long[] {0x2a000100L}), records, devices);
    }

    /** A device of {@code size} bytes at {@code base} over a byte array, recording each chunk copied in. */
    static class ArrayDevice implements CheckpointContents.Device {
        final long base;
        final byte[] bytes;
        final List<long[]> copiedIn = new ArrayList<>();

        ArrayDevice(long base, byte[] bytes) {
            this.base = base;
            this.bytes = bytes;
        }

        @Override
        public void copyOut(long address, MemorySegment to, int length, boolean pageLocked) {
            MemorySegment.copy(bytes, (int) (address - base), to, ValueLayout.JAVA_BYTE, 0, length);
        }

        @Override
        public synchronized void copyIn(long address, MemorySegment from, int length, boolean pageLocked)
                throws IOException {
            MemorySegment.copy(from, ValueLayout.JAVA_BYTE, 0, bytes, (int) (address - base), length);
            copiedIn.add(new long[] {address, length});
        }
    }

    /** An image of {@code ranges} (base, size pairs) over {@code device}, its contents written through the pipeline. */
    static byte[] image(ArrayDevice device, long... ranges) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        List<CheckpointImage.Range> rs = new ArrayList<>();
        List<CheckpointRecorder.Record> records = new ArrayList<>();
        long total = 0;
        for (int i = 0; i < ranges.length; i += 2) {
            rs.add(new CheckpointImage.Range(ranges[i], ranges[i + 1]));
            records.add(new CheckpointRecorder.Record(i / 2, CheckpointRecorder.Kind.ALLOC,
                    ApiTable.get().byName("cuMemAlloc").opcode(), new byte[] {8, 0, 0, 0, 0, 0, 0, 0}, new byte[0], 0x2a000100L,
                    new long[0], ranges[i], ranges[i + 1], 0, null));
            total += ranges[i + 1];
        }
        DataOutputStream out = new DataOutputStream(bytes);
        CheckpointImage.writeHeader(out, header(records), rs);
        out.flush();
        WritableByteChannel ch = Channels.newChannel(bytes);
        try (CheckpointContents contents = new CheckpointContents(null, 42, 0, null)) { // plain buffers
            assertEquals(0, contents.pinnedBuffers());
            assertEquals(total, contents.write(ch, rs, device, CheckpointProgress.NONE, total));
        }
        CheckpointImage.writeEnd(ch);
        return bytes.toByteArray();
    }

    /** Reads {@code image}'s header, then its contents through the pipeline into {@code device}. */
    private static long restore(byte[] image, ArrayDevice device) throws IOException {
        ByteArrayInputStream in = new ByteArrayInputStream(image);
        CheckpointImage.readHeader(new DataInputStream(in));
        try (CheckpointContents contents = new CheckpointContents(null, 42, 0, null)) {
            return contents.read(Channels.newChannel(in), device, CheckpointProgress.NONE, image.length);
        }
    }

    @Test
    void anImageReadsBackAsWrittenWithItsContentsInHashedChunks() throws IOException {
        byte[] contents = new byte[CheckpointImage.CHUNK_BYTES * 2 + 1000];
        new Random(1).nextBytes(contents);
        long base = 0x7f5a00400000L;
        byte[] image = image(new ArrayDevice(base, contents), base, contents.length);
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(image));
        CheckpointImage.Header h = CheckpointImage.readHeader(in);
        assertEquals(42, h.sessionId());
        assertEquals("default", h.tenant());
        assertEquals(0x7f5a00000000L, h.windows().get(0));
        assertEquals(0x2a000123L, h.nextHandleId());
        assertArrayEquals(new byte[] {1, 2, 3}, h.resume().token());
        assertEquals(60, h.resume().graceSeconds());
        assertArrayEquals(new long[] {9, 2}, h.resume().received().get(1));
        assertArrayEquals(new byte[] {4, 5}, h.resume().kept().get(0).bodies().get(0));
        assertEquals(2, h.primary()[0][0]);
        assertArrayEquals(new long[] {0x2a000100L}, h.laneContexts().get(1));
        assertEquals(1, h.records().size());
        assertEquals(base, h.records().get(0).base);
        assertEquals(List.of(new CheckpointImage.DeviceModel(0, "NVIDIA H100 80GB HBM3", 90)), h.devices());
        ArrayDevice back = new ArrayDevice(base, new byte[contents.length]);
        assertEquals(contents.length, restore(image, back));
        assertEquals(List.of(CheckpointImage.CHUNK_BYTES, CheckpointImage.CHUNK_BYTES, 1000),
                back.copiedIn.stream().map(c -> (int) c[1]).toList());
        assertArrayEquals(contents, back.bytes);
    }

    /**
     * Allocations that span several chunks, none a multiple of the chunk size (and one of exactly one chunk), go out
     * and come back through the pipeline byte for byte, chunk after chunk in image order, the image as long as the
     * format says (so its layout is the serial writer's).
     */
    @Test
    void rangesSpanningSeveralChunksWithRaggedSizesComeBackByteForByte() throws IOException {
        int c = CheckpointImage.CHUNK_BYTES;
        long a = 0x7f5a00400000L, b = a + 4L * c, d = b + 2L * c;
        long sa = 3L * c + 12345, sb = c, sd = c + 1;
        byte[] device = new byte[(int) (d + sd - a)];
        new Random(3).nextBytes(device);
        byte[] image = image(new ArrayDevice(a, device), a, sa, b, sb, d, sd);
        int headerBytes;
        {
            ByteArrayInputStream in = new ByteArrayInputStream(image);
            CheckpointImage.readHeader(new DataInputStream(in));
            headerBytes = image.length - in.available();
        }
        int chunks = 4 + 1 + 2;
        assertEquals(headerBytes + 4 + 3 * 21 + chunks * 8 + sa + sb + sd + CheckpointImage.END.length, image.length,
                "header, the range count, three range starts (kind, base, level, size), each chunk's length and hash, the bytes, the end mark");
        ArrayDevice back = new ArrayDevice(a, new byte[device.length]);
        assertEquals(sa + sb + sd, restore(image, back));
        List<Long> at = back.copiedIn.stream().map(x -> x[0]).toList();
        assertEquals(List.of(a, a + c, a + 2L * c, a + 3L * c, b, d, d + c), at, "chunk after chunk, in image order");
        assertEquals(List.of((long) c, (long) c, (long) c, 12345L, (long) c, (long) c, 1L),
                back.copiedIn.stream().map(x -> x[1]).toList());
        for (long[] r : new long[][] {{a, sa}, {b, sb}, {d, sd}}) {
            int from = (int) (r[0] - a), to = from + (int) r[1];
            assertArrayEquals(java.util.Arrays.copyOfRange(device, from, to), java.util.Arrays.copyOfRange(back.bytes, from, to));
        }
    }

    @Test
    void aFlippedByteFailsItsChunkBeforeTheChunkIsUsedAndABadMagicOrVersionIsRefused() throws IOException {
        byte[] contents = new byte[5000];
        new Random(2).nextBytes(contents);
        byte[] image = image(new ArrayDevice(0x1000, contents), 0x1000, contents.length);
        image[image.length - 8 - 4 - 10] ^= 1;
        ArrayDevice written = new ArrayDevice(0x1000, new byte[contents.length]);
        IOException e = assertThrows(IOException.class, () -> restore(image, written));
        assertTrue(e.getMessage().contains("does not match its hash"), e.getMessage());
        assertEquals(List.of(), written.copiedIn, "nothing of the damaged chunk was used");

        byte[] bad = image(new ArrayDevice(0x1000, contents), 0x1000, contents.length);
        bad[0] = 'X';
        assertThrows(IOException.class, () -> CheckpointImage.readHeader(new DataInputStream(new ByteArrayInputStream(bad))));
        byte[] later = image(new ArrayDevice(0x1000, contents), 0x1000, contents.length);
        later[11] = 6; // version 6
        IOException v = assertThrows(IOException.class,
                () -> CheckpointImage.readHeader(new DataInputStream(new ByteArrayInputStream(later))));
        assertTrue(v.getMessage().contains("version 6") && v.getMessage().contains("versions 1 to 5"), v.getMessage());
    }

    /**
     * What a session of a group checkpoint shares (its exports' tokens, the memory and events it opened) is written as
     * version 4 and read back as it was; the contents that follow are read as in version 3.
     */
    @Test
    void aGroupCheckpointsSharesAreWrittenAsVersionFourAndReadBack() throws IOException {
        byte[] secret = new byte[16];
        new Random(7).nextBytes(secret);
        byte[] token = ShareRegistry.tokenOf(0x1234_5678_9abcL, ShareRegistry.KIND_MEMORY, secret);
        CheckpointImage.Shares shares = new CheckpointImage.Shares(
                List.of(new CheckpointImage.Export(ShareRegistry.KIND_MEMORY, 0x1234_5678_9abcL, secret, 0x7f5a00200000L,
                                3 << 20),
                        new CheckpointImage.Export(ShareRegistry.KIND_EVENT, 0x1234_5678_9abdL, secret, 0x2a000107L, 0)),
                List.of(new CheckpointImage.Opened(token, 0x7e0000000000L, 3 << 20, 0x7e0000000000L, 4 << 20, 0)),
                List.of(new CheckpointImage.OpenedEvent(token, 0x2a000108L, 0x2a000100L)));
        byte[] contents = new byte[3000];
        new Random(8).nextBytes(contents);
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        CheckpointImage.Range range = new CheckpointImage.Range(0x7f5a00200000L, contents.length);
        CheckpointImage.writeHeader(out, header(List.of()).withShares(shares), List.of(range));
        out.flush();
        WritableByteChannel ch = Channels.newChannel(bytes);
        try (CheckpointContents c = new CheckpointContents(null, 42, 0, null)) {
            c.write(ch, List.of(range), new ArrayDevice(range.base(), contents), CheckpointProgress.NONE, 0);
        }
        CheckpointImage.writeEnd(ch);
        ByteArrayInputStream in = new ByteArrayInputStream(bytes.toByteArray());
        CheckpointImage.Header h = CheckpointImage.readHeader(new DataInputStream(in));
        assertEquals(CheckpointImage.SHARES_VERSION, h.version());
        CheckpointImage.Export e = h.shares().exports().get(0);
        assertEquals(List.of(0x1234_5678_9abcL, 0x7f5a00200000L, 3L << 20), List.of(e.tokenId(), e.address(), e.size()));
        assertArrayEquals(secret, e.secret());
        CheckpointImage.Export ev = h.shares().exports().get(1);
        assertEquals(List.of((long) ShareRegistry.KIND_EVENT, 0x1234_5678_9abdL, 0x2a000107L, 0L),
                List.of((long) ev.kind(), ev.tokenId(), ev.address(), ev.size()));
        CheckpointImage.OpenedEvent oe = h.shares().openedEvents().get(0);
        assertArrayEquals(token, oe.token());
        assertEquals(List.of(0x2a000108L, 0x2a000100L), List.of(oe.event(), oe.context()));
        CheckpointImage.Opened o = h.shares().opened().get(0);
        assertArrayEquals(token, o.token());
        assertEquals(List.of(0x7e0000000000L, 3L << 20, 0x7e0000000000L, 4L << 20, 0L),
                List.of(o.base(), o.size(), o.reservation(), o.span(), (long) o.device()));
        ArrayDevice back = new ArrayDevice(range.base(), new byte[contents.length]);
        try (CheckpointContents c = new CheckpointContents(null, 42, 0, null)) {
            assertEquals(contents.length, c.read(Channels.newChannel(in), h.version(), back, CheckpointProgress.NONE, 0));
        }
        assertArrayEquals(contents, back.bytes);
        assertTrue(CheckpointImage.readHeader(new DataInputStream(new ByteArrayInputStream(image(
                new ArrayDevice(0x1000, contents), 0x1000, contents.length)))).shares().isEmpty(), "none in version 3");
    }

    /**
     * A group member that imported another's shareable VMM handle is written as version 5: its exported VMM handle
     * (kind 3, by handle id), its imports (token, handle id, references, size, mappings) and the access settings over
     * them read back as written; a forged length of an access setting's descriptors is refused, naming it.
     */
    @Test
    void importedShareableVmmHandlesAreWrittenAsVersionFiveAndReadBack() throws IOException {
        byte[] secret = new byte[16];
        new Random(9).nextBytes(secret);
        byte[] token = ShareRegistry.tokenOf(0x55_0001L, ShareRegistry.KIND_VMM, secret);
        byte[] desc = new byte[12];
        desc[8] = 3; // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        CheckpointImage.Shares shares = new CheckpointImage.Shares(
                List.of(new CheckpointImage.Export(ShareRegistry.KIND_VMM, 0x55_0002L, secret, 0x2a000109L, 2 << 20)),
                List.of(), List.of(),
                List.of(new CheckpointImage.Imported(token, 0x2a00010aL, 2, 2 << 20, List.of(
                        new CheckpointImage.ImportedMapping(0x7e0000200000L, 1 << 20, 0),
                        new CheckpointImage.ImportedMapping(0x7e0000400000L, 1 << 20, 1 << 20)))),
                List.of(new CheckpointImage.ImportedAccess(0x7e0000200000L, 1 << 20, 0x2a000100L, 0, desc)));
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        CheckpointImage.writeHeader(out, header(List.of()).withShares(shares), List.of());
        out.flush();
        byte[] image = bytes.toByteArray();
        CheckpointImage.Header h = CheckpointImage.readHeader(new DataInputStream(new ByteArrayInputStream(image)));
        assertEquals(CheckpointImage.IMPORTS_VERSION, h.version());
        CheckpointImage.Export e = h.shares().exports().get(0);
        assertEquals(List.of((long) ShareRegistry.KIND_VMM, 0x55_0002L, 0x2a000109L, 2L << 20),
                List.of((long) e.kind(), e.tokenId(), e.address(), e.size()));
        CheckpointImage.Imported m = h.shares().imported().get(0);
        assertArrayEquals(token, m.token());
        assertEquals(List.of(0x2a00010aL, 2L, 2L << 20), List.of(m.handle(), (long) m.references(), m.size()));
        assertEquals(shares.imported().get(0).mappings(), m.mappings());
        CheckpointImage.ImportedAccess a = h.shares().importedAccesses().get(0);
        assertEquals(List.of(0x7e0000200000L, 1L << 20, 0x2a000100L, 0L),
                List.of(a.base(), a.size(), a.context(), (long) a.device()));
        assertArrayEquals(desc, a.desc());

        int at = image.length - 4 /* ranges */ - 12 - 4; // the access setting's descriptors' length
        assertEquals(12, java.nio.ByteBuffer.wrap(image, at, 4).getInt());
        java.nio.ByteBuffer.wrap(image, at, 4).putInt(Integer.MAX_VALUE);
        IOException forged = assertThrows(IOException.class,
                () -> CheckpointImage.readHeader(new DataInputStream(new ByteArrayInputStream(image))));
        assertTrue(forged.getMessage().contains("access setting"), forged.getMessage());

        CheckpointImage.Shares noImports = new CheckpointImage.Shares(shares.exports(), List.of(), List.of());
        ByteArrayOutputStream four = new ByteArrayOutputStream();
        DataOutputStream out4 = new DataOutputStream(four);
        CheckpointImage.writeHeader(out4, header(List.of()).withShares(noImports), List.of());
        out4.flush();
        assertEquals(CheckpointImage.SHARES_VERSION, CheckpointImage.readHeader(new DataInputStream(
                new ByteArrayInputStream(four.toByteArray()))).version(), "an exporter alone is written as version 4");
    }

    /**
     * An image of version 1 (written before arrays were captured: its ranges have no kind and no level) reads back,
     * header and contents, as device memory.
     */
    @Test
    void anImageOfVersionOneIsStillRead() throws IOException {
        byte[] contents = new byte[CheckpointImage.CHUNK_BYTES + 300];
        new Random(5).nextBytes(contents);
        long base = 0x7f5a00400000L;
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        CheckpointImage.writeHeader(out, header(List.of(), List.of()), List.of());
        out.writeInt(1); // one range, in version 1's form: u64 base, u64 size
        out.writeLong(base);
        out.writeLong(contents.length);
        out.flush();
        WritableByteChannel ch = Channels.newChannel(bytes);
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        MemorySegment all = MemorySegment.ofArray(contents);
        CheckpointImage.writeChunk(ch, all, CheckpointImage.CHUNK_BYTES, crc);
        CheckpointImage.writeChunk(ch, all.asSlice(CheckpointImage.CHUNK_BYTES), 300, crc);
        CheckpointImage.writeEnd(ch);
        byte[] image = bytes.toByteArray();
        // writeHeader ends with the device count (0; version 3 on) and the range count, written above instead
        byte[] v1 = new byte[image.length - 8];
        int headerEnd = image.length - 4 - (16 + contents.length + 2 * 8 + CheckpointImage.END.length) - 8;
        System.arraycopy(image, 0, v1, 0, headerEnd);
        System.arraycopy(image, headerEnd + 8, v1, headerEnd, image.length - headerEnd - 8);
        v1[11] = 1;
        ByteArrayInputStream in = new ByteArrayInputStream(v1);
        CheckpointImage.Header h = CheckpointImage.readHeader(new DataInputStream(in));
        assertEquals(1, h.version());
        assertEquals(42, h.sessionId());
        ArrayDevice back = new ArrayDevice(base, new byte[contents.length]);
        try (CheckpointContents c = new CheckpointContents(null, 42, 0, null)) {
            assertEquals(contents.length, c.read(Channels.newChannel(in), h.version(), back, CheckpointProgress.NONE, 0));
        }
        assertArrayEquals(contents, back.bytes);
    }

    /**
     * CUDA arrays' and mipmapped array levels' contents travel as ranges of their own kind, cut as the device cuts
     * them (here whole rows: {@link CheckpointArrays.Geometry}), hashed, and come back to the same array and level.
     */
    @Test
    void arrayRangesTravelWithTheirKindAndLevelInTheirOwnCuts() throws IOException {
        CheckpointArrays.Geometry g = new CheckpointArrays.Geometry(3 << 20, 7, 1, CheckpointImage.CHUNK_BYTES);
        class Arrays implements CheckpointContents.Device {
            final Map<CheckpointImage.Range, byte[]> held = new java.util.HashMap<>();
            final List<String> in = new ArrayList<>();

            @Override
            public void copyOut(long address, MemorySegment to, int length, boolean pageLocked) {
                throw new AssertionError("no device memory here");
            }

            @Override
            public void copyIn(long address, MemorySegment from, int length, boolean pageLocked) {
                throw new AssertionError("no device memory here");
            }

            @Override
            public int chunkLength(CheckpointImage.Range r, long offset) throws IOException {
                return (int) g.at(offset).bytes();
            }

            @Override
            public void copyOut(CheckpointImage.Range r, long offset, MemorySegment to, int length, boolean pageLocked) {
                MemorySegment.copy(held.get(r), (int) offset, to, ValueLayout.JAVA_BYTE, 0, length);
            }

            @Override
            public void copyIn(CheckpointImage.Range r, long offset, MemorySegment from, int length, boolean pageLocked) {
                MemorySegment.copy(from, ValueLayout.JAVA_BYTE, 0, held.computeIfAbsent(r, k -> new byte[(int) k.size()]),
                        (int) offset, length);
                in.add(r.kind() + "/" + r.base() + "/" + r.level() + "+" + offset + ":" + length);
            }
        }
        Arrays from = new Arrays();
        CheckpointImage.Range array = new CheckpointImage.Range(CheckpointImage.ARRAY, 0x2a000200L, 0, g.bytes());
        CheckpointImage.Range level = new CheckpointImage.Range(CheckpointImage.MIPMAP_LEVEL, 0x2a000300L, 2, g.bytes());
        Random random = new Random(6);
        for (CheckpointImage.Range r : List.of(array, level)) {
            byte[] b = new byte[(int) r.size()];
            random.nextBytes(b);
            from.held.put(r, b);
        }
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        CheckpointImage.writeHeader(out, header(List.of()), List.of(array, level));
        out.flush();
        WritableByteChannel ch = Channels.newChannel(bytes);
        try (CheckpointContents c = new CheckpointContents(null, 42, 0, null)) {
            assertEquals(2 * g.bytes(), c.write(ch, List.of(array, level), from, CheckpointProgress.NONE, 0));
        }
        CheckpointImage.writeEnd(ch);
        ByteArrayInputStream in = new ByteArrayInputStream(bytes.toByteArray());
        CheckpointImage.Header h = CheckpointImage.readHeader(new DataInputStream(in));
        assertEquals(CheckpointImage.DEVICES_VERSION, h.version(), "an image without shares: version 3, as older backends read");
        Arrays to = new Arrays();
        try (CheckpointContents c = new CheckpointContents(null, 42, 0, null)) {
            assertEquals(2 * g.bytes(), c.read(Channels.newChannel(in), h.version(), to, CheckpointProgress.NONE, 0));
        }
        int rows = 2 * (3 << 20); // two rows of 3 MiB per 8 MiB chunk: 2, 2, 2, 1
        assertEquals(List.of("1/" + 0x2a000200L + "/0+0:" + rows, "1/" + 0x2a000200L + "/0+" + rows + ":" + rows,
                "1/" + 0x2a000200L + "/0+" + 2 * rows + ":" + rows, "1/" + 0x2a000200L + "/0+" + 3 * rows + ":" + (3 << 20),
                "2/" + 0x2a000300L + "/2+0:" + rows, "2/" + 0x2a000300L + "/2+" + rows + ":" + rows,
                "2/" + 0x2a000300L + "/2+" + 2 * rows + ":" + rows, "2/" + 0x2a000300L + "/2+" + 3 * rows + ":" + (3 << 20)),
                to.in);
        assertArrayEquals(from.held.get(array), to.held.get(array));
        assertArrayEquals(from.held.get(level), to.held.get(level));
    }

    /**
     * With the pipeline reading ahead, a damaged chunk still never reaches the device: damage in the first chunk of a
     * range of several leaves the device untouched; damage in the third lets exactly the two verified before it through.
     */
    @Test
    void aDamagedChunkIsRefusedBeforeItOrAnythingAfterItIsWrittenWhileTheReaderRunsAhead() throws IOException {
        int c = CheckpointImage.CHUNK_BYTES;
        byte[] contents = new byte[4 * c + 77];
        new Random(4).nextBytes(contents);
        long base = 0x7f5a00400000L;
        byte[] image = image(new ArrayDevice(base, contents), base, contents.length);
        int firstChunkBytes = image.length - CheckpointImage.END.length - (contents.length + 5 * 8); // its u32 length first
        for (int damaged : new int[] {0, 2}) {
            byte[] copy = image.clone();
            copy[firstChunkBytes + 4 + damaged * (c + 8) + 1234] ^= 0x40;
            ArrayDevice device = new ArrayDevice(base, new byte[contents.length]);
            IOException e = assertThrows(IOException.class, () -> restore(copy, device));
            assertTrue(e.getMessage().contains(String.format("0x%x+%d", base, (long) damaged * c))
                    && e.getMessage().contains("does not match its hash"), e.getMessage());
            List<Long> at = device.copiedIn.stream().map(x -> x[0]).toList();
            assertEquals(damaged == 0 ? List.of() : List.of(base, base + c), at, "only chunks verified before the damaged one");
        }
        assertTrue(helpersGone(), "no pipeline thread left behind");
    }

    /** A failure on either side ends both: a device copy that fails while the reader runs ahead, a file that fails. */
    @Test
    void aFailureOnEitherSideEndsThePipelineWithItsMessage() throws IOException {
        int c = CheckpointImage.CHUNK_BYTES;
        byte[] contents = new byte[5 * c];
        long base = 0x10000;
        byte[] image = image(new ArrayDevice(base, contents), base, contents.length);
        ArrayDevice failing = new ArrayDevice(base, new byte[contents.length]) {
            @Override
            public synchronized void copyIn(long address, MemorySegment from, int length, boolean pageLocked)
                    throws IOException {
                if (address == base + c) {
                    throw new IOException("device lost");
                }
                super.copyIn(address, from, length, pageLocked);
            }
        };
        IOException e = assertThrows(IOException.class, () -> restore(image, failing));
        assertTrue(e.getMessage().contains("device lost"), e.getMessage());

        List<CheckpointImage.Range> rs = List.of(new CheckpointImage.Range(base, contents.length));
        WritableByteChannel full = new WritableByteChannel() {
            long written;

            @Override
            public int write(ByteBuffer src) throws IOException {
                if (written > c) {
                    throw new IOException("disk full");
                }
                int n = src.remaining();
                src.position(src.limit());
                written += n;
                return n;
            }

            @Override
            public boolean isOpen() {
                return true;
            }

            @Override
            public void close() {
            }
        };
        try (CheckpointContents contents2 = new CheckpointContents(null, 42, 0, null)) {
            IOException w = assertThrows(IOException.class,
                    () -> contents2.write(full, rs, new ArrayDevice(base, contents), CheckpointProgress.NONE, contents.length));
            assertTrue(w.getMessage().contains("disk full"), w.getMessage());
        }
        assertTrue(helpersGone(), "no pipeline thread left behind");
    }

    private static boolean helpersGone() {
        return Thread.getAllStackTraces().keySet().stream()
                .noneMatch(t -> t.isAlive() && (t.getName().startsWith("gpusockets-checkpoint-writer-")
                        || t.getName().startsWith("gpusockets-restore-reader-")));
    }

    private static ByteBuffer outs(long... values) {
        ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long v : values) {
            b.putLong(v);
        }
        return b.flip();
    }

    private static byte[] body(Object... values) {
        ByteBuffer b = ByteBuffer.allocate(64).order(ByteOrder.LITTLE_ENDIAN);
        for (Object v : values) {
            if (v instanceof Integer i) {
                b.putInt(i);
            } else {
                b.putLong((Long) v);
            }
        }
        return java.util.Arrays.copyOf(b.array(), b.position());
    }

    @Test
    void recordsGoWithWhatTheyMadeAndSettersKeepTheLastPerTargetAndKey() {
        CheckpointRecorder rec = new CheckpointRecorder(1 << 20);
        ApiTable t = ApiTable.get();
        ApiFunction stream = t.byName("cuStreamCreate"), alloc = t.byName("cuMemAlloc"), setAttr = t.byName("cuFuncSetAttribute");
        ApiFunction getFn = t.byName("cuModuleGetFunction");
        rec.succeeded(stream, body(0), null, outs(101), new long[] {101}, 1, b -> true);
        rec.succeeded(alloc, body(4096L), null, outs(0x7f00L << 32), new long[0], 1, b -> true);
        rec.succeeded(alloc, body(64L), null, outs(0x1234000L), new long[0], 1, b -> false); // outside the window
        rec.succeeded(getFn, body(102L, 1, (int) 'k'), null, outs(103), new long[] {103}, 1, b -> true);
        rec.succeeded(setAttr, body(103L, 8, 1024), null, outs(), new long[0], 1, b -> true);
        rec.succeeded(setAttr, body(103L, 8, 2048), null, outs(), new long[0], 1, b -> true);  // replaces the one above
        rec.succeeded(setAttr, body(103L, 9, 1), null, outs(), new long[0], 1, b -> true);     // another attribute
        List<CheckpointRecorder.Record> all = rec.snapshot();
        assertEquals(List.of("cuStreamCreate", "cuMemAlloc", "cuModuleGetFunction", "cuFuncSetAttribute", "cuFuncSetAttribute"),
                all.stream().map(CheckpointRecorder.Record::name).toList());
        assertEquals(4096, all.get(1).size);
        assertEquals(2048, ByteBuffer.wrap(all.get(3).body).order(ByteOrder.LITTLE_ENDIAN).getInt(12), "the last value set");

        rec.handleGone(101);          // the stream destroyed
        rec.rangeGone(0x7f00L << 32); // the allocation freed
        rec.handleGone(103);          // the function gone (its module unloaded): its setters go too
        assertEquals(List.of(), rec.snapshot());
        assertEquals(0, rec.bytes());
    }

    /**
     * A graph node's parameters superseded after an instantiation read them stay while that exec graph lives; a loop
     * of parameter changes each followed by an exec-graph update stays bounded (each update supersedes the one before,
     * freeing the value only it read); an update the driver refused is not recorded.
     */
    @Test
    void aSetterReadByACopyStaysWhileTheCopyLivesAndAnUpdateLoopStaysBounded() {
        CheckpointRecorder rec = new CheckpointRecorder(1 << 20);
        ApiTable t = ApiTable.get();
        ApiFunction set = t.byName("cuGraphKernelNodeSetParams"), inst = t.byName("cuGraphInstantiateWithFlags");
        ApiFunction update = t.byName("cuGraphExecUpdate");
        long graph = 10, node = 11, exec = 12, exec2 = 13;
        rec.succeeded(set, body(node, 1), null, outs(), new long[0], 1, b -> true);
        rec.succeeded(inst, body(graph, 0L), null, outs(exec), new long[] {exec}, 1, b -> true);
        rec.succeeded(set, body(node, 2), null, outs(), new long[0], 1, b -> true);
        assertEquals(List.of("cuGraphKernelNodeSetParams", "cuGraphInstantiateWithFlags", "cuGraphKernelNodeSetParams"),
                rec.snapshot().stream().map(CheckpointRecorder.Record::name).toList(), "the first value: exec's");
        rec.handleGone(exec);
        List<CheckpointRecorder.Record> left = rec.snapshot();
        assertEquals(1, left.size(), "with its reader gone, the superseded value goes: " + left);
        assertEquals(2, ByteBuffer.wrap(left.get(0).body).order(ByteOrder.LITTLE_ENDIAN).getInt(8));

        rec.succeeded(inst, body(graph, 0L), null, outs(exec2), new long[] {exec2}, 1, b -> true);
        for (int i = 0; i < 1000; i++) {
            rec.succeeded(set, body(node, 100 + i), null, outs(), new long[0], 1, b -> true);
            rec.succeeded(update, body(exec2, graph), null, outs(0L), new long[0], 1, b -> true);
        }
        rec.succeeded(update, body(exec2, 99L), null, outs(910L), new long[0], 1, b -> true); // GRAPH_EXEC_UPDATE_FAILURE
        List<CheckpointRecorder.Record> loop = rec.snapshot();
        assertEquals(List.of("cuGraphKernelNodeSetParams", "cuGraphInstantiateWithFlags", "cuGraphKernelNodeSetParams",
                "cuGraphExecUpdate"), loop.stream().map(CheckpointRecorder.Record::name).toList(),
                "exec2's instantiation read 2; the last update read 1099; nothing else is needed");
        assertEquals(1099, ByteBuffer.wrap(loop.get(2).body).order(ByteOrder.LITTLE_ENDIAN).getInt(8));
        rec.handleGone(exec2);
        rec.handleGone(node);
        assertEquals(List.of(), rec.snapshot());
        assertEquals(0, rec.bytes());
    }

    @Test
    void pastItsBoundTheRecorderMarksTheSessionNotCheckpointable() {
        CheckpointRecorder rec = new CheckpointRecorder(300);
        ApiFunction stream = ApiTable.get().byName("cuStreamCreate");
        for (long id = 1; id <= 5; id++) {
            rec.succeeded(stream, body(0), null, outs(id), new long[] {id}, 1, b -> true);
        }
        SessionHandles handles = new SessionHandles(1);
        List<String> why = rec.refusals(handles, new SessionMemory());
        assertEquals(1, why.size(), why.toString());
        assertTrue(why.get(0).contains("exceed 300 bytes"), why.get(0));
    }

    @Test
    void aRangeNotYetRecordedCountsOnlyOnceTheSessionIsDrained() {
        // a cuMemAlloc in flight has its range in the session's memory before the recorder sees the call succeed: the
        // early check (calls may be in flight) must not refuse for it, the check after the drain must
        CheckpointRecorder rec = new CheckpointRecorder(1 << 20);
        SessionMemory memory = new SessionMemory();
        memory.add(new SessionMemory.Range(0x6000_0010_0000L, 65536, 1, true));
        SessionHandles handles = new SessionHandles(1);
        assertEquals(List.of(), rec.refusals(handles, memory, false));
        List<String> why = rec.refusals(handles, memory, true);
        assertEquals(1, why.size(), why.toString());
        assertTrue(why.get(0).contains("1 allocations outside the session's address window (not cuMemAlloc)"), why.get(0));
        assertEquals(why, rec.refusals(handles, memory));
    }
}
