package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.ManagedMemoryStats;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Mapped pinned host memory (issue 25 item 5: cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP, cudaHostAllocMapped)
 * against a backend process on the emulated device: the device pointer is the host pointer, a kernel reads and writes
 * it, the pages moved are the pages touched (managed memory's machinery), the pointer attributes are those of host
 * memory, the calls the driver refuses on host memory are refused, and cuMemFreeHost frees both sides. Then the
 * runtime-API programs {@code runtime/mapped_host.cu} (golden output, pages counted) and {@code runtime/mapped_poll.cu}
 * (a kernel polling a host flag the CPU writes while it runs: ended with one stderr line naming the cause).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class MappedHostMemoryTest extends EmulatedBackendTest {
    private static final long PAGE = 4096;
    private static final int DEVICEMAP = 0x02;

    @Test
    void mappedHostMemoryIsOnePointerOnBothSides() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment v = cu.cell();
            Cuda.ok(d.cuDeviceGetAttribute(v, 19, 0), "CAN_MAP_HOST_MEMORY");
            assertEquals(1, v.get(JAVA_INT, 0), "CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY");
            MemorySegment free = cu.cell(), total = cu.cell();
            Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
            long freeBefore = free.get(JAVA_LONG, 0);

            long size = 16 * PAGE;
            MemorySegment pp = cu.cell();
            Cuda.ok(d.cuMemHostAlloc(pp, size, DEVICEMAP), "cuMemHostAlloc DEVICEMAP");
            long base = pp.get(JAVA_LONG, 0);
            assertTrue(ManagedMemoryTest.mappedHere(base), "the guest maps it at its device address");
            Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
            assertTrue(freeBefore - free.get(JAVA_LONG, 0) >= size, "the tenant is charged for the device side");
            MemorySegment dp = cu.cell();
            Cuda.ok(d.cuMemHostGetDevicePointer(dp, MemorySegment.ofAddress(base + 100), 0), "cuMemHostGetDevicePointer");
            assertEquals(base + 100, dp.get(JAVA_LONG, 0), "the device pointer is the host pointer");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemHostGetDevicePointer(dp, MemorySegment.ofAddress(base), 1),
                    "flags other than 0");
            Cuda.ok(d.cuMemHostGetFlags(v, MemorySegment.ofAddress(base + 5)), "cuMemHostGetFlags");
            assertEquals(DEVICEMAP, v.get(JAVA_INT, 0));

            // pointer attributes: those of pinned host memory
            MemorySegment data = cu.cell().fill((byte) 0);
            Cuda.ok(d.cuPointerGetAttribute(data, 2, base + 8), "MEMORY_TYPE");
            assertEquals(1, data.get(JAVA_INT, 0), "CU_MEMORYTYPE_HOST");
            Cuda.ok(d.cuPointerGetAttribute(data, 8, base + 8), "IS_MANAGED");
            assertEquals(0, data.get(JAVA_INT, 0), "IS_MANAGED 0");
            Cuda.ok(d.cuPointerGetAttribute(data, 3, base + 8), "DEVICE_POINTER");
            assertEquals(base + 8, data.get(JAVA_LONG, 0));
            Cuda.ok(d.cuPointerGetAttribute(data, 4, base + 8), "HOST_POINTER");
            assertEquals(base + 8, data.get(JAVA_LONG, 0));
            Cuda.ok(d.cuPointerGetAttribute(data, 13, base + 8), "MAPPED");
            assertEquals(1, data.get(JAVA_INT, 0));

            // what the driver refuses on host memory
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemFree(base), "cuMemFree of host memory");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemAdvise(base, PAGE, 1, 0), "advice");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemPrefetchAsync(base, PAGE, 0, 0), "prefetch");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamAttachMemAsync(0, base, 0, 2), "attachment");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemRangeGetAttribute(data, 4, 1, base, PAGE), "range attributes");
            assertTrue(ManagedMemoryTest.mappedHere(base), "a refused cuMemFree leaves it");

            // the CPU writes 3 pages, a kernel fills 4 pages further on, the CPU reads both
            d.prepareManagedAccess(base, 3 * PAGE, true);
            MemorySegment host = MemorySegment.ofAddress(base).reinterpret(size);
            for (long i = 0; i < 3 * PAGE; i += 4) {
                host.set(JAVA_INT, i, (int) (i * 5 + 3));
            }
            long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
            long at = base + 8 * PAGE;
            int n = (int) (4 * PAGE / 4);
            Cuda.ok(d.cuLaunchKernel(fill, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0,
                    cu.params(cu.u64(dp.get(JAVA_LONG, 0) - 100 + 8 * PAGE), cu.u32(0x5A5A), cu.u32(n)), MemorySegment.NULL),
                    "cuLaunchKernel on the device pointer");
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
            ManagedMemoryStats afterLaunch = d.managedMemoryStats();
            assertEquals(3, afterLaunch.pagesSent(), "only the pages the CPU wrote went to the device");
            assertEquals(0, afterLaunch.pagesFetched(), "nothing fetched before the CPU touches it");
            d.prepareManagedAccess(at, 4 * PAGE, false);
            d.prepareManagedAccess(base, 3 * PAGE, false);
            for (long i = 0; i < 4 * PAGE; i += 4) {
                assertEquals(0x5A5A, host.get(JAVA_INT, at - base + i), "kernel's value at +" + i);
            }
            for (long i = 0; i < 3 * PAGE; i += 4) {
                assertEquals((int) (i * 5 + 3), host.get(JAVA_INT, i), "CPU's value at +" + i);
            }
            assertEquals(3 + 4, d.managedMemoryStats().pagesFetched(), "the pages the CPU wrote and the kernel wrote came back");

            // cuMemFreeHost frees both sides and gives the charge back
            Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
            long freeBeforeFree = free.get(JAVA_LONG, 0);
            Cuda.ok(d.cuMemFreeHost(MemorySegment.ofAddress(base)), "cuMemFreeHost");
            assertFalse(ManagedMemoryTest.mappedHere(base), "the guest mapping goes with cuMemFreeHost");
            Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
            assertTrue(free.get(JAVA_LONG, 0) - freeBeforeFree >= size, "the charge goes back");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemFreeHost(MemorySegment.ofAddress(base)), "freed already");

            // cuMemAllocHost stays plain guest memory: no device address
            Cuda.ok(d.cuMemAllocHost(pp, PAGE), "cuMemAllocHost");
            MemorySegment plain = pp.get(java.lang.foreign.ValueLayout.ADDRESS, 0);
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuMemHostGetDevicePointer(dp, plain, 0),
                    "pinned memory without DEVICEMAP has no device address here");
            Cuda.ok(d.cuMemFreeHost(plain), "cuMemFreeHost");
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuMemHostRegister(host, PAGE, DEVICEMAP),
                    "registering existing memory with DEVICEMAP");
        }
    }

    /** runtime/mapped_host.cu through libcuda.so.1: golden output, and the pages moved are the pages it touched. */
    @Test
    void cudaHostAllocMappedProgramMatchesItsCpuReference() throws Exception {
        ManagedMemoryTest.assertMovedAsExpected(ManagedMemoryTest.runGolden("mapped_host"));
    }

    /**
     * runtime/mapped_poll.cu by default: the write is said once on stderr and the program goes on; the polling kernel
     * does not see it (its bounded spin ends), so the program reports the flag unseen and fails as it says.
     */
    @Test
    void aCpuWriteWhileWorkRunsIsSaidOnceAndTheProgramGoesOn() throws Exception {
        NativePrograms.Run r = ManagedMemoryTest.run("mapped_poll");
        String context = "\n--- stdout:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail();
        assertTrue(r.stderr().contains("the CPU wrote mapped pinned host memory (cudaHostAllocMapped) at 0x")
                && r.stderr().contains("a kernel polling host memory would not see it"), () -> "the line on stderr" + context);
        assertEquals(1, r.stderr().split("the CPU wrote mapped pinned host memory", -1).length - 1, () -> "said once" + context);
        assertTrue(r.stdout().contains("flag NOT seen"), () -> "the program went on to its own check" + context);
    }

    /**
     * runtime/mapped_poll.cu with GPUSOCKETS_MAPPED_POLLING=exit: a CPU write to mapped memory while a kernel polls it
     * ends the program, saying why.
     */
    @Test
    void aKernelPollingHostMemoryEndsTheProgramWithTheCause() throws Exception {
        NativePrograms.Run r = ManagedMemoryTest.run("mapped_poll", Map.of("GPUSOCKETS_MAPPED_POLLING", "exit"));
        String context = "\n--- stdout:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail();
        assertEquals(1, r.exit(), () -> "exit status" + context);
        assertTrue(r.stderr().contains("the CPU wrote mapped pinned host memory (cudaHostAllocMapped) at 0x")
                && r.stderr().contains("a kernel polling host memory cannot work here"), () -> "the cause on stderr" + context);
        assertFalse(r.stdout().contains("PASS"), () -> "no result printed" + context);
    }
}
