package io.gpusockets.protocol.transport;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/** A shared window in this process's memory, for testing either side's window code without a transport. */
public final class HeapWindow implements SharedWindow {
    private final MemorySegment segment;
    private volatile boolean released;

    public HeapWindow(long bytes) {
        segment = Arena.ofAuto().allocate(bytes, 4096);
    }

    @Override
    public MemorySegment segment() {
        return segment;
    }

    @Override
    public void release() {
        released = true;
    }

    /** Whether its taker released it. */
    public boolean released() {
        return released;
    }
}
