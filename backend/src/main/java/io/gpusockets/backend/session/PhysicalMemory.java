package io.gpusockets.backend.session;

/**
 * One physical allocation backing a session's address window ({@link StableAddresses}): {@code size} bytes of the
 * driver's allocation handle {@code handle} mapped at {@code address} on {@code device}. What a hand-over to another
 * backend process on the same GPU exports ({@link Session#physicalMemory}), and, on the receiving side with the
 * handle imported there, what its restore maps at the same address ({@link SessionRestore}).
 */
public record PhysicalMemory(long address, long size, long handle, int device) {
}
