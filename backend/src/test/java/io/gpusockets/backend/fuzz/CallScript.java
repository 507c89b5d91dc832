package io.gpusockets.backend.fuzz;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;

/**
 * The little language a {@link DispatcherFuzzTest} input is read in: a sequence of steps, each a frame
 * (or a wait) a frontend could send after its handshake. Every step is an op byte and its fields,
 * little-endian; an input that ends mid-step ends the script (missing bytes read as zeros).
 * <pre>
 *   CALL     0  fn u16 (index into the API table, modulo its size), flags u8 (bit 0: NO_REPLY), lane u8, len u16, body[len]
 *   DATA     1  lane u8, flags u8 (bit 0: WINDOW, bit 1: one chunk long, bit 2: body follows), len u16
 *               (the body is len zero bytes, or with bit 2 the next len bytes of the script)
 *   LANE_END 2  lane u8
 *   RAW      3  opcode u32, flags u32, lane u32, len u16, body[len]
 *   GOODBYE  4
 *   WAIT     5  (until every call sent so far that wants a reply has one, or a second passed; once per
 *               such count: a second WAIT without a call in between does not wait again)
 * </pre>
 * Ops are taken modulo 6. In a CALL body, any 8 bytes at a 4-aligned offset that read
 * {@link #OUT_REF} plus k (k &lt; 256) are replaced by the k-th (modulo their count) 8-byte output
 * the backend has replied with so far: the handles and device addresses it issued, which a script
 * cannot know in advance (nothing is replaced before the first).
 */
final class CallScript {
    static final int CALL = 0, DATA = 1, LANE_END = 2, RAW = 3, GOODBYE = 4, WAIT = 5, OPS = 6;
    static final long OUT_REF = 0x5EED_0000_0000_0000L;

    static final List<ApiFunction> FUNCTIONS = ApiTable.get().functions();

    private CallScript() {
    }

    /** Reads an input step by step. */
    static final class Reader {
        private final ByteBuffer in;

        Reader(byte[] input) {
            in = ByteBuffer.wrap(input).order(ByteOrder.LITTLE_ENDIAN);
        }

        boolean more() {
            return in.hasRemaining();
        }

        int u8() {
            return in.hasRemaining() ? Byte.toUnsignedInt(in.get()) : 0;
        }

        int u16() {
            return u8() | u8() << 8;
        }

        int u32() {
            return u16() | u16() << 16;
        }

        byte[] bytes(int n) {
            byte[] b = new byte[Math.min(n, in.remaining())];
            in.get(b);
            return b;
        }
    }

    /** Writes a script (for the seed corpus). */
    static final class Writer {
        private final ByteArrayOutputStream out = new ByteArrayOutputStream();

        private Writer u8(int v) {
            out.write(v);
            return this;
        }

        private Writer u16(int v) {
            return u8(v & 0xff).u8((v >>> 8) & 0xff);
        }

        private Writer u32(int v) {
            return u16(v & 0xffff).u16(v >>> 16);
        }

        Writer call(String function, int flags, int lane, Body body) {
            byte[] b = body.bytes();
            u8(CALL).u16(ApiTable.get().byName(function).index()).u8(flags).u8(lane).u16(b.length);
            out.writeBytes(b);
            return this;
        }

        Writer data(int lane, int flags, int length) {
            return u8(DATA).u8(lane).u8(flags).u16(length);
        }

        Writer data(int lane, byte[] body) {
            u8(DATA).u8(lane).u8(4).u16(body.length);
            out.writeBytes(body);
            return this;
        }

        Writer laneEnd(int lane) {
            return u8(LANE_END).u8(lane);
        }

        Writer raw(int opcode, int flags, int lane, byte[] body) {
            u8(RAW).u32(opcode).u32(flags).u32(lane).u16(body.length);
            out.writeBytes(body);
            return this;
        }

        Writer goodbye() {
            return u8(GOODBYE);
        }

        Writer await() {
            return u8(WAIT);
        }

        byte[] bytes() {
            return out.toByteArray();
        }
    }

    /** A call body: its inputs in C order, as WireValues lays them out. */
    static class Body {
        private final ByteBuffer b = ByteBuffer.allocate(4096).order(ByteOrder.LITTLE_ENDIAN);

        Body u32(int v) {
            b.putInt(v);
            return this;
        }

        Body u64(long v) {
            b.putLong(v);
            return this;
        }

        /** The k-th output the backend replied with (see {@link CallScript}). */
        Body out(int k) {
            return u64(OUT_REF + k);
        }

        Body cstr(String s) {
            byte[] d = s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
            b.putInt(d.length).put(d);
            return this;
        }

        byte[] bytes() {
            byte[] d = new byte[b.position()];
            b.duplicate().flip().get(d);
            return d;
        }
    }
}
