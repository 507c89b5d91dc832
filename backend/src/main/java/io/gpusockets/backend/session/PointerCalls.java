package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.PointerAttributeRequest;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** Area {@code pointers}: pointer attributes, whose output needs translating (a context becomes this session's handle id). */
final class PointerCalls implements BackendHandlers.Pointers {
    private final Session session;
    private final CudaDriver driver;

    PointerCalls(Session session) {
        this.session = session;
        this.driver = session.host().driver();
    }

    /** Request and reply are {@link PointerAttributeRequest}'s; a context comes back as this session's handle id. */
    @Override
    public int cuPointerGetAttribute(Call c) throws ProtocolException, CallRejected {
        PointerAttributeRequest.Request q = PointerAttributeRequest.read(c.body);
        int attribute = q.attribute();
        long ptr = q.ptr();
        c.expectEnd();
        // Only attributes a remote program can use have a size; the others refer to its own host.
        if (PointerAttributeRequest.valueBytes(attribute) == 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "pointer attribute " + attribute);
        }
        c.deviceRange(ptr, 1);
        MemorySegment data = c.scratch(16);
        int r = driver.cuPointerGetAttribute(data, attribute, ptr);
        long value = data.get(ValueLayout.JAVA_LONG, 0);
        if (attribute == PointerAttributeRequest.CONTEXT) {
            value = session.handles().idOf(ParamType.CTX, value);
        }
        PointerAttributeRequest.putValue(c.outs, value);
        return r;
    }
}
