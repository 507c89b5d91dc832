package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.PointerAttributeRequest;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code pointers}: pointer attributes, whose output needs translating (a context becomes this session's handle id),
 * and cuPointerSetAttribute, whose one settable attribute (SYNC_MEMOPS) is checked here. Managed memory
 * ({@link ManagedCalls}), device memory to the driver, answers as the driver answers for its managed memory: IS_MANAGED 1
 * and HOST_POINTER the pointer itself (the guest maps it at the same address).
 */
final class PointerCalls implements BackendHandlers.Pointers {
    private final Session session;
    private final CudaDriver driver;
    private final ManagedCalls managed;

    PointerCalls(Session session, ManagedCalls managed) {
        this.session = session;
        this.driver = session.driver();
        this.managed = managed;
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
        ptr = c.deviceRange(ptr, 1);
        MemorySegment data = c.scratch(16);
        int r = driver.cuPointerGetAttribute(data, attribute, ptr);
        long value = data.get(ValueLayout.JAVA_LONG, 0);
        if (attribute == PointerAttributeRequest.CONTEXT) {
            value = session.handles().idOf(ParamType.CTX, value);
        } else if (attribute == PointerAttributeRequest.IS_MANAGED && r == CuResult.CUDA_SUCCESS) {
            value = managed.isManaged(ptr, 1) ? 1 : 0;
        } else {
            value = programAddress(attribute, value);
        }
        PointerAttributeRequest.putValue(c.outs, value);
        return r;
    }

    /**
     * A device address among the attributes (DEVICE_POINTER, RANGE_START_ADDR) as the program knows it: a restored module
     * global the driver placed elsewhere answers with its recorded address ({@link GlobalTranslation}).
     */
    private long programAddress(int attribute, long value) {
        return attribute == PointerAttributeRequest.DEVICE_POINTER || attribute == PointerAttributeRequest.RANGE_START_ADDR
                ? session.toProgram(value) : value;
    }

    /** HOST_POINTER (cuda.h CU_POINTER_ATTRIBUTE_HOST_POINTER): the backend's host address is nobody's business; 0. */
    static final int HOST_POINTER = 4;

    /**
     * Request and reply are {@link PointerAttributeRequest#readSeveral}'s. As the driver, a pointer that is
     * none of the session's answers success with every value 0 but HOST_POINTER, the pointer itself (the
     * driver is not asked, so nothing of another session shows); for the session's memory a context comes
     * back as this session's handle id, a host pointer as 0 (none is mapped into the guest) but for managed memory.
     */
    @Override
    public int cuPointerGetAttributes(Call c) throws ProtocolException, CallRejected {
        PointerAttributeRequest.Several q = PointerAttributeRequest.readSeveral(c.body);
        c.expectEnd();
        int[] attributes = q.attributes();
        int n = attributes.length;
        for (int a : attributes) {
            if (PointerAttributeRequest.valueBytes(a) == 0 && a != HOST_POINTER) {
                throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "pointer attribute " + a);
            }
        }
        long[] values = new long[n];
        int r = CuResult.CUDA_SUCCESS;
        long ptr = session.toReal(q.ptr());
        boolean ours = session.memory().contains(ptr, 1);
        for (int i = 0; i < n && !ours; i++) {
            // as the driver answers for memory it does not know (seen on the H200): the host pointer is the pointer
            values[i] = attributes[i] == HOST_POINTER ? q.ptr() : 0;
        }
        if (n > 0 && ours) {
            MemorySegment attrs = c.scratch(4L * n);
            MemorySegment slots = c.scratch(16L * n);
            MemorySegment data = c.scratch(8L * n);
            for (int i = 0; i < n; i++) {
                attrs.setAtIndex(ValueLayout.JAVA_INT, i, attributes[i]);
                data.setAtIndex(ValueLayout.JAVA_LONG, i, slots.address() + 16L * i);
            }
            r = driver.cuPointerGetAttributes(n, attrs, data, ptr);
            for (int i = 0; i < n && r == CuResult.CUDA_SUCCESS; i++) {
                long v = PointerAttributeRequest.valueBytes(attributes[i]) == 4
                        ? slots.get(ValueLayout.JAVA_INT, 16L * i) : slots.get(ValueLayout.JAVA_LONG, 16L * i);
                if (attributes[i] == PointerAttributeRequest.CONTEXT) {
                    v = session.handles().idOf(ParamType.CTX, v);
                } else if (attributes[i] == HOST_POINTER) {
                    v = managed.isManaged(ptr, 1) ? q.ptr() : 0;
                } else if (attributes[i] == PointerAttributeRequest.IS_MANAGED) {
                    v = managed.isManaged(ptr, 1) ? 1 : 0;
                } else {
                    v = programAddress(attributes[i], v);
                }
                values[i] = v;
            }
        }
        if (r == CuResult.CUDA_SUCCESS) {
            for (long v : values) {
                PointerAttributeRequest.putValue(c.outs, v);
            }
        }
        return r;
    }

    /**
     * Only CU_POINTER_ATTRIBUTE_SYNC_MEMOPS may be set (cuda.h): its value, an unsigned int, travels as 4
     * bytes of DATA; the pointer was checked to be the session's memory. Other attributes are refused
     * before the driver sees their value.
     */
    @Override
    public int cuPointerSetAttribute(Call c, long value, int attribute, long ptr)
            throws ProtocolException, CallRejected, InterruptedException {
        if (attribute != PointerAttributeRequest.SYNC_MEMOPS || value != 4) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "attribute " + attribute + " cannot be set");
        }
        return driver.cuPointerSetAttribute(c.receiveBulk(value), attribute, ptr);
    }
}
