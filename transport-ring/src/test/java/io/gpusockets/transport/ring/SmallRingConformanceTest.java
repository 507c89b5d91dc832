package io.gpusockets.transport.ring;

import io.gpusockets.protocol.transport.TransportConformanceSuite;
import io.gpusockets.protocol.transport.TransportUri;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The shared suite over 64 KiB rings: every frame above a few KiB wraps, and the 4 MiB frames and the
 * 64 MiB stream go through the ring in pieces while the reader drains it.
 */
class SmallRingConformanceTest extends TransportConformanceSuite {
    private static final AtomicInteger NEXT = new AtomicInteger();

    @Override
    protected TransportUri listenUri() {
        return TransportUri.parse("ring://small-" + ProcessHandle.current().pid() + "-" + NEXT.incrementAndGet() + "?size=64k");
    }

    @Override
    protected long maxBufferedBytes() {
        return 1L << 20;
    }
}
