package io.gpusockets.backend.session;

/**
 * What a checkpoint wrote: the image's bytes, the allocations and globals whose contents it holds, the records
 * it holds, and how long each stage took (drain: until no call ran and the device was idle; image: writing).
 */
public record CheckpointResult(long bytesWritten, int allocations, int records, long drainNanos, long imageNanos) {
}
