package io.gpusockets.transport.unix;

import io.gpusockets.protocol.transport.TransportConformanceSuite;
import io.gpusockets.protocol.transport.TransportUri;
import java.nio.file.Path;
import org.junit.jupiter.api.io.TempDir;

class UnixConformanceTest extends TransportConformanceSuite {
    @TempDir
    Path dir;

    @Override
    protected TransportUri listenUri() {
        return TransportUri.parse("unix://" + dir.resolve("backend.sock"));
    }
}
