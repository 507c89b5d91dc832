package io.gpusockets.backend.session;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.DelegatingCudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Address-stable device memory for one session (issue 22, item 2; opt-in with
 * {@code -Dgpusockets.backend.stableAddresses=true}): the session's {@code cuMemAlloc} allocations lie in a
 * virtual address window of its own on each device, reserved with {@code cuMemAddressReserve} at an address
 * derived from the session id, and backed by {@code cuMemCreate}/{@code cuMemMap}/{@code cuMemSetAccess}, so
 * that memory can be made again at the same addresses (the way PhOS, SOSP 2025, keeps addresses across a
 * restore). An allocation of at least a quarter granule gets granules of its own; a smaller one a block of
 * its power-of-two size class (256 bytes up) in a granule shared with others of that class. What the
 * program sees stays as the driver's: {@code cuMemGetAddressRange} and the range attributes of
 * {@code cuPointerGetAttribute(s)} answer the allocation, not the granule; {@code cuMemFree} waits for the
 * context's work first, as the driver's implicit synchronisation does.
 *
 * <p>A restore ({@link SessionRestore}) reserves each window at the checkpointed base ({@link #windowAt}: a
 * window the driver puts elsewhere fails) and places each replayed allocation at its recorded address
 * ({@link #placeNext}: its granules, or its block in its size class's granule, must be free; else the allocation
 * fails and {@link #placeFailure} says why).
 *
 * <p>Not yet here (they keep the driver's own addresses): pitched allocations, stream-ordered allocations
 * and pools, graph memory nodes, and the VMM calls the program makes itself. A session whose window cannot
 * be reserved at its address gets the one the driver picks (logged). The tenant's charge stays the size asked
 * (a size class's rounding and a granule's unused rest are not charged).
 */
final class StableAddresses extends DelegatingCudaDriver {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** The system property that turns it on. */
    static final String PROPERTY = "gpusockets.backend.stableAddresses";
    /** Where the windows start: the upper TiB of the emulated device's range; the GPU pass checks the real driver's. */
    static final long WINDOWS_BASE = 0x7f00_0000_0000L;
    /** Room for windows above {@link #WINDOWS_BASE}. */
    static final long WINDOWS_SPAN = 0x00ff_0000_0000L;
    private static final long SMALLEST = 256;
    private static final int CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11;
    private static final int CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12;

    private final long sessionId;
    /** One window per device, made at its first allocation. */
    private final Map<Integer, Window> windows = new HashMap<>();
    /** Every live allocation, by base. */
    private final TreeMap<Long, Allocation> allocations = new TreeMap<>();
    /** A restore: where the next allocation must lie (0: anywhere), and why the last placement failed. */
    private long placeAt;
    private String placeFailure;
    /** A restore: the window bases the checkpointed session had, by device. */
    private final Map<Integer, Long> windowAt = new HashMap<>();

    StableAddresses(CudaDriver real, long sessionId) {
        super(real);
        this.sessionId = sessionId;
    }

    /** Whether the property turns it on. */
    static boolean enabled() {
        return Boolean.getBoolean(PROPERTY);
    }

    /** A live allocation: {@code size} as asked, inside a block of {@code slab} or granules of its own. */
    private record Allocation(long base, long size, long context, Window window, Slab slab, int block, long length,
                              long handle) {
    }

    private record SlabKey(long context, long blockSize) {
    }

    /** Granules of one size class's blocks. */
    private static final class Slab {
        final long base;
        final long blockSize;
        final long handle;
        final BitSet used;
        final int blocks;

        Slab(long base, long blockSize, long handle, int blocks) {
            this.base = base;
            this.blockSize = blockSize;
            this.handle = handle;
            this.blocks = blocks;
            this.used = new BitSet(blocks);
        }
    }

    /** A device's window: its reservation, the ranges free in it, and the slabs of each size class. */
    private static final class Window {
        final int device;
        final long base;
        final long size;
        final long granule;
        final TreeMap<Long, Long> free = new TreeMap<>();
        /** Slabs by context and size class: a context's blocks share granules only with its own (the emulated
         * device reaches mapped memory from the context that made it accessible). */
        final Map<SlabKey, List<Slab>> slabs = new HashMap<>();

        Window(int device, long base, long size, long granule) {
            this.device = device;
            this.base = base;
            this.size = size;
            this.granule = granule;
            free.put(base, size);
        }

        /** The lowest free range of {@code n} bytes (a granule multiple), taken; 0 when none. */
        long take(long n) {
            for (Map.Entry<Long, Long> e : free.entrySet()) {
                if (e.getValue() >= n) {
                    long at = e.getKey();
                    free.remove(at);
                    if (e.getValue() > n) {
                        free.put(at + n, e.getValue() - n);
                    }
                    return at;
                }
            }
            return 0;
        }

        /** Takes exactly {@code [at, at + n)} when it is free (a restore); false when any of it is not. */
        boolean takeAt(long at, long n) {
            Map.Entry<Long, Long> e = free.floorEntry(at);
            if (e == null || e.getKey() + e.getValue() < at + n) {
                return false;
            }
            long start = e.getKey(), end = e.getKey() + e.getValue();
            free.remove(start);
            if (at > start) {
                free.put(start, at - start);
            }
            if (end > at + n) {
                free.put(at + n, end - at - n);
            }
            return true;
        }

        /** Gives back a range {@link #take} handed out, merged with its free neighbours. */
        void give(long at, long n) {
            Map.Entry<Long, Long> before = free.floorEntry(at);
            if (before != null && before.getKey() + before.getValue() == at) {
                at = before.getKey();
                n += before.getValue();
                free.remove(at);
            }
            Long after = free.get(at + n);
            if (after != null) {
                free.remove(at + n);
                n += after;
            }
            free.put(at, n);
        }
    }

    @Override
    public synchronized int cuMemAlloc(MemorySegment dptr, long bytesize) {
        if (bytesize <= 0) {
            return delegate.cuMemAlloc(dptr, bytesize);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            int r = delegate.cuCtxGetDevice(out);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            int device = out.get(JAVA_INT, 0);
            r = delegate.cuCtxGetCurrent(out);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            long context = out.get(JAVA_LONG, 0);
            Window w = windows.get(device);
            if (w == null) {
                w = openWindow(arena, device);
                if (w == null) {
                    placeAt = 0;
                    return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
                }
                windows.put(device, w);
            }
            long at = placeAt;
            placeAt = 0;
            Allocation a = at != 0 ? placed(arena, w, bytesize, context, at)
                    : bytesize >= w.granule / 4 ? large(arena, w, bytesize, context) : small(arena, w, bytesize, context);
            if (a == null) {
                return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
            }
            allocations.put(a.base(), a);
            dptr.set(JAVA_LONG, 0, a.base());
            return CuResult.CUDA_SUCCESS;
        }
    }

    /** Reserves the device's window at this session's address (or where the driver puts it); null when it cannot. */
    private Window openWindow(Arena arena, int device) {
        MemorySegment out = arena.allocate(8);
        MemorySegment prop = prop(arena, device);
        if (delegate.cuMemGetAllocationGranularity(out, prop, 0) != CuResult.CUDA_SUCCESS) {
            return null;
        }
        long granule = out.get(JAVA_LONG, 0);
        if (delegate.cuDeviceTotalMem(out, device) != CuResult.CUDA_SUCCESS) {
            return null;
        }
        long total = out.get(JAVA_LONG, 0);
        long size = Long.highestOneBit(Math.max(total, granule) - 1) << 1; // the device's memory, to a power of two
        long slots = Math.max(1, WINDOWS_SPAN / size);
        Long pinned = windowAt.get(device);
        long want = pinned != null ? pinned : WINDOWS_BASE + Math.floorMod(sessionId * 7919 + device, slots) * size;
        if (delegate.cuMemAddressReserve(out, size, granule, want, 0) != CuResult.CUDA_SUCCESS) {
            placeFailure = "the address window of device " + device + " could not be reserved at 0x" + Long.toHexString(want);
            return null;
        }
        long base = out.get(JAVA_LONG, 0);
        if (pinned != null && base != want) {
            delegate.cuMemAddressFree(base, size);
            placeFailure = "the address window of device " + device + " is taken at 0x" + Long.toHexString(want)
                    + " (the driver offered 0x" + Long.toHexString(base) + ")";
            return null;
        }
        if (base != want) {
            LOG.log(System.Logger.Level.WARNING, "session " + sessionId + ": the address window for device " + device
                    + " is at 0x" + Long.toHexString(base) + ", not at 0x" + Long.toHexString(want) + " (taken)");
        }
        return new Window(device, base, size, granule);
    }

    /** Granules of its own, mapped and made accessible; null when none can be had. */
    private Allocation large(Arena arena, Window w, long bytesize, long context) {
        long length = (bytesize + w.granule - 1) / w.granule * w.granule;
        long at = w.take(length);
        if (at == 0) {
            return null;
        }
        long handle = back(arena, w, at, length);
        if (handle == 0) {
            w.give(at, length);
            return null;
        }
        return new Allocation(at, bytesize, context, w, null, -1, length, handle);
    }

    /**
     * A restore: the allocation at exactly {@code at}, granules of its own or a block of its size class, whose
     * range (or block) must be free; null, with {@link #placeFailure} saying why, when it is not.
     */
    private Allocation placed(Arena arena, Window w, long bytesize, long context, long at) {
        if (bytesize >= w.granule / 4) {
            long length = (bytesize + w.granule - 1) / w.granule * w.granule;
            if (at < w.base || (at - w.base) % w.granule != 0 || !w.takeAt(at, length)) {
                placeFailure = String.format("0x%x+%d is not a free granule range of the window", at, bytesize);
                return null;
            }
            long handle = back(arena, w, at, length);
            if (handle == 0) {
                w.give(at, length);
                placeFailure = String.format("0x%x+%d could not be mapped", at, bytesize);
                return null;
            }
            return new Allocation(at, bytesize, context, w, null, -1, length, handle);
        }
        long block = Math.max(SMALLEST, Long.highestOneBit(bytesize - 1) << 1);
        long granule = at - Math.floorMod(at - w.base, w.granule);
        if (at < w.base || (at - granule) % block != 0) {
            placeFailure = String.format("0x%x is not a %d-byte block of the window", at, block);
            return null;
        }
        List<Slab> list = w.slabs.computeIfAbsent(new SlabKey(context, block), k -> new ArrayList<>());
        Slab s = list.stream().filter(x -> x.base == granule).findFirst().orElse(null);
        if (s == null) {
            if (!w.takeAt(granule, w.granule)) {
                placeFailure = String.format("the granule at 0x%x is taken (by another size class or allocation)", granule);
                return null;
            }
            long handle = back(arena, w, granule, w.granule);
            if (handle == 0) {
                w.give(granule, w.granule);
                placeFailure = String.format("the granule at 0x%x could not be mapped", granule);
                return null;
            }
            s = new Slab(granule, block, handle, (int) (w.granule / block));
            list.add(s);
        }
        int i = (int) ((at - granule) / block);
        if (s.used.get(i)) {
            placeFailure = String.format("the block at 0x%x is taken", at);
            return null;
        }
        s.used.set(i);
        return new Allocation(at, bytesize, context, w, s, i, block, 0);
    }

    /** A restore: the next {@link #cuMemAlloc} must place its allocation at {@code base}. */
    synchronized void placeNext(long base) {
        placeAt = base;
        placeFailure = null;
    }

    /** Why the last placement ({@link #placeNext}) failed, or null. */
    synchronized String placeFailure() {
        return placeFailure;
    }

    /** A restore: the window of {@code device} must be reserved at {@code base} (before its first allocation). */
    synchronized void windowAt(int device, long base) {
        windowAt.put(device, base);
    }

    /** The windows' bases by device (those opened so far). */
    synchronized Map<Integer, Long> windowBases() {
        Map<Integer, Long> out = new TreeMap<>();
        windows.forEach((d, w) -> out.put(d, w.base));
        return out;
    }

    /** Where the live allocation holding {@code base} was made: its context (real value), or 0. */
    synchronized long contextOf(long base) {
        Allocation a = allocations.get(base);
        return a == null ? 0 : a.context();
    }

    /** A block of its size class; null when no granule can be had for a new slab. */
    private Allocation small(Arena arena, Window w, long bytesize, long context) {
        long block = Math.max(SMALLEST, Long.highestOneBit(bytesize - 1) << 1);
        List<Slab> list = w.slabs.computeIfAbsent(new SlabKey(context, block), k -> new ArrayList<>());
        for (Slab s : list) {
            int i = s.used.nextClearBit(0);
            if (i < s.blocks) {
                s.used.set(i);
                return new Allocation(s.base + i * block, bytesize, context, w, s, i, block, 0);
            }
        }
        long at = w.take(w.granule);
        if (at == 0) {
            return null;
        }
        long handle = back(arena, w, at, w.granule);
        if (handle == 0) {
            w.give(at, w.granule);
            return null;
        }
        Slab s = new Slab(at, block, handle, (int) (w.granule / block));
        list.add(s);
        s.used.set(0);
        return new Allocation(at, bytesize, context, w, s, 0, block, 0);
    }

    /** Physical memory for {@code [at, at + length)}, mapped read-write for the window's device; 0 when it fails. */
    private long back(Arena arena, Window w, long at, long length) {
        MemorySegment out = arena.allocate(8);
        if (delegate.cuMemCreate(out, length, prop(arena, w.device), 0) != CuResult.CUDA_SUCCESS) {
            return 0;
        }
        long handle = out.get(JAVA_LONG, 0);
        if (delegate.cuMemMap(at, length, 0, handle, 0) != CuResult.CUDA_SUCCESS) {
            delegate.cuMemRelease(handle);
            return 0;
        }
        MemorySegment access = arena.allocate(12, 4);
        access.set(JAVA_INT, 0, 1); // CU_MEM_LOCATION_TYPE_DEVICE
        access.set(JAVA_INT, 4, w.device);
        access.set(JAVA_INT, 8, 3); // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        if (delegate.cuMemSetAccess(at, length, access, 1) != CuResult.CUDA_SUCCESS) {
            delegate.cuMemUnmap(at, length);
            delegate.cuMemRelease(handle);
            return 0;
        }
        return handle;
    }

    /** CUmemAllocationProp: pinned device memory on {@code device}, no handle types, no flags. */
    private static MemorySegment prop(Arena arena, int device) {
        MemorySegment p = arena.allocate(32, 8);
        p.set(JAVA_INT, 0, 1); // CU_MEM_ALLOCATION_TYPE_PINNED
        p.set(JAVA_INT, 8, 1); // location: CU_MEM_LOCATION_TYPE_DEVICE
        p.set(JAVA_INT, 12, device);
        return p;
    }

    @Override
    public synchronized int cuMemFree(long dptr) {
        Allocation a = allocations.get(dptr);
        if (a == null) {
            return delegate.cuMemFree(dptr);
        }
        delegate.cuCtxSynchronize(); // the driver's cuMemFree waits for the device's work likewise
        allocations.remove(dptr);
        release(a);
        return CuResult.CUDA_SUCCESS;
    }

    /** Gives back what {@code a} held: its block, or its granules (unmapped and released). */
    private void release(Allocation a) {
        Window w = a.window();
        if (a.slab() == null) {
            delegate.cuMemUnmap(a.base(), a.length());
            delegate.cuMemRelease(a.handle());
            w.give(a.base(), a.length());
            return;
        }
        Slab s = a.slab();
        s.used.clear(a.block());
        if (s.used.isEmpty()) {
            delegate.cuMemUnmap(s.base, w.granule);
            delegate.cuMemRelease(s.handle);
            w.give(s.base, w.granule);
            w.slabs.get(new SlabKey(a.context(), s.blockSize)).remove(s);
        }
    }

    @Override
    public synchronized int cuCtxDestroy(long ctx) {
        int r = delegate.cuCtxDestroy(ctx);
        if (r == CuResult.CUDA_SUCCESS) {
            // the context's work is done (destroying waited for it); its allocations go with it, as the driver's do
            List<Allocation> gone = allocations.values().stream().filter(a -> a.context() == ctx).toList();
            for (Allocation a : gone) {
                allocations.remove(a.base());
                release(a);
            }
        }
        return r;
    }

    /** The live allocation holding {@code p}, or null. */
    private Allocation holding(long p) {
        Map.Entry<Long, Allocation> e = allocations.floorEntry(p);
        return e != null && p - e.getKey() < e.getValue().size() ? e.getValue() : null;
    }

    @Override
    public synchronized int cuMemGetAddressRange(MemorySegment pbase, MemorySegment psize, long dptr) {
        Allocation a = holding(dptr);
        if (a == null) {
            return delegate.cuMemGetAddressRange(pbase, psize, dptr);
        }
        if (pbase.address() != 0) {
            pbase.set(JAVA_LONG, 0, a.base());
        }
        if (psize.address() != 0) {
            psize.set(JAVA_LONG, 0, a.size());
        }
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuPointerGetAttribute(MemorySegment data, int attribute, long ptr) {
        int r = delegate.cuPointerGetAttribute(data, attribute, ptr);
        Allocation a = holding(ptr);
        if (r == CuResult.CUDA_SUCCESS && a != null) {
            answerRange(data, attribute, a);
        }
        return r;
    }

    @Override
    public synchronized int cuPointerGetAttributes(int numAttributes, MemorySegment attributes, MemorySegment data, long ptr) {
        int r = delegate.cuPointerGetAttributes(numAttributes, attributes, data, ptr);
        Allocation a = holding(ptr);
        if (r == CuResult.CUDA_SUCCESS && a != null) {
            for (int i = 0; i < numAttributes; i++) {
                MemorySegment slot = data.get(java.lang.foreign.ValueLayout.ADDRESS, 8L * i);
                if (slot.address() != 0) {
                    answerRange(slot.reinterpret(8), attributes.getAtIndex(JAVA_INT, i), a);
                }
            }
        }
        return r;
    }

    private static void answerRange(MemorySegment data, int attribute, Allocation a) {
        if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) {
            data.set(JAVA_LONG, 0, a.base());
        } else if (attribute == CU_POINTER_ATTRIBUTE_RANGE_SIZE) {
            data.set(JAVA_LONG, 0, a.size());
        }
    }

    /** At the session's end, after its contexts: every mapping and the windows go. */
    synchronized void close() {
        for (Allocation a : List.copyOf(allocations.values())) {
            release(a);
        }
        allocations.clear();
        for (Window w : windows.values()) {
            delegate.cuMemAddressFree(w.base, w.size);
        }
        windows.clear();
    }

    /** Whether a live allocation of this session's window starts at {@code base}. */
    synchronized boolean holds(long base) {
        return allocations.containsKey(base);
    }

    /** The base of the window on {@code device}, or 0 before its first allocation (tests, status). */
    synchronized long windowBase(int device) {
        Window w = windows.get(device);
        return w == null ? 0 : w.base;
    }
}
