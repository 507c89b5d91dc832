package io.gpusockets.backend.session;

/**
 * A checkpoint that cannot be taken, or a restore that cannot be made: the message names every reason (each
 * feature in use that a checkpoint cannot capture). A refused checkpoint leaves its session running; a refused
 * restore leaves nothing behind. {@link #anotherProcessMay}: a restore refused only because of this process's own
 * address space (an address window it needs is taken by the process's own memory), which another process may not have.
 */
public final class CheckpointRefused extends Exception {
    private final boolean anotherProcessMay;

    public CheckpointRefused(String message) {
        this(message, false);
    }

    public CheckpointRefused(String message, boolean anotherProcessMay) {
        super(message);
        this.anotherProcessMay = anotherProcessMay;
    }

    /** Whether the same restore in another process (a fresh worker) may succeed: see the class. */
    public boolean anotherProcessMay() {
        return anotherProcessMay;
    }
}
