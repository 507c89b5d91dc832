package io.gpusockets.transport.ring;

import io.gpusockets.protocol.transport.TransportConformanceSuite;
import io.gpusockets.protocol.transport.TransportUri;
import java.util.concurrent.atomic.AtomicInteger;

/** The shared suite over rings of the default size (4 MiB per direction). */
class RingConformanceTest extends TransportConformanceSuite {
    private static final AtomicInteger NEXT = new AtomicInteger();

    @Override
    protected TransportUri listenUri() {
        return TransportUri.parse("ring://conf-" + ProcessHandle.current().pid() + "-" + NEXT.incrementAndGet());
    }
}
