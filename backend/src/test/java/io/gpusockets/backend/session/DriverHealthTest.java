package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.CuResult;
import org.junit.jupiter.api.Test;

class DriverHealthTest {

    @Test
    void onlyTheErrorsCudaDocumentsAsEndingTheProcessPoisonIt() {
        for (int code : new int[] {700, 702, 710, 714, 715, 716, 717, 718, 719}) {
            assertTrue(CuResult.poisonsProcess(code), CuResult.name(code));
        }
        for (int code : new int[] {0, 1, 2, 201, 400, 701, 709, 720, 999}) {
            assertFalse(CuResult.poisonsProcess(code), CuResult.name(code));
        }
    }

    @Test
    void theFirstPoisoningErrorIsKeptAndNamesItsSession() {
        DriverHealth h = new DriverHealth();
        h.sawResult(CuResult.CUDA_ERROR_OUT_OF_MEMORY, 1, "cuMemAlloc_v2");
        assertNull(h.refusal());
        h.sawResult(CuResult.CUDA_ERROR_ASSERT, 4, "cuStreamSynchronize");
        h.sawResult(CuResult.CUDA_ERROR_ILLEGAL_ADDRESS, 5, "cuCtxSynchronize");
        assertEquals(4, h.poison().orElseThrow().sessionId());
        assertEquals("the driver in this backend process is poisoned by a kernel fault of session 4 (CUDA_ERROR_ASSERT);"
                + " restart the backend, or run it with --isolation process", h.refusal());
    }

    @Test
    void aDriverWhoseFaultsStayInTheirContextIsNeverPoisoned() {
        DriverHealth h = new DriverHealth(false); // the emulated device with faultScope=context
        h.sawResult(CuResult.CUDA_ERROR_ILLEGAL_ADDRESS, 1, "cuCtxSynchronize");
        assertNull(h.refusal());
    }
}
