package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The device, context and stream queries the libraries above cudart probe, through the Java
 * frontend against a backend process on the emulated device: each reaches the device (which answers
 * what it can, and CUDA_ERROR_NOT_SUPPORTED for what it does not model) and its inputs are checked
 * like every other entry's.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ProbedQueriesTest extends EmulatedBackendTest {
    @Test
    void theProbedQueriesReachTheDeviceAndAreChecked() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            assertEquals(CuResult.name(CuResult.CUDA_ERROR_INVALID_CONTEXT), CuResult.name(d.cuCtxResetPersistingL2Cache()),
                    "no current context yet");
            cu.primaryContext();
            Cuda.ok(d.cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache");
            MemorySegment v = cu.cell();
            assertEquals(CuResult.name(CuResult.CUDA_ERROR_INVALID_DEVICE), CuResult.name(d.cuDeviceGetP2PAttribute(v, 1, 0, 7)),
                    "a device the session does not have");
            assertEquals(CuResult.name(CuResult.CUDA_ERROR_NOT_SUPPORTED), CuResult.name(d.cuDeviceGetP2PAttribute(v, 1, 0, 0)),
                    "the emulated device does not model peer attributes");
            assertEquals(CuResult.name(CuResult.CUDA_ERROR_INVALID_HANDLE),
                    CuResult.name(d.cuStreamGetAttribute(0x7777, 1, cu.arena.allocate(64))), "a stream never issued");
            MemorySegment ops = cu.arena.allocate(8), caps = cu.arena.allocate(8);
            assertEquals(CuResult.name(CuResult.CUDA_ERROR_NOT_SUPPORTED),
                    CuResult.name(d.cuDeviceGetHostAtomicCapabilities(caps, ops, 2, 0)), "atomics capabilities are not modelled");
        }
    }
}
