package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Area {@code libraries}: cuKernelGetName and cuFuncGetName. The driver returns a {@code const char*}
 * into its own memory, valid while the handle lives; the backend's memory is not the guest's, so the
 * name travels as text and the program gets a NUL-terminated copy made here. Copies are kept per
 * distinct name for the frontend's life (never freed while a handle could still point at them):
 * their number is bounded by the names in the program's code, not by how often it asks.
 */
final class LibraryCalls implements FrontendHandlers.Libraries {
    /** The backend sends at most this many bytes of a name (LibraryCalls.MAX_NAME there). */
    static final int MAX_NAME = 16 << 10;

    private final CallChannel channel;
    private final Map<String, MemorySegment> names = new ConcurrentHashMap<>();

    LibraryCalls(CallChannel channel) {
        this.channel = channel;
    }

    @Override
    public int cuKernelGetName(MemorySegment name, long hfunc) {
        return name(ApiEntries.cuKernelGetName, ParamType.KERNEL, name, hfunc);
    }

    @Override
    public int cuFuncGetName(MemorySegment name, long hfunc) {
        return name(ApiEntries.cuFuncGetName, ParamType.FUNC, name, hfunc);
    }

    /** Request: the handle (generic layout). Reply: the length u32; the bytes arrive as DATA before it. */
    private int name(ApiFunction f, ParamType kind, MemorySegment out, long handle) {
        if (out.isNative() && out.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment text = arena.allocate(MAX_NAME);
            ByteBuffer req = CallChannel.request();
            WireValues.putScalar(req, kind, handle);
            CallChannel.Reply reply = channel.exchange(f, req.flip(), List.of(), List.of(text), false);
            if (reply.result() != CuResult.CUDA_SUCCESS) {
                return reply.result();
            }
            int n = reply.body().getInt();
            if (n < 0 || n > MAX_NAME) {
                return CuResult.CUDA_ERROR_UNKNOWN;
            }
            // ISO-8859-1 maps bytes to chars one to one: the key (and the copy) keep the driver's bytes exactly
            String s = new String(text.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.ISO_8859_1);
            MemorySegment copy = names.computeIfAbsent(s, LibraryCalls::nativeCopy);
            WireValues.sized(out, 8).set(ValueLayout.ADDRESS, 0, copy);
            return CuResult.CUDA_SUCCESS;
        }
    }

    private static MemorySegment nativeCopy(String s) {
        byte[] bytes = s.getBytes(StandardCharsets.ISO_8859_1);
        MemorySegment copy = Arena.global().allocate(bytes.length + 1L);
        MemorySegment.copy(bytes, 0, copy, ValueLayout.JAVA_BYTE, 0, bytes.length);
        return copy;   // zeroed: the last byte is the NUL
    }
}
