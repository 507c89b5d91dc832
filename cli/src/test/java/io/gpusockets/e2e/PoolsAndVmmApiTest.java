package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.PoolAttributeRequest;
import io.gpusockets.protocol.structs.BatchMemOp;
import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 11 through the Java frontend against a backend process on the emulated device: memory pools and
 * stream-ordered allocation, VMM, several pointer attributes, peer copies, managed memory and stream
 * memory operations; what one session may not name of another's, and what a session's end releases.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PoolsAndVmmApiTest extends EmulatedBackendTest {
    private static final long MIB2 = 2L << 20;

    private static void expect(int expected, int actual, String what) {
        assertEquals(CuResult.name(expected), CuResult.name(actual), what);
    }

    private static long out(Cuda cu, int r, MemorySegment cell, String what) {
        Cuda.ok(r, what);
        return cell.get(JAVA_LONG, 0);
    }

    private static long defaultPool(Cuda cu) {
        MemorySegment c = cu.cell();
        return out(cu, cu.d.cuDeviceGetDefaultMemPool(c, 0), c, "cuDeviceGetDefaultMemPool");
    }

    private static long poolAttr(Cuda cu, long pool, int attr) {
        MemorySegment v = cu.cell().fill((byte) 0);
        Cuda.ok(cu.d.cuMemPoolGetAttribute(pool, attr, v), "cuMemPoolGetAttribute " + attr);
        return PoolAttributeRequest.valueBytes(attr) == 4 ? v.get(JAVA_INT, 0) : v.get(JAVA_LONG, 0);
    }

    private static long allocAsync(Cuda cu, long bytes, long stream) {
        MemorySegment c = cu.cell();
        return out(cu, cu.d.cuMemAllocAsync(c, bytes, stream), c, "cuMemAllocAsync");
    }

    private static MemorySegment poolProps(Cuda cu, int handleTypes) {
        MemorySegment p = cu.cell(MemoryProps.POOL_PROPS_SIZE).fill((byte) 0);
        p.set(JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
        p.set(JAVA_INT, 4, handleTypes);
        p.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
        return p;
    }

    private static MemorySegment allocationProp(Cuda cu) {
        MemorySegment p = cu.cell(MemoryProps.ALLOCATION_PROP_SIZE).fill((byte) 0);
        p.set(JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
        p.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
        return p;
    }

    private static MemorySegment readWrite(Cuda cu) {
        MemorySegment d = cu.cell(MemoryProps.ACCESS_DESC_SIZE).fill((byte) 0);
        d.set(JAVA_INT, 0, MemoryProps.LOCATION_TYPE_DEVICE);
        d.set(JAVA_INT, 8, MemoryProps.ACCESS_READWRITE);
        return d;
    }

    /** A mapped, accessible VMM range of {@code size} bytes: {reservation, handle}. */
    private static long[] mapped(Cuda cu, long size) {
        MemorySegment c = cu.cell();
        long handle = out(cu, cu.d.cuMemCreate(c, size, allocationProp(cu), 0), c, "cuMemCreate");
        long va = out(cu, cu.d.cuMemAddressReserve(c, size, 0, 0, 0), c, "cuMemAddressReserve");
        Cuda.ok(cu.d.cuMemMap(va, size, 0, handle, 0), "cuMemMap");
        Cuda.ok(cu.d.cuMemSetAccess(va, size, readWrite(cu), 1), "cuMemSetAccess");
        return new long[] {va, handle};
    }

    @Test
    void eachSessionHasPoolsOfItsOwnAndCannotNameAnothers() throws Exception {
        try (RemoteCudaDriver a = connect("unix"); RemoteCudaDriver b = connect("tcp")) {
            Cuda ca = new Cuda(a), cb = new Cuda(b);
            ca.primaryContext();
            cb.primaryContext();
            long poolA = defaultPool(ca);
            long poolB = defaultPool(cb);
            assertNotEquals(poolA, poolB);
            assertEquals(poolA, defaultPool(ca), "the same stand-in every time");

            long p = allocAsync(ca, 4096, 0);
            byte[] data = new byte[4096];
            java.util.Arrays.fill(data, (byte) 7);
            ca.put(p, data);
            assertArrayEquals(data, ca.get(p, 4096));
            assertEquals(4096, poolAttr(ca, poolA, PoolAttributeRequest.USED_MEM_CURRENT));
            assertEquals(0, poolAttr(cb, poolB, PoolAttributeRequest.USED_MEM_CURRENT), "b sees nothing of a's pool");

            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuMemPoolGetAttribute(poolA, PoolAttributeRequest.USED_MEM_CURRENT,
                    cb.cell()), "a's pool in b");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuMemPoolTrimTo(poolA, 0), "trimming a's pool from b");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuDeviceSetMemPool(0, poolA), "a's pool as b's current");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuMemAllocFromPoolAsync(cb.cell(), 64, poolA, 0), "allocating from a's pool");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemFreeAsync(p, 0), "freeing a's allocation from b");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemsetD8(p, (byte) 0, 1), "a's allocation in b");

            MemorySegment c = ca.cell();
            long created = out(ca, a.cuMemPoolCreate(c, poolProps(ca, 0)), c, "cuMemPoolCreate");
            Cuda.ok(a.cuDeviceSetMemPool(0, created), "cuDeviceSetMemPool");
            long q = allocAsync(ca, 100, 0);
            assertEquals(100, poolAttr(ca, created, PoolAttributeRequest.USED_MEM_CURRENT));
            Cuda.ok(a.cuDeviceGetMemPool(c, 0), "cuDeviceGetMemPool");
            assertEquals(created, c.get(JAVA_LONG, 0));
            Cuda.ok(b.cuDeviceGetMemPool(c, 0), "b's current pool");
            assertEquals(poolB, c.get(JAVA_LONG, 0), "a's cuDeviceSetMemPool changes only a's view");

            MemorySegment threshold = ca.u64(1L << 20);
            Cuda.ok(a.cuMemPoolSetAttribute(created, PoolAttributeRequest.RELEASE_THRESHOLD, threshold), "set threshold");
            assertEquals(1L << 20, poolAttr(ca, created, PoolAttributeRequest.RELEASE_THRESHOLD));
            assertEquals(1, poolAttr(ca, created, PoolAttributeRequest.REUSE_FOLLOW_EVENT_DEPENDENCIES), "an int attribute");

            Cuda.ok(a.cuMemFreeAsync(p, 0), "cuMemFreeAsync");
            Cuda.ok(a.cuCtxSynchronize(), "cuCtxSynchronize");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuMemsetD8(p, (byte) 0, 1), "a freed async allocation is no session range");
            Cuda.ok(a.cuMemFreeAsync(q, 0), "free q");

            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, a.cuMemPoolCreate(c, poolProps(ca, 1)), "an IPC handle type");
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, a.cuMemPoolExportToShareableHandle(c, created, 1, 0), "export");
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, a.cuMemPoolImportFromShareableHandle(c, c, 1, 0), "import");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuMemPoolDestroy(poolA), "the default stand-in");
            Cuda.ok(a.cuMemPoolDestroy(created), "cuMemPoolDestroy");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, a.cuMemPoolTrimTo(created, 0), "a destroyed pool");
        }
    }

    @Test
    void vmmMappingsAreSessionRangesFromMapToUnmapAndAnotherSessionsHandleIsRefused() throws Exception {
        try (RemoteCudaDriver a = connect("unix"); RemoteCudaDriver b = connect("unix")) {
            Cuda ca = new Cuda(a), cb = new Cuda(b);
            ca.primaryContext();
            cb.primaryContext();
            MemorySegment c = ca.cell();
            Cuda.ok(a.cuMemGetAllocationGranularity(c, allocationProp(ca), 0), "granularity");
            assertEquals(MIB2, c.get(JAVA_LONG, 0));
            long[] m = mapped(ca, MIB2);
            long va = m[0], handle = m[1];
            byte[] data = new byte[8192];
            new java.util.Random(3).nextBytes(data);
            ca.put(va + 4096, data);
            assertArrayEquals(data, ca.get(va + 4096, 8192));
            MemorySegment host = ca.cell(8192);
            Cuda.ok(a.cuMemcpy(host.address(), va + 4096, 8192), "a unified copy knows the reservation is device memory");
            assertArrayEquals(data, host.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));

            MemorySegment props = ca.cell(32);
            Cuda.ok(a.cuMemGetAllocationPropertiesFromHandle(props, handle), "properties");
            assertEquals(MemoryProps.ALLOCATION_TYPE_PINNED, props.get(JAVA_INT, 0));
            long retained = out(ca, a.cuMemRetainAllocationHandle(c, va + 100), c, "retain");
            assertEquals(handle, retained);
            Cuda.ok(a.cuMemRelease(retained), "release the retained reference");

            // b can name none of it
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuMemRelease(handle), "a's handle in b");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuMemGetAllocationPropertiesFromHandle(cb.cell(32), handle), "a's handle");
            MemorySegment cbc = cb.cell();
            long vb = out(cb, b.cuMemAddressReserve(cbc, MIB2, 0, 0, 0), cbc, "b reserves");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuMemMap(vb, MIB2, 0, handle, 0), "mapping a's handle in b");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemUnmap(va, MIB2), "unmapping a's mapping from b");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemAddressFree(va, MIB2), "freeing a's reservation from b");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemRetainAllocationHandle(cbc, va), "retaining through a's address");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemsetD8(va, (byte) 0, 1), "a's mapping in b");
            Cuda.ok(b.cuMemAddressFree(vb, MIB2), "b frees its own");

            // maps stay inside the session's reservations
            long h2 = out(ca, a.cuMemCreate(c, MIB2, allocationProp(ca), 0), c, "second handle");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuMemMap(va + MIB2, MIB2, 0, h2, 0), "past the reservation");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuMemMap(va, MIB2, 0, h2, 0), "over a mapping");
            MemorySegment badProp = allocationProp(ca);
            badProp.set(JAVA_INT, 4, 2); // CU_MEM_HANDLE_TYPE_WIN32 (POSIX fd and fabric are served: IpcSharingTest)
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, a.cuMemCreate(c, MIB2, badProp, 0), "a Win32 handle type");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuMemExportToShareableHandle(c, h2, 1, 0),
                    "export of an allocation made without the type");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuMemImportFromShareableHandle(c, c, 1), "import of no descriptor");
            Cuda.ok(a.cuMemRelease(h2), "release h2");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, a.cuMemRelease(h2), "released already");

            expect(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuMemAddressFree(va, MIB2), "still mapped");
            Cuda.ok(a.cuMemUnmap(va, MIB2), "cuMemUnmap");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, a.cuMemsetD8(va, (byte) 0, 1), "unmapped: no session range");
            Cuda.ok(a.cuMemRelease(handle), "cuMemRelease");
            Cuda.ok(a.cuMemAddressFree(va, MIB2), "cuMemAddressFree");
        }
    }

    @Test
    void aSessionsEndFreesItsAsyncAllocationsPoolsMappingsHandlesAndReservations() throws Exception {
        long freeBefore;
        long session;
        backend.awaitNoSessions(10_000); // an earlier test's session ending meanwhile would move the baseline
        try (RemoteCudaDriver probe = connect("unix")) {
            Cuda cp = new Cuda(probe);
            cp.primaryContext();
            freeBefore = freeBytes(cp);
        }
        RemoteCudaDriver d = connect("unix");
        session = d.sessionId();
        try {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            allocAsync(cu, 1 << 20, 0);
            MemorySegment c = cu.cell();
            long created = out(cu, d.cuMemPoolCreate(c, poolProps(cu, 0)), c, "cuMemPoolCreate");
            Cuda.ok(d.cuMemAllocFromPoolAsync(c, 3 << 20, created, 0), "from the created pool");
            mapped(cu, 2 * MIB2);
            out(cu, d.cuMemAddressReserve(c, MIB2, 0, 0, 0), c, "an unmapped reservation");
            Cuda.ok(d.cuCtxSynchronize(), "sync");
            assertTrue(freeBytes(cu) <= freeBefore - (4L << 20) - 2 * MIB2, "the session holds memory");
        } finally {
            d.close();
        }
        String line = backend.awaitLog("session " + session + " ended", 10_000);
        assertTrue(line.contains("2 async allocation(s), 2 pool(s)"), line);
        assertTrue(line.contains("1 mapping(s), 1 VMM handle(s), 2 reservation(s)"), line);
        try (RemoteCudaDriver probe = connect("unix")) {
            Cuda cp = new Cuda(probe);
            cp.primaryContext();
            assertEquals(freeBefore, freeBytes(cp), "everything went back");
        }
    }

    private static long freeBytes(Cuda cu) {
        MemorySegment free = cu.cell(), total = cu.cell();
        Cuda.ok(cu.d.cuMemGetInfo(free, total), "cuMemGetInfo");
        return free.get(JAVA_LONG, 0);
    }

    @Test
    void severalPointerAttributesPeerCopiesAndManagedMemory() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            long ctx = cu.primaryContext();
            long p = cu.alloc(256);
            int[] attrs = {1, 2, 3, 4, 9, 11, 12};
            MemorySegment a = cu.arena.allocateFrom(JAVA_INT, attrs);
            MemorySegment values = cu.cell(16L * attrs.length).fill((byte) 0x55);
            MemorySegment slots = cu.cell(8L * attrs.length);
            for (int i = 0; i < attrs.length; i++) {
                slots.setAtIndex(JAVA_LONG, i, values.address() + 16L * i);
            }
            Cuda.ok(d.cuPointerGetAttributes(attrs.length, a, slots, p + 16), "cuPointerGetAttributes");
            assertEquals(ctx, values.get(JAVA_LONG, 0), "the context as this session's handle");
            assertEquals(2, values.get(JAVA_INT, 16), "device memory");
            assertEquals(p + 16, values.get(JAVA_LONG, 32));
            assertEquals(0, values.get(JAVA_LONG, 48), "no host pointer");
            assertEquals(0x55555555, values.get(JAVA_INT, 20), "a 4-byte value: the slot's next bytes untouched");
            assertEquals(p, values.get(JAVA_LONG, 80));
            assertEquals(256, values.get(JAVA_LONG, 96));
            Cuda.ok(d.cuPointerGetAttributes(attrs.length, a, slots, 0x7f00_1234_0000L), "not the session's: NULL values");
            assertEquals(0, values.get(JAVA_INT, 16));
            assertEquals(0x7f00_1234_0000L, values.get(JAVA_LONG, 48), "HOST_POINTER of memory the driver does not know: itself");
            MemorySegment p2p = cu.arena.allocateFrom(JAVA_INT, 5);
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuPointerGetAttributes(1, p2p, slots, p), "P2P tokens are not forwarded");

            long q = cu.alloc(256);
            cu.put(p, new byte[] {1, 2, 3, 4});
            Cuda.ok(d.cuMemcpyPeer(q, ctx, p, ctx, 4), "cuMemcpyPeer within the session's context");
            assertArrayEquals(new byte[] {1, 2, 3, 4}, cu.get(q, 4));
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpyPeer(q, ctx, p, ctx, 257), "past the allocation");
            expect(CuResult.CUDA_ERROR_INVALID_CONTEXT, d.cuMemcpyPeer(q, 0x1234, p, ctx, 4), "not a context of the session");

            MemorySegment c = cu.cell();
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemAllocManaged(c, 4096, 4), "managed memory of flags SINGLE");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemAdvise_v2(p, 256, 1, 1), "not managed");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemRangeGetAttribute(cu.cell(), 4, 1, p, 256), "not managed");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemAdvise(0x1000, 256, 1, 0), "not the session's");
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuMemGetHandleForAddressRange(c, p, 256, 1, 0), "dma-buf handles");
        }
    }

    @Test
    void streamMemoryOperationsUseTheSessionsRangesOnly() throws Exception {
        long session;
        try (RemoteCudaDriver d = connect("unix"); RemoteCudaDriver other = connect("unix")) {
            session = d.sessionId();
            Cuda cu = new Cuda(d), co = new Cuda(other);
            cu.primaryContext();
            co.primaryContext();
            long flag = cu.alloc(16);
            long data = cu.alloc(16);
            Cuda.ok(d.cuMemsetD8(flag, (byte) 0, 16), "clear");
            long waiter = cu.stream();
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuStreamCreate(c, 1), "a non-blocking writer");
            long writer = c.get(JAVA_LONG, 0);
            Cuda.ok(d.cuStreamWaitValue32(waiter, flag, 1, 1), "wait for 1");
            Cuda.ok(d.cuStreamWriteValue64(waiter, data, 42, 0), "written after the wait");
            expect(CuResult.CUDA_ERROR_NOT_READY, d.cuStreamQuery(waiter), "held by the wait");
            MemorySegment batch = cu.cell(BatchMemOp.SIZE).fill((byte) 0);
            batch.set(JAVA_INT, 0, BatchMemOp.WRITE_VALUE_32);
            batch.set(JAVA_LONG, 8, flag);
            batch.set(JAVA_INT, 16, 1);
            Cuda.ok(d.cuStreamBatchMemOp(writer, 1, batch, 0), "release it");
            Cuda.ok(d.cuStreamSynchronize(waiter), "released");
            assertEquals(42, java.nio.ByteBuffer.wrap(cu.get(data, 8)).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong());

            // the other session can neither write nor wait on these addresses
            Cuda.ok(other.cuStreamWriteValue32(0, flag, 9, 0), "pipelined: the error comes at the next sync");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, other.cuCtxSynchronize(), "another session's address");
            MemorySegment ob = co.cell(BatchMemOp.SIZE).fill((byte) 0);
            ob.set(JAVA_INT, 0, BatchMemOp.WAIT_VALUE_32);
            ob.set(JAVA_LONG, 8, flag);
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, other.cuStreamBatchMemOp(0, 1, ob, 0), "another session's address in a batch");
            MemorySegment many = cu.cell(300L * BatchMemOp.SIZE).fill((byte) 0);
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamBatchMemOp(0, 300, many, 0), "count over the bound");
            assertEquals(1, cu.get(flag, 4)[0], "untouched by the other session");

            // a wait that never completes does not keep the session from ending
            Cuda.ok(d.cuStreamWaitValue32(waiter, flag, 77, 1), "never satisfied");
        }
        String line = backend.awaitLog("session " + session + " ended", 10_000);
        assertTrue(line.contains("2 stream(s)") && line.contains("2 stream wait(s) released"), line);
    }
}
