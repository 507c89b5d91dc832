package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Set;

/** Area {@code pointers}: pointer attributes, whose output needs translating (a context becomes this session's handle id). */
final class PointerCalls implements BackendHandlers.Pointers {
    /** cuPointerGetAttribute attributes a remote program can use; the others refer to its own host. */
    private static final Set<Integer> POINTER_ATTRIBUTES = Set.of(1, 2, 3, 6, 7, 8, 9, 11, 12, 13);
    private static final int POINTER_ATTRIBUTE_CONTEXT = 1;

    private final Session session;
    private final CudaDriver driver;

    PointerCalls(Session session) {
        this.session = session;
        this.driver = session.host().driver();
    }

    /** Request: attribute i32, ptr u64. Reply: the value as u64 (a context as this session's handle id). */
    @Override
    public int cuPointerGetAttribute(Call c) throws ProtocolException, CallRejected {
        int attribute = c.readInt();
        long ptr = c.readLong();
        c.expectEnd();
        if (!POINTER_ATTRIBUTES.contains(attribute)) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "pointer attribute " + attribute);
        }
        c.deviceRange(ptr, 1);
        MemorySegment data = c.scratch(16);
        int r = driver.cuPointerGetAttribute(data, attribute, ptr);
        long value = data.get(ValueLayout.JAVA_LONG, 0);
        if (attribute == POINTER_ATTRIBUTE_CONTEXT) {
            value = session.handles().idOf(ParamType.CTX, value);
        }
        c.outs.putLong(value);
        return r;
    }
}
