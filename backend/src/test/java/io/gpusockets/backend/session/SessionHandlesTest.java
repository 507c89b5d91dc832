package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.testing.FakeGpu;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class SessionHandlesTest {
    /**
     * Dropping a context visits what it holds once: before, each handle dropped copied the whole
     * table and searched the dropped list, so a context with 20,000 events took far longer than minutes.
     */
    @Test
    void destroyingAContextWithTwentyThousandHandlesTakesTimeInWhatItHolds() throws Exception {
        FakeGpu gpu = new FakeGpu();
        DispatchKit kit = new DispatchKit(gpu, SessionTestKit.settings().withLimits(SessionLimits.DEFAULT.withHandleCaps(65_536, 20_000)));
        DispatchKit.Reply ctx = kit.call(1, "cuCtxCreate", 0, 0);
        assertEquals(CuResult.CUDA_SUCCESS, ctx.result());
        for (int i = 0; i < 10_000; i++) {
            assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuEventCreate", 0));
            assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuStreamCreate", 0));
        }
        SessionHandles handles = kit.session.handles();
        assertEquals(10_000, handles.count(ParamType.EVENT));
        assertEquals(10_000, handles.count(ParamType.STREAM));
        // a liveness bound, far above what it takes (milliseconds)
        assertTimeoutPreemptively(Duration.ofSeconds(5),
                () -> assertEquals(CuResult.CUDA_SUCCESS, kit.result(1, "cuCtxDestroy", ctx.handle())));
        assertEquals(0, handles.count(ParamType.EVENT));
        assertEquals(0, handles.count(ParamType.STREAM));
        assertEquals(0, handles.count(ParamType.CTX));
        assertTrue(handles.all(ParamType.EVENT).isEmpty() && handles.all(ParamType.STREAM).isEmpty());
    }

    @Test
    void removeDropsOwnedHandlesOfOwnedHandlesAndWhatWasMadeInAContext() {
        SessionHandles h = new SessionHandles(1);
        long ctx = h.intern(ParamType.CTX, 0xC, 0, 0);
        long other = h.intern(ParamType.CTX, 0xD, 0, 0);
        long lib = h.intern(ParamType.LIB, 0x1, 0, 0);
        long mod = h.intern(ParamType.MOD, 0x2, lib, ctx);
        long func = h.intern(ParamType.FUNC, 0x3, mod, ctx);
        long stream = h.intern(ParamType.STREAM, 0x4, 0, ctx);
        long kept = h.intern(ParamType.STREAM, 0x5, 0, other);
        long graph = h.intern(ParamType.GRAPH, 0x6, 0, 0);
        long node = h.intern(ParamType.GNODE, 0x7, 0, 0);
        h.claim(node, graph, 0);

        List<Long> dropped = h.remove(lib).stream().map(SessionHandles.Entry::id).toList();
        assertEquals(List.of(lib, mod, func), dropped);
        assertEquals(List.of(ctx, stream), h.remove(ctx).stream().map(SessionHandles.Entry::id).toList());
        assertEquals(List.of(graph, node), h.remove(graph).stream().map(SessionHandles.Entry::id).toList());
        assertEquals(kept, h.idOf(ParamType.STREAM, 0x5));
        assertEquals(0, h.idOf(ParamType.STREAM, 0x4));
        assertEquals(List.of(), h.remove(stream));
        assertEquals(List.of(other, kept), h.remove(other).stream().map(SessionHandles.Entry::id).toList());
    }
}
