package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.tenant.Tenant;
import io.gpusockets.backend.tenant.TenantLimits;
import io.gpusockets.protocol.api.ChargeRule;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The charge rules of {@link SessionQuota} against a tenant, and how a session's parts give charges back. */
class SessionQuotaTest {
    private static final long MIB = 1L << 20;

    private static Tenant tenant(long memory, int lanes) {
        return new Tenant("t", new TenantLimits(memory, 10, lanes, 100, 100, 4 * MIB, 0));
    }

    private static Session session(Tenant t) {
        return SessionTestKit.session(new LanesTest.BlockingSync(), SessionTestKit.settings(), null,
                new SessionTestKit.QuietConnection(), t);
    }

    @Test
    void overTheQuotaIsOutOfMemoryBeforeTheDriverAndNamesTheTenant() throws Exception {
        Tenant t = tenant(8 * MIB, 4);
        SessionQuota q = session(t).quota();
        q.reserve(6 * MIB, "cuMemAlloc");
        CallRejected e = assertThrows(CallRejected.class, () -> q.reserve(4 * MIB, "cuMemAlloc"));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, e.result);
        assertEquals("cuMemAlloc of 4194304 bytes: tenant t holds 6291456 of its 8388608 bytes", e.getMessage());
        assertEquals(6 * MIB, q.charged());
        q.unreserve(6 * MIB); // the driver call failed
        assertEquals(0, t.memoryUsed());
        assertEquals(0, q.charged());
    }

    @Test
    void rangesGoBackWhenFreedOrWhenTheirContextOrModuleGoes() throws Exception {
        Tenant t = tenant(64 * MIB, 4);
        Session s = session(t);
        SessionQuota q = s.quota();
        for (long base : new long[] {0x1000_0000L, 0x2000_0000L, 0x3000_0000L}) {
            q.reserve(MIB, "cuMemAlloc");
            q.keepRange(base, MIB);
            s.memory().add(new SessionMemory.Range(base, MIB, base == 0x3000_0000L ? 77 : 55, true));
        }
        s.memory().add(new SessionMemory.Range(0x4000_0000L, MIB, 99, false)); // a module's global: charged with its load
        assertEquals(3 * MIB, t.memoryUsed());
        s.memory().remove(0x1000_0000L);                    // cuMemFree
        assertEquals(2 * MIB, t.memoryUsed());
        s.memory().removeOwnedBy(Set.of(55L));              // its context destroyed
        assertEquals(MIB, t.memoryUsed());
        s.memory().removeOwnedBy(Set.of(99L));              // the module unloaded: its global was no charge of its own
        assertEquals(MIB, t.memoryUsed());
        s.end("test");                                      // the rest at the end, and nothing is counted as missed
        assertEquals(0, t.memoryUsed());
        assertEquals(0, q.charged());
    }

    @Test
    void arraysAndVmmAllocationsGoBackWithTheirHandles() throws Exception {
        Tenant t = tenant(64 * MIB, 4);
        SessionQuota q = session(t).quota();
        MemorySegment out = Arena.ofAuto().allocate(8);
        out.set(ValueLayout.JAVA_LONG, 0, 0xA11);
        q.reserve(4 * MIB, "cuArrayCreate");
        int r = q.succeeded(null, io.gpusockets.protocol.api.ApiTable.get().byName("cuArrayCreate"),
                new Object[] {out, null}, new long[2], new SessionQuota.Pending(ChargeRule.ARRAY, 4 * MIB));
        assertEquals(CuResult.CUDA_SUCCESS, r);
        q.handleDropped(new SessionHandles.Entry(9, ParamType.STREAM, 0xA11, 0, 0));
        assertEquals(4 * MIB, t.memoryUsed(), "only an array's drop gives an array's charge back");
        q.handleDropped(new SessionHandles.Entry(9, ParamType.ARRAY, 0xA11, 0, 0));
        assertEquals(0, t.memoryUsed());
        q.reserve(2 * MIB, "cuMemCreate");
        q.vmmCreated(0xB22, 2 * MIB);
        q.vmmFreed(0xB22);
        q.vmmFreed(0xB22);
        assertEquals(0, t.memoryUsed(), "given back once");
    }

    @Test
    void aModuleIsChargedUntilItsHandleGoesWhetherUnloadedOrWithItsContext() throws Exception {
        Tenant t = tenant(64 * MIB, 4);
        SessionQuota q = new SessionQuota(1, t);
        var load = io.gpusockets.protocol.api.ApiTable.get().byName("cuModuleLoadData");
        for (long real : new long[] {0xD1, 0xD2}) {
            MemorySegment out = Arena.ofAuto().allocate(8);
            out.set(ValueLayout.JAVA_LONG, 0, real);
            q.reserve(3 * MIB, "cuModuleLoadData");
            assertEquals(CuResult.CUDA_SUCCESS, q.succeeded(null, load, new Object[] {out, null}, new long[2],
                    new SessionQuota.Pending(ChargeRule.MODULE, 3 * MIB)));
        }
        assertEquals(6 * MIB, t.memoryUsed());
        q.handleDropped(new SessionHandles.Entry(7, ParamType.FUNC, 0xD1, 0, 0));
        assertEquals(6 * MIB, t.memoryUsed(), "a function's drop is not its module's");
        q.handleDropped(new SessionHandles.Entry(7, ParamType.MOD, 0xD1, 0, 0));   // cuModuleUnload
        assertEquals(3 * MIB, t.memoryUsed());
        q.handleDropped(new SessionHandles.Entry(8, ParamType.MOD, 0xD2, 0, 0));   // dropped with its context
        assertEquals(0, t.memoryUsed());
        assertEquals(0, q.close(), "nothing missed");
    }

    @Test
    void whatIsStillChargedAtCloseGoesBackAndIsReported() throws Exception {
        Tenant t = tenant(64 * MIB, 4);
        SessionQuota q = new SessionQuota(1, t);
        q.reserve(MIB, "cuMemAlloc");
        q.keepRange(0x1000, MIB);
        q.reserve(2 * MIB, "cuMemCreate");
        q.vmmCreated(0x2000, 2 * MIB);
        assertEquals(MIB, q.close(), "the range was missed by the release paths; the VMM handle is the end's to release");
        assertEquals(0, t.memoryUsed());
        assertEquals(0, q.close());
        q.reserve(MIB, "cuMemAlloc");       // a lane that was still inside the driver at the end
        q.keepRange(0x3000, MIB);
        assertEquals(0, t.memoryUsed(), "kept after the close: given back at once");
    }

    @Test
    void estimatesNeverOverflowIntoSmallCharges() {
        assertEquals(1024L * 10, SessionQuota.pitchEstimate(1000, 10));
        assertEquals(Long.MAX_VALUE, SessionQuota.pitchEstimate(1L << 40, 1L << 40));
        assertEquals(Long.MAX_VALUE, SessionQuota.pitchEstimate(-1, 1));
        assertEquals(1024L * 1024 * 4, SessionQuota.arrayBytes(new ArrayDescriptor(1024, 1024, 0x20, 1)));
        assertEquals(1024L * 16, SessionQuota.arrayBytes(new ArrayDescriptor(1024, 0, 0x9999, 1)), "unknown format: 16 bytes an element");
        assertEquals(Long.MAX_VALUE, SessionQuota.arrayBytes(new ArrayDescriptor(1L << 40, 1L << 40, 0x20, 4)));
        // cuArray3DCreate's descriptor: depth counts slices, layers and cubemap faces
        assertEquals(64L * 32 * 8 * 8, SessionQuota.arrayBytes(new Array3DDescriptor(64, 32, 8, 0x20, 2, 0)));
        assertEquals(16L * 16 * 12 * 4, SessionQuota.arrayBytes(new Array3DDescriptor(16, 16, 12, 0x01, 4, 5)), "cubemap layered");
        assertEquals(100L * 7 * 2, SessionQuota.arrayBytes(new Array3DDescriptor(100, 0, 7, 0x02, 1, 1)), "1D layered");
        assertEquals(Long.MAX_VALUE, SessionQuota.arrayBytes(new Array3DDescriptor(1L << 30, 1L << 30, 1L << 30, 0x20, 4, 0)));
        // mipmapped arrays: every level, each dimension halved (a cubemap's faces and layers are not)
        assertEquals((64L * 32 + 32 * 16 + 16 * 8 + 8 * 4) * 4, new Array3DDescriptor(64, 32, 0, 0x20, 1, 0).mipmapBytes(4, 16));
        assertEquals((8L * 8 + 4 * 4 + 2 * 2 + 1) * 6 * 4, new Array3DDescriptor(8, 8, 6, 0x20, 1, 4).mipmapBytes(4, 16));
        assertEquals((8L * 4 * 4 + 4 * 2 * 2 + 2 * 1 * 1) * 2, new Array3DDescriptor(8, 4, 4, 0x02, 1, 0).mipmapBytes(3, 16), "3D: depth halves");
        assertEquals(0, new Array3DDescriptor(8, 8, 0, 0x20, 1, 0).mipmapBytes(0, 16), "no level: the driver refuses, nothing charged");
        try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment d3 = a.allocate(Array3DDescriptor.SIZE);
            new Array3DDescriptor(8, 8, 6, 0x20, 1, 4).write(d3);
            assertEquals(8L * 8 * 6 * 4, SessionQuota.arrayBytes(d3), "told apart from a 2D descriptor by its length");
            java.lang.foreign.MemorySegment d2 = a.allocate(ArrayDescriptor.SIZE);
            new ArrayDescriptor(8, 8, 0x20, 1).write(d2);
            assertEquals(8L * 8 * 4, SessionQuota.arrayBytes(d2));
        }
    }

    /** A sparse or deferred-mapping array has no memory of its own: the VMM allocations bound to it are charged. */
    @Test
    void sparseAndDeferredMappingArraysAreChargedNothing() {
        assertEquals(0, SessionQuota.arrayBytes(new Array3DDescriptor(4096, 4096, 0, 0x20, 4, Array3DDescriptor.SPARSE)));
        assertEquals(0, SessionQuota.arrayBytes(new Array3DDescriptor(512, 512, 64, 0x20, 1, Array3DDescriptor.DEFERRED_MAPPING)));
        assertEquals(0, SessionQuota.arrayBytes(new Array3DDescriptor(64, 64, 6, 0x20, 1,
                Array3DDescriptor.SPARSE | Array3DDescriptor.LAYERED)), "layered");
        try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment d3 = a.allocate(Array3DDescriptor.SIZE);
            new Array3DDescriptor(1024, 1024, 0, 0x20, 4, Array3DDescriptor.SPARSE).write(d3);
            assertEquals(0, SessionQuota.arrayBytes(d3), "as cuArray3DCreate passes it");
        }
    }

    @Test
    void memGetInfoShowsTheTenantsView() throws Exception {
        Tenant t = tenant(8 * MIB, 4);
        SessionQuota q = new SessionQuota(1, t);
        q.reserve(3 * MIB, "cuMemAlloc");
        MemorySegment free = Arena.ofAuto().allocate(8), total = Arena.ofAuto().allocate(8);
        free.set(ValueLayout.JAVA_LONG, 0, 100 * MIB);
        total.set(ValueLayout.JAVA_LONG, 0, 141 * MIB);
        q.tenantView(free, total);
        assertEquals(8 * MIB, total.get(ValueLayout.JAVA_LONG, 0));
        assertEquals(5 * MIB, free.get(ValueLayout.JAVA_LONG, 0));
        free.set(ValueLayout.JAVA_LONG, 0, 2 * MIB); // the device itself has less left than the quota
        q.tenantView(free, total);
        assertEquals(2 * MIB, free.get(ValueLayout.JAVA_LONG, 0));
        SessionQuota unlimited = new SessionQuota(2, new Tenant("u", TenantLimits.UNLIMITED));
        total.set(ValueLayout.JAVA_LONG, 0, 141 * MIB);
        unlimited.tenantView(free, total);
        assertEquals(141 * MIB, total.get(ValueLayout.JAVA_LONG, 0));
    }

    @Test
    void theTenantsLaneLimitBoundsTheSession() throws Exception {
        Tenant t = tenant(MIB, 2);
        Lanes lanes = session(t).lanes();
        lanes.lane(1);
        lanes.lane(2);
        ProtocolException e = assertThrows(ProtocolException.class, () -> lanes.lane(3));
        assertEquals("too many lanes: max=2", e.getMessage());
        assertEquals(1, t.rejections().get("lanes"));
    }

    @Test
    void pinnedMemoryIsChargedAgainstItsOwnLimit() {
        Tenant t = tenant(MIB, 2);
        SessionQuota q = new SessionQuota(1, t);
        assertTrue(q.reservePinned(3 * MIB));
        assertFalse(q.reservePinned(2 * MIB));
        q.releasePinned(3 * MIB);
        assertEquals(0, t.pinnedUsed());
        assertEquals(1, t.rejections().get("pinned"));
    }
}
