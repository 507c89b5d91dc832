package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_STATE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

/**
 * What a stream remembers of its creation (cuStreamGetFlags, cuStreamGetPriority) and
 * cuEventRecordWithFlags. The legacy and per-thread default streams answer flags 0 and priority 0,
 * as the real driver does; they need a current context, created streams do not.
 */
final class StreamQueries {
    /** CU_EVENT_RECORD_EXTERNAL: only meaningful during stream capture, which is not emulated. */
    static final int RECORD_EXTERNAL = 0x1;

    private final Contexts contexts;
    private final Streams streams;

    StreamQueries(Contexts contexts, Streams streams) {
        this.contexts = contexts;
        this.streams = streams;
    }

    int flags(long hStream) {
        EmulatedStream s = created(hStream);
        return s == null ? 0 : s.flags;
    }

    int priority(long hStream) {
        EmulatedStream s = created(hStream);
        return s == null ? 0 : s.priority;
    }

    /** A created stream, or null for the special handles (after checking there is a context for them). */
    private EmulatedStream created(long hStream) {
        if (hStream >= 0 && hStream <= Streams.PER_THREAD) {
            contexts.current();
            return null;
        }
        return contexts.lookup(hStream, EmulatedStream.class, "hStream");
    }

    void recordWithFlags(long hEvent, long hStream, int flags) {
        if ((flags & ~RECORD_EXTERNAL) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=0x" + Integer.toHexString(flags));
        }
        if (flags == RECORD_EXTERNAL) {
            EmulatedContext c = contexts.active();
            EmulatedStream s = streams.resolve(hStream, c);
            if (s.capture != null) {   // in a capture: an event record node of the graph
                EmulatedEvent e = contexts.lookup(hEvent, EmulatedEvent.class, "hEvent");
                contexts.captures.recordEventNode(s, EmulatedGraph.EVENT_RECORD, e);
                return;
            }
            // What the real driver answers outside stream capture.
            throw new CudaError(CUDA_ERROR_ILLEGAL_STATE, "CU_EVENT_RECORD_EXTERNAL outside stream capture");
        }
        streams.record(hEvent, hStream);
    }
}
