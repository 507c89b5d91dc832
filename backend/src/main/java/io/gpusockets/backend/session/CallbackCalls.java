package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.HostCallbackOps;
import io.gpusockets.protocol.wire.ProtocolException;

/**
 * Area {@code callbacks}: host callbacks run in the guest, beside the program; the backend only holds
 * the stream at a gate ({@link HostCallbackGates}) until the guest's callback has run.
 *
 * <p>Requests and replies are {@link HostCallbackOps}'s: enqueue a gate, await the next gate
 * reached (blocking the lane), open a gate.
 */
final class CallbackCalls implements BackendHandlers.Callbacks {
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
        HostCallbackOps.Request op = HostCallbackOps.read(c.body);
        c.expectEnd();
        return switch (op) {
            case HostCallbackOps.Enqueue e -> {
                long stream = c.handle(ParamType.STREAM, e.stream(), true);
                session.captureGuard().refuseHostWork(c, session.host().driver(), stream, c.name());
                long[] id = new long[1];
                int r = gates.enqueue(session.host().driver(), stream, e.flags(), id);
                HostCallbackOps.putEnqueueReply(c.outs, id[0]);
                yield r;
            }
            case HostCallbackOps.Await a -> {
                long[] gate = new long[2];
                int r = gates.await(gate);
                HostCallbackOps.putAwaitReply(c.outs, gate[0], (int) gate[1]);
                yield r;
            }
            case HostCallbackOps.Open o -> gates.open(o.gate());
        };
    }
}
