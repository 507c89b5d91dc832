package io.gpusockets.backend.session;

/**
 * A checkpoint that cannot be taken, or a restore that cannot be made: the message names every reason (each
 * feature in use that a checkpoint cannot capture). A refused checkpoint leaves its session running; a refused
 * restore leaves nothing behind.
 */
public final class CheckpointRefused extends Exception {
    public CheckpointRefused(String message) {
        super(message);
    }
}
