package io.gpusockets.transport.tcp;

import io.gpusockets.protocol.transport.TransportConformanceSuite;
import io.gpusockets.protocol.transport.TransportUri;

class TcpConformanceTest extends TransportConformanceSuite {
    @Override
    protected TransportUri listenUri() {
        return TransportUri.parse("tcp://127.0.0.1:0");
    }
}
