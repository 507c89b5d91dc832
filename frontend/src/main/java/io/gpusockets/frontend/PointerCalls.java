package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.PointerAttributeRequest;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * Area {@code pointers}: pointer attributes, whose value travels as u64 whatever its size in the program. A
 * {@code __managed__} variable, which the backend knows as a module global only, answers IS_MANAGED 1 and HOST_POINTER
 * the pointer itself here ({@link ManagedMemory#isManagedVariable}), as cuMemAllocManaged memory does from the backend.
 * Mapped pinned host memory, a managed allocation to the backend, answers as host memory here
 * ({@link ManagedMemory#isMappedHost}; {@link #value}).
 */
final class PointerCalls implements FrontendHandlers.Pointers {
    private final CallChannel channel;
    private final ManagedMemory managed;

    PointerCalls(CallChannel channel, ManagedMemory managed) {
        this.channel = channel;
        this.managed = managed;
    }

    /**
     * The value the program gets: the backend's, but for a managed variable's IS_MANAGED and HOST_POINTER, and mapped
     * pinned host memory's ({@link ManagedMemory#isMappedHost}), answered as the driver does for host memory mapped
     * with unified addressing: MEMORY_TYPE host, DEVICE_POINTER and HOST_POINTER the pointer itself, IS_MANAGED 0,
     * MAPPED 1, RANGE_START_ADDR the allocation's base.
     */
    private long value(int attribute, long ptr, long backends) {
        if (managed.isMappedHost(ptr)) {
            switch (attribute) {
                case PointerAttributeRequest.MEMORY_TYPE -> {
                    return MEMORYTYPE_HOST;
                }
                case PointerAttributeRequest.DEVICE_POINTER, HOST_POINTER -> {
                    return ptr;
                }
                case PointerAttributeRequest.IS_MANAGED -> {
                    return 0;
                }
                case PointerAttributeRequest.MAPPED -> {
                    return 1;
                }
                default -> {
                    return backends;
                }
            }
        }
        if ((attribute == PointerAttributeRequest.IS_MANAGED || attribute == HOST_POINTER) && managed.isManagedVariable(ptr)) {
            return attribute == HOST_POINTER ? ptr : 1;
        }
        return backends;
    }

    @Override
    public int cuPointerGetAttribute(MemorySegment data, int attribute, long ptr) {
        if (attribute == HOST_POINTER && managed.isMappedHost(ptr)) { // not forwarded: answered here for mapped host memory
            if (data.isNative() && data.address() == 0) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            WireValues.sized(data, 8).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, ptr);
            return CuResult.CUDA_SUCCESS;
        }
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
            long v = value(attribute, ptr, PointerAttributeRequest.readValue(reply.body()));
            MemorySegment d = WireValues.sized(data, size);
            if (size == 8) {
                d.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, v);
            } else {
                d.set(ValueLayout.JAVA_INT_UNALIGNED, 0, (int) v);
            }
        }
        return reply.result();
    }

    /** HOST_POINTER: the backend answers 0 (device memory is not mapped into the guest), the pointer itself for managed memory. */
    private static final int HOST_POINTER = 4;
    /** CU_MEMORYTYPE_HOST. */
    private static final int MEMORYTYPE_HOST = 1;

    /**
     * Each value travels as u64 and is written, in the program's size, where {@code data[i]} points. An
     * attribute that is not forwarded refuses the whole call with CUDA_ERROR_NOT_SUPPORTED before anything is sent.
     */
    @Override
    public int cuPointerGetAttributes(int numAttributes, MemorySegment attributes, MemorySegment data, long ptr) {
        if (numAttributes < 0 || numAttributes > PointerAttributeRequest.MAX_ATTRIBUTES) {
            return numAttributes < 0 ? CuResult.CUDA_ERROR_INVALID_VALUE : CuResult.CUDA_ERROR_NOT_SUPPORTED;
        }
        if (numAttributes > 0 && ((attributes.isNative() && attributes.address() == 0) || (data.isNative() && data.address() == 0))) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        int[] attrs = new int[numAttributes];
        MemorySegment a = WireValues.sized(attributes, 4L * numAttributes);
        MemorySegment slots = WireValues.sized(data, 8L * numAttributes);
        for (int i = 0; i < numAttributes; i++) {
            attrs[i] = a.getAtIndex(ValueLayout.JAVA_INT_UNALIGNED, i);
            if ((PointerAttributeRequest.valueBytes(attrs[i]) == 0 && attrs[i] != HOST_POINTER)
                    || slots.getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i) == 0) {
                return PointerAttributeRequest.valueBytes(attrs[i]) == 0 && attrs[i] != HOST_POINTER
                        ? CuResult.CUDA_ERROR_NOT_SUPPORTED : CuResult.CUDA_ERROR_INVALID_VALUE;
            }
        }
        ByteBuffer req = CallChannel.request();
        PointerAttributeRequest.putSeveral(req, attrs, ptr);
        req.flip();
        CallChannel.Reply reply = channel.exchange(ApiEntries.cuPointerGetAttributes, req, List.of(), List.of(), false);
        if (reply.result() == CuResult.CUDA_SUCCESS) {
            for (int i = 0; i < numAttributes; i++) {
                long v = value(attrs[i], ptr, PointerAttributeRequest.readValue(reply.body()));
                int size = attrs[i] == HOST_POINTER ? 8 : PointerAttributeRequest.valueBytes(attrs[i]);
                MemorySegment d = MemorySegment.ofAddress(slots.getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i)).reinterpret(size);
                if (size == 8) {
                    d.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, v);
                } else {
                    d.set(ValueLayout.JAVA_INT_UNALIGNED, 0, (int) v);
                }
            }
        }
        return reply.result();
    }
}
