package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link PoolsAndVmmApiTest} unchanged, against a backend with address-stable memory on
 * ({@code -Dgpusockets.backend.stableAddresses=true}): pool allocations then lie in the session's address window
 * ({@code StablePools}), and every assertion must hold as it does with the driver's pools.
 */
class StablePoolsAndVmmApiTest extends PoolsAndVmmApiTest {
    @BeforeAll
    static void startStableBackend() throws Exception {
        startBackend(java.util.List.of("-Dgpusockets.backend.stableAddresses=true"));
    }

    /** The property reached the backend: an async allocation lies in the windows' range. */
    @Test
    void asyncAllocationsLieInTheWindow() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuMemAllocAsync(c, 4096, 0), "cuMemAllocAsync");
            long p = c.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0);
            assertTrue(io.gpusockets.protocol.api.ManagedRange.inGuest(p), "0x" + Long.toHexString(p)); // the window: in the guest's range
        }
    }
}
