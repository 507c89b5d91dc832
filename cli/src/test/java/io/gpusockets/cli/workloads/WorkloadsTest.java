package io.gpusockets.cli.workloads;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.testing.FakeGpu;
import io.gpusockets.protocol.api.CuResult;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class WorkloadsTest {
    static final WorkloadSuite.Options SMALL = new WorkloadSuite.Options(0, 42, 1000 + 3, 3 * 256 + 77,
            MemcpyRoundTrips.sizes(4L << 10, 64L << 10, 4), 200);

    @Test
    void suitePassesOnAFakeDeviceAndReleasesEverything() {
        FakeGpu gpu = new FakeGpu();
        List<WorkloadSuite.Outcome> outcomes = WorkloadSuite.run(gpu, SMALL);
        assertEquals(WorkloadSuite.NAMES, outcomes.stream().map(WorkloadSuite.Outcome::workload).toList());
        for (WorkloadSuite.Outcome o : outcomes) {
            assertTrue(o.passed(), o.workload() + ": " + o.detail());
        }
        assertEquals(0, gpu.liveAllocations());
        assertEquals(0, gpu.loadedModules());
        assertEquals(0, gpu.retainedContexts());
    }

    @Test
    void sameSeedGivesIdenticalOutputsOnTwoDevices() {
        List<WorkloadSuite.Outcome> a = WorkloadSuite.run(new FakeGpu(), SMALL);
        List<WorkloadSuite.Outcome> b = WorkloadSuite.run(new FakeGpu(), SMALL);
        for (int i = 0; i < a.size(); i++) {
            assertArrayEquals(a.get(i).result().comparableOutput(), b.get(i).result().comparableOutput(), a.get(i).workload());
        }
    }

    @Test
    void failingLaunchFreesDeviceMemoryAndNamesTheCall() {
        FakeGpu gpu = new FakeGpu();
        gpu.failLaunches = true;
        try (PrimaryContext ctx = PrimaryContext.retain(gpu, 0); Kernels kernels = Kernels.load(gpu)) {
            CudaException e = assertThrows(CudaException.class, () -> VectorAdd.run(gpu, kernels, 1024, 1));
            assertEquals(CuResult.CUDA_ERROR_LAUNCH_FAILED, e.result());
            assertTrue(e.getMessage().contains("cuLaunchKernel(gpus_vector_add"), e.getMessage());
            assertTrue(e.getMessage().contains("CUDA_ERROR_LAUNCH_FAILED"), e.getMessage());
            assertEquals(0, gpu.liveAllocations());
        }
        assertEquals(0, gpu.loadedModules());
    }

    @Test
    void suiteReportsEveryWorkloadWhenLaunchesFail() {
        FakeGpu gpu = new FakeGpu();
        gpu.failLaunches = true;
        List<WorkloadSuite.Outcome> outcomes = WorkloadSuite.run(gpu, SMALL);
        assertEquals(WorkloadSuite.NAMES, outcomes.stream().map(WorkloadSuite.Outcome::workload).toList());
        assertTrue(outcomes.stream().filter(o -> !o.passed()).map(WorkloadSuite.Outcome::workload).toList()
                .containsAll(List.of(WorkloadSuite.VECTOR_ADD, WorkloadSuite.BLOCK_SUM, WorkloadSuite.MIXED12)));
        assertTrue(outcomes.stream().filter(o -> o.workload().equals(WorkloadSuite.MEMCPY)).allMatch(WorkloadSuite.Outcome::passed));
        assertEquals(0, gpu.liveAllocations());
        assertEquals(0, gpu.retainedContexts());
    }

    @Test
    void checkNamesTheCallAndTheResult() {
        Cu.check(CuResult.CUDA_SUCCESS, "cuInit");
        CudaException e = assertThrows(CudaException.class, () -> Cu.check(CuResult.CUDA_ERROR_NO_DEVICE, "cuInit(0)"));
        assertEquals("cuInit(0) failed: CUDA_ERROR_NO_DEVICE (100): "
                + CuResult.description(CuResult.CUDA_ERROR_NO_DEVICE), e.getMessage());
    }

    @Test
    void shippedPtxHasTheKernelsTheWorkloadsLaunch() {
        String ptx = new String(Kernels.ptx(), StandardCharsets.US_ASCII);
        for (String name : List.of(Kernels.VECTOR_ADD, Kernels.BLOCK_SUM, Kernels.MIXED12)) {
            assertTrue(ptx.contains(".entry " + name + "("), name);
        }
        assertTrue(ptx.contains(".param .align 16 .b8 gpus_mixed12_param_7[16]"), "int4 parameter as the workload lays it out");
    }

    @Test
    void mixed12ExpectedLayoutFollowsTheKernelComment() {
        byte[] e = Mixed12.expected();
        assertEquals(176, e.length);
        ByteBuffer b = ByteBuffer.wrap(e).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals((byte) 0xA5, b.get(0));
        assertEquals((short) 0xB1C2, b.getShort(16));
        assertEquals(0x12345678, b.getInt(32));
        assertEquals(0x1122334455667788L, b.getLong(48));
        assertEquals(3.14159265f, b.getFloat(64));
        assertEquals(-2.718281828459045, b.getDouble(80));
        assertEquals(-2.25f, b.getFloat(100));
        assertEquals(0x2468ACE0, b.getInt(124));
        assertEquals((short) 0xFEDC, b.getShort(128));
        assertEquals("GPUs", new String(e, 144, 4, StandardCharsets.US_ASCII));
        assertEquals(-1.0e-300, b.getDouble(168));
        // padding is zero: slot 0 holds one byte, slot 9 four
        assertTrue(Arrays.equals(new byte[15], Arrays.copyOfRange(e, 1, 16)));
        assertTrue(Arrays.equals(new byte[12], Arrays.copyOfRange(e, 148, 160)));
    }

    @Test
    void treeSumFollowsTheKernelOrderNotTheSequentialOne() {
        // 1e8f + 1 + ... loses the ones sequentially in different places than pairwise
        float[] v = new float[256];
        v[0] = 1e8f;
        Arrays.fill(v, 1, 256, 1.0f);
        float sequential = 0;
        for (float x : v) {
            sequential += x;
        }
        float tree = BlockSum.treeSum(v.clone());
        assertNotEquals(Float.floatToRawIntBits(sequential), Float.floatToRawIntBits(tree));
        assertEquals(1e8f + 256f, tree, 8f);
    }

    @Test
    void memcpySizesAreFourKibToSixtyFourMibTimesFour() {
        assertEquals(List.of(4096L, 16384L, 65536L, 262144L, 1048576L, 4194304L, 16777216L, 67108864L),
                MemcpyRoundTrips.DEFAULT_SIZES);
    }

    @Test
    void nullCallsFailWithoutAContext() {
        NullCalls.Result r = NullCalls.run(new FakeGpu(), 100);
        assertEquals(100, r.failures());
        assertTrue(r.summary().contains("CUDA_ERROR_INVALID_CONTEXT"), r.summary());
    }
}
