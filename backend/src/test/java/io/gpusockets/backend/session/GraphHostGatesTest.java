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
    /** A driver without page-locking, as the emulated device. */
    private static final io.gpusockets.protocol.api.CudaDriver NO_PINS = new io.gpusockets.protocol.api.UnsupportedCudaDriver() {
    };

    private static SessionQuota quota() {
        return new SessionQuota(1, new io.gpusockets.backend.tenant.Tenant("t", io.gpusockets.backend.tenant.TenantLimits.UNLIMITED));
    }

    /**
     * A driver that page-locks: staging is registered (portable), charged to the tenant's pinned memory and given back
     * (unregistered) at the release; a tenant without pinned memory left, or a registration the driver refuses, gets
     * no node. (A pageable staging buffer is read by the real driver at the graph's launch, before its gate fills it.)
     */
    @Test
    void stagingIsPageLockedAndChargedAsPinnedMemory() {
        java.util.List<Long> registered = new java.util.ArrayList<>(), unregistered = new java.util.ArrayList<>();
        int[] refuse = {0};
        io.gpusockets.protocol.api.CudaDriver pins = new io.gpusockets.protocol.api.UnsupportedCudaDriver() {
            @Override
            public int cuMemHostRegister(MemorySegment p, long bytesize, int flags) {
                if (refuse[0] != 0) {
                    return refuse[0];
                }
                assertEquals(1, flags, "portable");
                assertEquals(0, p.address() % 4096);
                assertEquals(0, bytesize % 4096);
                registered.add(bytesize);
                return CuResult.CUDA_SUCCESS;
            }

            @Override
            public int cuMemHostUnregister(MemorySegment p) {
                unregistered.add(p.address());
                return CuResult.CUDA_SUCCESS;
            }
        };
        io.gpusockets.backend.tenant.Tenant tenant = new io.gpusockets.backend.tenant.Tenant("t",
                new io.gpusockets.backend.tenant.TenantLimits(Long.MAX_VALUE, 10, 4, 100, 100, 3 * 4096, 0));
        SessionQuota q = new SessionQuota(1, tenant);
        HostCallbackGates gates = new HostCallbackGates();
        HostCallbackGates.GraphWork w = gates.graphWork(7, 5000, pins, q);
        assertNotNull(w);
        assertEquals(5000, w.staging().byteSize(), "the node's bytes, in two locked pages");
        assertEquals(java.util.List.of(8192L), registered);
        assertEquals(8192, q.pinned());
        assertNull(gates.graphWork(8, 5000, pins, q), "the tenant's pinned memory is spent");
        refuse[0] = CuResult.CUDA_ERROR_OUT_OF_MEMORY;
        assertNull(gates.graphWork(9, 100, pins, q), "the driver would not lock it");
        assertEquals(8192, q.pinned(), "a refused registration gives its charge back");
        gates.close();
        gates.releaseGraphWork();
        assertEquals(1, unregistered.size());
        assertEquals(0, q.pinned());
    }

    @Test
    void graphWorkIsBoundedAndStagingIsCountedPerSession() {
        HostCallbackGates gates = new HostCallbackGates();
        HostCallbackGates.GraphWork w = gates.graphWork(7, 4096, NO_PINS, quota());
        assertNotNull(w);
        assertEquals(7, gates.tokenOf(w.key()));
        assertEquals(4096, w.staging().byteSize());
        assertEquals(w.staging().address(), gates.stagingAt(w.key()));
        assertNull(gates.graphWork(8, HostCallbackGates.MAX_STAGING_BYTES, NO_PINS, quota()), "staging past the session's bound");
        assertNull(gates.graphWork(8, -1, NO_PINS, quota()), "a negative size");
        HostCallbackGates.GraphWork host = gates.graphWork(9, 0, NO_PINS, quota());
        assertEquals(0, host.staging().byteSize(), "a host function node has no staging");
        assertEquals(0, gates.stagingAt(host.key()));
        long[] held = gates.graphWorkHeld();
        assertEquals(2, held[0]);
        assertEquals(4096, held[1]);
    }

    @Test
    void aWorkKeyAnswersOnlyItsOwnSession() {
        HostCallbackGates a = new HostCallbackGates(), b = new HostCallbackGates();
        HostCallbackGates.GraphWork w = a.graphWork(5, 64, NO_PINS, quota());
        assertEquals(0, b.tokenOf(w.key()), "another session's key");
        assertEquals(0, b.stagingAt(w.key()));
        assertEquals(0, a.tokenOf(w.key() + 1000), "a made-up key");
    }

    @Test
    void stagingIsReachedOnlyThroughAReachedGateOfItsSize() {
        HostCallbackGates gates = new HostCallbackGates();
        gates.graphWork(5, 64, NO_PINS, quota());
        assertNull(gates.stagingOf(1, 64), "no gate has been reached");
        assertEquals(-1, gates.stagingBytesOf(1));
    }

    @Test
    void theReleaseFreesTheWorkAndAClosedSessionMakesNoMore() {
        HostCallbackGates gates = new HostCallbackGates();
        HostCallbackGates.GraphWork w = gates.graphWork(5, 1 << 20, NO_PINS, quota());
        gates.close();
        assertNull(gates.graphWork(6, 0, NO_PINS, quota()), "the session ended");
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
        HostCallbackGates.GraphWork w = kit.session.callbackGates().graphWork(3, 16, NO_PINS, quota());
        assertNotNull(w);
        assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                kit.result(1, "cuStreamAddCallback", HostCallbackOps.GET, w.key()), "a work key is no gate");
        assertTrue(kit.session.callbackGates().graphWorkHeld()[0] == 1);
        MemorySegment unused = w.staging();
        assertEquals(16, unused.byteSize());
    }
}
