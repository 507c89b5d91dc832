package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.ProtocolException;

/**
 * Area {@code callbacks}: host callbacks run in the guest, beside the program; the backend only holds
 * the stream at a gate ({@link HostCallbackGates}) until the guest's callback has run.
 *
 * <p>Request bodies of cuStreamAddCallback and cuLaunchHostFunc start with an operation:
 * <pre>
 *   ENQUEUE  op u32, stream u64, flags u32  →  gate u64
 *   AWAIT    op u32                         →  gate u64, status i32   (blocks the lane until a gate is reached)
 *   OPEN     op u32, gate u64               →  (nothing)
 * </pre>
 */
final class CallbackCalls implements BackendHandlers.Callbacks {
    static final int ENQUEUE = 0;
    static final int AWAIT = 1;
    static final int OPEN = 2;

    private final Session session;

    CallbackCalls(Session session) {
        this.session = session;
    }

    @Override
    public int cuStreamAddCallback(Call c) throws ProtocolException, CallRejected, InterruptedException {
        return gate(c);
    }

    @Override
    public int cuLaunchHostFunc(Call c) throws ProtocolException, CallRejected, InterruptedException {
        return gate(c);
    }

    private int gate(Call c) throws ProtocolException, CallRejected, InterruptedException {
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
