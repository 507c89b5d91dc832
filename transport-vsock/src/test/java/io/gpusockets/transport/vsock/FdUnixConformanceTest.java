package io.gpusockets.transport.vsock;

import io.gpusockets.protocol.transport.TransportConformanceSuite;
import io.gpusockets.protocol.transport.TransportUri;
import java.nio.file.Path;
import org.junit.jupiter.api.io.TempDir;

/** The whole FFM socket layer (AF_UNIX through the same code as AF_VSOCK) against the shared suite. */
class FdUnixConformanceTest extends TransportConformanceSuite {
    @TempDir
    Path dir;

    @Override
    protected TransportUri listenUri() {
        return TransportUri.parse("fdunix://" + dir.resolve("backend.sock"));
    }
}
