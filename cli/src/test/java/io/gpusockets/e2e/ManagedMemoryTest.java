package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusockets.frontend.ManagedMemoryStats;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Managed memory (issue 25) against a backend process on the emulated device: one pointer valid in the guest and on
 * the device, pages sent before GPU work and fetched after it, and only the pages touched moved (the counters of
 * {@link ManagedMemoryStats}); the attributes, the calls on managed ranges, the tenant's accounting and the free of
 * both sides. Then the runtime-API program {@code runtime/managed.cu} (cudaMallocManaged, NVIDIA's add, a linked list
 * built on the CPU and walked by a kernel, several streams), built by nvcc and run unmodified through libcuda.so.1:
 * its output equals its golden file and the pages the frontend moved equal the pages the program touched.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ManagedMemoryTest extends EmulatedBackendTest {
    private static final long PAGE = 4096;

    /** Guest pages covered by [p, p + n). */
    private static long pages(long p, long n) {
        return (p + n - 1) / PAGE - p / PAGE + 1;
    }

    private static long managed(Cuda cu, long bytes) {
        MemorySegment c = cu.cell();
        Cuda.ok(cu.d.cuMemAllocManaged(c, bytes, 1), "cuMemAllocManaged");
        return c.get(JAVA_LONG, 0);
    }

    /** Whether a mapping of this process starts at {@code address}'s page (MappedHostMemoryTest asks it too). */
    static boolean mappedHere(long address) throws Exception {
        String start = Long.toHexString(address & -PAGE);
        for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
            if (line.startsWith(start + "-")) {
                return !line.split("\\s+")[1].equals("---p"); // the managed range's reservation: no memory there
            }
        }
        return false;
    }

    @Test
    void onePointerOnBothSidesAndOnlyTouchedPagesMove() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment v = cu.cell();
            Cuda.ok(d.cuDeviceGetAttribute(v, 83, 0), "MANAGED_MEMORY");
            assertEquals(1, v.get(JAVA_INT, 0), "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY");
            Cuda.ok(d.cuDeviceGetAttribute(v, 89, 0), "CONCURRENT_MANAGED_ACCESS");
            assertEquals(0, v.get(JAVA_INT, 0), "CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS");

            MemorySegment free = cu.cell(), total = cu.cell();
            Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
            long freeBefore = free.get(JAVA_LONG, 0);

            long size = (1 << 20) + 3;
            long base = managed(cu, size);
            assertTrue(mappedHere(base), "the guest maps the managed allocation at its device address");
            Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
            assertTrue(freeBefore - free.get(JAVA_LONG, 0) >= size, "the tenant is charged for managed memory");

            // the CPU writes the first 4 pages' worth of bytes
            long written = 4 * PAGE;
            d.prepareManagedAccess(base, written, true);
            MemorySegment host = MemorySegment.ofAddress(base).reinterpret(size);
            for (long i = 0; i < written; i += 4) {
                host.set(JAVA_INT, i, (int) (i * 7 + 1));
            }
            // a kernel fills 8 pages' worth further on
            long module = cu.loadKernels();
            long fill = cu.function(module, "gpus_fill_u32");
            long at = base + 8 * PAGE;
            int n = (int) (8 * PAGE / 4);
            Cuda.ok(d.cuLaunchKernel(fill, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0,
                    cu.params(cu.u64(at), cu.u32(0xABCD), cu.u32(n)), MemorySegment.NULL), "cuLaunchKernel");
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
            ManagedMemoryStats afterLaunch = d.managedMemoryStats();
            assertEquals(pages(base, written), afterLaunch.pagesSent(), "only the pages the CPU wrote went to the device");
            assertEquals(written, afterLaunch.bytesSent());
            assertEquals(0, afterLaunch.pagesFetched(), "nothing is fetched before the CPU touches it");

            // the CPU reads what the kernel wrote, through the same pointer
            d.prepareManagedAccess(at, 8 * PAGE, false);
            for (long i = 0; i < 8 * PAGE; i += 4) {
                assertEquals(0xABCD, host.get(JAVA_INT, at - base + i), "kernel's value at +" + i);
            }
            // and its own bytes, which went to the device and came back
            d.prepareManagedAccess(base, written, false);
            for (long i = 0; i < written; i += 4) {
                assertEquals((int) (i * 7 + 1), host.get(JAVA_INT, i), "CPU's value at +" + i);
            }
            ManagedMemoryStats afterRead = d.managedMemoryStats();
            assertEquals(pages(at, 8 * PAGE) + pages(base, written), afterRead.pagesFetched(),
                    "only the pages the CPU read were fetched");
            assertEquals(afterLaunch.pagesSent(), afterRead.pagesSent(), "reads send nothing");

            // attributes and the calls on managed ranges
            long plain = cu.alloc(4096);
            MemorySegment data = cu.cell().fill((byte) 0);
            Cuda.ok(d.cuPointerGetAttribute(data, 8, base + 100), "IS_MANAGED");
            assertEquals(1, data.get(JAVA_INT, 0), "IS_MANAGED of managed memory");
            Cuda.ok(d.cuPointerGetAttribute(data, 8, plain), "IS_MANAGED");
            assertEquals(0, data.get(JAVA_INT, 0), "IS_MANAGED of device memory");
            Cuda.ok(d.cuMemAdvise(base, size, 1, 0), "cuMemAdvise READ_MOSTLY");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemAdvise(plain, 4096, 1, 0), "advice on device memory");
            Cuda.ok(d.cuMemRangeGetAttribute(data, 4, 2, base, size), "PREFERRED_LOCATION");
            assertEquals(-2, data.get(JAVA_INT, 0), "no preferred location (CU_DEVICE_INVALID)");
            long stream = cu.stream();
            Cuda.ok(d.cuStreamAttachMemAsync(stream, base, 0, 2), "cuStreamAttachMemAsync HOST, the whole allocation");
            Cuda.ok(d.cuStreamAttachMemAsync(stream, base, size, 4), "cuStreamAttachMemAsync SINGLE, length the size");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamAttachMemAsync(stream, base + PAGE, PAGE, 4),
                    "a part of an allocation (the driver cannot attach one)");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamAttachMemAsync(stream, base, size - 1, 4),
                    "a length that is neither 0 nor the size");
            Cuda.ok(d.cuStreamAttachMemAsync(stream, base, 0, 1), "cuStreamAttachMemAsync GLOBAL again");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamAttachMemAsync(stream, plain, 0, 2), "device memory");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamAttachMemAsync(stream, base + 8, 0, 2),
                    "length 0 names a whole allocation, from its base");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamAttachMemAsync(stream, base, 0, 8), "unknown flags");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemAllocManaged(cu.cell(), 0, 1), "zero bytes");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemAllocManaged(cu.cell(), 4096, 3), "both flags");

            // a prefetch to the CPU fetches now: the kernel's pages again after another launch
            Cuda.ok(d.cuLaunchKernel(fill, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0,
                    cu.params(cu.u64(at), cu.u32(0x1234), cu.u32(n)), MemorySegment.NULL), "cuLaunchKernel");
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
            Cuda.ok(d.cuMemPrefetchAsync(at, 8 * PAGE, -1, 0), "cuMemPrefetchAsync to CU_DEVICE_CPU");
            assertEquals(afterRead.pagesFetched() + pages(at, 8 * PAGE), d.managedMemoryStats().pagesFetched());
            assertEquals(0x1234, host.get(JAVA_INT, at - base + 4 * PAGE));

            // a free frees both sides, and gives the charge back
            Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
            long freeBeforeFree = free.get(JAVA_LONG, 0);
            Cuda.ok(d.cuMemFree(base), "cuMemFree");
            assertFalse(mappedHere(base), "the guest mapping goes with cuMemFree");
            Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
            assertTrue(free.get(JAVA_LONG, 0) - freeBeforeFree >= size, "the charge goes back with the free");
            Cuda.ok(d.cuMemFree(plain), "cuMemFree");
        }
    }

    /** Writes {@code words} ints of {@code value} from {@code p} on the CPU (after prepareManagedAccess). */
    private static void cpuWrite(RemoteCudaDriver d, long p, long bytes, int value) {
        d.prepareManagedAccess(p, bytes, true);
        MemorySegment s = MemorySegment.ofAddress(p).reinterpret(bytes);
        for (long i = 0; i < bytes; i += 4) {
            s.set(JAVA_INT, i, value);
        }
    }

    private static void fillLaunch(Cuda cu, long fill, long stream, long p, long bytes, int value) {
        int n = (int) (bytes / 4);
        Cuda.ok(cu.d.cuLaunchKernel(fill, (n + 255) / 256, 1, 1, 256, 1, 1, 0, stream,
                cu.params(cu.u64(p), cu.u32(value), cu.u32(n)), MemorySegment.NULL), "cuLaunchKernel");
    }

    /**
     * Attached memory (cuStreamAttachMemAsync, and CU_MEM_ATTACH_HOST at allocation) narrows what a kernel launch on
     * stream S moves: memory attached to another stream or to the host is neither sent nor invalidated by it (its
     * written pages stay here, unsent, and a CPU read after the launch fetches nothing), memory attached to S and GLOBAL
     * memory are; a launch on the NULL stream moves memory attached to any stream; a copy moves all of it.
     */
    @Test
    void attachedMemoryIsMovedOnlyByLaunchesThatMayUseIt() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
            long s = cu.stream(), t = cu.stream();
            long global = managed(cu, 4 * PAGE);
            long onS = managed(cu, 4 * PAGE);
            long onT = managed(cu, 4 * PAGE);
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuMemAllocManaged(c, 4 * PAGE, 2), "cuMemAllocManaged CU_MEM_ATTACH_HOST");
            long host = c.get(JAVA_LONG, 0);
            Cuda.ok(d.cuStreamAttachMemAsync(s, onS, 0, 4), "attach SINGLE to S");
            Cuda.ok(d.cuStreamAttachMemAsync(t, onT, 4 * PAGE, 4), "attach SINGLE to T");

            // the CPU writes 1 page of GLOBAL, 2 of S's, 3 of T's and 4 of the host's memory
            cpuWrite(d, global, PAGE, 1);
            cpuWrite(d, onS, 2 * PAGE, 2);
            cpuWrite(d, onT, 3 * PAGE, 3);
            cpuWrite(d, host, 4 * PAGE, 4);
            ManagedMemoryStats before = d.managedMemoryStats();

            // a launch on S, filling S's memory's last page: GLOBAL and S's pages go, T's and the host's stay
            fillLaunch(cu, fill, s, onS + 3 * PAGE, PAGE, 0x55);
            Cuda.ok(d.cuStreamSynchronize(s), "cuStreamSynchronize");
            ManagedMemoryStats afterS = d.managedMemoryStats();
            assertEquals(1 + 2, afterS.pagesSent() - before.pagesSent(), "a launch on S sends GLOBAL's and S's written pages only");
            // T's and the host's pages are still here: reading them fetches nothing
            d.prepareManagedAccess(onT, 4 * PAGE, false);
            d.prepareManagedAccess(host, 4 * PAGE, false);
            MemorySegment tSeg = MemorySegment.ofAddress(onT).reinterpret(4 * PAGE);
            MemorySegment hSeg = MemorySegment.ofAddress(host).reinterpret(4 * PAGE);
            assertEquals(3, tSeg.get(JAVA_INT, 2 * PAGE), "T's memory keeps the CPU's bytes through S's launch");
            assertEquals(4, hSeg.get(JAVA_INT, 3 * PAGE), "host memory keeps the CPU's bytes through S's launch");
            assertEquals(0, tSeg.get(JAVA_INT, 3 * PAGE), "T's unwritten page reads zero");
            ManagedMemoryStats read = d.managedMemoryStats();
            assertEquals(afterS.pagesFetched(), read.pagesFetched(), "memory not invalidated by S's launch is not fetched");
            // S's memory was invalidated: the kernel's page is fetched with its value
            d.prepareManagedAccess(onS + 3 * PAGE, PAGE, false);
            assertEquals(0x55, MemorySegment.ofAddress(onS).reinterpret(4 * PAGE).get(JAVA_INT, 3 * PAGE), "S's kernel's bytes");
            assertEquals(read.pagesFetched() + 1, d.managedMemoryStats().pagesFetched(), "S's page fetched after S's launch");

            // a launch on T moves T's written pages (and GLOBAL's: none written since), not the host's
            ManagedMemoryStats beforeT = d.managedMemoryStats();
            fillLaunch(cu, fill, t, onT + 3 * PAGE, PAGE, 0x77);
            Cuda.ok(d.cuStreamSynchronize(t), "cuStreamSynchronize");
            assertEquals(3, d.managedMemoryStats().pagesSent() - beforeT.pagesSent(), "a launch on T sends T's 3 written pages");
            d.prepareManagedAccess(onT, 4 * PAGE, false);
            assertEquals(3, tSeg.get(JAVA_INT, 0), "T's bytes went to the device and back");
            assertEquals(0x77, tSeg.get(JAVA_INT, 3 * PAGE), "T's kernel's bytes");

            // the NULL stream's launch uses memory attached to any stream, still not the host's
            cpuWrite(d, onS, PAGE, 9);
            cpuWrite(d, onT, PAGE, 9);
            ManagedMemoryStats beforeNull = d.managedMemoryStats();
            fillLaunch(cu, fill, 0, global, PAGE, 0x11);
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
            assertEquals(2, d.managedMemoryStats().pagesSent() - beforeNull.pagesSent(),
                    "a launch on the NULL stream sends S's and T's written pages, not the host's");

            // a copy makes all managed memory coherent: the host's 4 written pages go now
            ManagedMemoryStats beforeCopy = d.managedMemoryStats();
            long plain = cu.alloc(PAGE);
            Cuda.ok(d.cuMemsetD8(plain, (byte) 0, PAGE), "cuMemsetD8");
            assertEquals(4, d.managedMemoryStats().pagesSent() - beforeCopy.pagesSent(), "other GPU work sends host-attached pages");
            // and the host's bytes are on the device: a DtoH copy of them equals what the CPU wrote
            MemorySegment back = cu.cell(PAGE);
            Cuda.ok(d.cuMemcpyDtoH(back, host + 3 * PAGE, PAGE), "cuMemcpyDtoH");
            assertEquals(4, back.get(JAVA_INT, 100));
            // attached back to GLOBAL, S's launch moves T's memory again
            Cuda.ok(d.cuStreamAttachMemAsync(t, onT, 0, 1), "attach GLOBAL");
            cpuWrite(d, onT, PAGE, 5);
            ManagedMemoryStats beforeGlobal = d.managedMemoryStats();
            fillLaunch(cu, fill, s, onS, PAGE, 0x22);
            Cuda.ok(d.cuStreamSynchronize(s), "cuStreamSynchronize");
            assertEquals(1, d.managedMemoryStats().pagesSent() - beforeGlobal.pagesSent(), "GLOBAL again: S's launch sends it");
            for (long p : new long[] {global, onS, onT, host, plain}) {
                Cuda.ok(d.cuMemFree(p), "cuMemFree");
            }
        }
    }

    /** cuMemRangeGetAttribute of one int (dataSize 4). */
    private static int attribute(Cuda cu, int attribute, long p, long n) {
        MemorySegment v = cu.cell().fill((byte) 0x5A);
        Cuda.ok(cu.d.cuMemRangeGetAttribute(v, 4, attribute, p, n), "cuMemRangeGetAttribute " + attribute);
        return v.get(JAVA_INT, 0);
    }

    /** ACCESSED_BY with {@code slots} slots. */
    private static List<Integer> accessedBy(Cuda cu, long p, long n, int slots) {
        MemorySegment v = cu.cell(4L * slots).fill((byte) 0x5A);
        Cuda.ok(cu.d.cuMemRangeGetAttribute(v, 4L * slots, 3, p, n), "ACCESSED_BY");
        List<Integer> l = new java.util.ArrayList<>();
        for (int i = 0; i < slots; i++) {
            l.add(v.getAtIndex(JAVA_INT, i));
        }
        return l;
    }

    private static final int READ_MOSTLY = 1, PREFERRED = 2, LAST_PREFETCH = 4, PREFERRED_TYPE = 5, PREFERRED_ID = 6,
            LAST_PREFETCH_TYPE = 7, LAST_PREFETCH_ID = 8;
    private static final long HOST = 2, DEVICE_0 = 1; // CUmemLocation {type, id} as a u64

    /**
     * cuMemRangeGetAttribute(s) answers what cuMemAdvise(_v2) and cuMemPrefetchAsync(_v2) were told, page by page as the
     * driver keeps it (a range whose pages differ reads CU_DEVICE_INVALID / INVALID), and refuses as the driver does.
     */
    @Test
    void rangeAttributesAnswerWhatAdviceAndPrefetchesSaid() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long size = 16 * PAGE;
            long base = managed(cu, size);
            long half = base + 8 * PAGE;
            // never advised
            assertEquals(0, attribute(cu, READ_MOSTLY, base, size));
            assertEquals(-2, attribute(cu, PREFERRED, base, size));
            assertEquals(-2, attribute(cu, LAST_PREFETCH, base, size));
            assertEquals(0, attribute(cu, PREFERRED_TYPE, base, size));
            assertEquals(0, attribute(cu, LAST_PREFETCH_TYPE, base, size));
            assertEquals(List.of(-2, -2, -2), accessedBy(cu, base, size, 3));

            // read-mostly on the first half: the half says 1, the whole 0; unset again
            Cuda.ok(d.cuMemAdvise(base, 8 * PAGE, 1, 0), "SET_READ_MOSTLY");
            assertEquals(1, attribute(cu, READ_MOSTLY, base + 100, 4 * PAGE));
            assertEquals(0, attribute(cu, READ_MOSTLY, base, size));
            Cuda.ok(d.cuMemAdvise(base, size, 1, 0), "SET_READ_MOSTLY");
            assertEquals(1, attribute(cu, READ_MOSTLY, base, size));
            Cuda.ok(d.cuMemAdvise_v2(base, PAGE, 2, HOST), "UNSET_READ_MOSTLY");
            assertEquals(0, attribute(cu, READ_MOSTLY, base, size));

            // preferred location: device 0 everywhere, then the host (v2) on the second half
            Cuda.ok(d.cuMemAdvise(base, size, 3, 0), "SET_PREFERRED_LOCATION device 0");
            assertEquals(0, attribute(cu, PREFERRED, base, size));
            assertEquals(1, attribute(cu, PREFERRED_TYPE, base, size), "CU_MEM_LOCATION_TYPE_DEVICE");
            assertEquals(0, attribute(cu, PREFERRED_ID, base, size));
            Cuda.ok(d.cuMemAdvise_v2(half, 8 * PAGE, 3, HOST), "SET_PREFERRED_LOCATION host");
            assertEquals(-1, attribute(cu, PREFERRED, half, 8 * PAGE), "CU_DEVICE_CPU");
            assertEquals(2, attribute(cu, PREFERRED_TYPE, half, 8 * PAGE), "CU_MEM_LOCATION_TYPE_HOST");
            assertEquals(-2, attribute(cu, PREFERRED, base, size), "pages that differ");
            assertEquals(0, attribute(cu, PREFERRED_TYPE, base, size), "pages that differ: INVALID");
            Cuda.ok(d.cuMemAdvise(base, size, 4, 0), "UNSET_PREFERRED_LOCATION");
            assertEquals(-2, attribute(cu, PREFERRED, half, PAGE));

            // accessed-by: device 0 everywhere, the CPU on the first 4 pages
            Cuda.ok(d.cuMemAdvise(base, size, 5, 0), "SET_ACCESSED_BY device 0");
            Cuda.ok(d.cuMemAdvise(base, 4 * PAGE, 5, -1), "SET_ACCESSED_BY CU_DEVICE_CPU");
            assertEquals(List.of(0, -1, -2), accessedBy(cu, base, 4 * PAGE, 3));
            assertEquals(List.of(0, -2, -2), accessedBy(cu, base, size, 3));
            assertEquals(List.of(0), accessedBy(cu, base, 4 * PAGE, 1), "as many as fit");
            Cuda.ok(d.cuMemAdvise_v2(base, size, 6, DEVICE_0), "UNSET_ACCESSED_BY device 0");
            assertEquals(List.of(-1, -2), accessedBy(cu, base, PAGE, 2));

            // the last prefetch location: the device everywhere, then the CPU on the first 4 pages
            Cuda.ok(d.cuMemPrefetchAsync(base, size, 0, 0), "cuMemPrefetchAsync to device 0");
            assertEquals(0, attribute(cu, LAST_PREFETCH, base, size));
            assertEquals(1, attribute(cu, LAST_PREFETCH_TYPE, base, size));
            assertEquals(0, attribute(cu, LAST_PREFETCH_ID, base, size));
            Cuda.ok(d.cuMemPrefetchAsync_v2(base, 4 * PAGE, HOST, 0, 0), "cuMemPrefetchAsync_v2 to the host");
            assertEquals(-1, attribute(cu, LAST_PREFETCH, base, 4 * PAGE));
            assertEquals(2, attribute(cu, LAST_PREFETCH_TYPE, base, 4 * PAGE));
            assertEquals(-2, attribute(cu, LAST_PREFETCH, base, size), "pages that differ");

            // several at once
            MemorySegment rm = cu.cell(), pref = cu.cell(), acc = cu.cell(8);
            MemorySegment ptrs = cu.cell(24), sizes = cu.cell(24), attrs = cu.cell(12);
            long[][] want = {{rm.address(), 4, READ_MOSTLY}, {pref.address(), 4, LAST_PREFETCH}, {acc.address(), 8, 3}};
            for (int i = 0; i < 3; i++) {
                ptrs.setAtIndex(JAVA_LONG, i, want[i][0]);
                sizes.setAtIndex(JAVA_LONG, i, want[i][1]);
                attrs.setAtIndex(JAVA_INT, i, (int) want[i][2]);
            }
            Cuda.ok(d.cuMemRangeGetAttributes(ptrs, sizes, attrs, 3, base, 4 * PAGE), "cuMemRangeGetAttributes");
            assertEquals(0, rm.get(JAVA_INT, 0));
            assertEquals(-1, pref.get(JAVA_INT, 0));
            assertEquals(-1, acc.get(JAVA_INT, 0));
            assertEquals(-2, acc.get(JAVA_INT, 4));

            // refused as the driver refuses
            long plain = cu.alloc(PAGE);
            MemorySegment v = cu.cell();
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemRangeGetAttribute(v, 4, READ_MOSTLY, plain, PAGE), "not managed");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemRangeGetAttribute(v, 4, READ_MOSTLY, base, size + 1),
                    "past the allocation");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemRangeGetAttribute(v, 4, READ_MOSTLY, base, 0), "count 0");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemRangeGetAttribute(v, 8, READ_MOSTLY, base, size), "dataSize 8");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemRangeGetAttribute(cu.cell(8), 6, 3, base, size),
                    "ACCESSED_BY: not a multiple of 4");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemRangeGetAttribute(v, 4, 9, base, size), "attribute 9");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemRangeGetAttribute(MemorySegment.NULL, 4, 1, base, size), "NULL data");
            sizes.setAtIndex(JAVA_LONG, 0, 8);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemRangeGetAttributes(ptrs, sizes, attrs, 3, base, size),
                    "one bad dataSize refuses all");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemRangeGetAttributes(ptrs, sizes, attrs, 0, base, size),
                    "no attributes");
            Cuda.ok(d.cuMemFree(plain), "cuMemFree");
            Cuda.ok(d.cuMemFree(base), "cuMemFree");
        }
    }

    /**
     * A prefetch moves its own range at the call and nothing else: to the device it sends the range's written pages
     * (another allocation's stay unsent), to the CPU it fetches the range's device-newer pages (no fault, no fetch at
     * the CPU's touch after it), waiting for the stream's kernel first.
     */
    @Test
    void prefetchesMoveTheirRangeNow() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
            long size = 16 * PAGE;
            long base = managed(cu, size);
            long other = managed(cu, 4 * PAGE);
            cpuWrite(d, base, 4 * PAGE, 7);
            cpuWrite(d, other, 2 * PAGE, 8);
            ManagedMemoryStats before = d.managedMemoryStats();
            Cuda.ok(d.cuMemPrefetchAsync(base, size, 0, 0), "cuMemPrefetchAsync to device 0");
            ManagedMemoryStats afterToDevice = d.managedMemoryStats();
            assertEquals(4, afterToDevice.pagesSent() - before.pagesSent(), "the range's 4 written pages go at the call");
            assertEquals(4 * PAGE, afterToDevice.bytesSent() - before.bytesSent());
            assertEquals(0, afterToDevice.pagesFetched() - before.pagesFetched());
            // the range's pages left for the device: the CPU's read fetches them back; the other allocation is still here
            d.prepareManagedAccess(base, PAGE, false);
            assertEquals(7, MemorySegment.ofAddress(base).reinterpret(PAGE).get(JAVA_INT, 40));
            assertEquals(afterToDevice.pagesFetched() + 1, d.managedMemoryStats().pagesFetched());
            d.prepareManagedAccess(other, 2 * PAGE, false);
            assertEquals(afterToDevice.pagesFetched() + 1, d.managedMemoryStats().pagesFetched(), "the other allocation stayed");

            // a kernel on a stream writes the whole range; a prefetch to the CPU on that stream fetches all of it now
            long stream = cu.stream();
            fillLaunch(cu, fill, stream, base, size, 0xC0DE);
            ManagedMemoryStats beforeToHost = d.managedMemoryStats();
            assertEquals(2, beforeToHost.pagesSent() - afterToDevice.pagesSent(), "the launch sent the other allocation's pages");
            Cuda.ok(d.cuMemPrefetchAsync_v2(base, size, HOST, 0, stream), "cuMemPrefetchAsync_v2 to the host");
            ManagedMemoryStats afterToHost = d.managedMemoryStats();
            assertEquals(16, afterToHost.pagesFetched() - beforeToHost.pagesFetched(), "the range fetched at the call");
            assertEquals(size, afterToHost.bytesFetched() - beforeToHost.bytesFetched());
            Cuda.ok(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
            d.prepareManagedAccess(base, size, false);
            MemorySegment seg = MemorySegment.ofAddress(base).reinterpret(size);
            for (long i = 0; i < size; i += 4) {
                assertEquals(0xC0DE, seg.get(JAVA_INT, i), "the kernel's value at +" + i);
            }
            ManagedMemoryStats read = d.managedMemoryStats();
            assertEquals(afterToHost.pagesFetched(), read.pagesFetched(), "nothing more is fetched at the touch");
            assertEquals(afterToHost.faults(), read.faults(), "no faults");
            Cuda.ok(d.cuMemFree(base), "cuMemFree");
            Cuda.ok(d.cuMemFree(other), "cuMemFree");
        }
    }

    /**
     * An address the guest already uses is a clash: the backend's allocation is freed again (the charge goes back) and
     * the program gets CUDA_ERROR_OUT_OF_MEMORY. The emulated device hands out addresses in order and never reuses one,
     * so the next managed allocation's address is known: this test maps a page of its own there first.
     */
    @Test
    void anAddressTheGuestUsesIsAClashAndRefused() throws Throwable {
        // without a managed range (GPUSOCKETS_MANAGED_RANGE=off): inside one, nothing else of the guest can lie
        System.setProperty("gpusockets.managed.range", "off");
        try {
            clashWithoutRange();
        } finally {
            System.clearProperty("gpusockets.managed.range");
        }
    }

    private void clashWithoutRange() throws Throwable {
        java.lang.foreign.Linker linker = java.lang.foreign.Linker.nativeLinker();
        java.lang.invoke.MethodHandle mmap = linker.downcallHandle(linker.defaultLookup().find("mmap").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(java.lang.foreign.ValueLayout.ADDRESS, java.lang.foreign.ValueLayout.ADDRESS,
                        JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
        java.lang.invoke.MethodHandle munmap = linker.downcallHandle(linker.defaultLookup().find("munmap").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(JAVA_INT, java.lang.foreign.ValueLayout.ADDRESS, JAVA_LONG));
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long step = 2 * 65536; // 64 KiB, padded with 64 KiB (ManagedCalls.GUEST_PAGE)
            long a = managed(cu, 65536);
            long b = managed(cu, 65536);
            assertEquals(a + step, b, "the emulated device places managed allocations one after the other");
            long next = b + step;
            MemorySegment taken = (MemorySegment) mmap.invokeExact(MemorySegment.ofAddress(next & -PAGE), PAGE, 3,
                    0x02 | 0x20 | 0x100000, -1, 0L); // PRIVATE | ANONYMOUS | FIXED_NOREPLACE
            assertEquals(next & -PAGE, taken.address(), "the test's own page at the next address");
            try {
                MemorySegment free = cu.cell(), total = cu.cell();
                Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
                long before = free.get(JAVA_LONG, 0);
                assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, d.cuMemAllocManaged(cu.cell(), 65536, 1), "a clash");
                Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
                assertEquals(before, free.get(JAVA_LONG, 0), "the clashing allocation was freed on the backend");
                long c = managed(cu, 65536);
                assertTrue(c > next, "the next allocation lies past the clash");
                Cuda.ok(d.cuMemFree(c), "cuMemFree");
            } finally {
                int ignored = (int) munmap.invokeExact(taken, PAGE);
            }
            Cuda.ok(d.cuMemFree(a), "cuMemFree");
            Cuda.ok(d.cuMemFree(b), "cuMemFree");
        }
    }

    /**
     * A system call that reads absent managed pages (write(2) from them into a pipe) gets the device's bytes: the
     * kernel's fault is served too where the process may have it served (root in CI; elsewhere skipped).
     */
    @Test
    void aSystemCallReadsManagedPagesTheGpuWrote() throws Throwable {
        java.lang.foreign.Linker linker = java.lang.foreign.Linker.nativeLinker();
        java.lang.foreign.SymbolLookup libc = linker.defaultLookup();
        java.lang.invoke.MethodHandle pipe = linker.downcallHandle(libc.find("pipe").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(JAVA_INT, java.lang.foreign.ValueLayout.ADDRESS));
        java.lang.invoke.MethodHandle write = linker.downcallHandle(libc.find("write").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(JAVA_LONG, JAVA_INT, java.lang.foreign.ValueLayout.ADDRESS, JAVA_LONG));
        java.lang.invoke.MethodHandle read = linker.downcallHandle(libc.find("read").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(JAVA_LONG, JAVA_INT, java.lang.foreign.ValueLayout.ADDRESS, JAVA_LONG));
        java.lang.invoke.MethodHandle close = linker.downcallHandle(libc.find("close").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(JAVA_INT, JAVA_INT));
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long base = managed(cu, 4 * PAGE);
            long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
            int n = (int) (PAGE / 4);
            Cuda.ok(d.cuLaunchKernel(fill, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0,
                    cu.params(cu.u64(base + PAGE), cu.u32(0x5EED), cu.u32(n)), MemorySegment.NULL), "cuLaunchKernel");
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
            MemorySegment fds = cu.cell(8);
            assertEquals(0, (int) pipe.invokeExact(fds));
            int in = fds.get(JAVA_INT, 0), out = fds.get(JAVA_INT, 4);
            try {
                long wrote = (long) write.invokeExact(out, MemorySegment.ofAddress(base + PAGE), PAGE);
                assumeTrue(wrote == PAGE, "userfaultfd serves user-mode faults only here (write(2) from managed memory: " + wrote + ")");
                MemorySegment got = cu.cell(PAGE);
                assertEquals(PAGE, (long) read.invokeExact(in, got, PAGE));
                for (long i = 0; i < PAGE; i += 4) {
                    assertEquals(0x5EED, got.get(JAVA_INT, i), "byte " + i + " written by the kernel, read by write(2)");
                }
            } finally {
                int ignored = (int) close.invokeExact(in);
                ignored = (int) close.invokeExact(out);
            }
            Cuda.ok(d.cuMemFree(base), "cuMemFree");
        }
    }

    @Test
    void aSessionsEndFreesBothSides() throws Exception {
        long base;
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            base = managed(cu, 3 * PAGE);
            assertTrue(mappedHere(base));
        }
        assertFalse(mappedHere(base), "closing the driver unmaps its managed memory");
    }

    /**
     * Builds runtime/NAME.cu with nvcc and runs it through libcuda.so.1 with GPUSOCKETS_MANAGED_STATS=1; checks its exit
     * status and golden output and returns the run (skipped where libcuda.so.1 or nvcc is missing).
     */
    static NativePrograms.Run runGolden(String name) throws Exception {
        NativePrograms.Run r = run(name);
        String context = "\n--- stdout:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail();
        assertEquals(0, r.exit(), () -> name + ": exit status" + context);
        assertEquals(Files.readString(RuntimeProgramsTest.golden(name), StandardCharsets.UTF_8), r.stdout(), name + context);
        return r;
    }

    /** Builds runtime/NAME.cu with nvcc and runs it as {@link #runGolden} does, checking nothing. */
    static NativePrograms.Run run(String name) throws Exception {
        return run(name, Map.of());
    }

    /** As {@link #run(String)}, with {@code extraEnv} added to the program's environment. */
    static NativePrograms.Run run(String name, Map<String, String> extraEnv) throws Exception {
        NativePrograms programs = NativePrograms.locate();
        Path nvcc = NativePrograms.nvcc();
        String skip = programs.cannotRun(name + ".cu");
        assumeTrue(skip == null, skip);
        assumeTrue(nvcc != null, name + ".cu needs nvcc");
        Path work = Files.createTempDirectory("gpusockets-managed");
        try {
            Path exe = work.resolve(name);
            List<String> build = RuntimeProgramsTest.buildCommand(nvcc, new RuntimeProgramsTest.Line(name, "static", Map.of()), exe);
            NativePrograms.Run b = NativePrograms.run(build, Map.of(), work, 300);
            assertEquals(0, b.exit(), () -> "nvcc: " + b.stdout() + b.stderr());
            Map<String, String> env = new HashMap<>();
            env.put("LD_LIBRARY_PATH", programs.libDir.toString());
            env.put("GPUSOCKETS_SERVER", backend.address("unix"));
            env.put("GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"));
            env.put("GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path"));
            env.put("GPUSOCKETS_MANAGED_STATS", "1");
            env.putAll(extraEnv);
            return NativePrograms.run(List.of(exe.toString()), env, work, 120);
        } finally {
            NativePrograms.deleteTree(work);
        }
    }

    /** runtime/managed.cu through libcuda.so.1: golden output, and the pages moved are the pages it touched. */
    @Test
    void cudaMallocManagedProgramMovesOnlyTheTouchedPages() throws Exception {
        assertMovedAsExpected(runGolden("managed"));
    }

    /**
     * runtime/managed_attach.cu: memory attached to one stream and to the host is not moved by another stream's launch
     * (the CPU writes it while that kernel runs); the pages moved are those the program counts.
     */
    @Test
    void attachedMemoryProgramMovesOnlyWhatEachStreamsLaunchUses() throws Exception {
        assertMovedAsExpected(runGolden("managed_attach"));
    }

    /** The program's own "managed expect:" count equals the frontend's (GPUSOCKETS_MANAGED_STATS=1). */
    static void assertMovedAsExpected(NativePrograms.Run r) {
        String context = "\n--- stderr:\n" + r.stderrTail();
        Matcher expect = Pattern.compile("managed expect: pages_sent=(\\d+) pages_fetched=(\\d+)").matcher(r.stderr());
        Matcher moved = Pattern.compile("managed memory: pages_sent=(\\d+) bytes_sent=\\d+ pages_fetched=(\\d+)").matcher(r.stderr());
        assertTrue(expect.find(), () -> "the program's own count" + context);
        assertTrue(moved.find(), () -> "the frontend's count (GPUSOCKETS_MANAGED_STATS=1)" + context);
        assertEquals(expect.group(1), moved.group(1), () -> "pages sent = pages the CPU wrote" + context);
        assertEquals(expect.group(2), moved.group(2), () -> "pages fetched = pages the CPU read after GPU work" + context);
    }

    /** runtime/managed_vars.cu: __managed__ variables (an initializer, a table, a struct holding a managed pointer). */
    @Test
    void managedVariablesHoldTheirValuesOnBothSides() throws Exception {
        runGolden("managed_vars");
    }
}
