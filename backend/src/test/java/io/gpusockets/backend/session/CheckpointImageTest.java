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
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The checkpoint image's writer and reader ({@link CheckpointImage}), and the recorder's bookkeeping ({@link CheckpointRecorder}). */
class CheckpointImageTest {
    private static CheckpointImage.Header header(List<CheckpointRecorder.Record> records) {
        return new CheckpointImage.Header(42, "default", Map.of(0, 0x7f5a00000000L), 0x2a000123L,
                new CheckpointImage.ResumeState(new byte[] {1, 2, 3}, "psk=;cert=;uid=0", 60, 5, Map.of(1, new long[] {9, 2}),
                        List.of(new ResumeLog.Kept(1, 8, List.of(new int[] {77, 1}), List.of(new byte[] {4, 5})))),
                new int[][] {{2, 0}}, Map.of(1, new long[] {0x2a000100L}), records);
    }

    private static byte[] image(byte[] contents, long base) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            List<CheckpointRecorder.Record> records = List.of(new CheckpointRecorder.Record(0, CheckpointRecorder.Kind.ALLOC,
                    ApiTable.get().byName("cuMemAlloc").opcode(), new byte[] {8, 0, 0, 0, 0, 0, 0, 0}, new byte[0], 0x2a000100L,
                    new long[0], base, contents.length, 0, null));
            CheckpointImage.writeHeader(out, header(records), List.of(new CheckpointImage.Range(base, contents.length)));
            CheckpointImage.writeRange(out, new CheckpointImage.Range(base, contents.length),
                    (address, length) -> java.util.Arrays.copyOfRange(contents, (int) (address - base), (int) (address - base) + length));
            CheckpointImage.writeEnd(out);
        }
        return bytes.toByteArray();
    }

    @Test
    void anImageReadsBackAsWrittenWithItsContentsInHashedChunks() throws IOException {
        byte[] contents = new byte[CheckpointImage.CHUNK_BYTES * 2 + 1000];
        new Random(1).nextBytes(contents);
        long base = 0x7f5a00400000L;
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(image(contents, base)));
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
        byte[] back = new byte[contents.length];
        List<Integer> chunks = new ArrayList<>();
        long n = CheckpointImage.readContents(in, (address, bytes, length) -> {
            System.arraycopy(bytes, 0, back, (int) (address - base), length);
            chunks.add(length);
        }, CheckpointProgress.NONE, contents.length);
        assertEquals(contents.length, n);
        assertEquals(List.of(CheckpointImage.CHUNK_BYTES, CheckpointImage.CHUNK_BYTES, 1000), chunks);
        assertArrayEquals(contents, back);
    }

    @Test
    void aFlippedByteFailsItsChunkBeforeTheChunkIsUsedAndABadMagicOrVersionIsRefused() throws IOException {
        byte[] contents = new byte[5000];
        new Random(2).nextBytes(contents);
        byte[] image = image(contents, 0x1000);
        image[image.length - 8 - 4 - 10] ^= 1;
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(image));
        CheckpointImage.readHeader(in);
        List<Long> written = new ArrayList<>();
        IOException e = assertThrows(IOException.class, () -> CheckpointImage.readContents(in,
                (address, bytes, length) -> written.add(address), CheckpointProgress.NONE, contents.length));
        assertTrue(e.getMessage().contains("does not match its hash"), e.getMessage());
        assertEquals(List.of(), written, "nothing of the damaged chunk was used");

        byte[] bad = image(contents, 0x1000);
        bad[0] = 'X';
        assertThrows(IOException.class, () -> CheckpointImage.readHeader(new DataInputStream(new ByteArrayInputStream(bad))));
        byte[] later = image(contents, 0x1000);
        later[11] = 2; // version 2
        IOException v = assertThrows(IOException.class,
                () -> CheckpointImage.readHeader(new DataInputStream(new ByteArrayInputStream(later))));
        assertTrue(v.getMessage().contains("version 2"), v.getMessage());
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
}
