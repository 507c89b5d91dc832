package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
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
        int size = switch (attribute) {
            case 1, 3, 7, 11, 12 -> 8; // context, device pointer, buffer id, range start, range size
            case 2, 6, 8, 9, 13 -> 4;  // memory type, sync memops, is managed, device ordinal, mapped
            default -> 0;
        };
        if (size == 0) {
            return CuResult.CUDA_ERROR_NOT_SUPPORTED;
        }
        if (data.isNative() && data.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ByteBuffer req = CallChannel.request().putInt(attribute).putLong(ptr).flip();
        CallChannel.Reply reply = channel.exchange(ApiEntries.cuPointerGetAttribute, req, List.of(), List.of(), false);
        if (reply.result() == CuResult.CUDA_SUCCESS) {
            long v = reply.body().getLong();
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
