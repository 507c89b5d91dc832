package io.gpusockets.protocol.calls;

import io.gpusockets.protocol.wire.ProtocolException;
import java.nio.ByteBuffer;

/**
 * The bodies of cuStreamAddCallback and cuLaunchHostFunc, which both carry the same operations (the
 * program's function runs in the guest; the backend only holds the stream, or the graph, at a gate):
 *
 * <pre>
 *  request                                         reply (after the CUresult)
 *  ENQUEUE  op u32 = 0 | stream u64 | flags u32 | work u64      gate u64 (0: captured as graph work)
 *           0          4            12          16         24    0        8
 *  AWAIT    op u32 = 1                               gate u64 | status i32 | work u64 | bytes u64   (blocks until a gate is reached)
 *           0          4                             0        8            12         20          28
 *  OPEN     op u32 = 2 | gate u64                    (nothing)
 *           0          4          12
 *  PUT      op u32 = 3 | gate u64 | bytes u64        (nothing)      then {@code bytes} of DATA: the guest's side of the copy
 *           0          4          12          20
 *  GET      op u32 = 4 | gate u64                    (nothing)      after bytes of DATA: the device's side of the copy
 *           0          4          12
 * </pre>
 *
 * {@code stream} is a session handle id (0: the legacy stream), {@code status} the stream's CUresult
 * handed to the callback. A gate of a graph node (a host node or the guest's side of a memcpy node
 * that touches host memory, see the backend's HostCallbackGates) reports the guest's {@code work}
 * token the node was made with (0 for a stream callback) and the size of its staging buffer; before
 * opening such a gate the guest fills the staging buffer (PUT, a host-to-device copy) or reads it
 * (GET, device-to-host). ENQUEUE's {@code work} is a token the guest filed the host function under
 * (0: none): on a capturing stream the backend puts a graph gate with it into the capture (a host
 * node) and answers gate 0. All fields little-endian, no padding.
 */
public final class HostCallbackOps {
    public static final int ENQUEUE = 0;
    public static final int AWAIT = 1;
    public static final int OPEN = 2;
    public static final int PUT = 3;
    public static final int GET = 4;

    public static final int OP_OFFSET = 0;
    /** ENQUEUE's stream, and OPEN's gate, follow the op. */
    public static final int STREAM_OFFSET = 4;
    public static final int FLAGS_OFFSET = 12;
    public static final int GATE_OFFSET = 4;
    public static final int WORK_OFFSET = 16;
    public static final int ENQUEUE_BYTES = 24;
    public static final int AWAIT_BYTES = 4;
    public static final int OPEN_BYTES = 12;
    /** In the replies: ENQUEUE's and AWAIT's gate, AWAIT's status. */
    public static final int REPLY_GATE_OFFSET = 0;
    public static final int REPLY_STATUS_OFFSET = 8;
    public static final int ENQUEUE_REPLY_BYTES = 8;
    public static final int REPLY_WORK_OFFSET = 12;
    public static final int REPLY_BYTES_OFFSET = 20;
    public static final int AWAIT_REPLY_BYTES = 28;
    public static final int PUT_BYTES = 20;
    public static final int GET_BYTES = 12;

    private HostCallbackOps() {
    }

    /** A decoded request: one record per operation. */
    public sealed interface Request permits Enqueue, Await, Open, Put, Get {
    }

    /**
     * Put a gate into {@code stream} ({@code flags}: cuStreamAddCallback's, 0 for a host function;
     * {@code work}: the guest's token for a host function, used when the stream captures, or 0).
     */
    public record Enqueue(long stream, int flags, long work) implements Request {
    }

    /** Wait for the next gate a stream has reached. */
    public record Await() implements Request {
    }

    /** Open {@code gate}, letting later work on its stream run. */
    public record Open(long gate) implements Request {
    }

    /** Fill the staging buffer of graph gate {@code gate} with {@code bytes} of DATA that follow. */
    public record Put(long gate, long bytes) implements Request {
    }

    /** Read the staging buffer of graph gate {@code gate} (its bytes come back as DATA). */
    public record Get(long gate) implements Request {
    }

    /**
     * AWAIT's reply: the gate reached and the stream's status; for a graph node's gate the guest's work
     * token (0: a stream callback) and its staging buffer's size.
     */
    public record Reached(long gate, int status, long work, long bytes) {
    }

    private static final Await AWAIT_REQUEST = new Await();

    // ---- requests (frontend writes, backend reads) -----------------------------------------------

    public static void putEnqueue(ByteBuffer b, long stream, int flags, long work) {
        b.putInt(ENQUEUE).putLong(stream).putInt(flags).putLong(work);
    }

    public static void putAwait(ByteBuffer b) {
        b.putInt(AWAIT);
    }

    public static void putOpen(ByteBuffer b, long gate) {
        b.putInt(OPEN).putLong(gate);
    }

    public static void putPut(ByteBuffer b, long gate, long bytes) {
        b.putInt(PUT).putLong(gate).putLong(bytes);
    }

    public static void putGet(ByteBuffer b, long gate) {
        b.putInt(GET).putLong(gate);
    }

    /**
     * Reads a request: its op and that op's fields. Throws ProtocolException naming an unknown op,
     * {@link java.nio.BufferUnderflowException} on a truncated body.
     */
    public static Request read(ByteBuffer b) throws ProtocolException {
        int op = b.getInt();
        return switch (op) {
            case ENQUEUE -> {
                long stream = b.getLong();
                int flags = b.getInt();
                long work = b.getLong();
                yield new Enqueue(stream, flags, work);
            }
            case AWAIT -> AWAIT_REQUEST;
            case OPEN -> new Open(b.getLong());
            case PUT -> {
                long gate = b.getLong();
                long bytes = b.getLong();
                if (bytes < 0) {
                    throw new ProtocolException("cuStreamAddCallback: PUT of bytes=" + bytes);
                }
                yield new Put(gate, bytes);
            }
            case GET -> new Get(b.getLong());
            default -> throw new ProtocolException("cuStreamAddCallback/cuLaunchHostFunc: unknown operation: op=" + op);
        };
    }

    // ---- replies (backend writes after the CUresult, frontend reads) -------------------------------

    public static void putEnqueueReply(ByteBuffer b, long gate) {
        b.putLong(gate);
    }

    public static long readEnqueueReply(ByteBuffer b) {
        return b.getLong();
    }

    public static void putAwaitReply(ByteBuffer b, long gate, int status, long work, long bytes) {
        b.putLong(gate).putInt(status).putLong(work).putLong(bytes);
    }

    public static Reached readAwaitReply(ByteBuffer b) {
        long gate = b.getLong();
        int status = b.getInt();
        long work = b.getLong();
        long bytes = b.getLong();
        return new Reached(gate, status, work, bytes);
    }
}
