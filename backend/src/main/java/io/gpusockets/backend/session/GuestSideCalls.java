package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.ProtocolException;

/**
 * Entries whose real work happens in the guest, beside the program: cuModuleLoad (the frontend reads
 * the file and sends it as cuModuleLoadData; a backend never opens a path a client names) and the
 * host callbacks, for which the backend only holds the stream at a gate ({@link HostCallbackGates}).
 *
 * <p>Request bodies of cuStreamAddCallback and cuLaunchHostFunc start with an operation:
 * <pre>
 *   ENQUEUE  op u32, stream u64, flags u32  →  gate u64
 *   AWAIT    op u32                         →  gate u64, status i32   (blocks the lane until a gate is reached)
 *   OPEN     op u32, gate u64               →  (nothing)
 * </pre>
 */
final class GuestSideCalls {
    static final int ENQUEUE = 0;
    static final int AWAIT = 1;
    static final int OPEN = 2;

    private final Session session;

    GuestSideCalls(Session session) {
        this.session = session;
    }

    int handle(Call c) throws ProtocolException, CallRejected, InterruptedException {
        if (c.function.name().equals("cuModuleLoad")) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "module files are read by the frontend");
        }
        HostCallbackGates gates = session.callbackGates();
        int op = c.readInt();
        switch (op) {
            case ENQUEUE -> {
                long streamId = c.readLong();
                int flags = c.readInt();
                c.expectEnd();
                long stream = c.handle(ParamType.STREAM, streamId, true);
                long[] id = new long[1];
                int r = gates.enqueue(session.host().driver(), stream, flags, id);
                c.outs.putLong(id[0]);
                return r;
            }
            case AWAIT -> {
                c.expectEnd();
                long[] gate = new long[2];
                int r = gates.await(gate);
                c.outs.putLong(gate[0]).putInt((int) gate[1]);
                return r;
            }
            case OPEN -> {
                long gate = c.readLong();
                c.expectEnd();
                return gates.open(gate);
            }
            default -> throw new ProtocolException(c.name() + ": unknown operation " + op);
        }
    }
}
