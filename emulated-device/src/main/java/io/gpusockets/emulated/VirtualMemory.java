package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_DEVICE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY;

import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The VMM API on host-backed memory. cuMemCreate makes a physical allocation (native host memory,
 * charged to the device's budget, a multiple of the 2 MiB granularity the H200 reports);
 * cuMemAddressReserve hands out device-like addresses from the same space as cuMemAlloc, never
 * reused, or the address asked for ({@code addr}) when it lies outside that space, above 4 GiB and below the 47-bit
 * limit ({@link EmulatedMemory#reserveAt}), is aligned and is free, in this process too: nothing the process maps
 * may lie there (reused once freed; elsewhere or taken, the
 * address is a hint not followed, as the driver's may be): so a session's memory can be made again at the
 * same addresses; cuMemMap binds part of a physical allocation to part of a reservation; cuMemSetAccess makes
 * a mapping resolvable (as a MAPPED allocation of the current context, the one its kernels and copies
 * then reach), and PROT_NONE or cuMemUnmap takes that away. A physical allocation is freed when it is
 * released as often as it was created or retained and no mapping uses it. Read-only access is not
 * emulated (CUDA_ERROR_NOT_SUPPORTED), since the emulated memory cannot refuse a write; nor are the
 * allocation usages of a device with sparse arrays or a decompression engine (CU_MEM_CREATE_USAGE_TILE_POOL,
 * CU_MEM_CREATE_USAGE_HW_DECOMPRESS: CUDA_ERROR_NOT_SUPPORTED), which the emulated device has not.
 * An allocation whose requestedHandleTypes has CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR lives in a memory file
 * ({@link MemoryFiles}) instead of private host memory: cuMemExportToShareableHandle gives a descriptor of it and
 * cuMemImportFromShareableHandle, in this instance or one in another process, maps the same pages, so two backend
 * processes on one host share the allocation as two processes on one GPU do (the pages live while any holds the
 * file or a mapping of it).
 */
final class VirtualMemory {
    static final long GRANULARITY = 2L << 20;

    /**
     * A physical allocation; {@code file} is its memory file's descriptor (this instance's own) when it is exportable
     * (requestedHandleTypes POSIX_FILE_DESCRIPTOR, or imported), else -1.
     */
    static final class Physical {
        final long handle;
        final int device;
        final long size;
        final Arena arena;
        final MemorySegment host;
        final int file;
        int references = 1;     // guarded by VirtualMemory.this
        int mappings;           // guarded by VirtualMemory.this

        Physical(long handle, int device, long size, Arena arena, MemorySegment host, int file) {
            this.handle = handle;
            this.device = device;
            this.size = size;
            this.arena = arena;
            this.host = host;
            this.file = file;
        }

        int handleTypes() {
            return file >= 0 ? MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : MemoryProps.HANDLE_TYPE_NONE;
        }
    }

    /** A mapping of [offset, offset+size) of {@code physical} at {@code base}; {@code visible} once access is set. */
    static final class Mapping {
        final long base;
        final long size;
        final long offset;
        final Physical physical;
        Allocation visible;

        Mapping(long base, long size, long offset, Physical physical) {
            this.base = base;
            this.size = size;
            this.offset = offset;
            this.physical = physical;
        }
    }

    record Reservation(long base, long size, TreeMap<Long, Mapping> mappings) {
        boolean contains(long p, long n) {
            return n > 0 && p >= base && p - base <= size - n;
        }
    }

    private final Handles handles;
    private final Contexts contexts;
    private final EmulatedMemory memory;
    private final int deviceCount;
    private final TreeMap<Long, Reservation> reservations = new TreeMap<>();   // guarded by this

    VirtualMemory(Handles handles, Contexts contexts, EmulatedMemory memory, int deviceCount) {
        this.handles = handles;
        this.contexts = contexts;
        this.memory = memory;
        this.deviceCount = deviceCount;
    }

    private int checkedProp(MemorySegment prop) {
        contexts.requireInit();
        MemorySegment s = HostSegments.sized(prop, MemoryProps.ALLOCATION_PROP_SIZE, "prop");
        String refusal = MemoryProps.allocationRefusal(s, deviceCount, 0, MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (refusal != null) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, refusal);
        }
        if (!MemoryProps.validDevice(s, deviceCount)) {
            throw new CudaError(CUDA_ERROR_INVALID_DEVICE, "prop.location.id is no device");
        }
        return MemoryProps.Location.read(s, MemoryProps.LOCATION).id();
    }

    /** Minimum and recommended are both 2 MiB, as on the H200. */
    long granularity(MemorySegment prop, int option) {
        checkedProp(prop);
        if (option != 0 && option != 1) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "option=" + option);
        }
        return GRANULARITY;
    }

    private static void checkAligned(long value, String what) {
        if (value <= 0 || value % GRANULARITY != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + "=" + value + " must be a positive multiple of " + GRANULARITY);
        }
    }

    long create(long size, MemorySegment prop, long flags) {
        int device = checkedProp(prop);
        checkAligned(size, "size");
        if (flags != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=" + flags);
        }
        boolean exportable = (prop.get(HostSegments.INT, MemoryProps.HANDLE_TYPES) & MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0;
        memory.charge(device, size);
        Arena arena = Arena.ofShared();
        MemorySegment host;
        int file = -1;
        try {
            if (exportable) {
                file = MemoryFiles.create(size);
                host = MemoryFiles.map(file, size, arena);
            } else {
                host = arena.allocate(size, EmulatedMemory.ALIGNMENT);
            }
        } catch (OutOfMemoryError | IllegalArgumentException | MemoryFiles.SystemCallFailed e) {
            arena.close();
            if (file >= 0) {
                MemoryFiles.close(file);
            }
            memory.uncharge(device, size);
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "host memory for size=" + size + " unavailable: " + e.getMessage());
        }
        long h = handles.issue();
        handles.register(h, new Physical(h, device, size, arena, host, file));
        return h;
    }

    /**
     * cuMemExportToShareableHandle: a new descriptor of the allocation's memory file, written as an int to
     * {@code out}; the caller owns it. Only POSIX file descriptors are emulated (other types: NOT_SUPPORTED); an
     * allocation created without that requested handle type cannot be exported (INVALID_VALUE, as the driver answers).
     */
    synchronized void export(MemorySegment out, long handle, int handleType, long flags) {
        Physical p = physical(handle);
        if (flags != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=" + flags);
        }
        if (handleType != MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "handleType=" + handleType + ": only CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR is emulated");
        }
        if (p.file < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "handle=0x" + Long.toHexString(handle)
                    + " was not created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR in requestedHandleTypes");
        }
        MemorySegment o = HostSegments.sized(out, 4, "shareableHandle");
        try {
            o.set(HostSegments.INT, 0, MemoryFiles.dup(p.file));
        } catch (MemoryFiles.SystemCallFailed e) {
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "no descriptor for the export: " + e.getMessage());
        }
    }

    /**
     * cuMemImportFromShareableHandle with a POSIX descriptor (the pointer's value, as the driver takes it): a new
     * physical allocation on the same pages, of the file's size (a multiple of the granularity), on the current
     * context's device (device 0 without one), charged to this instance's budget as any allocation is. The caller
     * keeps {@code fd}; this instance holds a dup of it.
     */
    long importFrom(MemorySegment osHandle, int handleType) {
        contexts.requireInit();
        if (handleType != MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "shHandleType=" + handleType + ": only CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR is emulated");
        }
        long value = osHandle.address();
        if (value < 0 || value > Integer.MAX_VALUE) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "osHandle=" + value + " is no file descriptor");
        }
        int fd = (int) value;
        long size;
        try {
            size = MemoryFiles.size(fd);
        } catch (MemoryFiles.SystemCallFailed e) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "osHandle=" + fd + " is no exported allocation: " + e.getMessage());
        }
        if (size <= 0 || size % GRANULARITY != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "osHandle=" + fd + " is no exported allocation: its size " + size
                    + " is no positive multiple of " + GRANULARITY);
        }
        EmulatedContext current = contexts.currentOrNull();
        int device = current != null ? current.device : 0;
        memory.charge(device, size);
        Arena arena = Arena.ofShared();
        int own = -1;
        MemorySegment host;
        try {
            own = MemoryFiles.dup(fd);
            host = MemoryFiles.map(own, size, arena);
        } catch (MemoryFiles.SystemCallFailed e) {
            arena.close();
            if (own >= 0) {
                MemoryFiles.close(own);
            }
            memory.uncharge(device, size);
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "osHandle=" + fd + " cannot be mapped: " + e.getMessage());
        }
        long h = handles.issue();
        handles.register(h, new Physical(h, device, size, arena, host, own));
        return h;
    }

    private Physical physical(long handle) {
        contexts.requireInit();
        Physical p = handles.find(handle, Physical.class);
        if (p == null) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "handle=0x" + Long.toHexString(handle) + " is no live allocation handle");
        }
        return p;
    }

    synchronized void release(long handle) {
        Physical p = physical(handle);
        p.references--;
        if (p.references == 0) {
            handles.remove(handle, p);
            freeIfUnused(p);
        }
    }

    private void freeIfUnused(Physical p) {
        if (p.references == 0 && p.mappings == 0) {
            p.arena.close();
            if (p.file >= 0) {
                MemoryFiles.close(p.file);   // the pages live on while another process holds the file or maps it
            }
            memory.uncharge(p.device, p.size);
        }
    }

    /** {@code addr} is a hint CUDA may ignore, as here; alignment 0 means the granularity. */
    synchronized long reserve(long size, long alignment, long addr, long flags) {
        contexts.requireInit();
        checkAligned(size, "size");
        if (alignment != 0 && (alignment < 0 || Long.bitCount(alignment) != 1)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "alignment=" + alignment + " must be 0 or a power of two");
        }
        if (flags != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=" + flags);
        }
        long align = Math.max(alignment, GRANULARITY);
        long base = addr != 0 ? memory.reserveAt(addr, size, align) : 0;
        if (base == 0) {
            base = memory.reserveAddresses(size, align);
        }
        reservations.put(base, new Reservation(base, size, new TreeMap<>()));
        return base;
    }

    synchronized void free(long ptr, long size) {
        contexts.requireInit();
        Reservation r = reservations.get(ptr);
        if (r == null || r.size() != size) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "0x" + Long.toHexString(ptr) + "+" + size + " is no address reservation");
        }
        if (!r.mappings().isEmpty()) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "the reservation still has mappings");
        }
        reservations.remove(ptr);
        memory.releaseAt(ptr);
    }

    private Reservation holding(long ptr, long size) {
        Map.Entry<Long, Reservation> e = reservations.floorEntry(ptr);
        if (e == null || !e.getValue().contains(ptr, size)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "0x" + Long.toHexString(ptr) + "+" + size + " is not inside one reservation");
        }
        return e.getValue();
    }

    synchronized void map(long ptr, long size, long offset, long handle, long flags) {
        contexts.requireInit();
        checkAligned(size, "size");
        if ((ptr % GRANULARITY) != 0 || offset < 0 || (offset % GRANULARITY) != 0 || flags != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "ptr, offset must be aligned to " + GRANULARITY + " and flags 0");
        }
        Reservation r = holding(ptr, size);
        Physical p = physical(handle);
        if (offset > p.size - size) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "offset=" + offset + "+size=" + size + " exceeds the allocation's " + p.size);
        }
        Map.Entry<Long, Mapping> before = r.mappings().floorEntry(ptr);
        Map.Entry<Long, Mapping> after = r.mappings().ceilingEntry(ptr);
        if ((before != null && before.getKey() + before.getValue().size > ptr) || (after != null && after.getKey() < ptr + size)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "the range is already mapped");
        }
        r.mappings().put(ptr, new Mapping(ptr, size, offset, p));
        p.mappings++;
    }

    /** The mappings making up exactly [ptr, ptr+size). */
    private List<Mapping> covering(Reservation r, long ptr, long size) {
        List<Mapping> out = new ArrayList<>();
        long at = ptr;
        for (Mapping m : r.mappings().tailMap(ptr, true).values()) {
            if (m.base != at || m.base + m.size > ptr + size) {
                break;
            }
            out.add(m);
            at += m.size;
            if (at == ptr + size) {
                return out;
            }
        }
        throw new CudaError(CUDA_ERROR_INVALID_VALUE, "0x" + Long.toHexString(ptr) + "+" + size + " is not a union of whole mappings");
    }

    synchronized void unmap(long ptr, long size) {
        contexts.requireInit();
        Reservation r = holding(ptr, size);
        for (Mapping m : covering(r, ptr, size)) {
            hide(m);
            r.mappings().remove(m.base);
            m.physical.mappings--;
            freeIfUnused(m.physical);
        }
    }

    private void hide(Mapping m) {
        if (m.visible != null) {
            memory.unmap(m.visible);
            m.visible = null;
        }
    }

    synchronized void setAccess(long ptr, long size, MemorySegment desc, long count) {
        EmulatedContext c = contexts.current();
        if (count <= 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "count=" + count);
        }
        List<Mapping> ms = covering(holding(ptr, size), ptr, size);
        MemorySegment d = HostSegments.sized(desc, count * MemoryProps.ACCESS_DESC_SIZE, "desc");
        for (long i = 0; i < count; i++) {
            long at = i * MemoryProps.ACCESS_DESC_SIZE;
            MemoryProps.Location l = MemoryProps.Location.read(d, at);
            if (l.type() != MemoryProps.LOCATION_TYPE_DEVICE) {
                throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "desc[" + i + "].location.type=" + l.type() + ": only devices are emulated");
            }
            if (l.id() < 0 || l.id() >= deviceCount) {
                throw new CudaError(CUDA_ERROR_INVALID_DEVICE, "desc[" + i + "].location.id=" + l.id());
            }
            int flags = d.get(HostSegments.INT, at + MemoryProps.ACCESS_FLAGS);
            if (flags == MemoryProps.ACCESS_READ) {
                throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "read-only access is not emulated");
            }
            if (flags != MemoryProps.ACCESS_NONE && flags != MemoryProps.ACCESS_READWRITE) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "desc[" + i + "].flags=" + flags);
            }
        }
        for (long i = 0; i < count; i++) {
            long at = i * MemoryProps.ACCESS_DESC_SIZE;
            int device = MemoryProps.Location.read(d, at).id();
            boolean grant = d.get(HostSegments.INT, at + MemoryProps.ACCESS_FLAGS) == MemoryProps.ACCESS_READWRITE;
            if (device != c.device) {
                continue;   // only the current context's device is reached through a mapping here
            }
            for (Mapping m : ms) {
                hide(m);
                if (grant) {
                    m.visible = memory.addMapped(c, m.base, m.size, m.physical.arena, m.physical.host.asSlice(m.offset, m.size));
                }
            }
        }
    }

    synchronized long getAccess(MemorySegment location, long ptr) {
        contexts.requireInit();
        MemoryProps.Location l = MemoryProps.Location.read(HostSegments.sized(location, MemoryProps.LOCATION_SIZE, "location"), 0);
        if (l.type() != MemoryProps.LOCATION_TYPE_DEVICE || l.id() < 0 || l.id() >= deviceCount) {
            throw new CudaError(CUDA_ERROR_INVALID_DEVICE, "location type=" + l.type() + " id=" + l.id());
        }
        Mapping m = mappingAt(ptr);
        return m != null && m.visible != null && m.visible.owner().device == l.id() ? MemoryProps.ACCESS_READWRITE : MemoryProps.ACCESS_NONE;
    }

    private Mapping mappingAt(long ptr) {
        Map.Entry<Long, Reservation> e = reservations.floorEntry(ptr);
        if (e == null || !e.getValue().contains(ptr, 1)) {
            return null;
        }
        Map.Entry<Long, Mapping> m = e.getValue().mappings().floorEntry(ptr);
        return m != null && ptr < m.getKey() + m.getValue().size ? m.getValue() : null;
    }

    synchronized long retain(long addr) {
        contexts.requireInit();
        Mapping m = mappingAt(addr);
        if (m == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "addr=0x" + Long.toHexString(addr) + " is in no mapping");
        }
        if (m.physical.references == 0) {
            handles.register(m.physical.handle, m.physical);   // released but still mapped: the handle comes back
        }
        m.physical.references++;
        return m.physical.handle;
    }

    void properties(MemorySegment prop, long handle) {
        Physical p = physical(handle);
        MemorySegment s = HostSegments.sized(prop, MemoryProps.ALLOCATION_PROP_SIZE, "prop").fill((byte) 0);
        s.set(HostSegments.INT, MemoryProps.TYPE, MemoryProps.ALLOCATION_TYPE_PINNED);
        s.set(HostSegments.INT, MemoryProps.HANDLE_TYPES, p.handleTypes());
        s.set(HostSegments.INT, MemoryProps.LOCATION, MemoryProps.LOCATION_TYPE_DEVICE);
        s.set(HostSegments.INT, MemoryProps.LOCATION + 4, p.device);
    }
}
