package io.gpusockets.e2e;

import org.junit.jupiter.api.BeforeAll;

/**
 * {@link PoolLocationsAndBatchesApiTest} unchanged, against a backend with address-stable memory on
 * ({@code -Dgpusockets.backend.stableAddresses=true}): pool allocations then lie in the session's address window
 * ({@code StablePools}), and every assertion must hold as it does with the driver's pools.
 */
class StablePoolLocationsAndBatchesApiTest extends PoolLocationsAndBatchesApiTest {
    @BeforeAll
    static void startStableBackend() throws Exception {
        startBackend(java.util.List.of("-Dgpusockets.backend.stableAddresses=true"));
    }
}
