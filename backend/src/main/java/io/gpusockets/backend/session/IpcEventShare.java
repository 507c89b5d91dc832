package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * Isolation {@code context} and {@code shared}: one IPC event shared between sessions of the front process
 * (cuIpcGetEventHandle, cuIpcOpenEventHandle; issue 24 item 1). The driver cannot open an IPC event handle in the
 * process that exported it, and an event belongs to its context, which its session's end destroys; so each member
 * (the exporter, and each session's open) has a driver event of its own in its own context, and the members are kept
 * in step by "latest recording" propagation: after a member's event is recorded ({@link #recorded}: cuEventRecord,
 * cuEventRecordWithFlags, not inside a stream capture), every other live member's event is recorded on a stream of
 * the backend in that member's context ({@link Member#stream}, made when the member joins, destroyed when it leaves)
 * behind a cuStreamWaitEvent on the recorded event, so it completes when the recording does (one process, one device:
 * the driver allows a stream to wait for another context's event). The share's lock orders two recordings'
 * propagations as their records were ordered. A member that was never recorded is complete, as the driver's event is;
 * one that joins after a recording follows the latest one (as an opened driver event would).
 *
 * <p>A member leaves before its event or context is destroyed (cuEventDestroy, cuCtxDestroy, the session's end:
 * {@link #leave}, under the lock, so no propagation touches a destroyed event or stream); the other members stay, the
 * exporter's end included: an opener's event keeps its last propagated recording and is still kept in step with the
 * other openers. Bounds: the members are sessions' events (each in its session's bounded handle table); the registry
 * entry is bounded per exporting session ({@link ShareRegistry}).
 */
public final class IpcEventShare {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");
    /** CU_STREAM_NON_BLOCKING: the backend's stream does not wait for a context's legacy stream. */
    static final int STREAM_NON_BLOCKING = 1;

    /**
     * One session's event of the share: its session, its context and event, and the backend's stream in that context
     * (driver values of {@code real}, the host's driver).
     */
    record Member(IpcEventShare share, long session, CudaDriver real, long context, long event, long stream) {
    }

    private final List<Member> members = new ArrayList<>();
    /** The backend's streams of every share of the registry, live now (its count of them: status, tests). */
    private final java.util.concurrent.atomic.AtomicInteger liveStreams;

    /** A share whose members' streams {@code liveStreams} counts (the registry's: {@link ShareRegistry#eventStreams}). */
    IpcEventShare(java.util.concurrent.atomic.AtomicInteger liveStreams) {
        this.liveStreams = liveStreams;
    }
    /** Whether a member was ever recorded: a member joining later follows that recording (the driver's event would). */
    private boolean recordedOnce;

    /**
     * Makes the member of session {@code session} for {@code event} of the context current on the calling thread
     * (its backend stream is made there), joined to this share; refused with the driver's result when the stream
     * cannot be made.
     */
    Member join(long session, CudaDriver real, long event) throws CallRejected {
        long context;
        long stream;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(8);
            int r = real.cuCtxGetCurrent(out);
            context = out.get(ValueLayout.JAVA_LONG, 0);
            if (r != CuResult.CUDA_SUCCESS || context == 0) {
                throw new CallRejected(r == CuResult.CUDA_SUCCESS ? CuResult.CUDA_ERROR_INVALID_CONTEXT : r,
                        "no current context for the IPC event's stream");
            }
            r = real.cuStreamCreate(out, STREAM_NON_BLOCKING);
            if (r != CuResult.CUDA_SUCCESS) {
                throw new CallRejected(r, "the backend's stream for the IPC event could not be made");
            }
            stream = out.get(ValueLayout.JAVA_LONG, 0);
            liveStreams.incrementAndGet();
        }
        Member m = new Member(this, session, real, context, event, stream);
        synchronized (this) {
            if (recordedOnce && !members.isEmpty()) {
                propagate(members.get(0), m); // every member is in step: the newcomer follows the latest recording
            }
            members.add(m);
        }
        return m;
    }

    /**
     * {@code from}'s event was just recorded (by its session, outside a capture): every other member's event is
     * recorded behind it on that member's stream.
     */
    synchronized void recorded(Member from) {
        if (!members.contains(from)) {
            return; // it left meanwhile
        }
        recordedOnce = true;
        for (Member m : members) {
            if (m != from) {
                propagate(from, m);
            }
        }
    }

    /** {@code m}'s event is recorded on its stream behind {@code from}'s event (under the lock). */
    private void propagate(Member from, Member m) {
        {
            CudaDriver real = m.real();
            int r = real.cuCtxPushCurrent(m.context());
            if (r != CuResult.CUDA_SUCCESS) {
                int failed = r;
                LOG.log(Level.DEBUG, () -> "IPC event of session " + m.session() + ": its context could not be made"
                        + " current (" + failed + "); recording not propagated");
                return;
            }
            try {
                r = real.cuStreamWaitEvent(m.stream(), from.event(), 0);
                if (r == CuResult.CUDA_SUCCESS) {
                    r = real.cuEventRecord(m.event(), m.stream());
                }
            } finally {
                try (Arena a = Arena.ofConfined()) {
                    real.cuCtxPopCurrent(a.allocate(8));
                }
            }
            if (r != CuResult.CUDA_SUCCESS) {
                int failed = r;
                LOG.log(Level.DEBUG, () -> "IPC event of session " + m.session() + ": propagating session "
                        + from.session() + "'s recording failed (" + failed + ")");
            }
        }
    }

    /** {@code m} leaves (its event or context is going): no recording touches it from here on; its stream goes. */
    void leave(Member m) {
        synchronized (this) {
            if (!members.remove(m)) {
                return;
            }
        }
        liveStreams.decrementAndGet(); // the context's destroy frees it where it cannot be made current
        CudaDriver real = m.real();
        if (real.cuCtxPushCurrent(m.context()) == CuResult.CUDA_SUCCESS) {
            try {
                real.cuStreamDestroy(m.stream());
            } finally {
                try (Arena a = Arena.ofConfined()) {
                    real.cuCtxPopCurrent(a.allocate(8));
                }
            }
        }
    }

    /** Members now (tests, status). */
    synchronized int members() {
        return members.size();
    }
}
