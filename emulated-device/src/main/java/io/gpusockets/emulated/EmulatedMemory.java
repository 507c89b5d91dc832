package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_CONTEXT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The emulated devices' address space. Device pointers are not host addresses: they are handed out
 * from a range of their own, 256-byte aligned like cuMemAlloc's, and never reused while the device
 * lives, so a stale pointer cannot alias a newer allocation. Each device has its own budget of the
 * advertised size; beyond it allocation fails with CUDA_ERROR_OUT_OF_MEMORY even if the host has room.
 *
 * <p>Resolution is per context: a context sees only its own allocations, as a GPU context sees only
 * its own page tables, so one tenant's pointer is an illegal address in another tenant's kernel.
 *
 * <p>Besides allocations, a device's budget holds {@link Reservation reservations}: memory the real
 * driver takes for a context without giving the program an address in it (the context itself, a
 * module's code, the local memory, heap and printf FIFO its limits reserve). They are a model of the
 * driver's footprint (README, "Footprint model"), kept so that the device's memory in use moves as a
 * GPU's does; each belongs to a context and goes when it is released or its context is destroyed.
 *
 * <p>Module data (a module's {@code __device__} and {@code __constant__} variables, {@link Allocation.Kind#GLOBAL})
 * lies in a range of its own ({@link #MODULE_BASE}), starting at an offset that differs from one instance (one device,
 * one process) to the next, as the real driver places a module's globals wherever it likes in a new process: a
 * backend that loads a module again (a restore, a migration's target) finds its globals elsewhere, as on a GPU.
 * Within one instance the placement is deterministic (in order, never reused). The system property
 * {@value #MODULE_OFFSET_PROPERTY} pins the offset (a multiple of 64 KiB below 64 GiB; 0 places module data as
 * every instance did before) for tests that need a fixed place.
 */
final class EmulatedMemory {
    /**
     * Start of the module data range: the upper half of the device's own TiB (allocations take the lower half, below
     * it, from {@link #BASE}; it ends at {@link #OWN_END}).
     */
    static final long MODULE_BASE = 0x7e80_0000_0000L;
    /** The system property that pins the module data offset (bytes past {@link #MODULE_BASE}). */
    static final String MODULE_OFFSET_PROPERTY = "gpusockets.emulated.moduleDataOffset";
    /** Instances made in this process so far: one input of the next one's module data offset. */
    private static final AtomicLong INSTANCES = new AtomicLong();

    static final long BASE = 0x7e00_0000_0000L;
    /**
     * End of the device's own range, the TiB from {@link #BASE}: handed out in order and never reused by the driver's
     * own choice (allocations below {@link #MODULE_BASE}, module data above it; a reservation asked for at a free
     * address there that was handed out before is granted, {@link #reserveAt}). Address reservations made at the
     * address their caller asked for ({@link #reserveAt}) lie anywhere else from {@link #FIXED_LOW} to {@link #LIMIT},
     * reused once freed.
     */
    static final long OWN_END = 0x7f00_0000_0000L;
    /** The top of the user address space the emulated device hands out, below the 47-bit user-space limit. */
    static final long LIMIT = 0x7fff_ffff_0000L;
    /** The lowest address a reservation at a requested address may have ({@link #reserveAt}): above the first 4 GiB. */
    static final long FIXED_LOW = 0x1_0000_0000L;
    /** Live reservations at requested addresses: base to end (exclusive); guarded by this. */
    private final java.util.TreeMap<Long, Long> fixed = new java.util.TreeMap<>();
    /** Live address reservations in the device's own range, start to end (guarded by this). */
    private final java.util.TreeMap<Long, Long> ownReserved = new java.util.TreeMap<>();
    static final long ALIGNMENT = 256;

    private final long capacity;
    private final AtomicLong[] used;
    private final ConcurrentSkipListMap<Long, Allocation> byBase = new ConcurrentSkipListMap<>();
    private final AtomicLong ids = new AtomicLong(1);
    /** Each context's live reservations. */
    private final Map<EmulatedContext, java.util.Set<Reservation>> reservations = new java.util.concurrent.ConcurrentHashMap<>();

    /** Device memory a context holds without an address ({@link #reserve}); released once. */
    static final class Reservation {
        final EmulatedContext owner;
        final long size;
        private final java.util.concurrent.atomic.AtomicBoolean released = new java.util.concurrent.atomic.AtomicBoolean();

        private Reservation(EmulatedContext owner, long size) {
            this.owner = owner;
            this.size = size;
        }
    }
    private long nextAddress = BASE;   // guarded by this
    /** The next module data address ({@link #MODULE_BASE} plus this instance's offset, then onwards). */
    private long nextModuleAddress;   // guarded by this

    EmulatedMemory(int deviceCount, long capacityPerDevice) {
        this.capacity = capacityPerDevice;
        this.nextModuleAddress = MODULE_BASE + moduleOffset(Long.getLong(MODULE_OFFSET_PROPERTY, -1));
        this.used = new AtomicLong[deviceCount];
        for (int i = 0; i < deviceCount; i++) {
            used[i] = new AtomicLong();
        }
    }

    long capacity() {
        return capacity;
    }

    long used(int device) {
        return used[device].get();
    }

    /** Zero-filled memory (unlike cuMemAlloc's): a tenant never sees what another left behind. */
    Allocation allocate(EmulatedContext owner, long size, Allocation.Kind kind) {
        if (size <= 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "bytesize=" + size + " must be positive");
        }
        // the context's reservations already hold its heap's budget
        long budgeted = kind == Allocation.Kind.HEAP ? 0 : size;
        AtomicLong budget = used[owner.device];
        charge(owner.device, budgeted);
        long base;
        try {
            base = kind == Allocation.Kind.GLOBAL ? reserveModuleAddresses(size) : reserveAddresses(size);
        } catch (CudaError e) {
            budget.addAndGet(-budgeted);
            throw e;
        }
        Arena arena = Arena.ofShared();
        MemorySegment host;
        try {
            host = arena.allocate(size, ALIGNMENT);
        } catch (OutOfMemoryError | IllegalArgumentException e) {
            arena.close();
            budget.addAndGet(-budgeted);
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "host memory for bytesize=" + size + " unavailable: " + e.getMessage());
        }
        Allocation a = new Allocation(base, size, ids.getAndIncrement(), kind, owner, arena, host);
        byBase.put(base, a);
        // The context may have died meanwhile; its cleanup (unmapAll) may or may not have seen this one.
        if (owner.destroyed()) {
            if (unmap(a)) {
                release(a);
            }
            throw new CudaError(CUDA_ERROR_INVALID_CONTEXT, "context " + owner.name + " was destroyed");
        }
        return a;
    }

    /**
     * The offset of an instance's module data past {@link #MODULE_BASE}: {@code pinned} where it is a valid one (a
     * multiple of 64 KiB below 64 GiB), else drawn from this process's id and the instances made in it before, in
     * steps of 64 KiB (so two instances in one process, or two processes, place module data apart).
     */
    static long moduleOffset(long pinned) {
        long step = 64 * 1024, slots = 1 << 20; // 64 GiB
        if (pinned >= 0) {
            if (pinned % step != 0 || pinned >= step * slots) {
                throw new IllegalArgumentException(MODULE_OFFSET_PROPERTY + "=" + pinned
                        + ": a multiple of 64 KiB below 64 GiB");
            }
            return pinned;
        }
        long seed = ProcessHandle.current().pid() * 0x9E3779B97F4A7C15L + INSTANCES.incrementAndGet() * 0xBF58476D1CE4E5B9L;
        seed ^= seed >>> 31;
        return (Math.floorMod(seed, slots - 1) + 1) * step; // never 0: a fresh instance never matches the pinned default
    }

    private long reserveAddresses(long size) {
        return nextOwn(size, ALIGNMENT);
    }

    /** A fresh range of module data addresses, never reused ({@link #MODULE_BASE}). */
    private synchronized long reserveModuleAddresses(long size) {
        long start = nextModuleAddress;
        long rounded = (size + ALIGNMENT - 1) & -ALIGNMENT;
        if (rounded <= 0 || rounded > OWN_END - start) {
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "module data address range exhausted (addresses are never reused)");
        }
        nextModuleAddress = start + rounded;
        return start;
    }

    /**
     * A fresh range of addresses aligned to {@code alignment} (a power of two, at least {@link #ALIGNMENT}) for an
     * address reservation made where the driver chooses: never handed out by the driver's own choice again, live until
     * {@link #releaseAt} (a reservation asked for at an address in it, {@link #reserveAt}, is refused meanwhile).
     */
    synchronized long reserveAddresses(long size, long alignment) {
        long start = nextOwn(size, alignment);
        ownReserved.put(start, start + ((size + ALIGNMENT - 1) & -ALIGNMENT));
        return start;
    }

    /** A fresh range of the device's own addresses, never handed out by its own choice again. */
    private synchronized long nextOwn(long size, long alignment) {
        long start = (nextAddress + alignment - 1) & -alignment;
        long rounded = (size + ALIGNMENT - 1) & -ALIGNMENT;
        if (rounded <= 0 || start < nextAddress || rounded > MODULE_BASE - start) {
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "device address range exhausted (addresses are never reused)");
        }
        nextAddress = start + rounded;
        return start;
    }

    /**
     * The range {@code [addr, addr + size)} for a reservation made at the address its caller asked for, as the
     * driver grants one: when it lies from {@link #FIXED_LOW} to {@link #LIMIT} outside the device's own range
     * ({@link #BASE} to {@link #OWN_END}), is aligned to {@code alignment}, overlaps no live reservation there and
     * overlaps nothing this process maps ({@link HostMappings}: the driver's device addresses share the process's
     * address space, so where the JVM's heap, a library or a thread stack lies the driver reserves elsewhere); else 0
     * (the caller then takes a fresh range, as the driver treats the address as a hint). In the device's own range,
     * the driver grants an address it handed out before and that is free again, as a GPU's driver grants a free
     * address asked for (a range wholly below {@link #MODULE_BASE} and below the next fresh address, overlapping no
     * live allocation and no live reservation: a group migration's target maps an opened IPC range where the source's
     * driver had placed it); a fresh address is never granted that way (the driver's own choices stay in order).
     * {@code size} is a positive multiple of the alignment.
     */
    synchronized long reserveAt(long addr, long size, long alignment) {
        if (addr < FIXED_LOW || (addr & (alignment - 1)) != 0 || size <= 0 || size > LIMIT - addr) {
            return 0;
        }
        if (addr < OWN_END && addr + size > BASE) {
            if (addr < BASE || addr + size > Math.min(nextAddress, MODULE_BASE) || overlaps(ownReserved, addr, size)) {
                return 0;
            }
            Map.Entry<Long, Allocation> a = byBase.floorEntry(addr + size - 1);
            if (a != null && a.getKey() + ((a.getValue().size() + ALIGNMENT - 1) & -ALIGNMENT) > addr) {
                return 0; // a live allocation (they do not overlap one another: the one below the end is the only one)
            }
            ownReserved.put(addr, addr + size);
            return addr;
        }
        java.util.Map.Entry<Long, Long> below = fixed.floorEntry(addr + size - 1);
        if (below != null && below.getValue() > addr) {
            return 0; // overlaps the live reservation that starts at or below its end
        }
        if (HostMappings.overlap(addr, size)) {
            return 0;
        }
        fixed.put(addr, addr + size);
        return addr;
    }

    /** Gives back a reservation's range ({@link #reserveAt}, {@link #reserveAddresses}; no-op for any other address). */
    synchronized void releaseAt(long addr) {
        fixed.remove(addr);
        ownReserved.remove(addr);
    }

    /** Whether {@code [addr, addr + size)} overlaps a range of {@code ranges} (start to end, not overlapping one another). */
    private static boolean overlaps(java.util.TreeMap<Long, Long> ranges, long addr, long size) {
        Map.Entry<Long, Long> below = ranges.floorEntry(addr + size - 1);
        return below != null && below.getValue() > addr;
    }

    /** Takes {@code size} bytes of the device's budget (memory that is not an allocation of its own: VMM physical memory). */
    void charge(int device, long size) {
        AtomicLong budget = used[device];
        long before;
        do {
            before = budget.get();
            if (size > capacity - before) {
                throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "size=" + size + " exceeds free=" + (capacity - before)
                        + " of the advertised " + capacity + " bytes");
            }
        } while (!budget.compareAndSet(before, before + size));
    }

    void uncharge(int device, long size) {
        used[device].addAndGet(-size);
    }

    /**
     * Takes {@code size} bytes (0 or more) of {@code owner}'s device budget as a reservation of the context;
     * CUDA_ERROR_OUT_OF_MEMORY when the device has not that much left.
     */
    Reservation reserve(EmulatedContext owner, long size) {
        charge(owner.device, size);
        Reservation r = new Reservation(owner, size);
        reservations.computeIfAbsent(owner, k -> java.util.concurrent.ConcurrentHashMap.newKeySet()).add(r);
        if (owner.destroyed()) {   // its context died meanwhile, and its cleanup may not have seen this one
            release(r);
            throw new CudaError(CUDA_ERROR_INVALID_CONTEXT, "context " + owner.name + " was destroyed");
        }
        return r;
    }

    /** Gives a reservation's bytes back (once; null and released ones are ignored). */
    void release(Reservation r) {
        if (r != null && r.released.compareAndSet(false, true)) {
            java.util.Set<Reservation> own = reservations.get(r.owner);
            if (own != null) {
                own.remove(r);
            }
            uncharge(r.owner.device, r.size);
        }
    }

    /** A destroyed context's reservations go. */
    void releaseReservations(EmulatedContext context) {
        java.util.Set<Reservation> own = reservations.remove(context);
        if (own != null) {
            own.forEach(this::release);
        }
    }

    /**
     * The memory file an allocation exported with cuIpcGetMemHandle lives in ({@link IpcMemory}): the descriptor this
     * process keeps open for openers to reach through {@code /proc/PID/fd/N} until the allocation is released, and the
     * nonce its name and the handle carry.
     */
    record SharedFile(int fd, long nonce) {
    }

    /** Exported allocations' memory files, by allocation id; each closed when its allocation is released. */
    private final Map<Long, SharedFile> sharedFiles = new java.util.concurrent.ConcurrentHashMap<>();

    SharedFile sharedFile(Allocation a) {
        return sharedFiles.get(a.id());
    }

    /**
     * Moves a live allocation into shared pages ({@code host}, owned by {@code arena}: a mapping of {@code file}): its
     * contents are copied over, the record with the new backing replaces {@code a} (same address, id, kind and
     * owner), and {@code a}'s own memory is freed; from then on releasing the allocation closes {@code file}. The caller
     * has waited for the context's queued work, which may hold the old memory; later accesses (kernels, copies) resolve
     * the new record. Returns null (nothing changed: the caller closes {@code arena} and the file) when {@code a} is no
     * longer live.
     */
    Allocation share(Allocation a, SharedFile file, Arena arena, MemorySegment host) {
        Allocation b = new Allocation(a.base(), a.size(), a.id(), a.kind(), a.owner(), arena, host);
        MemorySegment.copy(a.host(), 0, host, 0, a.size());
        if (!byBase.replace(a.base(), a, b)) {
            return null;
        }
        a.arena().close();
        sharedFiles.put(a.id(), file);
        if (byBase.get(a.base()) != b && sharedFiles.remove(a.id(), file)) {
            MemoryFiles.close(file.fd());   // freed meanwhile, before its release could see the file
        }
        return b;
    }

    /**
     * Makes another process's exported allocation resolvable in {@code owner}: an IPC allocation at fresh addresses
     * over {@code host} (a mapping of its memory file, owned by {@code arena}), charged to nobody here.
     */
    Allocation addOpened(EmulatedContext owner, long size, Arena arena, MemorySegment host) {
        long base = reserveAddresses(size);
        Allocation a = new Allocation(base, size, ids.getAndIncrement(), Allocation.Kind.IPC, owner, arena, host);
        byBase.put(base, a);
        if (owner.destroyed()) {   // as in allocate: the context's cleanup may not have seen this one
            if (unmap(a)) {
                release(a);
            }
            throw new CudaError(CUDA_ERROR_INVALID_CONTEXT, "context " + owner.name + " was destroyed");
        }
        return a;
    }

    /** Makes a VMM mapping resolvable: a MAPPED allocation over host memory owned by its physical allocation. */
    Allocation addMapped(EmulatedContext owner, long base, long size, Arena arena, MemorySegment host) {
        Allocation a = new Allocation(base, size, ids.getAndIncrement(), Allocation.Kind.MAPPED, owner, arena, host);
        byBase.put(base, a);
        return a;
    }

    /** The allocation (of any context) containing {@code address}, or null. */
    Allocation find(long address) {
        Map.Entry<Long, Allocation> e = byBase.floorEntry(address);
        if (e == null) {
            return null;
        }
        Allocation a = e.getValue();
        return address < a.end() ? a : null;
    }

    /** Host memory behind [address, address+bytes) if it lies in one allocation of {@code context}, else null. */
    MemorySegment resolve(EmulatedContext context, long address, long bytes) {
        Allocation a = find(address);
        if (a == null || a.owner() != context || !a.contains(address, bytes)) {
            return null;
        }
        return a.host().asSlice(address - a.base(), bytes);
    }

    /** Takes the allocation out of the address space; {@link #release} frees it once no queued work can use it. */
    boolean unmap(Allocation a) {
        return byBase.remove(a.base(), a);
    }

    void release(Allocation a) {
        if (a.kind() == Allocation.Kind.MAPPED) {
            return; // its memory and budget are its physical allocation's
        }
        a.arena().close();
        if (a.kind() == Allocation.Kind.IPC) {
            return; // the mapping goes; the memory and its budget are the exporter's
        }
        SharedFile file = sharedFiles.remove(a.id());
        if (file != null) {
            MemoryFiles.close(file.fd());   // a late cuIpcOpenMemHandle of it now fails cleanly
        }
        if (a.kind() != Allocation.Kind.HEAP) {
            used[a.owner().device].addAndGet(-a.size());
        }
    }

    /** Every allocation owned by {@code context}, unmapped; the caller releases them. */
    List<Allocation> unmapAll(EmulatedContext context) {
        List<Allocation> taken = new ArrayList<>();
        for (Allocation a : byBase.values()) {
            if (a.owner() == context && unmap(a)) {
                taken.add(a);
            }
        }
        return taken;
    }
}
