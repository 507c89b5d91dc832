package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.api.UnsupportedCudaDriver;
import io.gpusockets.protocol.transport.HeapWindow;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class SessionCleanupTest {
    private static final long CTX_A = 0xA000;
    private static final long CTX_B = 0xB000;

    /** Records the calls that give things back, in order; {@code failDestroy} is refused. */
    static final class RecordingDriver extends UnsupportedCudaDriver {
        final List<String> calls = new ArrayList<>();
        final Arena arena = Arena.ofShared();
        long failDestroy;
        final List<Long> pushed = new ArrayList<>();

        @Override
        public synchronized int cuCtxDestroy(long ctx) {
            calls.add("cuCtxDestroy " + Long.toHexString(ctx));
            return ctx == failDestroy ? CuResult.CUDA_ERROR_INVALID_CONTEXT : CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemAllocHost(MemorySegment pp, long bytesize) {
            pp.set(ValueLayout.JAVA_LONG, 0, arena.allocate(bytesize).address());
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemFreeHost(MemorySegment p) {
            calls.add("cuMemFreeHost");
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemHostRegister(MemorySegment p, long bytesize, int flags) {
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemHostUnregister(MemorySegment p) {
            calls.add("cuMemHostUnregister");
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public int cuCtxPushCurrent(long ctx) {
            pushed.add(ctx);
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemFreeAsync(long dptr, long stream) {
            calls.add("cuMemFreeAsync " + Long.toHexString(dptr) + " " + stream);
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuStreamCreate(MemorySegment phStream, int flags) {
            calls.add("cuStreamCreate " + flags);
            phStream.set(ValueLayout.JAVA_LONG, 0, 0x5500);
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuStreamWriteValue32_v2(long stream, long addr, int value, int flags) {
            calls.add("cuStreamWriteValue32_v2 " + Long.toHexString(stream) + " " + Long.toHexString(addr) + " " + value);
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuStreamWriteValue64_v2(long stream, long addr, long value, int flags) {
            calls.add("cuStreamWriteValue64_v2 " + Long.toHexString(stream) + " " + Long.toHexString(addr) + " " + value);
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuStreamSynchronize(long stream) {
            calls.add("cuStreamSynchronize " + Long.toHexString(stream));
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuStreamDestroy(long stream) {
            calls.add("cuStreamDestroy " + Long.toHexString(stream));
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemPoolDestroy(long pool) {
            calls.add("cuMemPoolDestroy " + Long.toHexString(pool));
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemUnmap(long ptr, long size) {
            calls.add("cuMemUnmap " + Long.toHexString(ptr));
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemRelease(long handle) {
            calls.add("cuMemRelease " + Long.toHexString(handle));
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemAddressFree(long ptr, long size) {
            calls.add("cuMemAddressFree " + Long.toHexString(ptr));
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public int cuCtxPopCurrent(MemorySegment pctx) {
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuLibraryUnload(long library) {
            calls.add("cuLibraryUnload " + Long.toHexString(library));
            return library == failUnload ? CuResult.CUDA_ERROR_INVALID_HANDLE : CuResult.CUDA_SUCCESS;
        }

        long failUnload;
    }

    private final RecordingDriver driver = new RecordingDriver();
    private final SessionHandles handles = new SessionHandles(3);
    private final SessionMemory memory = new SessionMemory();
    private final StagingPool staging = new StagingPool(driver, 3, 4096);

    /** Two contexts; in the first a module, a stream, an event and two allocations of 100 and 200 bytes. */
    private void populate() {
        long a = handles.intern(ParamType.CTX, CTX_A, 0, 0);
        handles.intern(ParamType.CTX, CTX_B, 0, 0);
        handles.intern(ParamType.MOD, 0x10, 0, a);
        handles.intern(ParamType.STREAM, 0x20, 0, a);
        handles.intern(ParamType.EVENT, 0x30, 0, a);
        memory.add(new SessionMemory.Range(0x7000_0000L, 100, a, true));
        memory.add(new SessionMemory.Range(0x7000_1000L, 200, a, true));
    }

    @Test
    void releaseAllDestroysEveryContextAndSaysWhatWentWithThem() {
        populate();
        SessionCleanup cleanup = new SessionCleanup(3, driver, handles, memory, staging, null);
        assertEquals("2 context(s), 2 allocation(s) (300 bytes), 1 module(s)/librar(ies), 1 stream(s), 1 event(s)",
                cleanup.releaseAll());
        assertEquals(List.of("cuCtxDestroy a000", "cuCtxDestroy b000"), driver.calls.stream().sorted().toList());
        for (ParamType kind : List.of(ParamType.CTX, ParamType.MOD, ParamType.STREAM, ParamType.EVENT)) {
            assertEquals(0, handles.count(kind), kind + " handles left after the end");
        }
        assertEquals(0, memory.allocationCount());
    }

    @Test
    void releaseAllCountsContextsTheDriverRefusedToDestroy() {
        populate();
        driver.failDestroy = CTX_B;
        String released = new SessionCleanup(3, driver, handles, memory, staging, null).releaseAll();
        assertTrue(released.endsWith(", 1 context(s) failed to destroy"), released);
        assertEquals(0, handles.count(ParamType.CTX), "a context that failed to destroy is still forgotten");
    }

    @Test
    void windowAndPinnedStagingGoBeforeTheirContexts() {
        populate();
        HeapWindow shared = new HeapWindow(1 << 20);
        SessionWindow window = new SessionWindow(3, shared, driver, () -> false);
        assertTrue(window.pin(CTX_A));
        staging.release(staging.acquire(CTX_A));
        String released = new SessionCleanup(3, driver, handles, memory, staging, window).releaseAll();
        assertTrue(released.endsWith(", 1/1 pinned staging buffer(s) freed"), released);
        assertEquals(List.of("cuMemHostUnregister", "cuMemFreeHost"), driver.calls.subList(0, 2),
                "the window and the staging buffers must go while their contexts exist: " + driver.calls);
        assertEquals(4, driver.calls.size());
        assertEquals(0, window.pinnedIn());
    }

    @Test
    void poolsAndVmmObjectsGoBeforeTheContextsInTheDriversOrder() {
        populate();
        SessionPools pools = new SessionPools();
        SessionVmm vmm = new SessionVmm();
        pools.add(new SessionPools.Pool(0x50, 0, true));
        handles.intern(ParamType.POOL, 0x50, 0, 0);
        pools.allocated(new SessionPools.AsyncAllocation(0x7100_0000L, 0x50, CTX_A));
        memory.add(new SessionMemory.Range(0x7100_0000L, 64, 0, true));
        vmm.reserved(0x7200_0000L, 4 << 20);
        vmm.referenced(0x60);
        vmm.referenced(0x60);   // created and retained: released twice
        handles.intern(ParamType.MEMH, 0x60, 0, 0);
        vmm.mapped(vmm.reservationHolding(0x7200_0000L, 2 << 20), new SessionVmm.Mapping(0x7200_0000L, 2 << 20, 0x60, 0));
        memory.add(new SessionMemory.Range(0x7200_0000L, 2 << 20, 0, false));

        String released = new SessionCleanup(3, driver, handles, memory, staging, null, pools, vmm, new SessionWaits()).releaseAll();
        assertTrue(released.contains(", 1 async allocation(s), 1 pool(s), 1 mapping(s), 1 VMM handle(s), 1 reservation(s)"), released);
        assertEquals(List.of("cuMemFreeAsync 71000000 0", "cuMemPoolDestroy 50",
                "cuMemUnmap 72000000", "cuMemRelease 60", "cuMemRelease 60", "cuMemAddressFree 72000000"),
                driver.calls.subList(0, 6), driver.calls.toString());
        assertTrue(driver.calls.get(6).startsWith("cuCtxDestroy"), "contexts last: " + driver.calls);
        assertTrue(driver.pushed.contains(CTX_A), "the async allocation is freed in its own context");
        assertEquals(0, handles.count(ParamType.POOL));
        assertEquals(0, handles.count(ParamType.MEMH));
        assertTrue(!memory.contains(0x7200_0000L, 1) && !memory.contains(0x7100_0000L, 1), "no range survives");
    }

    @Test
    void pendingWaitsAreReleasedOnAStreamOfTheirOwnBeforeTheContextsGo() {
        populate();
        SessionWaits waits = new SessionWaits();
        waits.queued(new SessionWaits.Wait(CTX_A, 0x7000_0000L, 5, SessionWaits.GEQ, 4));
        waits.queued(new SessionWaits.Wait(CTX_A, 0x7000_0008L, 6, SessionWaits.NOR, 8));
        waits.queued(new SessionWaits.Wait(CTX_A, 0x7000_0010L, 0, SessionWaits.AND, 4));    // nothing satisfies it
        waits.queued(new SessionWaits.Wait(CTX_A, 0x7fff_0000L, 1, SessionWaits.EQ, 4));     // no longer the session's
        String released = new SessionCleanup(3, driver, handles, memory, staging, null, new SessionPools(), new SessionVmm(), waits)
                .releaseAll();
        assertTrue(released.contains(", 2 stream wait(s) released"), released);
        assertEquals(List.of("cuStreamCreate 1", "cuStreamWriteValue32_v2 5500 70000000 5", "cuStreamWriteValue64_v2 5500 70000008 0",
                "cuStreamSynchronize 5500", "cuStreamDestroy 5500"), driver.calls.subList(0, 5), driver.calls.toString());
        assertTrue(driver.calls.get(5).startsWith("cuCtxDestroy"), driver.calls.toString());
        assertEquals(0, waits.count());
    }

    @Test
    void dropHandleForgetsWhatTheHandleOwned() {
        populate();
        long a = handles.idOf(ParamType.CTX, CTX_A);
        new SessionCleanup(3, driver, handles, memory, staging, null).dropHandle(a);
        assertEquals(1, handles.count(ParamType.CTX));
        assertEquals(0, handles.count(ParamType.MOD));
        assertEquals(0, memory.allocationCount(), "allocations of a dropped context are still reachable");
        assertTrue(driver.calls.isEmpty(), "dropping a handle calls the driver");
    }

    /** Libraries belong to no context: cuCtxDestroy would leave them loaded in the driver. */
    @Test
    void librariesAreUnloadedBeforeTheContextsAndTheirKernelsGoWithThem() {
        populate();
        long lib = handles.intern(ParamType.LIB, 0x40, 0, 0);
        handles.intern(ParamType.KERNEL, 0x41, lib, 0);
        long failing = handles.intern(ParamType.LIB, 0x50, 0, 0);
        driver.failUnload = 0x50;
        String released = new SessionCleanup(3, driver, handles, memory, staging, null).releaseAll();
        assertEquals(List.of("cuLibraryUnload 40", "cuLibraryUnload 50"), driver.calls.subList(0, 2).stream().sorted().toList(),
                "libraries first: " + driver.calls);
        assertEquals(4, driver.calls.size());
        assertTrue(released.contains("3 module(s)/librar(ies)") && released.endsWith(", 1 librar(ies) failed to unload"), released);
        assertEquals(0, handles.count(ParamType.LIB));
        assertEquals(0, handles.count(ParamType.KERNEL));
        assertTrue(failing != 0);
    }

    @Test
    void endLineKeepsItsWording() {
        assertEquals("session 7 ended (clean close), peer unix:///run/g.sock (uid 0): released 0 context(s)",
                SessionCleanup.endLine(7, "clean close", "unix:///run/g.sock (uid 0)", "0 context(s)", false, 0));
        assertEquals("session 7 ended (peer closed the connection), peer p: released R; a lane was still inside a driver call;"
                        + " 42 bytes went through the shared window",
                SessionCleanup.endLine(7, "peer closed the connection", "p", "R", true, 42));
    }

    @Test
    void sessionEndDestroysWhatTheSessionMade() {
        Session s = SessionTestKit.session(driver);
        long a = s.handles().intern(ParamType.CTX, CTX_A, 0, 0);
        s.memory().add(new SessionMemory.Range(0x7000_0000L, 100, a, true));
        s.end("test");
        s.end("again");
        assertEquals(List.of("cuCtxDestroy a000"), driver.calls);
        assertEquals(0, s.handles().count(ParamType.CTX));
    }
}
