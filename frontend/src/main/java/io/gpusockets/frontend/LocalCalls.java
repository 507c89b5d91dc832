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
 * that uses it, and error names and strings come from cuda.h.
 *
 * <p>Host blocks (cuMemAllocHost, cuMemHostAlloc, cuMemHostRegister) are kept with their flags so
 * that cuMemHostGetFlags can answer. Registering memory changes nothing else: copies from any guest
 * memory travel the same way. cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP (cudaHostAllocMapped) is
 * made by {@link Mapper} where there is one (a remote GPU: managed memory's machinery, so that the
 * host pointer is also the device pointer, which cuMemHostGetDevicePointer answers), and freed by
 * cuMemFreeHost through it. Other blocks have no device address: cuMemAllocHost and cuMemHostAlloc
 * without DEVICEMAP stay plain guest memory (copies from them are what pinned memory is for; making
 * each of them device-visible would move every copy's data twice), so cuMemHostGetDevicePointer on
 * them, and DEVICEMAP or IOMEMORY on cuMemHostRegister (an existing mapping cannot be moved to a
 * device address), fail with CUDA_ERROR_NOT_SUPPORTED and a note on stderr the first time.
 */
final class LocalCalls implements FrontendHandlers.Host, FrontendHandlers.Errors, AutoCloseable {
    static final int HOST_REGISTER_PORTABLE = 0x01;
    static final int HOST_REGISTER_DEVICEMAP = 0x02;
    static final int HOST_REGISTER_IOMEMORY = 0x04;
    static final int HOST_REGISTER_READ_ONLY = 0x08;
    private static final int HOST_REGISTER_KNOWN = HOST_REGISTER_PORTABLE | HOST_REGISTER_DEVICEMAP
            | HOST_REGISTER_IOMEMORY | HOST_REGISTER_READ_ONLY;
    static final int HOST_ALLOC_DEVICEMAP = 0x02;
    private static final AtomicBoolean MAPPING_NOTED = new AtomicBoolean();

    /** Makes and frees mapped pinned host memory (RemoteCudaDriver: a managed allocation marked as host memory). */
    interface Mapper {
        /** Allocates {@code bytesize} bytes mapped at one address in the guest and on the device; result and base. */
        int allocMapped(long bytesize, long[] base);

        /** Frees what {@link #allocMapped} made at {@code base}. */
        int freeMapped(long base);
    }

    private final Mapper mapper;

    /** Without a mapper: DEVICEMAP fails (as in a frontend with no remote device behind it). */
    LocalCalls() {
        this(null);
    }

    LocalCalls(Mapper mapper) {
        this.mapper = mapper;
    }

    private static final Map<Integer, MemorySegment[]> ERROR_TEXT = new ConcurrentHashMap<>();

    /** A block of guest memory the driver API knows: allocated here ({@code arena} set) or registered (null). */
    private record HostBlock(long base, long size, int flags, Arena arena, boolean mapped) {
        HostBlock(long base, long size, int flags, Arena arena) {
            this(base, size, flags, arena, false);
        }

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
        return devicePointer(pdptr, p, flags);
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
        if ((flags & HOST_ALLOC_DEVICEMAP) != 0 && mapper != null) {
            long[] base = new long[1];
            int r = mapper.allocMapped(bytesize, base);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            blocks.put(base[0], new HostBlock(base[0], bytesize, flags, null, true));
            WireValues.sized(pp, 8).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, base[0]);
            return CuResult.CUDA_SUCCESS;
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
        if (b == null || b.arena() == null && !b.mapped() || !blocks.remove(p.address(), b)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        if (b.mapped()) {
            int r = mapper.freeMapped(b.base());
            if (r != CuResult.CUDA_SUCCESS) {
                blocks.put(b.base(), b);
            }
            return r;
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
        if (b == null || b.arena() != null || b.mapped()) {
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

    /**
     * cuMemHostGetDevicePointer: in mapped host memory the pointer itself (the device address is the host address, as
     * with unified addressing); flags must be 0, as the driver asks; other host blocks have no device address
     * (CUDA_ERROR_NOT_SUPPORTED), memory that is no host block CUDA_ERROR_INVALID_VALUE, as the driver answers.
     */
    int devicePointer(MemorySegment pdptr, MemorySegment p, int flags) {
        if (pdptr.isNative() && pdptr.address() == 0 || flags != 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Map.Entry<Long, HostBlock> e = blocks.floorEntry(p.address());
        if (e == null || !e.getValue().contains(p.address())) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        if (!e.getValue().mapped()) {
            return mappingNotSupported("cuMemHostGetDevicePointer on host memory allocated without"
                    + " CU_MEMHOSTALLOC_DEVICEMAP (cudaHostAllocMapped)");
        }
        WireValues.sized(pdptr, 8).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, p.address());
        return CuResult.CUDA_SUCCESS;
    }

    private static int mappingNotSupported(String what) {
        if (MAPPING_NOTED.compareAndSet(false, true)) {
            System.err.println("gpusockets: " + what + ": a remote GPU cannot map this guest memory;"
                    + " returning CUDA_ERROR_NOT_SUPPORTED (copies to and from it work; memory from cudaHostAlloc with"
                    + " cudaHostAllocMapped is mapped)");
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
        for (HostBlock b : blocks.values()) { // mapped blocks go with the managed memory's close
            if (b.arena() != null) {
                b.arena().close();
            }
        }
        blocks.clear();
    }
}
