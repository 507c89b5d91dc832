package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.SharedWindow;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.ProtocolException;
import io.gpusockets.protocol.wire.WindowSlots;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BooleanSupplier;

/**
 * The backend's side of the memory a session shares with its frontend (the connection's window), over
 * the rules both sides follow ({@link WindowSlots}). Owns the segment, the two frame counters this
 * side keeps (input frames done with, published to the frontend; output frames sent), the window's
 * page-locking with the driver, the check of incoming window references, the count of bytes carried,
 * and the unmapping at the session's end.
 *
 * <p>DATA frames flagged FLAG_WINDOW refer to it; copies to the host may be placed in it. Only the
 * frontend's own data is ever in it, so a frontend that writes it at the wrong time harms nobody else.
 */
final class SessionWindow {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** cuMemHostRegister flag: the registration is seen by every context, not only the registering one. */
    static final int MEMHOSTREGISTER_PORTABLE = 0x01;

    private final long sessionId;
    private final SharedWindow window;
    private final CudaDriver driver;
    /** True once the session has ended or the frontend is gone: a wait for a slot then gives up. */
    private final BooleanSupplier gone;
    /** Bulk bytes that went through the window, both ways. */
    private final LongAdder bytes = new LongAdder();
    /** Window input frames done with, ever; published to the frontend, which then reuses their slots. Guarded by this. */
    private long inReleased;
    /** Window output frames sent, ever (by whichever lane holds the frontend's window call). Guarded by this. */
    private long outSent;
    /** The real context the window is page-locked in (cuMemHostRegister), 0 while it is not. Guarded by this. */
    private long pinnedIn;
    /** The driver refused to page-lock the window once: copies through it go through the driver's own staging. */
    private boolean pinRefused;
    /** Where page-locking is charged, or null. Guarded by this. */
    private SessionQuota quota;

    SessionWindow(long sessionId, SharedWindow window, CudaDriver driver, BooleanSupplier gone) {
        this.sessionId = sessionId;
        this.window = window;
        this.driver = driver;
        this.gone = gone;
    }

    /** The shared memory itself. */
    MemorySegment segment() {
        return window.segment();
    }

    /**
     * The window DATA frame {@code h}, whose body {@code ref} names its bytes (offset u64, length u64):
     * checked against the window, charged {@link BodyBudget#MIN_CHARGE} (its bytes take none of the
     * backend's memory) and used in place, never copied out first.
     */
    Inbound data(FrameHeader h, ByteBuffer ref, BodyBudget budget) throws IOException, InterruptedException {
        MemorySegment in = WindowSlots.resolve(window.segment(), ref);
        budget.acquire(BodyBudget.MIN_CHARGE);
        bytes.add(in.byteSize());
        return new Inbound(h, in.asByteBuffer().order(ByteOrder.LITTLE_ENDIAN), BodyBudget.MIN_CHARGE);
    }

    /** An input frame's bytes are done with: the frontend may refill its slot. */
    synchronized void inputDone() {
        WindowSlots.publish(window.segment(), WindowSlots.IN_RELEASED_OFFSET, ++inReleased);
    }

    /**
     * The window offset where the next output frame goes, in one of {@code slots} output slots of
     * {@code slotBytes}, once the frontend has copied out the frame that last used that slot; call
     * {@link #outputSent} after sending it. Waits for as long as the frontend is there: it ends
     * with an IOException when the frontend goes away or the session ends, and an InterruptedException
     * when the lane is interrupted. A frontend that never takes its data holds only its own lane.
     */
    long nextOutputSlot(int slots, long slotBytes) throws IOException, InterruptedException {
        MemorySegment w = window.segment();
        long sent;
        synchronized (this) {
            sent = outSent;
        }
        boolean[] interrupted = new boolean[1];
        if (!WindowSlots.await(w, WindowSlots.OUT_TAKEN_OFFSET, sent - slots + 1,
                () -> (interrupted[0] = Thread.interrupted()) || gone.getAsBoolean())) {
            if (interrupted[0]) {
                throw new InterruptedException("session ending while waiting for the frontend to take window data");
            }
            throw new IOException("frontend gone while window data was waiting for it");
        }
        return WindowSlots.outputSlotOffset(w.byteSize(), (int) (sent % slots), slotBytes);
    }

    /** An output frame of {@code length} bytes was sent through the window. */
    synchronized void outputSent(long length) {
        outSent++;
        bytes.add(length);
    }

    /** Bulk bytes that went through the window so far, both ways. */
    long bytes() {
        return bytes.sum();
    }

    /**
     * Page-locks the window with the driver, once, portably (so that any context may DMA to and from
     * it), in {@code context}, the caller's current context. Then the device reads and writes the
     * window itself, with no copy on this side. False where the driver will not (the emulated device
     * has no page-locking): copies through the window then go through the driver's staging.
     */
    /** Where page-locking the window is charged (the session's tenant's pinned limit), or null for nowhere. */
    synchronized void pinQuota(SessionQuota q) {
        this.quota = q;
    }

    synchronized boolean pin(long context) {
        if (pinnedIn != 0) {
            return true;
        }
        if (pinRefused || context == 0) {
            return false;
        }
        MemorySegment w = window.segment();
        if (quota != null && !quota.reservePinned(w.byteSize())) {
            pinRefused = true;
            LOG.log(Level.INFO, "session " + sessionId + ": the shared window is not page-locked: tenant "
                    + quota.tenant().name() + " is at its pinned-memory limit; copies through it are staged by the driver");
            return false;
        }
        int r = driver.cuMemHostRegister(w, w.byteSize(), MEMHOSTREGISTER_PORTABLE);
        if (r == CuResult.CUDA_SUCCESS) {
            pinnedIn = context;
            return true;
        }
        if (quota != null) {
            quota.releasePinned(w.byteSize());
        }
        pinRefused = true;
        LOG.log(r == CuResult.CUDA_ERROR_NOT_SUPPORTED ? Level.DEBUG : Level.INFO, "session " + sessionId
                + ": the shared window could not be page-locked (" + CuResult.name(r) + "); copies through it are staged by the driver");
        return false;
    }

    /** Undoes {@link #pin} if it was done in {@code context} (in any context when 0), from any thread. */
    synchronized void unpin(long context) {
        if (pinnedIn == 0 || (context != 0 && pinnedIn != context)) {
            return;
        }
        boolean pushed = driver.cuCtxPushCurrent(pinnedIn) == CuResult.CUDA_SUCCESS;
        int r = driver.cuMemHostUnregister(window.segment());
        if (pushed) {
            try (Arena a = Arena.ofConfined()) {
                driver.cuCtxPopCurrent(a.allocate(ValueLayout.ADDRESS));
            }
        }
        if (r != CuResult.CUDA_SUCCESS) {
            LOG.log(Level.WARNING, "session " + sessionId + ": cuMemHostUnregister of the shared window failed: " + CuResult.name(r));
        }
        if (quota != null) {
            quota.releasePinned(window.segment().byteSize());
        }
        pinnedIn = 0;
    }

    /** The real context the window is page-locked in, 0 for none. */
    synchronized long pinnedIn() {
        return pinnedIn;
    }

    /** Unmaps the window here; only once nothing of the session touches it any more. */
    void release() {
        window.release();
    }
}
