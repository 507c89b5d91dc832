package io.gpusockets.transport.vsock;

import io.gpusockets.protocol.transport.TransportConformanceSuite;
import io.gpusockets.protocol.transport.TransportUri;
import org.junit.jupiter.api.BeforeAll;

/** The conformance suite over real AF_VSOCK through CID 1; the whole class is skipped where loopback is missing. */
class VsockLoopbackConformanceTest extends TransportConformanceSuite {
    @BeforeAll
    static void requireLoopback() {
        VsockLoopback.require();
    }

    @Override
    protected TransportUri listenUri() {
        return TransportUri.parse("vsock://1:0");
    }
}
