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
 *
 * <p>A window belongs to one connection (a ring's mapping): a resumable session that resumes on a new ring gets
 * a new window and {@linkplain #retire retires} the old one. Frames read before the resume may still refer to a
 * retired window: it stays mapped (and page-locked) until the last of them is done with and no copy to the host
 * writes it ({@link #tryUse}), then it is unpinned and unmapped. A copy to the host waiting for a slot of a
 * retired window is told so ({@link #nextOutputSlot} returns -1) and sends the rest through the byte stream.
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
    /** The connection the window came with (frames referring to it travel on it), or null where unknown. */
    private final Object channel;
    /** Attached at a resume, not at the session's start. */
    private final boolean resumed;
    /** Frames referring to the window not yet done with, and copies to the host writing it now. Guarded by this. */
    private int users;
    /** Its connection is gone: no new use, unmapped once {@link #users} is 0. Guarded by this. */
    private boolean retired;
    /** Unpinned and unmapped (retired and unused, or the session's end). Guarded by this. */
    private boolean released;
    /** Where page-locking is charged, or null. Guarded by this. */
    private SessionQuota quota;

    SessionWindow(long sessionId, SharedWindow window, CudaDriver driver, BooleanSupplier gone) {
        this(sessionId, window, driver, gone, null, false);
    }

    /**
     * {@code gone}: the session ended, or its frontend is gone for good; {@code channel}: the connection the window
     * came with; {@code resumed}: attached when the session resumed on that connection.
     */
    SessionWindow(long sessionId, SharedWindow window, CudaDriver driver, BooleanSupplier gone, Object channel, boolean resumed) {
        this.sessionId = sessionId;
        this.window = window;
        this.driver = driver;
        this.gone = gone;
        this.channel = channel;
        this.resumed = resumed;
    }

    /** The connection the window came with: a window reference is valid only on it. */
    Object channel() {
        return channel;
    }

    /** Whether the window came with a resume (for the count of bytes through windows re-created at resumes). */
    boolean resumed() {
        return resumed;
    }

    /**
     * Takes the window for one copy to the host that writes it; false once it is retired. The copy gives it back
     * with {@link #doneUsing}.
     */
    synchronized boolean tryUse() {
        if (retired || released) {
            return false;
        }
        users++;
        return true;
    }

    /** A copy that {@link #tryUse took} the window is done with it. */
    void doneUsing() {
        boolean last;
        synchronized (this) {
            last = --users == 0 && retired;
        }
        if (last) {
            unmapRetired();
        }
    }

    /**
     * Its connection is gone (the session resumes on another, with a window of its own): no new use; unpinned and
     * unmapped once the frames that refer to it are done with, at once when none does.
     */
    void retire() {
        boolean now;
        synchronized (this) {
            retired = true;
            now = users == 0;
        }
        if (now) {
            unmapRetired();
        }
    }

    synchronized boolean retired() {
        return retired;
    }

    /** Whether the window is unmapped here (retired and unused, or the session's end). */
    synchronized boolean released() {
        return released;
    }

    private void unmapRetired() {
        synchronized (this) {
            if (released) {
                return;
            }
            released = true;
        }
        unpin(0);
        window.release();
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
        synchronized (this) {
            users++; // read on the window's own connection, which is not retired while its reader reads it
        }
        return new Inbound(h, in.asByteBuffer().order(ByteOrder.LITTLE_ENDIAN), BodyBudget.MIN_CHARGE, this);
    }

    /** An input frame's bytes are done with: the frontend may refill its slot. */
    void inputDone() {
        boolean last;
        synchronized (this) {
            if (!released) {
                WindowSlots.publish(window.segment(), WindowSlots.IN_RELEASED_OFFSET, ++inReleased);
            }
            last = --users == 0 && retired;
        }
        if (last) {
            unmapRetired();
        }
    }

    /**
     * The window offset where the next output frame goes, in one of {@code slots} output slots of
     * {@code slotBytes}, once the frontend has copied out the frame that last used that slot; call
     * {@link #outputSent} after sending it. Waits for as long as the frontend is there: it ends
     * with an IOException when the frontend goes away or the session ends, an InterruptedException
     * when the lane is interrupted, and -1 when the window is {@linkplain #retire retired} (the
     * session resumes on a new connection: the copy sends the rest through the byte stream). A
     * frontend that never takes its data holds only its own lane. Only while {@link #tryUse} holds it.
     */
    long nextOutputSlot(int slots, long slotBytes) throws IOException, InterruptedException {
        MemorySegment w = window.segment();
        long sent;
        synchronized (this) {
            sent = outSent;
        }
        boolean[] interrupted = new boolean[1];
        if (!WindowSlots.await(w, WindowSlots.OUT_TAKEN_OFFSET, sent - slots + 1,
                () -> (interrupted[0] = Thread.interrupted()) || gone.getAsBoolean() || retired())) {
            if (interrupted[0]) {
                throw new InterruptedException("session ending while waiting for the frontend to take window data");
            }
            if (!gone.getAsBoolean() && retired()) {
                return -1;
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
        if (pinRefused || released || context == 0) {
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
        synchronized (this) {
            released = true;
        }
        window.release();
    }
}
