package io.gpusockets.frontend;

import io.gpusockets.protocol.transport.SharedWindow;
import io.gpusockets.protocol.wire.ProtocolException;
import io.gpusockets.protocol.wire.WindowSlots;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * The frontend's side of the memory a connection shares with its backend, over the rules both sides
 * follow ({@link WindowSlots}). Owns the segment, the one call at a time that may put bulk data in it
 * (from its request to its reply), the input slots and the count of input frames sent, the count of
 * output frames copied out (published to the backend, which then reuses their slots), the check of the
 * backend's references into it, and the unmapping at close.
 *
 * <p>A window belongs to one connection ({@link #channel}): frames that refer to it mean it only there. When a
 * resumable session resumes on a new ring, the connection {@linkplain #retire retires} the old window (a call that
 * holds it goes on through the byte stream and unmaps it when it lets go) and uses the new ring's.
 */
final class FrontendWindow {
    /** How long {@link #close} waits for a call still holding the window. */
    private static final long CLOSE_WAIT_SECONDS = 5;

    private final SharedWindow window;
    /** Held by the one call whose bulk data is in the window, from its request to its reply. */
    private final ReentrantLock holder = new ReentrantLock();
    private final long slotBytes;
    /** Input slots in the window (0: no input through it). */
    private final int inSlots;
    /** Window input frames sent, ever (under {@link #holder}). */
    private long inSent;
    /** Window output frames copied out, ever (by whichever thread reads). */
    private long outTaken;
    /** The connection the window came with, or null where none is named (tests). */
    private final Object channel;
    /** The connection was lost and the session resumed on another: no call takes this window any more. */
    private volatile boolean retired;
    private final java.util.concurrent.atomic.AtomicBoolean unmapped = new java.util.concurrent.atomic.AtomicBoolean();

    /** {@code slotBytes}: the bytes one input frame carries. */
    FrontendWindow(SharedWindow window, long slotBytes) {
        this(window, slotBytes, null);
    }

    /** {@code channel}: the connection the window came with; references to it are sent and resolved only there. */
    FrontendWindow(SharedWindow window, long slotBytes, Object channel) {
        this.window = window;
        this.slotBytes = slotBytes;
        this.inSlots = WindowSlots.inputSlots(window.segment().byteSize(), slotBytes);
        this.channel = channel;
    }

    /** Whether a call holds the window now. */
    boolean held() {
        return holder.isLocked();
    }

    /** The connection the window came with. */
    Object channel() {
        return channel;
    }

    /**
     * The session resumed on another connection: no call takes this window any more; it is unmapped at once when
     * no call holds it, else when the call that holds it lets go (that call goes on through the byte stream).
     */
    void retire() {
        retired = true;
        if (!holder.isHeldByCurrentThread() && holder.tryLock()) {
            try {
                unmap();
            } finally {
                holder.unlock();
            }
        }
    }

    private void unmap() {
        if (unmapped.compareAndSet(false, true)) {
            window.release();
        }
    }

    MemorySegment segment() {
        return window.segment();
    }

    /**
     * Takes the window for one call with bulk data going out ({@code in}) or coming back; false when
     * another call holds it, or when the call has input and the window has no input slots. A call that
     * got it gives it back with {@link #letGo}.
     */
    boolean tryHold(boolean in) {
        if ((in && inSlots == 0) || retired || !holder.tryLock()) {
            return false;
        }
        if (retired) {
            letGo();
            return false;
        }
        return true;
    }

    void letGo() {
        holder.unlock();
        if (retired && holder.tryLock()) {
            try {
                unmap();
            } finally {
                holder.unlock();
            }
        }
    }

    /**
     * Where the next input frame goes in the window, once the backend is done with the frame that last
     * used that slot; call {@link #inputSent} after sending it. Waits (spinning, then sleeping) while
     * the backend is behind, for as long as it is: a copy behind a long kernel on the legacy stream
     * waits for the kernel, as it would natively. -1 when {@code stop} says the backend is gone.
     */
    long nextInputSlot(BooleanSupplier stop) {
        if (!WindowSlots.await(window.segment(), WindowSlots.IN_RELEASED_OFFSET, inSent - inSlots + 1, stop)) {
            return -1;
        }
        return WindowSlots.inputSlotOffset((int) (inSent % inSlots), slotBytes);
    }

    /** The frame for the slot {@link #nextInputSlot} gave is sent. */
    void inputSent() {
        inSent++;
    }

    /** The window bytes the body of a window DATA frame from the backend names, checked against the window. */
    MemorySegment resolve(ByteBuffer ref) throws ProtocolException {
        return WindowSlots.resolve(window.segment(), ref);
    }

    /** A window output frame is copied out: the backend may fill that slot again. */
    void outputTaken() {
        WindowSlots.publish(window.segment(), WindowSlots.OUT_TAKEN_OFFSET, ++outTaken);
    }

    /**
     * Unmaps the window once no call holds it. Called after the connection is marked broken, so a call
     * can take it no more and one still inside its exchange lets go once it has failed; a call stuck
     * with it past {@link #CLOSE_WAIT_SECONDS} leaves it mapped rather than have it pulled away.
     */
    void close() {
        try {
            if (holder.tryLock(CLOSE_WAIT_SECONDS, TimeUnit.SECONDS)) {
                try {
                    unmap();
                } finally {
                    holder.unlock();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
