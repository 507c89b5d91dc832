package io.gpusockets.protocol.images;

/**
 * Decompresses one LZ4 block (no frame), the format of fatbin entries nvcc compresses with
 * {@code -compress-mode=speed}. A block is a run of sequences: a token byte (literal length in its
 * high nibble, match length - 4 in its low nibble; 15 means more length bytes follow, each added,
 * until one below 255), the literals, then a 2-byte little-endian match offset back into the output.
 * The last sequence has literals only. Format as documented by the LZ4 project (lz4_Block_format.md).
 * Every read is bounded by the input, every write by the expected size.
 */
public final class Lz4Block {
    private static final int MIN_MATCH = 4;

    /** Input that is not an LZ4 block expanding to exactly the expected size. */
    public static final class Malformed extends Exception {
        private static final long serialVersionUID = 1L;

        Malformed(String detail) {
            super(detail, null, false, false);
        }
    }

    private Lz4Block() {
    }

    public static byte[] decompress(byte[] in, int expected) throws Malformed {
        byte[] out = new byte[expected];
        int ip = 0;
        int op = 0;
        while (true) {
            if (ip >= in.length) {
                throw new Malformed("block ends inside a sequence at " + ip);
            }
            int token = in[ip++] & 0xFF;
            int literals = token >>> 4;
            if (literals == 15) {
                int[] at = {ip};
                literals = extended(in, at, literals);
                ip = at[0];
            }
            if (literals > in.length - ip || literals > expected - op) {
                throw new Malformed("literals of " + literals + " bytes at " + ip + " overrun the block or the output");
            }
            System.arraycopy(in, ip, out, op, literals);
            ip += literals;
            op += literals;
            if (ip == in.length) {
                break; // the last sequence: literals only
            }
            if (in.length - ip < 2) {
                throw new Malformed("match offset cut short at " + ip);
            }
            int offset = (in[ip] & 0xFF) | (in[ip + 1] & 0xFF) << 8;
            ip += 2;
            if (offset == 0 || offset > op) {
                throw new Malformed("match offset " + offset + " at output " + op);
            }
            int match = token & 0x0F;
            if (match == 15) {
                int[] at = {ip};
                match = extended(in, at, match);
                ip = at[0];
            }
            match += MIN_MATCH;
            if (match > expected - op) {
                throw new Malformed("match of " + match + " bytes overruns the output at " + op);
            }
            for (int i = 0; i < match; i++, op++) {
                out[op] = out[op - offset]; // byte by byte: a match may overlap its own output
            }
        }
        if (op != expected) {
            throw new Malformed("expanded to " + op + " bytes, expected " + expected);
        }
        return out;
    }

    private static int extended(byte[] in, int[] at, int length) throws Malformed {
        int b;
        do {
            if (at[0] >= in.length) {
                throw new Malformed("length cut short at " + at[0]);
            }
            b = in[at[0]++] & 0xFF;
            length += b;
            if (length < 0 || length > Integer.MAX_VALUE - 255) {
                throw new Malformed("length overflows");
            }
        } while (b == 255);
        return length;
    }
}
