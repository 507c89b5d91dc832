package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_DEVICE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_READY;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.StableWindows;
import io.gpusockets.protocol.calls.PoolAttributeRequest;
import io.gpusockets.protocol.structs.BatchMemOp;
import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Issue 11 on the emulated device: pools and stream-ordered allocation, VMM, peer copies, pointer attributes, stream memory operations. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PoolsAndVirtualMemoryTest {
    private static final long MIB2 = 2L << 20;

    private static long readLong(MemorySegment s) {
        return s.get(ValueLayout.JAVA_LONG, 0);
    }

    private static MemorySegment poolProps(Emulated e, int allocType, int handleTypes, int locType, int dev) {
        MemorySegment p = e.arena.allocate(MemoryProps.POOL_PROPS_SIZE, 8);
        p.set(ValueLayout.JAVA_INT, 0, allocType);
        p.set(ValueLayout.JAVA_INT, 4, handleTypes);
        p.set(ValueLayout.JAVA_INT, 8, locType);
        p.set(ValueLayout.JAVA_INT, 12, dev);
        return p;
    }

    private static MemorySegment allocationProp(Emulated e, int type, int handleTypes, int dev) {
        MemorySegment p = e.arena.allocate(MemoryProps.ALLOCATION_PROP_SIZE, 8);
        p.set(ValueLayout.JAVA_INT, 0, type);
        p.set(ValueLayout.JAVA_INT, 4, handleTypes);
        p.set(ValueLayout.JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
        p.set(ValueLayout.JAVA_INT, 12, dev);
        return p;
    }

    private static MemorySegment access(Emulated e, int dev, int flags) {
        MemorySegment d = e.arena.allocate(MemoryProps.ACCESS_DESC_SIZE, 4);
        d.set(ValueLayout.JAVA_INT, 0, MemoryProps.LOCATION_TYPE_DEVICE);
        d.set(ValueLayout.JAVA_INT, 4, dev);
        d.set(ValueLayout.JAVA_INT, 8, flags);
        return d;
    }

    private static long poolAttr(Emulated e, long pool, int attr) {
        MemorySegment v = e.arena.allocate(8).fill((byte) 0);
        e.ok(e.device.cuMemPoolGetAttribute(pool, attr, v));
        return PoolAttributeRequest.valueBytes(attr) == 4 ? v.get(ValueLayout.JAVA_INT, 0) : readLong(v);
    }

    @Test
    void asyncAllocationIsUsableInStreamOrderAndItsFreeTakesEffectWhenTheStreamGetsThere() {
        try (Emulated e = new Emulated()) {
            long s = e.stream(0);
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuMemAllocAsync(out, 4096, s));
            long p = readLong(out);
            e.ok(e.device.cuMemsetD32Async(p, 0x01020304, 1024, s));
            MemorySegment host = e.arena.allocate(4096);
            e.ok(e.device.cuMemcpyDtoHAsync(host, p, 4096, s));
            e.ok(e.device.cuMemFreeAsync(p, s));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemFreeAsync(p, s), "a free already queued");
            e.ok(e.device.cuStreamSynchronize(s));
            assertEquals(0x01020304, host.get(ValueLayout.JAVA_INT, 4092));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemsetD8(p, (byte) 0, 1), "freed");

            long pool = defaultPool(e, 0);
            assertEquals(0, poolAttr(e, pool, PoolAttributeRequest.USED_MEM_CURRENT));
            assertTrue(poolAttr(e, pool, PoolAttributeRequest.USED_MEM_HIGH) >= 4096);
            MemorySegment zero = e.arena.allocate(8).fill((byte) 0);
            e.ok(e.device.cuMemPoolSetAttribute(pool, PoolAttributeRequest.USED_MEM_HIGH, zero));
            assertEquals(0, poolAttr(e, pool, PoolAttributeRequest.USED_MEM_HIGH));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemPoolSetAttribute(pool, PoolAttributeRequest.USED_MEM_CURRENT, zero),
                    "read-only");
            assertEquals(1, poolAttr(e, pool, PoolAttributeRequest.REUSE_ALLOW_OPPORTUNISTIC));
            MemorySegment threshold = e.arena.allocateFrom(ValueLayout.JAVA_LONG, 1L << 30);
            e.ok(e.device.cuMemPoolSetAttribute(pool, PoolAttributeRequest.RELEASE_THRESHOLD, threshold));
            assertEquals(1L << 30, poolAttr(e, pool, PoolAttributeRequest.RELEASE_THRESHOLD));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemPoolDestroy(pool), "a default pool is not destroyed");
        }
    }

    private static long defaultPool(Emulated e, int dev) {
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuDeviceGetDefaultMemPool(out, dev));
        return readLong(out);
    }

    @Test
    void createdPoolsServeAllocationsBecomeCurrentPerDeviceAndRefuseWhatIsNotEmulated() {
        try (Emulated e = new Emulated(new EmulatedDevice(2, 1L << 30))) {
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuMemPoolCreate(out, poolProps(e, 1, 0, 1, 0)));
            long pool = readLong(out);
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuMemPoolCreate(out, poolProps(e, 1, 1, 1, 0)), "POSIX fd handles");
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuMemPoolCreate(out, poolProps(e, 2, 0, 1, 0)), "managed");
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuMemPoolCreate(out, poolProps(e, 1, 0, 2, 0)), "host location");
            assertEquals(CUDA_ERROR_INVALID_DEVICE, e.device.cuMemPoolCreate(out, poolProps(e, 1, 0, 1, 2)));

            e.ok(e.device.cuMemAllocFromPoolAsync(out, 1000, pool, 0));
            long p = readLong(out);
            assertEquals(1000, poolAttr(e, pool, PoolAttributeRequest.USED_MEM_CURRENT));
            assertEquals(CUDA_ERROR_INVALID_DEVICE, e.device.cuDeviceSetMemPool(1, pool), "a pool of device 0");
            e.ok(e.device.cuDeviceSetMemPool(0, pool));
            e.ok(e.device.cuDeviceGetMemPool(out, 0));
            assertEquals(pool, readLong(out));
            e.ok(e.device.cuMemAllocAsync(out, 24, 0));
            assertEquals(1024, poolAttr(e, pool, PoolAttributeRequest.USED_MEM_CURRENT), "cuMemAllocAsync uses the current pool");
            e.ok(e.device.cuMemFree(p));   // cuMemFree takes pool memory too
            e.ok(e.device.cuCtxSynchronize());
            assertEquals(24, poolAttr(e, pool, PoolAttributeRequest.USED_MEM_CURRENT));

            MemorySegment flags = e.arena.allocate(4);
            MemorySegment loc1 = e.arena.allocate(8);
            loc1.set(ValueLayout.JAVA_INT, 0, 1);
            loc1.set(ValueLayout.JAVA_INT, 4, 1);
            e.ok(e.device.cuMemPoolGetAccess(flags, pool, loc1));
            assertEquals(0, flags.get(ValueLayout.JAVA_INT, 0));
            e.ok(e.device.cuMemPoolSetAccess(pool, access(e, 1, 3), 1));
            e.ok(e.device.cuMemPoolGetAccess(flags, pool, loc1));
            assertEquals(3, flags.get(ValueLayout.JAVA_INT, 0));
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuMemPoolSetAccess(pool, access(e, 1, 1), 1), "read-only");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemPoolSetAccess(pool, access(e, 0, 0), 1), "own device");
            e.ok(e.device.cuMemPoolTrimTo(pool, 0));

            e.ok(e.device.cuMemPoolDestroy(pool));
            e.ok(e.device.cuDeviceGetMemPool(out, 0));
            assertEquals(defaultPool(e, 0), readLong(out), "destroying the current pool makes the default current");
            assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuMemAllocFromPoolAsync(out, 8, pool, 0));
            assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuMemPoolTrimTo(e.context, 0), "a context is no pool");
        }
    }

    @Test
    void mappedMemoryIsReachableAfterSetAccessByCopiesAndKernelsAndGoneAfterUnmap() {
        try (Emulated e = new Emulated()) {
            MemorySegment prop = allocationProp(e, 1, 0, 0);
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuMemGetAllocationGranularity(out, prop, 1));
            assertEquals(MIB2, readLong(out));
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuMemCreate(out, MIB2, allocationProp(e, 1, 2, 0), 0), "win32 export");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemCreate(out, 4096, prop, 0), "not a granularity multiple");
            long before = e.freeBytes();
            e.ok(e.device.cuMemCreate(out, 2 * MIB2, prop, 0));
            long handle = readLong(out);
            assertEquals(before - 2 * MIB2, e.freeBytes());

            e.ok(e.device.cuMemAddressReserve(out, 4 * MIB2, 0, 0, 0));
            long va = readLong(out);
            assertEquals(0, va % MIB2);
            e.ok(e.device.cuMemMap(va + MIB2, 2 * MIB2, 0, handle, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemMap(va + 2 * MIB2, MIB2, 0, handle, 0), "overlaps");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemMap(va + 3 * MIB2, 2 * MIB2, 0, handle, 0), "past the reservation");
            long p = va + MIB2;
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemsetD8(p, (byte) 1, 16), "not accessible before cuMemSetAccess");
            e.ok(e.device.cuMemSetAccess(p, 2 * MIB2, access(e, 0, 3), 1));
            MemorySegment loc = e.arena.allocate(8);
            loc.set(ValueLayout.JAVA_INT, 0, 1);
            e.ok(e.device.cuMemGetAccess(out, loc, p));
            assertEquals(3, readLong(out));

            long module = e.loadShippedModule();
            e.ok(e.launch(e.function(module, "gpus_fill_u32"), 1, 64, 0, 0, p + 4096, 0xCAFEF00D, 64));
            e.ok(e.device.cuCtxSynchronize());
            int[] got = e.downloadInts(p + 4096, 64);
            for (int v : got) {
                assertEquals(0xCAFEF00D, v);
            }

            e.ok(e.device.cuMemRetainAllocationHandle(out, p + 12345));
            assertEquals(handle, readLong(out));
            MemorySegment props = e.arena.allocate(32);
            e.ok(e.device.cuMemGetAllocationPropertiesFromHandle(props, handle));
            assertEquals(1, props.get(ValueLayout.JAVA_INT, 0));
            assertEquals(1, props.get(ValueLayout.JAVA_INT, 8));
            e.ok(e.device.cuMemRelease(handle));
            e.ok(e.device.cuMemRelease(handle));
            long code = Emulated.codeBytes(Emulated.shippedPtx());   // the module's, in the footprint model
            assertEquals(before - 2 * MIB2 - code, e.freeBytes(), "still mapped: the memory stays");
            assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuMemRelease(handle));

            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemUnmap(p, MIB2), "a part of a mapping");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemAddressFree(va, 4 * MIB2), "still mapped");
            e.ok(e.device.cuMemUnmap(p, 2 * MIB2));
            assertEquals(before - code, e.freeBytes(), "unmapped and released: freed");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemsetD8(p, (byte) 1, 16));
            e.ok(e.device.cuMemAddressFree(va, 4 * MIB2));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemAddressFree(va, 4 * MIB2));
        }
    }

    /**
     * A reservation asked for at an address of the device's own range that the driver handed out before and that is
     * free again gets it, as a GPU's driver grants a free address asked for (a group migration's target maps an opened
     * IPC range where the source's driver put it); one where a live reservation or allocation lies gets another.
     */
    @Test
    void aReservationAtAFreedAddressOfTheDevicesOwnRangeGetsItAgain() {
        try (Emulated e = new Emulated()) {
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuMemAddressReserve(out, 4 * MIB2, 0, 0, 0));
            long first = readLong(out);
            assertTrue(first >= EmulatedMemory.BASE && first < EmulatedMemory.OWN_END, "the driver's choice: its own range");
            e.ok(e.device.cuMemAddressReserve(out, 2 * MIB2, 0, first, 0));
            long taken = readLong(out);
            assertTrue(taken != first, "live: another address");
            e.ok(e.device.cuMemAddressFree(taken, 2 * MIB2));
            e.ok(e.device.cuMemAddressFree(first, 4 * MIB2));
            e.ok(e.device.cuMemAddressReserve(out, 4 * MIB2, 0, first, 0));
            assertEquals(first, readLong(out), "freed: granted again where asked");
            e.ok(e.device.cuMemAddressFree(first, 4 * MIB2));

            e.ok(e.device.cuMemAlloc(out, MIB2));
            long alloc = readLong(out);
            e.ok(e.device.cuMemAddressReserve(out, 2 * MIB2, 0, alloc & -(2 * MIB2), 0));
            assertTrue(readLong(out) != (alloc & -(2 * MIB2)), "over a live allocation: another address");
            e.ok(e.device.cuMemAddressFree(readLong(out), 2 * MIB2));
            e.ok(e.device.cuMemFree(alloc));
        }
    }

    /**
     * Address-stable memory (issue 22): a reservation asked for at an address where the backend's windows lie gets
     * it, and the same address again once freed (a session's memory made again where it was); an overlapping or
     * misplaced request, or one in the device's own range, is a hint not followed; memory mapped there is reached by
     * copies and kernels.
     */
    @Test
    void aReservationAtARequestedAddressGetsItAndGetsItAgainOnceFreed() {
        try (Emulated e = new Emulated()) {
            MemorySegment out = e.arena.allocate(8);
            long want = StableWindows.base() + 64 * MIB2;
            e.ok(e.device.cuMemAddressReserve(out, 4 * MIB2, 0, want, 0));
            assertEquals(want, readLong(out));
            e.ok(e.device.cuMemAddressReserve(out, 2 * MIB2, 0, want + 2 * MIB2, 0));
            long other = readLong(out);
            assertTrue(other != want + 2 * MIB2, "overlapping: another address");
            e.ok(e.device.cuMemAddressReserve(out, 2 * MIB2, 0, want - MIB2 / 2, 0));
            long misaligned = readLong(out);
            assertTrue(misaligned != want - MIB2 / 2 && misaligned % MIB2 == 0, "misaligned: another, aligned address");
            e.ok(e.device.cuMemAddressReserve(out, 2 * MIB2, 0, EmulatedMemory.BASE + 1024 * MIB2, 0));
            assertTrue(readLong(out) >= EmulatedMemory.BASE && readLong(out) < EmulatedMemory.OWN_END,
                    "in the device's own range: a fresh address");
            long low = readLong(out);
            e.ok(e.device.cuMemAddressReserve(out, 2 * MIB2, 0, want + 4 * MIB2, 0));
            assertEquals(want + 4 * MIB2, readLong(out), "adjacent, not overlapping");

            MemorySegment prop = allocationProp(e, 1, 0, 0);
            e.ok(e.device.cuMemCreate(out, 2 * MIB2, prop, 0));
            long handle = readLong(out);
            e.ok(e.device.cuMemMap(want, 2 * MIB2, 0, handle, 0));
            e.ok(e.device.cuMemSetAccess(want, 2 * MIB2, access(e, 0, 3), 1));
            long module = e.loadShippedModule();
            e.ok(e.launch(e.function(module, "gpus_fill_u32"), 1, 64, 0, 0, want + 256, 0x5EED, 64));
            e.ok(e.device.cuCtxSynchronize());
            for (int v : e.downloadInts(want + 256, 64)) {
                assertEquals(0x5EED, v);
            }
            e.ok(e.device.cuMemUnmap(want, 2 * MIB2));
            e.ok(e.device.cuMemRelease(handle));
            e.ok(e.device.cuMemAddressFree(want, 4 * MIB2));
            e.ok(e.device.cuMemAddressReserve(out, 4 * MIB2, 0, want, 0));
            assertEquals(want, readLong(out), "freed: the same address again");
            e.ok(e.device.cuMemAddressFree(want, 4 * MIB2));
            for (long va : new long[] {other, misaligned, low, want + 4 * MIB2}) {
                e.ok(e.device.cuMemAddressFree(va, 2 * MIB2));
            }
        }
    }

    /**
     * The driver's device addresses share the process's address space: a reservation asked for where this process
     * maps something (here a host allocation of the test's own) or below 4 GiB is a hint not followed, as the real
     * driver reserves elsewhere.
     */
    @Test
    void aRequestedAddressWhereThisProcessMapsSomethingIsNotFollowed() {
        try (Emulated e = new Emulated(); Arena host = Arena.ofConfined()) {
            MemorySegment out = e.arena.allocate(8);
            long mapped = host.allocate(4 * MIB2, MIB2).address(); // a granule-aligned address the process maps
            e.ok(e.device.cuMemAddressReserve(out, 2 * MIB2, 0, mapped, 0));
            long got = readLong(out);
            assertTrue(got != mapped && got >= EmulatedMemory.BASE && got < EmulatedMemory.OWN_END,
                    "taken by the process: a fresh address, 0x" + Long.toHexString(got));
            e.ok(e.device.cuMemAddressFree(got, 2 * MIB2));
            e.ok(e.device.cuMemAddressReserve(out, 2 * MIB2, 0, 0x8000_0000L, 0));
            assertTrue(readLong(out) != 0x8000_0000L, "below 4 GiB: a fresh address");
            e.ok(e.device.cuMemAddressFree(readLong(out), 2 * MIB2));
        }
    }

    @Test
    void theMapsFileIsRead() {
        java.util.List<String> maps = java.util.List.of(
                "55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 123 /usr/bin/java",
                "7f3f00000000-7f4100000000 rw-p 00000000 00:00 0 ",
                "garbage");
        assertTrue(HostMappings.overlap(maps, 0x7f40_0000_0000L, MIB2));
        assertTrue(HostMappings.overlap(maps, 0x7f3e_0000_0000L, 0x1_0000_0001L), "its first byte");
        assertTrue(!HostMappings.overlap(maps, 0x7f3e_0000_0000L, 0x1_0000_0000L), "up to, not into it");
        assertTrue(!HostMappings.overlap(maps, 0x7f41_0000_0000L, MIB2), "from its end");
        assertTrue(!HostMappings.overlap(maps, StableWindows.DEFAULT_BASE, StableWindows.SPAN));
    }

    @Test
    void pointerAttributesComeSeveralAtOnceAndAnUnknownPointerGetsNullValues() {
        try (Emulated e = new Emulated()) {
            long p = e.alloc(256);
            int[] attrs = {2, 3, 9, 11, 12, 4};
            MemorySegment a = e.arena.allocateFrom(ValueLayout.JAVA_INT, attrs);
            MemorySegment slots = e.arena.allocate(8L * attrs.length);
            MemorySegment values = e.arena.allocate(16L * attrs.length).fill((byte) 0x55);
            for (int i = 0; i < attrs.length; i++) {
                slots.setAtIndex(ValueLayout.JAVA_LONG, i, values.address() + 16L * i);
            }
            e.ok(e.device.cuPointerGetAttributes(attrs.length, a, slots, p + 8));
            assertEquals(2, values.get(ValueLayout.JAVA_INT, 0));
            assertEquals(p + 8, values.get(ValueLayout.JAVA_LONG, 16));
            assertEquals(0, values.get(ValueLayout.JAVA_INT, 32));
            assertEquals(p, values.get(ValueLayout.JAVA_LONG, 48));
            assertEquals(256, values.get(ValueLayout.JAVA_LONG, 64));
            assertEquals(0, values.get(ValueLayout.JAVA_LONG, 80));
            e.ok(e.device.cuPointerGetAttributes(attrs.length, a, slots, 0x1234));
            assertEquals(0, values.get(ValueLayout.JAVA_INT, 0), "no device memory: NULL values, success");
            assertEquals(0x1234, values.get(ValueLayout.JAVA_LONG, 80), "the host pointer of memory the driver does not know is itself");
        }
    }

    @Test
    void peerCopiesJoinTwoContexts() {
        try (Emulated e = new Emulated(new EmulatedDevice(2, 1L << 30))) {
            long a = e.alloc(64);
            e.upload(a, new float[] {1, 2, 3, 4});
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuCtxCreate(out, MemorySegment.NULL, 0, 1));
            long other = readLong(out);
            long b = e.alloc(64);   // in the new (current) context
            e.ok(e.device.cuMemcpyPeer(b, other, a, e.context, 16));
            assertArrayEquals(new float[] {1, 2, 3, 4}, e.downloadFloats(b, 4));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyPeer(b, e.context, a, e.context, 16), "b is not the first context's");
            e.ok(e.device.cuMemsetD32(b, 0, 4));
            e.ok(e.device.cuMemcpyPeerAsync(b, other, a, e.context, 16, 0));
            e.ok(e.device.cuCtxSynchronize());
            assertArrayEquals(new float[] {1, 2, 3, 4}, e.downloadFloats(b, 4));
        }
    }

    @Test
    void aWaitHoldsItsStreamUntilAWriteOnAnotherStreamReleasesIt() throws Exception {
        try (Emulated e = new Emulated()) {
            long flag = e.alloc(16);
            long data = e.alloc(16);
            e.ok(e.device.cuMemsetD8(flag, (byte) 0, 16));
            long waiter = e.stream(1);
            long writer = e.stream(1);
            e.ok(e.device.cuStreamWaitValue32(waiter, flag, 5, StreamMemOps.WAIT_GEQ));
            e.ok(e.device.cuStreamWriteValue64(waiter, data, 0x1122334455667788L, 0));
            assertEquals(CUDA_ERROR_NOT_READY, e.device.cuStreamQuery(waiter));
            e.ok(e.device.cuStreamWriteValue32(writer, flag, 4, 0));
            e.ok(e.device.cuStreamSynchronize(writer));
            assertEquals(CUDA_ERROR_NOT_READY, e.device.cuStreamQuery(waiter), "4 < 5");

            MemorySegment batch = e.arena.allocate(2L * BatchMemOp.SIZE, 8).fill((byte) 0);
            batch.set(ValueLayout.JAVA_INT, 0, BatchMemOp.WRITE_VALUE_32);
            batch.set(ValueLayout.JAVA_LONG, 8, flag);
            batch.set(ValueLayout.JAVA_INT, 16, 7);
            batch.set(ValueLayout.JAVA_INT, BatchMemOp.SIZE, BatchMemOp.BARRIER);
            e.ok(e.device.cuStreamBatchMemOp(writer, 2, batch, 0));
            e.ok(e.device.cuStreamSynchronize(waiter));
            MemorySegment host = e.arena.allocate(8);
            e.ok(e.device.cuMemcpyDtoH(host, data, 8));
            assertEquals(0x1122334455667788L, readLong(host));

            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuStreamWriteValue32(writer, flag + 2, 1, 0), "misaligned");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuStreamWriteValue32(writer, 0x1000, 1, 0), "not device memory");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuStreamWaitValue32(writer, flag, 1, 7), "no such condition");
        }
    }

    @Test
    void conditionsFollowCuda() {
        assertTrue(StreamMemOps.holds(StreamMemOps.WAIT_GEQ, 0, 0xFFFF_FFFFL, 4), "cyclic: 0 is after 0xFFFFFFFF");
        assertTrue(StreamMemOps.holds(StreamMemOps.WAIT_EQ, 7, 7, 8));
        assertTrue(StreamMemOps.holds(StreamMemOps.WAIT_AND, 6, 2, 4));
        assertTrue(!StreamMemOps.holds(StreamMemOps.WAIT_AND, 4, 2, 4));
        assertTrue(StreamMemOps.holds(StreamMemOps.WAIT_NOR, 0, 1, 4));
        assertTrue(!StreamMemOps.holds(StreamMemOps.WAIT_NOR, 0xFFFF_FFFEL, 1, 4));
    }

    @Test
    void aWaitThatNeverCompletesDoesNotKeepItsContextFromBeingDestroyed() throws Exception {
        Emulated e = new Emulated();
        try {
            long flag = e.alloc(4);
            e.ok(e.device.cuMemsetD32(flag, 0, 1));
            long s = e.stream(1);
            e.ok(e.device.cuStreamWaitValue32(s, flag, 1, StreamMemOps.WAIT_EQ));
            int r = CompletableFuture.supplyAsync(() -> e.device.cuCtxDestroy(e.context)).get(30, TimeUnit.SECONDS);
            assertEquals(CUDA_SUCCESS, r);
        } finally {
            e.close();
        }
    }

    @Test
    void managedMemoryIsNotOffered() {
        try (Emulated e = new Emulated()) {
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuMemAllocManaged(e.arena.allocate(8), 64, 1));
            assertNotEquals(null, e.device.lastErrorDetail());
        }
    }

    @Test
    void anAsyncAllocationUsedAfterItsStreamOrderedFreeFaults() {
        try (Emulated e = new Emulated()) {
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuMemAllocAsync(out, 64, 0));
            long p = readLong(out);
            long module = e.loadShippedModule();
            e.ok(e.device.cuMemFreeAsync(p, 0));
            e.ok(e.launch(e.function(module, "gpus_fill_u32"), 1, 1, 0, 0, p, 1, 1));
            assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuCtxSynchronize(), "used after its stream-ordered free");
        }
    }
}
