package io.gpusockets.backend.session;

/**
 * Told how a checkpoint or a restore goes: {@code stage} ("drain", "records", "contents", "replay"...), and
 * {@code done} of {@code total} units (bytes for contents, records for the replay).
 */
@FunctionalInterface
public interface CheckpointProgress {
    /** Tells nothing. */
    CheckpointProgress NONE = (stage, done, total) -> { };

    void progress(String stage, long done, long total);
}
