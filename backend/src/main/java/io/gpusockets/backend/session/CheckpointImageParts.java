package io.gpusockets.backend.session;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.FilterInputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;

/**
 * Reads a checkpoint image file ({@link CheckpointImage}, versions 2 to 4) back as the parts a migration sends
 * ({@link io.gpusockets.backend.server.Migration}): the header (everything before the first range, the count of
 * ranges included), the device memory ranges' contents in pieces of a given size at offsets that are multiples of it
 * from each range's base (what the target puts back together: MIGRATE_CHUNK), and the CUDA arrays' ranges as written
 * (MIGRATE_IMAGE flags 1). A group migration in isolation process sends the images its members' workers wrote this
 * way ({@link io.gpusockets.backend.server.Migration.ImageSender}). Each chunk of the file is checked against its
 * CRC32C before any of it is handed on, and the structure as a restore checks it (counts, kinds, chunks that fit their
 * ranges, device memory before the arrays, the end mark); a damaged image fails, naming what. Holds one chunk of the
 * image ({@link CheckpointImage#CHUNK_BYTES}) and one piece at a time.
 */
public final class CheckpointImageParts {
    /** Where the parts go. */
    public interface Sink {
        /** A piece of the header, in order. */
        void header(ByteBuffer piece) throws IOException;

        /** {@code bytes} of device memory at {@code address} (a range's base plus a multiple of the piece size). */
        void memory(long address, MemorySegment bytes) throws IOException;

        /** A piece of the arrays' ranges, as the file holds them (each range's start, then its chunks), in order. */
        void arrays(ByteBuffer piece) throws IOException;
    }

    /** The bytes of the header or arrays one {@link Sink} call carries at most. */
    private static final int PIECE = 1 << 20;

    private CheckpointImageParts() {
    }

    /**
     * Reads {@code image} into {@code sink}, device memory in pieces of {@code pieceBytes} (dividing
     * {@link CheckpointImage#CHUNK_BYTES}); returns the device memory ranges, {base, size} each, in the image's order.
     */
    public static List<long[]> read(Path image, int pieceBytes, Sink sink) throws IOException {
        if (pieceBytes <= 0 || CheckpointImage.CHUNK_BYTES % pieceBytes != 0) {
            throw new IllegalArgumentException("pieceBytes=" + pieceBytes);
        }
        try (FileChannel file = FileChannel.open(image, StandardOpenOption.READ)) {
            long[] read = {0};
            DataInputStream din = new DataInputStream(new FilterInputStream(Channels.newInputStream(file.position(0))) {
                @Override
                public int read() throws IOException {
                    int b = super.read();
                    if (b >= 0) {
                        read[0]++;
                    }
                    return b;
                }

                @Override
                public int read(byte[] b, int off, int len) throws IOException {
                    int n = super.read(b, off, len);
                    if (n > 0) {
                        read[0] += n;
                    }
                    return n;
                }
            });
            CheckpointImage.Header h = CheckpointImage.readHeader(din);
            if (h.version() < 2) {
                throw new IOException("checkpoint image " + image + ": version " + h.version() + " is not migrated");
            }
            long at = read[0];
            int ranges = readInt(file, at);
            at += 4;
            copy(file, 0, at, sink::header);
            List<long[]> memory = new ArrayList<>();
            byte[] chunk = new byte[CheckpointImage.CHUNK_BYTES];
            MemorySegment piece = MemorySegment.ofArray(new byte[pieceBytes]);
            CRC32C crc = new CRC32C();
            long arraysAt = -1;
            ByteBuffer start = ByteBuffer.allocate(CheckpointImage.RANGE_BYTES);
            for (int k = 0; k < ranges; k++) {
                readFully(file, start.clear(), at);
                CheckpointImage.Range r = CheckpointImage.range(start, h.version(), k);
                if (!r.memory() && arraysAt < 0) {
                    arraysAt = at;
                } else if (r.memory() && arraysAt >= 0) {
                    throw new IOException("checkpoint image " + image + ": device memory " + r.describe() + " after the arrays");
                }
                at += CheckpointImage.RANGE_BYTES;
                if (r.memory()) {
                    memory.add(new long[] {r.base(), r.size()});
                }
                int filled = 0;
                long pieceAt = 0;
                for (long off = 0; off < r.size(); ) {
                    int n = CheckpointImage.checkChunkLength(readInt(file, at), r, off);
                    at += 4;
                    if (!r.memory()) {
                        at += n + 4L; // sent as the file holds it
                        off += n;
                        continue;
                    }
                    readFully(file, ByteBuffer.wrap(chunk, 0, n), at);
                    at += n;
                    CheckpointImage.checkHash(new CheckpointImage.Chunk(r, off, n), MemorySegment.ofArray(chunk),
                            readInt(file, at), crc);
                    at += 4;
                    for (int used = 0; used < n; ) { // into pieces at multiples of pieceBytes from the range's base
                        int k2 = Math.min(n - used, pieceBytes - filled);
                        MemorySegment.copy(MemorySegment.ofArray(chunk), used, piece, filled, k2);
                        filled += k2;
                        used += k2;
                        if (filled == pieceBytes || off + used == r.size()) {
                            sink.memory(r.base() + pieceAt, piece.asSlice(0, filled));
                            pieceAt += filled;
                            filled = 0;
                        }
                    }
                    off += n;
                }
            }
            ByteBuffer end = ByteBuffer.allocate(CheckpointImage.END.length);
            readFully(file, end, at);
            if (!java.util.Arrays.equals(end.array(), CheckpointImage.END)) {
                throw new IOException("checkpoint image " + image + ": bad end mark");
            }
            if (arraysAt >= 0) {
                copy(file, arraysAt, at, sink::arrays);
            }
            return memory;
        }
    }

    /** Bytes {@code from} to {@code to} of {@code in}, in pieces. */
    private static void copy(FileChannel in, long from, long to, Piece out) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(PIECE);
        for (long at = from; at < to; ) {
            b.clear().limit((int) Math.min(PIECE, to - at));
            readFully(in, b, at);
            at += b.limit();
            out.accept(b.flip());
        }
    }

    @FunctionalInterface
    private interface Piece {
        void accept(ByteBuffer b) throws IOException;
    }

    private static int readInt(FileChannel in, long at) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(4);
        readFully(in, b, at);
        return b.getInt(0);
    }

    private static void readFully(FileChannel in, ByteBuffer b, long at) throws IOException {
        while (b.hasRemaining()) {
            int n = in.read(b, at);
            if (n < 0) {
                throw new EOFException("checkpoint image: truncated");
            }
            at += n;
        }
    }
}
