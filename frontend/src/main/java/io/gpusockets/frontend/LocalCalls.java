package io.gpusockets.frontend;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Calls the frontend answers without the backend: page-locked host memory lives beside the program
 * that uses it (a remote GPU cannot map it anyway), and error names and strings come from cuda.h.
 *
 * <p>Host blocks (cuMemAllocHost, cuMemHostAlloc, cuMemHostRegister) are kept with their flags so
 * that cuMemHostGetFlags can answer. Registering memory changes nothing else: copies from any guest
 * memory travel the same way. Mapping guest memory into the device's address space
 * (DEVICEMAP, IOMEMORY, cuMemHostGetDevicePointer) is not possible and fails with
 * CUDA_ERROR_NOT_SUPPORTED, with a note on stderr the first time.
 */
final class LocalCalls implements FrontendHandlers.Host, FrontendHandlers.Errors, AutoCloseable {
    static final int HOST_REGISTER_PORTABLE = 0x01;
    static final int HOST_REGISTER_DEVICEMAP = 0x02;
    static final int HOST_REGISTER_IOMEMORY = 0x04;
    static final int HOST_REGISTER_READ_ONLY = 0x08;
    private static final int HOST_REGISTER_KNOWN = HOST_REGISTER_PORTABLE | HOST_REGISTER_DEVICEMAP
            | HOST_REGISTER_IOMEMORY | HOST_REGISTER_READ_ONLY;
    private static final AtomicBoolean MAPPING_NOTED = new AtomicBoolean();

    private static final Map<Integer, MemorySegment[]> ERROR_TEXT = new ConcurrentHashMap<>();

    /** A block of guest memory the driver API knows: allocated here ({@code arena} set) or registered (null). */
    private record HostBlock(long base, long size, int flags, Arena arena) {
        boolean contains(long p) {
            return p >= base && p - base < size;
        }
    }

    private final ConcurrentSkipListMap<Long, HostBlock> blocks = new ConcurrentSkipListMap<>();

    // ---- the table's local entries (areas host and errors) ----

    @Override
    public int cuMemAllocHost(MemorySegment pp, long bytesize) {
        return allocHost(pp, bytesize, 0);
    }

    @Override
    public int cuMemHostAlloc(MemorySegment pp, long bytesize, int flags) {
        return allocHost(pp, bytesize, flags);
    }

    @Override
    public int cuMemFreeHost(MemorySegment p) {
        return freeHost(p);
    }

    @Override
    public int cuMemHostRegister(MemorySegment p, long bytesize, int flags) {
        return register(p, bytesize, flags);
    }

    @Override
    public int cuMemHostUnregister(MemorySegment p) {
        return unregister(p);
    }

    @Override
    public int cuMemHostGetDevicePointer(MemorySegment pdptr, MemorySegment p, int flags) {
        return devicePointer();
    }

    @Override
    public int cuMemHostGetFlags(MemorySegment pFlags, MemorySegment p) {
        return flags(pFlags, p);
    }

    @Override
    public int cuGetErrorName(int error, MemorySegment pStr) {
        return errorText(error, pStr, true);
    }

    @Override
    public int cuGetErrorString(int error, MemorySegment pStr) {
        return errorText(error, pStr, false);
    }

    int allocHost(MemorySegment pp, long bytesize, int flags) {
        if (pp.isNative() && pp.address() == 0 || bytesize <= 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Arena arena = Arena.ofShared();
        MemorySegment m;
        try {
            m = arena.allocate(bytesize, 4096);
        } catch (OutOfMemoryError | IllegalArgumentException e) {
            arena.close();
            return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
        }
        blocks.put(m.address(), new HostBlock(m.address(), bytesize, flags, arena));
        WireValues.sized(pp, 8).set(ValueLayout.ADDRESS, 0, m);
        return CuResult.CUDA_SUCCESS;
    }

    int freeHost(MemorySegment p) {
        HostBlock b = blocks.get(p.address());
        if (b == null || b.arena() == null || !blocks.remove(p.address(), b)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        b.arena().close();
        return CuResult.CUDA_SUCCESS;
    }

    /** Records the range; overlapping a known block is CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, as in CUDA. */
    synchronized int register(MemorySegment p, long bytesize, int flags) {
        long base = p.address();
        if (base == 0 || bytesize <= 0 || (flags & ~HOST_REGISTER_KNOWN) != 0 || base + bytesize < base) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        if ((flags & (HOST_REGISTER_DEVICEMAP | HOST_REGISTER_IOMEMORY)) != 0) {
            return mappingNotSupported("cuMemHostRegister with " + ((flags & HOST_REGISTER_DEVICEMAP) != 0
                    ? "CU_MEMHOSTREGISTER_DEVICEMAP" : "CU_MEMHOSTREGISTER_IOMEMORY"));
        }
        Map.Entry<Long, HostBlock> below = blocks.floorEntry(base + bytesize - 1);
        if (below != null && below.getValue().base() + below.getValue().size() > base) {
            return CuResult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
        blocks.put(base, new HostBlock(base, bytesize, flags, null));
        return CuResult.CUDA_SUCCESS;
    }

    synchronized int unregister(MemorySegment p) {
        HostBlock b = blocks.get(p.address());
        if (b == null || b.arena() != null) {
            return CuResult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
        }
        blocks.remove(p.address());
        return CuResult.CUDA_SUCCESS;
    }

    /** The flags a block containing {@code p} was allocated or registered with. */
    int flags(MemorySegment pFlags, MemorySegment p) {
        if (pFlags.isNative() && pFlags.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Map.Entry<Long, HostBlock> e = blocks.floorEntry(p.address());
        if (e == null || !e.getValue().contains(p.address())) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        WireValues.sized(pFlags, 4).set(ValueLayout.JAVA_INT_UNALIGNED, 0, e.getValue().flags());
        return CuResult.CUDA_SUCCESS;
    }

    /** cuMemHostGetDevicePointer: guest memory has no device address. */
    int devicePointer() {
        return mappingNotSupported("cuMemHostGetDevicePointer");
    }

    private static int mappingNotSupported(String what) {
        if (MAPPING_NOTED.compareAndSet(false, true)) {
            System.err.println("gpusockets: " + what + ": a remote GPU cannot map guest memory;"
                    + " returning CUDA_ERROR_NOT_SUPPORTED (copies to and from guest memory work)");
        }
        return CuResult.CUDA_ERROR_NOT_SUPPORTED;
    }

    int errorText(int error, MemorySegment pStr, boolean name) {
        if (pStr.isNative() && pStr.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment out = WireValues.sized(pStr, 8);
        if (!CuResult.isKnown(error)) {
            out.set(ValueLayout.ADDRESS, 0, MemorySegment.NULL);
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment[] text = ERROR_TEXT.computeIfAbsent(error, e -> new MemorySegment[] {
                Arena.global().allocateFrom(CuResult.name(e)), Arena.global().allocateFrom(CuResult.description(e))});
        out.set(ValueLayout.ADDRESS, 0, text[name ? 0 : 1]);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public void close() {
        for (HostBlock b : blocks.values()) {
            if (b.arena() != null) {
                b.arena().close();
            }
        }
        blocks.clear();
    }
}
