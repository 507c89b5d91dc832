package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.CuResult;
import java.nio.ByteOrder;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Peer faults are logged rate-limited per session (a few lines and a summary, not a line per bad frame),
 * and a call the backend does not take over the wire gets a CUDA error and one line, never a stack trace.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PeerFaultLogTest extends EmulatedBackendTest {
    private static final int BAD_FRAMES = 500;

    @Test
    void aFloodOfBadFramesCostsTheLogAFewLines() throws Exception {
        long session;
        try (RawClient c = RawClient.session(backend.tcp())) {
            session = c.sessionId;
            for (int i = 0; i < BAD_FRAMES; i++) {
                RawClient.Frame f = c.call(0x7eadbe00 + i, RawClient.body(8).putLong(i));
                assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, f.body().order(ByteOrder.LITTLE_ENDIAN).getInt());
            }
        }
        backend.awaitLog("session " + session + " ended", 10_000);
        List<String> lines = backend.output().stream().filter(l -> l.contains("session " + session + ":")).toList();
        assertTrue(lines.size() <= 20, "one line per bad frame: " + lines.size() + " lines");
        assertTrue(lines.stream().anyMatch(l -> l.contains("more peer faults suppressed")), String.join("\n", lines));
    }

    @Test
    void pointerOptionsOfAFrontendOnlyCallGetNotSupportedWithoutAStackTrace() throws Exception {
        long session;
        try (RawClient c = RawClient.session(backend.unix())) {
            session = c.sessionId;
            // cuModuleLoadDataEx: an empty image, one JIT option (its arrays are pointers into the guest)
            RawClient.Frame f = c.call(RawClient.opcode("cuModuleLoadDataEx"), RawClient.body(12).putLong(0).putInt(1));
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, f.body().order(ByteOrder.LITTLE_ENDIAN).getInt());
        }
        backend.awaitLog("session " + session + " ended", 10_000);
        List<String> out = backend.output();
        assertTrue(out.stream().noneMatch(l -> l.startsWith("\tat ") || l.contains("Exception")),
                "a stack trace was logged:\n" + String.join("\n", out));
    }
}
