package io.gpusockets.protocol.images;

/**
 * Decompresses zstd frames (RFC 8878), the format nvcc 13 compresses fatbin entries with by default.
 * Decoding only, without dictionaries; the frame checksum is skipped (the expected size is checked
 * instead). Every read is bounded by the input and every write by the expected size: corrupt input
 * is a {@link Malformed}, never an exception of another kind or an over-read. Written from the RFC's
 * text (sections 3.1 and 4); the predefined distributions and code tables are the RFC's.
 */
public final class Zstd {
    private static final int MAGIC = 0xFD2FB528;
    private static final int MAX_BLOCK = 128 << 10;

    private static final int[] LL_BASE = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24, 28,
            32, 40, 48, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
    private static final int[] LL_BITS = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 6,
            7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    private static final int[] ML_BASE = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
            24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 37, 39, 41, 43, 47, 51, 59, 67, 83, 99, 131, 259, 515, 1027,
            2051, 4099, 8195, 16387, 32771, 65539};
    private static final int[] ML_BITS = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    private static final short[] LL_DEFAULT = {4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
            2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1};
    private static final short[] ML_DEFAULT = {1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1};
    private static final short[] OF_DEFAULT = {1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
            -1, -1, -1, -1, -1};

    /** Input that is not a zstd frame expanding to exactly the expected size. */
    public static final class Malformed extends Exception {
        private static final long serialVersionUID = 1L;

        Malformed(String detail) {
            super(detail, null, false, false);
        }
    }

    private final byte[] in;
    private final byte[] out;
    private int ip;
    private int op;
    private final int[] rep = new int[3];
    private Fse llTable;
    private Fse ofTable;
    private Fse mlTable;
    private Huffman huffman;
    private byte[] literals = new byte[0];

    private Zstd(byte[] in, int expected) {
        this.in = in;
        this.out = new byte[expected];
    }

    public static byte[] decompress(byte[] in, int expected) throws Malformed {
        Zstd z = new Zstd(in, expected);
        try {
            while (z.ip < in.length) {
                z.frame();
            }
        } catch (ArrayIndexOutOfBoundsException | NegativeArraySizeException e) {
            // a safety net only: every index is checked before use
            throw new Malformed("corrupt frame (" + e.getMessage() + ")");
        }
        if (z.op != expected) {
            throw new Malformed("expanded to " + z.op + " bytes, expected " + expected);
        }
        return z.out;
    }

    private void need(int n) throws Malformed {
        if (n < 0 || n > in.length - ip) {
            throw new Malformed("input cut short at " + ip);
        }
    }

    private int u8() throws Malformed {
        need(1);
        return in[ip++] & 0xFF;
    }

    private long le(int bytes) throws Malformed {
        need(bytes);
        long v = 0;
        for (int i = bytes - 1; i >= 0; i--) {
            v = v << 8 | (in[ip + i] & 0xFF);
        }
        ip += bytes;
        return v;
    }

    private void frame() throws Malformed {
        int magic = (int) le(4);
        if ((magic & 0xFFFFFFF0) == 0x184D2A50) { // skippable frame
            long size = le(4);
            if (size > in.length - ip) {
                throw new Malformed("skippable frame past the input");
            }
            ip += (int) size;
            return;
        }
        if (magic != MAGIC) {
            throw new Malformed(String.format("bad frame magic 0x%08x", magic));
        }
        int descriptor = u8();
        int fcsFlag = descriptor >>> 6;
        boolean singleSegment = (descriptor & 0x20) != 0;
        boolean checksum = (descriptor & 0x04) != 0;
        int dictFlag = descriptor & 3;
        if ((descriptor & 0x08) != 0) {
            throw new Malformed("reserved frame header bit set");
        }
        if (!singleSegment) {
            u8(); // window descriptor: the whole output is the window here
        }
        long dict = le(dictFlag == 3 ? 4 : dictFlag);
        if (dict != 0) {
            throw new Malformed("frame needs dictionary " + dict);
        }
        le(fcsFlag == 0 ? (singleSegment ? 1 : 0) : 1 << fcsFlag); // content size: the caller knows it
        rep[0] = 1;
        rep[1] = 4;
        rep[2] = 8;
        llTable = ofTable = mlTable = null;
        huffman = null;
        boolean last;
        do {
            int header = (int) le(3);
            last = (header & 1) != 0;
            int type = header >>> 1 & 3;
            int size = header >>> 3;
            switch (type) {
                case 0 -> {
                    need(size);
                    room(size);
                    System.arraycopy(in, ip, out, op, size);
                    ip += size;
                    op += size;
                }
                case 1 -> {
                    int b = u8();
                    room(size);
                    java.util.Arrays.fill(out, op, op + size, (byte) b);
                    op += size;
                }
                case 2 -> {
                    if (size > MAX_BLOCK) {
                        throw new Malformed("block of " + size + " bytes");
                    }
                    need(size);
                    int end = ip + size;
                    compressedBlock(end);
                    ip = end;
                }
                default -> throw new Malformed("reserved block type");
            }
        } while (!last);
        if (checksum) {
            le(4);
        }
    }

    private void room(int n) throws Malformed {
        if (n < 0 || n > out.length - op) {
            throw new Malformed("output exceeds the expected " + out.length + " bytes");
        }
    }

    // ---- literals ------------------------------------------------------------------------------

    private void compressedBlock(int end) throws Malformed {
        int litStart = ip;
        int b0 = u8();
        int type = b0 & 3;
        int sizeFormat = b0 >>> 2 & 3;
        if (type < 2) {
            int regen = switch (sizeFormat) {
                case 0, 2 -> b0 >>> 3;
                case 1 -> (b0 >>> 4) + (u8() << 4);
                default -> (b0 >>> 4) + (u8() << 4) + (u8() << 12);
            };
            if (regen > MAX_BLOCK) {
                throw new Malformed("literals of " + regen + " bytes");
            }
            ensureLiterals(regen);
            if (type == 0) {
                if (regen > end - ip) {
                    throw new Malformed("raw literals past the block");
                }
                System.arraycopy(in, ip, literals, 0, regen);
                ip += regen;
            } else {
                if (ip >= end) {
                    throw new Malformed("RLE literals past the block");
                }
                java.util.Arrays.fill(literals, 0, regen, in[ip++]);
            }
        } else {
            int headerBytes = sizeFormat < 2 ? 3 : sizeFormat + 2;
            int bits = sizeFormat < 2 ? 10 : sizeFormat == 2 ? 14 : 18;
            ip = litStart;
            long h = le(headerBytes);
            int regen = (int) (h >>> 4 & (1 << bits) - 1);
            int compressed = (int) (h >>> 4 + bits & (1 << bits) - 1);
            boolean oneStream = sizeFormat == 0;
            if (regen > MAX_BLOCK || compressed > end - ip) {
                throw new Malformed("compressed literals past the block");
            }
            int streamsEnd = ip + compressed;
            if (type == 2) {
                huffman = Huffman.read(this, streamsEnd);
            } else if (huffman == null) {
                throw new Malformed("treeless literals without an earlier Huffman table");
            }
            ensureLiterals(regen);
            if (oneStream) {
                huffman.decode(in, ip, streamsEnd, literals, 0, regen);
            } else {
                if (streamsEnd - ip < 6) {
                    throw new Malformed("jump table cut short");
                }
                int s1 = (int) le(2);
                int s2 = (int) le(2);
                int s3 = (int) le(2);
                long s4 = (long) streamsEnd - ip - s1 - s2 - s3;
                if (s4 < 0) {
                    throw new Malformed("literal streams past their section");
                }
                int quarter = (regen + 3) / 4;
                if (3L * quarter > regen) {
                    throw new Malformed("too few literals for four streams");
                }
                int at = ip;
                huffman.decode(in, at, at + s1, literals, 0, quarter);
                at += s1;
                huffman.decode(in, at, at + s2, literals, quarter, quarter);
                at += s2;
                huffman.decode(in, at, at + s3, literals, 2 * quarter, quarter);
                at += s3;
                huffman.decode(in, at, streamsEnd, literals, 3 * quarter, regen - 3 * quarter);
            }
            ip = streamsEnd;
        }
        sequences(end);
    }

    private int literalCountSet;

    private void ensureLiterals(int n) {
        if (literals.length < n) {
            literals = new byte[Math.max(n, Math.min(MAX_BLOCK, literals.length * 2))];
        }
        literalCountSet = n;
    }

    // ---- sequences -----------------------------------------------------------------------------

    private void sequences(int end) throws Malformed {
        int count = literalCountSet;
        if (ip >= end) {
            throw new Malformed("sequences section missing");
        }
        int b0 = u8();
        int nbSeq;
        if (b0 < 128) {
            nbSeq = b0;
        } else if (b0 < 255) {
            nbSeq = (b0 - 128 << 8) + u8();
        } else {
            nbSeq = (int) le(2) + 0x7F00;
        }
        int lit = 0;
        if (nbSeq > 0) {
            int modes = u8();
            if ((modes & 3) != 0) {
                throw new Malformed("reserved sequence mode bits");
            }
            llTable = table(modes >>> 6, llTable, LL_DEFAULT, 6, 35, 9, end);
            ofTable = table(modes >>> 4 & 3, ofTable, OF_DEFAULT, 5, 31, 8, end);
            mlTable = table(modes >>> 2 & 3, mlTable, ML_DEFAULT, 6, 52, 9, end);
            Bits bits = new Bits(in, ip, end);
            int ll = (int) bits.read(llTable.log);
            int of = (int) bits.read(ofTable.log);
            int ml = (int) bits.read(mlTable.log);
            for (int s = 0; s < nbSeq; s++) {
                int ofCode = ofTable.symbol[of];
                int mlCode = mlTable.symbol[ml];
                int llCode = llTable.symbol[ll];
                if (ofCode > 31 || mlCode >= ML_BASE.length || llCode >= LL_BASE.length) {
                    throw new Malformed("sequence code out of range");
                }
                long offsetValue = (1L << ofCode) + bits.read(ofCode);
                int matchLength = ML_BASE[mlCode] + (int) bits.read(ML_BITS[mlCode]);
                int literalLength = LL_BASE[llCode] + (int) bits.read(LL_BITS[llCode]);
                int offset = offset(offsetValue, literalLength);
                if (s < nbSeq - 1) {
                    ll = llTable.next(ll, bits);
                    ml = mlTable.next(ml, bits);
                    of = ofTable.next(of, bits);
                }
                if (literalLength > count - lit) {
                    throw new Malformed("sequence takes more literals than the block has");
                }
                room(literalLength);
                System.arraycopy(literals, lit, out, op, literalLength);
                lit += literalLength;
                op += literalLength;
                if (offset > op) {
                    throw new Malformed("match offset " + offset + " before the output's start");
                }
                room(matchLength);
                for (int i = 0; i < matchLength; i++, op++) {
                    out[op] = out[op - offset];
                }
            }
            if (!bits.exhausted()) {
                throw new Malformed("sequence bitstream not consumed exactly");
            }
        } else if (ip != end) {
            throw new Malformed("bytes after an empty sequences section");
        }
        room(count - lit);
        System.arraycopy(literals, lit, out, op, count - lit);
        op += count - lit;
    }

    private int offset(long offsetValue, int literalLength) throws Malformed {
        if (offsetValue > 3) {
            if (offsetValue - 3 > Integer.MAX_VALUE) {
                throw new Malformed("offset out of range");
            }
            int offset = (int) (offsetValue - 3);
            rep[2] = rep[1];
            rep[1] = rep[0];
            rep[0] = offset;
            return offset;
        }
        int index = (int) offsetValue + (literalLength == 0 ? 1 : 0);
        if (index == 1) {
            return rep[0];
        }
        int offset = index == 4 ? rep[0] - 1 : rep[index - 1];
        if (offset <= 0) {
            throw new Malformed("repeat offset 0");
        }
        if (index != 2) {
            rep[2] = rep[1];
        }
        rep[1] = rep[0];
        rep[0] = offset;
        return offset;
    }

    private Fse table(int mode, Fse previous, short[] predefined, int predefinedLog, int maxSymbol, int maxLog, int end)
            throws Malformed {
        return switch (mode) {
            case 0 -> Fse.build(predefined, predefined.length, predefinedLog);
            case 1 -> {
                if (ip >= end) {
                    throw new Malformed("RLE symbol past the block");
                }
                yield Fse.rle(in[ip++] & 0xFF);
            }
            case 2 -> {
                short[] norm = new short[maxSymbol + 1];
                int[] result = Fse.readCounts(in, ip, end, norm, maxLog);
                ip = result[1];
                yield Fse.build(norm, result[2], result[0]);
            }
            default -> {
                if (previous == null) {
                    throw new Malformed("repeated sequence table without an earlier one");
                }
                yield previous;
            }
        };
    }

    // ---- bitstreams ----------------------------------------------------------------------------

    /** A backward bitstream: read from its last byte's highest set bit (a marker) towards its start. */
    static final class Bits {
        private final byte[] data;
        private final int start;
        private int bit; // bits left; below 0 after an over-read (the missing bits read as 0)

        Bits(byte[] data, int start, int end) throws Malformed {
            if (end <= start || end > data.length || start < 0) {
                throw new Malformed("empty bitstream");
            }
            int last = data[end - 1] & 0xFF;
            if (last == 0) {
                throw new Malformed("bitstream without its end marker");
            }
            this.data = data;
            this.start = start;
            this.bit = (end - 1 - start) * 8 + 31 - Integer.numberOfLeadingZeros(last);
        }

        long peek(int n) {
            if (n == 0 || bit <= 0) {
                return 0;
            }
            int from = Math.max(bit - n, 0);
            long v = 0;
            for (int b = (bit - 1) >> 3; b >= from >> 3; b--) {
                v = v << 8 | (data[start + b] & 0xFF);
            }
            v >>>= from & 7;
            v &= (1L << (bit - from)) - 1;
            return bit - n < 0 ? v << (n - bit) : v;
        }

        long read(int n) {
            long v = peek(n);
            bit -= n;
            return v;
        }

        void skip(int n) {
            bit -= n;
        }

        boolean exhausted() {
            return bit == 0;
        }

        boolean overread() {
            return bit < 0;
        }
    }

    // ---- FSE -----------------------------------------------------------------------------------

    static final class Fse {
        final int log;
        final int[] symbol;
        final int[] bits;
        final int[] base;

        private Fse(int log) {
            this.log = log;
            int size = 1 << log;
            symbol = new int[size];
            bits = new int[size];
            base = new int[size];
        }

        static Fse rle(int s) {
            Fse t = new Fse(0);
            t.symbol[0] = s;
            return t;
        }

        int next(int state, Bits in) {
            return base[state] + (int) in.read(bits[state]);
        }

        /**
         * Reads a table description at {@code at}: returns {accuracy log, the offset after it, symbols}.
         */
        static int[] readCounts(byte[] in, int at, int end, short[] norm, int maxLog) throws Malformed {
            long bitPos = (long) at * 8;
            long limit = (long) end * 8;
            int log = (int) forward(in, bitPos, 4, limit) + 5;
            bitPos += 4;
            if (log > maxLog) {
                throw new Malformed("FSE accuracy log " + log + " above " + maxLog);
            }
            int remaining = (1 << log) + 1;
            int threshold = 1 << log;
            int nbBits = log + 1;
            int symbol = 0;
            boolean previousZero = false;
            while (remaining > 1) {
                if (previousZero) {
                    int repeat;
                    do {
                        repeat = (int) forward(in, bitPos, 2, limit);
                        bitPos += 2;
                        symbol += repeat;
                    } while (repeat == 3);
                    if (symbol > norm.length) {
                        throw new Malformed("FSE symbols past " + (norm.length - 1));
                    }
                }
                if (symbol >= norm.length) {
                    throw new Malformed("FSE symbols past " + (norm.length - 1));
                }
                int max = 2 * threshold - 1 - remaining;
                int value = (int) forward(in, bitPos, nbBits, limit);
                int count;
                if ((value & threshold - 1) < max) {
                    count = value & threshold - 1;
                    bitPos += nbBits - 1;
                } else {
                    count = value & 2 * threshold - 1;
                    if (count >= threshold) {
                        count -= max;
                    }
                    bitPos += nbBits;
                }
                count--;
                remaining -= Math.abs(count);
                norm[symbol++] = (short) count;
                previousZero = count == 0;
                while (remaining < threshold && threshold > 1) {
                    nbBits--;
                    threshold >>= 1;
                }
            }
            if (remaining != 1 || bitPos > limit) {
                throw new Malformed("FSE table description is inconsistent");
            }
            return new int[] {log, (int) ((bitPos + 7) / 8), symbol};
        }

        /** {@code n} bits at bit {@code pos} of {@code in}, least significant first; past {@code limit} they read 0. */
        private static long forward(byte[] in, long pos, int n, long limit) throws Malformed {
            if (pos + n > limit + 32) {
                throw new Malformed("FSE table description past its section");
            }
            long v = 0;
            for (int i = 0; i < n; i++) {
                long p = pos + i;
                if (p < limit) {
                    v |= (long) (in[(int) (p >>> 3)] >>> (p & 7) & 1) << i;
                }
            }
            return v;
        }

        static Fse build(short[] norm, int symbols, int log) throws Malformed {
            Fse t = new Fse(log);
            int size = 1 << log;
            int high = size - 1;
            int[] next = new int[symbols];
            for (int s = 0; s < symbols; s++) {
                if (norm[s] == -1) {
                    if (high < 0) {
                        throw new Malformed("FSE distribution over its table");
                    }
                    t.symbol[high--] = s;
                    next[s] = 1;
                } else {
                    next[s] = norm[s];
                }
            }
            int step = (size >>> 1) + (size >>> 3) + 3;
            int pos = 0;
            for (int s = 0; s < symbols; s++) {
                for (int i = 0; i < norm[s]; i++) {
                    t.symbol[pos] = s;
                    do {
                        pos = pos + step & size - 1;
                    } while (pos > high);
                }
            }
            if (pos != 0) {
                throw new Malformed("FSE distribution does not fill its table");
            }
            for (int u = 0; u < size; u++) {
                int s = t.symbol[u];
                int state = next[s]++;
                if (state <= 0) {
                    throw new Malformed("FSE distribution is inconsistent");
                }
                t.bits[u] = log - (31 - Integer.numberOfLeadingZeros(state));
                t.base[u] = (state << t.bits[u]) - size;
            }
            return t;
        }
    }

    // ---- Huffman -------------------------------------------------------------------------------

    static final class Huffman {
        private static final int MAX_BITS = 11;
        final int maxBits;
        final byte[] symbol;
        final byte[] length;

        private Huffman(int maxBits) {
            this.maxBits = maxBits;
            symbol = new byte[1 << maxBits];
            length = new byte[1 << maxBits];
        }

        static Huffman read(Zstd z, int end) throws Malformed {
            int header = z.u8();
            int[] weights = new int[256];
            int n;
            if (header < 128) {
                if (header > end - z.ip) {
                    throw new Malformed("Huffman weights past the literals");
                }
                n = fseWeights(z.in, z.ip, z.ip + header, weights);
                z.ip += header;
            } else {
                n = header - 127;
                int bytes = (n + 1) / 2;
                if (bytes > end - z.ip) {
                    throw new Malformed("Huffman weights past the literals");
                }
                for (int i = 0; i < n; i++) {
                    int b = z.in[z.ip + i / 2] & 0xFF;
                    weights[i] = i % 2 == 0 ? b >>> 4 : b & 15;
                }
                z.ip += bytes;
            }
            long sum = 0;
            for (int i = 0; i < n; i++) {
                if (weights[i] > MAX_BITS) {
                    throw new Malformed("Huffman weight " + weights[i]);
                }
                sum += weights[i] == 0 ? 0 : 1L << weights[i] - 1;
            }
            if (sum == 0 || n >= 256) {
                throw new Malformed("Huffman weights are empty");
            }
            int maxBits = 64 - Long.numberOfLeadingZeros(sum);
            long rest = (1L << maxBits) - sum;
            if (maxBits > MAX_BITS || Long.bitCount(rest) != 1) {
                throw new Malformed("Huffman weights do not form a tree");
            }
            weights[n++] = 64 - Long.numberOfLeadingZeros(rest);
            Huffman h = new Huffman(maxBits);
            int pos = 0;
            for (int w = 1; w <= maxBits; w++) {
                for (int s = 0; s < n; s++) {
                    if (weights[s] == w) {
                        int span = 1 << w - 1;
                        java.util.Arrays.fill(h.symbol, pos, pos + span, (byte) s);
                        java.util.Arrays.fill(h.length, pos, pos + span, (byte) (maxBits + 1 - w));
                        pos += span;
                    }
                }
            }
            return h;
        }

        /** Huffman weights compressed with FSE (two interleaved states); returns how many. */
        private static int fseWeights(byte[] in, int at, int end, int[] weights) throws Malformed {
            short[] norm = new short[256];
            int[] r = Fse.readCounts(in, at, end, norm, 6);
            Fse t = Fse.build(norm, r[2], r[0]);
            Bits bits = new Bits(in, r[1], end);
            int s1 = (int) bits.read(t.log);
            int s2 = (int) bits.read(t.log);
            int n = 0;
            while (true) {
                if (n > 253) {
                    throw new Malformed("too many Huffman weights");
                }
                weights[n++] = t.symbol[s1];
                s1 = t.next(s1, bits);
                if (bits.overread()) {
                    weights[n++] = t.symbol[s2];
                    break;
                }
                weights[n++] = t.symbol[s2];
                s2 = t.next(s2, bits);
                if (bits.overread()) {
                    weights[n++] = t.symbol[s1];
                    break;
                }
            }
            return n;
        }

        void decode(byte[] in, int start, int end, byte[] out, int at, int count) throws Malformed {
            if (count == 0) {
                return;
            }
            Bits bits = new Bits(in, start, end);
            for (int i = 0; i < count; i++) {
                int index = (int) bits.peek(maxBits);
                out[at + i] = symbol[index];
                bits.skip(length[index]);
            }
            if (!bits.exhausted()) {
                throw new Malformed("Huffman stream not consumed exactly");
            }
        }
    }
}
