package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.HostCallbackOps;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;

/**
 * Area {@code callbacks}: host callbacks run in the guest, beside the program; the backend only holds
 * the stream at a gate ({@link HostCallbackGates}) until the guest's callback has run.
 *
 * <p>Requests and replies are {@link HostCallbackOps}'s: enqueue a gate, await the next gate
 * reached (blocking the lane), open a gate; for a graph copy node's gate, fill or read its staging
 * buffer (the size must be the buffer's exactly, checked before any data is received).
 */
final class CallbackCalls implements BackendHandlers.Callbacks {
    private final Session session;

    CallbackCalls(Session session) {
        this.session = session;
    }

    @Override
    public int cuStreamAddCallback(Call c) throws ProtocolException, CallRejected, InterruptedException, java.io.IOException {
        return gate(c, false);
    }

    @Override
    public int cuLaunchHostFunc(Call c) throws ProtocolException, CallRejected, InterruptedException, java.io.IOException {
        return gate(c, true);
    }

    /**
     * {@code hostFunction}: cuLaunchHostFunc, which CUDA allows in a capture: there, with the guest's
     * work token, it becomes a graph gate in the capture (a host node, HostCallbackGates' graph work)
     * and the reply's gate is 0. A stream callback, or a host function without a token, is refused in
     * a capture (CaptureGuard), as before.
     */
    private int gate(Call c, boolean hostFunction) throws ProtocolException, CallRejected, InterruptedException, java.io.IOException {
        HostCallbackGates gates = session.callbackGates();
        HostCallbackOps.Request op = HostCallbackOps.read(c.body);
        c.expectEnd();
        return switch (op) {
            case HostCallbackOps.Enqueue e -> {
                long stream = c.handle(ParamType.STREAM, e.stream(), true);
                if (hostFunction && e.work() != 0 && session.captureGuard().capturing(c, session.driver(), stream)) {
                    HostCallbackGates.GraphWork w = gates.graphWork(e.work(), 0, session.driver(), session.quota());
                    if (w == null) {
                        throw new CallRejected(CuResult.CUDA_ERROR_OUT_OF_MEMORY, "graph work of the session over its bounds");
                    }
                    int r = session.driver().cuLaunchHostFunc(stream, HostCallbackGates.GRAPH_REACHED,
                            MemorySegment.ofAddress(w.key()));
                    HostCallbackOps.putEnqueueReply(c.outs, 0);
                    yield r;
                }
                session.captureGuard().refuseHostWork(c, session.driver(), stream, c.name());
                long[] id = new long[1];
                int r = gates.enqueue(session.driver(), stream, e.flags(), id);
                HostCallbackOps.putEnqueueReply(c.outs, id[0]);
                yield r;
            }
            case HostCallbackOps.Await a -> {
                long[] gate = new long[4];
                int r = gates.await(gate);
                HostCallbackOps.putAwaitReply(c.outs, gate[0], (int) gate[1], gate[2], gate[3]);
                yield r;
            }
            case HostCallbackOps.Open o -> gates.open(o.gate());
            case HostCallbackOps.Put p -> {
                c.expectBulk(p.bytes());   // announced first: a refused PUT's data is drained, never read as another call's
                MemorySegment staging = gates.stagingOf(p.gate(), p.bytes());
                if (staging == null) {
                    throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "PUT of " + p.bytes()
                            + " bytes: not a reached graph copy gate of this session with a staging buffer of that size");
                }
                c.receiveInto(staging, p.bytes());
                yield CuResult.CUDA_SUCCESS;
            }
            case HostCallbackOps.Get g -> {
                long bytes = gates.stagingBytesOf(g.gate());
                MemorySegment staging = bytes < 0 ? null : gates.stagingOf(g.gate(), bytes);
                if (staging == null) {
                    throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE,
                            "GET: not a reached graph copy gate of this session with a staging buffer");
                }
                c.sendData(staging);
                yield CuResult.CUDA_SUCCESS;
            }
        };
    }
}
