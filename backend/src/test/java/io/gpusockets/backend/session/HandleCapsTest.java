package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.backend.tenant.Tenant;
import io.gpusockets.backend.tenant.TenantLimits;
import io.gpusockets.backend.testing.FakeGpu;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import org.junit.jupiter.api.Test;

/** A session's handles are bounded: past a cap a call is refused before the driver makes anything. */
class HandleCapsTest {
    private final FakeGpu gpu = new FakeGpu();

    private static BackendSettings caps(int handles, int streams) {
        return SessionTestKit.settings().withLimits(SessionLimits.DEFAULT.withHandleCaps(handles, streams));
    }

    @Test
    void aCallPastTheHandleCapIsRefusedBeforeTheDriverMakesTheHandle() throws Exception {
        Tenant tenant = new Tenant("t", TenantLimits.UNLIMITED);
        DispatchKit kit = new DispatchKit(gpu, caps(10, 100), tenant);
        DispatchKit.Reply ctx = kit.call(1, "cuCtxCreate", 0, 0);
        assertEquals(CuResult.CUDA_SUCCESS, ctx.result());
        long[] events = new long[9];
        for (int i = 0; i < 9; i++) {
            DispatchKit.Reply e = kit.call(1, "cuEventCreate", 0);
            assertEquals(CuResult.CUDA_SUCCESS, e.result());
            events[i] = e.handle();
        }
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, kit.result(1, "cuEventCreate", 0));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, kit.result(1, "cuStreamCreate", 0));
        assertEquals(9, gpu.liveEvents(), "the refused call must not make an event in the driver");
        assertEquals(0, gpu.liveStreams());
        assertEquals(10, kit.session.handles().size());
        assertEquals(2L, tenant.rejections().get("handles"));

        // destroying one gives its room back
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuEventDestroy", events[0]));
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuEventCreate", 0));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, kit.result(1, "cuEventCreate", 0));
    }

    @Test
    void streamsHaveACapOfTheirOwn() throws Exception {
        Tenant tenant = new Tenant("t", TenantLimits.UNLIMITED);
        DispatchKit kit = new DispatchKit(gpu, caps(100, 3), tenant);
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuCtxCreate", 0, 0));
        for (int i = 0; i < 3; i++) {
            assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuStreamCreate", 0));
        }
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, kit.result(1, "cuStreamCreate", 0));
        assertEquals(3, gpu.liveStreams());
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuEventCreate", 0), "other handles are still allowed");
        assertEquals(1L, tenant.rejections().get("streams"));
    }

    @Test
    void theTenantsLimitsLowerTheSessionsCaps() throws Exception {
        Tenant tenant = new Tenant("t", new TenantLimits(Long.MAX_VALUE, 10, 10, 4, 2, Long.MAX_VALUE, 0));
        DispatchKit kit = new DispatchKit(gpu, SessionTestKit.settings(), tenant);
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuCtxCreate", 0, 0));
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuStreamCreate", 0));
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuStreamCreate", 0));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, kit.result(1, "cuStreamCreate", 0));
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuEventCreate", 0));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, kit.result(1, "cuEventCreate", 0));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, kit.result(1, "cuCtxCreate", 0, 0));
        assertEquals(1, gpu.liveContexts());
        assertEquals(2, gpu.liveStreams());
        assertEquals(1, gpu.liveEvents());
        assertEquals(1L, tenant.rejections().get("streams"));
        assertEquals(2L, tenant.rejections().get("handles"));
    }

    /** A handler that makes a context (the session's virtual primary context) reserves room first too. */
    @Test
    void aPrimaryRetainPastTheCapMakesNoContext() throws Exception {
        DispatchKit kit = new DispatchKit(gpu, caps(1, 1));
        assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuCtxCreate", 0, 0));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, kit.result(1, "cuDevicePrimaryCtxRetain", 0));
        assertEquals(1, gpu.liveContexts());
        assertEquals(1, kit.session.handles().count(ParamType.CTX));
    }
}
