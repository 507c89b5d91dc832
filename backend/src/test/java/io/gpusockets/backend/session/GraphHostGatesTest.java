package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.testing.FakeGpu;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.HostCallbackOps;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * The graph side of the host-callback gates (issue 21): graph work is bounded per session, a work key
 * answers only its own session, a staging buffer is reached only through a reached gate of its own
 * size, and the session's release frees it all.
 */
class GraphHostGatesTest {

    @Test
    void graphWorkIsBoundedAndStagingIsCountedPerSession() {
        HostCallbackGates gates = new HostCallbackGates();
        HostCallbackGates.GraphWork w = gates.graphWork(7, 4096);
        assertNotNull(w);
        assertEquals(7, gates.tokenOf(w.key()));
        assertEquals(4096, w.staging().byteSize());
        assertEquals(w.staging().address(), gates.stagingAt(w.key()));
        assertNull(gates.graphWork(8, HostCallbackGates.MAX_STAGING_BYTES), "staging past the session's bound");
        assertNull(gates.graphWork(8, -1), "a negative size");
        HostCallbackGates.GraphWork host = gates.graphWork(9, 0);
        assertEquals(0, host.staging().byteSize(), "a host function node has no staging");
        assertEquals(0, gates.stagingAt(host.key()));
        long[] held = gates.graphWorkHeld();
        assertEquals(2, held[0]);
        assertEquals(4096, held[1]);
    }

    @Test
    void aWorkKeyAnswersOnlyItsOwnSession() {
        HostCallbackGates a = new HostCallbackGates(), b = new HostCallbackGates();
        HostCallbackGates.GraphWork w = a.graphWork(5, 64);
        assertEquals(0, b.tokenOf(w.key()), "another session's key");
        assertEquals(0, b.stagingAt(w.key()));
        assertEquals(0, a.tokenOf(w.key() + 1000), "a made-up key");
    }

    @Test
    void stagingIsReachedOnlyThroughAReachedGateOfItsSize() {
        HostCallbackGates gates = new HostCallbackGates();
        gates.graphWork(5, 64);
        assertNull(gates.stagingOf(1, 64), "no gate has been reached");
        assertEquals(-1, gates.stagingBytesOf(1));
    }

    @Test
    void theReleaseFreesTheWorkAndAClosedSessionMakesNoMore() {
        HostCallbackGates gates = new HostCallbackGates();
        HostCallbackGates.GraphWork w = gates.graphWork(5, 1 << 20);
        gates.close();
        assertNull(gates.graphWork(6, 0), "the session ended");
        gates.releaseGraphWork();
        assertEquals(0, gates.tokenOf(w.key()));
        long[] held = gates.graphWorkHeld();
        assertEquals(0, held[0]);
        assertEquals(0, held[1]);
    }

    @Test
    void putAndGetOnAGateThatIsNotAReachedCopyGateAreRefused() throws Exception {
        DispatchKit kit = new DispatchKit(new FakeGpu());
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                kit.result(1, "cuStreamAddCallback", HostCallbackOps.PUT, 12345L, 0L), "PUT to an unknown gate");
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                kit.result(1, "cuLaunchHostFunc", HostCallbackOps.GET, 12345L), "GET from an unknown gate");
        HostCallbackGates.GraphWork w = kit.session.callbackGates().graphWork(3, 16);
        assertNotNull(w);
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                kit.result(1, "cuStreamAddCallback", HostCallbackOps.GET, w.key()), "a work key is no gate");
        assertTrue(kit.session.callbackGates().graphWorkHeld()[0] == 1);
        MemorySegment unused = w.staging();
        assertEquals(16, unused.byteSize());
    }
}
