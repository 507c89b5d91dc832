package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Work the backend cannot let into a graph: a copy to or from host memory whose data travels with the
 * call (the host side is the guest's, staged through buffers the backend reuses at once; the frontend
 * files an async host copy on a capturing stream as a memcpy node of the capture instead, its
 * CapturedCopies, so only a copy it sent anyway reaches this, e.g. one racing a capture another thread
 * begins) or a stream callback (its gate waits for a guest callback that a later graph launch never asks
 * for; a host function the guest filed as graph work becomes a graph gate instead, CallbackCalls). On a
 * capturing stream such a call is
 * refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and its capture is remembered as invalidated:
 * cuStreamEndCapture then destroys the graph and answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, as the
 * driver does for a capture in which an unsupported call was made. It also tells whether a stream
 * captures ({@link #capturing}), for the stream-ordered allocations a capture turns into graph memory
 * nodes (charged differently: {@link SessionQuota#keepGraphMemory}). One per session.
 */
final class CaptureGuard {
    /** Capture ids (cuStreamGetCaptureInfo) in which work was refused; each leaves at its cuStreamEndCapture. */
    private final Set<Long> refused = ConcurrentHashMap.newKeySet();
    /**
     * Set by the session's first cuStreamBeginCapture*: only then can one of its streams capture (a
     * stream joins a capture only through a capture's event, and captures never span sessions), so
     * until then host copies need no capture query.
     */
    private volatile boolean capturing;

    /** Called before each cuStreamBeginCapture* of the session reaches the driver. */
    void captureBegins() {
        capturing = true;
    }

    /** Whether a capture ever began in the session (only then can a stream be capturing). */
    boolean everCaptured() {
        return capturing;
    }

    /** Refuses {@code what} when {@code stream} (a driver handle) is capturing. */
    void refuseHostWork(Call c, CudaDriver driver, long stream, String what) throws CallRejected {
        refuseInCapture(c, driver, stream, what + " on a capturing stream with its data or callback at the call: the graph runs later, away"
                + " from the guest (the frontend files captured host copies and host functions as graph work)");
    }

    /** Whether {@code stream} (a driver handle) is capturing now; no driver query before the session's first capture. */
    boolean capturing(Call c, CudaDriver driver, long stream) {
        return captureId(c, driver, stream) != 0;
    }

    private void refuseInCapture(Call c, CudaDriver driver, long stream, String why) throws CallRejected {
        long id = captureId(c, driver, stream);
        if (id == 0) {
            return;
        }
        refused.add(id);
        throw new CallRejected(CuResult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, why);
    }

    /** The id of the capture {@code stream} takes part in, or 0 when it captures nothing (the driver numbers captures from 1). */
    private long captureId(Call c, CudaDriver driver, long stream) {
        if (!capturing) {
            return 0;
        }
        MemorySegment status = c.scratch(4);
        MemorySegment id = c.scratch(8);
        if (driver.cuStreamGetCaptureInfo_v1(stream, status, id) != CuResult.CUDA_SUCCESS
                || status.get(ValueLayout.JAVA_INT, 0) == 0) {
            return 0;   // not capturing (or not a stream the driver knows: the call itself reports that)
        }
        return Math.max(1, id.get(ValueLayout.JAVA_LONG, 0));
    }

    /** Whether work was refused in capture {@code id}; forgets it. */
    boolean takeRefused(long id) {
        return refused.remove(id);
    }
}
