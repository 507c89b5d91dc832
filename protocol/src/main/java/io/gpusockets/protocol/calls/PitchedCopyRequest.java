package io.gpusockets.protocol.calls;

import io.gpusockets.protocol.structs.Memcpy3D;
import java.nio.ByteBuffer;

/**
 * The request body of cuMemcpy2D, cuMemcpy2DUnaligned, cuMemcpy3D, cuMemcpy2DAsync and cuMemcpy3DAsync: the copy in
 * {@link Memcpy3D#encode}'s wire form, the stream for the async variants, then the length of the
 * DATA that follows (a host source's rows, packed; 0 otherwise). A host destination's rows come back
 * as DATA before the reply, which is the CUresult alone.
 *
 * <pre>
 *   offset  size  field (side = src at 0, dst at 68)
 *   side+0    4   memoryType u32 (Memcpy3D.HOST 1, DEVICE 2, ARRAY 3; UNIFIED 4 is resolved before sending)
 *   side+4    8   x u64 (bytes)
 *   side+12   8   y u64 (rows)
 *   side+20   8   z u64 (slices; 0 in 2D)
 *   side+28   8   lod u64 (0 in 2D)
 *   side+36   8   device u64 (a DEVICE side's pointer, an ARRAY side's session handle id)
 *   side+44   8   array u64
 *   side+52   8   pitch u64
 *   side+60   8   height u64 (rows per slice; 0 in 2D)
 *     136     8   width u64 (WidthInBytes)
 *     144     8   height u64
 *     152     8   depth u64 (1 in 2D)
 *     160     8   stream u64 (session handle id)          async only
 *   160/168   8   bulk bytes u64 (DATA that follows)
 *   168/176       end
 * </pre>
 *
 * Host addresses never travel. Little-endian, no padding.
 */
public final class PitchedCopyRequest {
    public static final int COPY_OFFSET = 0;
    /** The copy's bytes ({@link Memcpy3D#WIRE_BYTES}, 160). */
    public static final int COPY_BYTES = Memcpy3D.WIRE_BYTES;
    /** Where the destination side starts in the copy. */
    public static final int DST_SIDE_OFFSET = 68;
    /** The async variants' stream follows the copy. */
    public static final int STREAM_OFFSET = COPY_BYTES;
    public static final int SYNC_BULK_OFFSET = COPY_BYTES;
    public static final int ASYNC_BULK_OFFSET = COPY_BYTES + 8;
    public static final int SYNC_BYTES = COPY_BYTES + 8;
    public static final int ASYNC_BYTES = COPY_BYTES + 16;

    private PitchedCopyRequest() {
    }

    /** A decoded request; {@code stream} is 0 for the synchronous variants. */
    public record Request(Memcpy3D copy, long stream, long bulkBytes) {
    }

    /** Bytes of a request: {@link #ASYNC_BYTES} or {@link #SYNC_BYTES}. */
    public static int wireBytes(boolean async) {
        return async ? ASYNC_BYTES : SYNC_BYTES;
    }

    /**
     * The DATA length a request for {@code copy} carries: its {@link Memcpy3D#totalBytes()} when the
     * source is a HOST side, else 0 (-1 when the extent overflows, which no request may carry).
     */
    public static long bulkBytes(Memcpy3D copy) {
        return copy.src().memoryType() == Memcpy3D.HOST ? copy.totalBytes() : 0;
    }

    /** Writes the request (sets {@code b} little-endian, as {@link Memcpy3D#encode} does); {@code stream} only if async. */
    public static void put(ByteBuffer b, Memcpy3D copy, boolean async, long stream, long bulkBytes) {
        copy.encode(b);
        if (async) {
            b.putLong(stream);
        }
        b.putLong(bulkBytes);
    }

    /**
     * Reads a request; {@link java.nio.BufferUnderflowException} on a truncated body. The values are
     * not checked here: the caller compares {@code bulkBytes} with {@link #bulkBytes(Memcpy3D)} and
     * checks each side against the session.
     */
    public static Request read(ByteBuffer b, boolean async) {
        Memcpy3D copy = Memcpy3D.decode(b);
        long stream = async ? b.getLong() : 0;
        long bulk = b.getLong();
        return new Request(copy, stream, bulk);
    }
}
