package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.PoolAttributeRequest;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.List;

/** Area {@code pools}: pool attributes, whose value is an int or a cuuint64_t by attribute and travels as u64. */
final class PoolCalls implements FrontendHandlers.Pools {
    private final CallChannel channel;

    PoolCalls(CallChannel channel) {
        this.channel = channel;
    }

    @Override
    public int cuMemPoolSetAttribute(long pool, int attr, MemorySegment value) {
        int size = PoolAttributeRequest.valueBytes(attr);
        if (size == 0 || (value.isNative() && value.address() == 0)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment v = WireValues.sized(value, size);
        long widened = size == 8 ? v.get(ValueLayout.JAVA_LONG_UNALIGNED, 0) : v.get(ValueLayout.JAVA_INT_UNALIGNED, 0);
        ByteBuffer req = CallChannel.request();
        PoolAttributeRequest.put(req, pool, attr, widened);
        req.flip();
        return channel.exchange(ApiEntries.cuMemPoolSetAttribute, req, List.of(), List.of(), false).result();
    }

    @Override
    public int cuMemPoolGetAttribute(long pool, int attr, MemorySegment value) {
        int size = PoolAttributeRequest.valueBytes(attr);
        if (size == 0 || (value.isNative() && value.address() == 0)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ByteBuffer req = CallChannel.request();
        PoolAttributeRequest.put(req, pool, attr, 0);
        req.flip();
        CallChannel.Reply reply = channel.exchange(ApiEntries.cuMemPoolGetAttribute, req, List.of(), List.of(), false);
        if (reply.result() == CuResult.CUDA_SUCCESS) {
            long v = PoolAttributeRequest.readValue(reply.body());
            MemorySegment d = WireValues.sized(value, size);
            if (size == 8) {
                d.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, v);
            } else {
                d.set(ValueLayout.JAVA_INT_UNALIGNED, 0, (int) v);
            }
        }
        return reply.result();
    }
}
