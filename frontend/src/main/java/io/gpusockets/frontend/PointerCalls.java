package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.PointerAttributeRequest;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.List;

/** Area {@code pointers}: pointer attributes, whose value travels as u64 whatever its size in the program. */
final class PointerCalls implements FrontendHandlers.Pointers {
    private final CallChannel channel;

    PointerCalls(CallChannel channel) {
        this.channel = channel;
    }

    @Override
    public int cuPointerGetAttribute(MemorySegment data, int attribute, long ptr) {
        int size = PointerAttributeRequest.valueBytes(attribute);
        if (size == 0) {
            return CuResult.CUDA_ERROR_NOT_SUPPORTED;
        }
        if (data.isNative() && data.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ByteBuffer req = CallChannel.request();
        PointerAttributeRequest.put(req, attribute, ptr);
        req.flip();
        CallChannel.Reply reply = channel.exchange(ApiEntries.cuPointerGetAttribute, req, List.of(), List.of(), false);
        if (reply.result() == CuResult.CUDA_SUCCESS) {
            long v = PointerAttributeRequest.readValue(reply.body());
            MemorySegment d = WireValues.sized(data, size);
            if (size == 8) {
                d.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, v);
            } else {
                d.set(ValueLayout.JAVA_INT_UNALIGNED, 0, (int) v);
            }
        }
        return reply.result();
    }
}
