package io.gpusockets.backend.session;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.DelegatingCudaDriver;
import io.gpusockets.protocol.api.StableWindows;
import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Address-stable device memory for one session (issue 22, item 2; a setting, off by default: the tenants file's
 * {@code stable-addresses}, else {@code gpusockets backend --stable-addresses}, else
 * {@code -Dgpusockets.backend.stableAddresses=true}; see {@link Session#stableFor}): the session's device
 * allocations lie in a virtual address window of its own on each device ({@link AddressWindow}), reserved with
 * {@code cuMemAddressReserve} at an address derived from the session id ({@link #windowSlot}) above the windows' base
 * ({@link StableWindows}: {@code 0x6000_0000_0000} unless {@value StableWindows#PROPERTY} moves it, far from where
 * Linux puts the process's own mappings), and backed by
 * {@code cuMemCreate}/{@code cuMemMap}/{@code cuMemSetAccess}, so that memory can be made again at the same addresses (the way PhOS, SOSP 2025, keeps addresses across a
 * restore). An allocation of at least a quarter granule gets granules of its own; a smaller one a block of its
 * power-of-two size class (256 bytes up) in a granule shared with others of that class. What the program sees
 * stays as the driver's: {@code cuMemGetAddressRange} and the range attributes of {@code cuPointerGetAttribute(s)}
 * answer the allocation, not the granule; {@code cuMemFree} waits for the context's work first, as the driver's
 * implicit synchronisation does.
 *
 * <p>In the window:
 * <ul>
 * <li>{@code cuMemAlloc}.</li>
 * <li>{@code cuMemAllocPitch}: the pitch is the one the driver itself chooses for that width and element size
 *     (asked once per device, width and element size with a one-row {@code cuMemAllocPitch} freed at once, and
 *     remembered), not computed from CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: that attribute is only the least
 *     alignment a pitch may have for binding a texture, not what cuMemAllocPitch picks (the emulated device rounds
 *     rows up to 512 bytes; what the real driver picks is its own), and a program that ran before the window
 *     existed must get the pitch it got then. {@code pitch * height} is then placed like a {@code cuMemAlloc}, in blocks of at
 *     least 512 bytes (the texture alignment); {@code cuMemFree} frees it.</li>
 * <li>Stream-ordered allocations from the session's pools ({@link StablePools}: every pool a session has is one
 *     it made, device-located with no IPC handle types, since {@link PoolCalls} stands one in for the device's
 *     default pool and refuses the rest): {@code cuMemAllocFromPoolAsync} (which {@link PoolCalls} also uses for
 *     {@code cuMemAllocAsync}) and {@code cuMemFreeAsync} with the pools' stream order, release thresholds,
 *     trimming and accounting; {@code cuMemFreeAsync} of a {@code cuMemAlloc} allocation gives it back when its
 *     stream reaches the free. {@code cuStreamSynchronize}, {@code cuCtxSynchronize(_v2)} and
 *     {@code cuEventSynchronize} are the pools' synchronisation points (the backend's own, for staged copies,
 *     count too).</li>
 * </ul>
 * Every allocation in a window is in {@link #live()} with its kind, for a checkpoint. Where an allocation goes is
 * chosen apart from making it, so that a restore can name the place: {@link #placeLarge} maps granules at the
 * address it is given, {@link #slabAt} a slab's granule, and {@link #inBlock} names a block of a slab.
 *
 * <p>With the guest's managed range ({@link #confine}, issue 25: the HELLO's, set before the session's first call) a
 * new window lies in the range instead, device d's at d window sizes into it, so that the session's managed memory,
 * like the rest of its memory, is where the guest reserved address space for it. A place there that another session of
 * this process holds or the process itself maps is not waited for: the window goes to its slot (address-stable memory)
 * or is refused ({@link ManagedPlacement}'s managed-only windows), {@link #placeFailure} naming the range.
 *
 * <p>A restore ({@link SessionRestore}) reserves each window at the checkpointed base ({@link #windowAt}, whatever
 * the windows' base of this backend: an image written with another base restores at its own addresses; a window
 * the driver puts elsewhere fails, the message naming what this process itself maps there, {@link ProcessMappings})
 * and places each replayed allocation, plain, pitched or from a pool, at its recorded address ({@link #placeNext},
 * then {@link #placedAt} through the same hooks: its granules, or its block in a slab of its size class, must be free;
 * else the allocation fails and {@link #placeFailure} says why). A window held by another session of this process (on
 * the same driver; the windows the sessions hold are known process-wide) is waited for first: sessions migrated into one backend one after another
 * keep their ids, so the next one needs the window of the one before, which may still be ending (its release waits
 * for its lanes to leave the driver). The wait ends when that session's {@link #close} releases it, or after
 * {@value #WAIT_PROPERTY} seconds (default {@value #WAIT_SECONDS_DEFAULT}; 0: no wait), when the restore is refused
 * naming the session and whether it is still running or ending.
 *
 * <p>A captured {@code cuMemFreeAsync} of memory in the window (the driver cannot put a free of an address it
 * never handed out into a graph) succeeds, adds no node to the graph and frees nothing: the memory, no longer the
 * program's, stays mapped until the session ends (its charge stays too, as {@link PoolCalls} keeps a captured
 * free's).
 *
 * <p>The program's own VMM calls: {@code cuMemAddressReserve} is placed inside the window of the current context's
 * device ({@link #reserveInWindow}): a range of the size asked, aligned as asked (at least a granule), at the
 * address asked for when that lies in the window, is aligned and is free (the driver too treats {@code addr} as a
 * hint), else at the lowest free one; the driver sees no call, the window's own reservation already holds the range,
 * and the program's {@code cuMemMap}s go into it. {@code cuMemAddressFree} of such a range gives it back to the window
 * ({@link #cuMemAddressFree}). A reservation larger than what is free in the window (the window is the device's
 * memory rounded up to a power of two) fails with CUDA_ERROR_OUT_OF_MEMORY. {@link CheckpointVmm} saves and restores
 * what the program mapped there.
 *
 * <p>Graph memory nodes added with {@code cuGraphAddMemAllocNode}: {@link StableGraphMemory} places their memory here
 * ({@link #allocateGraphMemory}, kind {@link Kind#GRAPH}) when the node is added, and gives it back with the graph.
 *
 * <p>Hand-over on one host (issue 23): where the device has POSIX descriptor handles, every physical allocation of the
 * windows is made exportable ({@link #prop}) and known with its address ({@link #physical}), so that {@code HandOver}
 * can export them all to another backend process on the same GPU, whose restore maps them at the same addresses
 * instead of making and filling new memory ({@link #adopt}). A migration's target adopts the same way the memory it
 * landed as the pre-copy sent it ({@link MigrationLanding}).
 *
 * <p>Not yet here (they keep the driver's own addresses): allocations on a stream that is capturing (graph
 * memory of a capture); a pool's memory in the window is mapped for the pool's device only
 * ({@code cuMemPoolSetAccess} for other devices reaches the driver's pool alone). A session whose window cannot
 * be reserved at its address gets the one the driver picks (logged). The tenant's charge stays the size asked
 * (a size class's rounding, a granule's unused rest and a pool's cached memory are not charged, as today).
 */
final class StableAddresses extends DelegatingCudaDriver {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** The system property that turns it on where neither the tenant nor {@code --stable-addresses} does. */
    static final String PROPERTY = "gpusockets.backend.stableAddresses";
    /** Room for windows above their base ({@link StableWindows#base()}). */
    static final long WINDOWS_SPAN = StableWindows.SPAN;
    static final long SMALLEST = 256;
    /** The least block of a pitched allocation: CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT of current GPUs, so it can back a texture. */
    private static final long PITCHED_SMALLEST = 512;
    private static final int CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11;
    private static final int CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12;
    /** CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED. */
    static final int ATTRIBUTE_POSIX_FD_HANDLES = 103;
    /** Pitches remembered, by device, width and element size (bounded: a program may ask for any width). */
    private static final int PITCHES_KEPT = 256;

    /** What made an allocation. */
    enum Kind { PLAIN, PITCHED, POOL, GRAPH }

    /**
     * A live allocation in a window, as a checkpoint enumerates it: {@code size} as asked ({@code pitch * height}
     * for a pitched one), the real context it was made in, and for a pool allocation its pool (real handle) and
     * the stream it was allocated on (0 otherwise).
     */
    record Live(long base, long size, int device, long context, Kind kind, long pool, long stream) {
    }

    /**
     * A live allocation: {@code size} as asked, inside block {@code block} of {@code slab} or in granules of its
     * own ({@code length} bytes of {@code handle}); {@code pool} and {@code stream} for a pool allocation.
     */
    record Allocation(long base, long size, long context, AddressWindow window, AddressWindow.Slab slab, int block,
                      long length, long handle, Kind kind, StablePools.Pool pool, long stream) {
        Allocation as(Kind k, long newSize, StablePools.Pool p, long s) {
            return new Allocation(base, newSize, context, window, slab, block, length, handle, k, p, s);
        }
    }

    private record PitchKey(int device, long width, int elementSize) {
    }

    /** The property: seconds a restore waits for a session of this process to release the window it needs. */
    static final String WAIT_PROPERTY = "gpusockets.backend.windowWaitSeconds";
    static final long WAIT_SECONDS_DEFAULT = 10;
    /**
     * The windows the sessions of this process hold, by driver (identity: each driver is an address space of its own,
     * as two emulated devices in one JVM are); guarded by itself, which is also what {@link #awaitRelease} waits on.
     */
    private static final Map<CudaDriver, List<Held>> HELD = new java.util.IdentityHashMap<>();
    /** Restores waiting in {@link #awaitRelease}; guarded by {@link #HELD}. */
    private static int waiting;

    /** A window of {@code owner}'s, reserved at {@code base}. */
    private record Held(int device, long base, long size, StableAddresses owner) {
    }

    private final long sessionId;
    /** Set when the session starts ending ({@link #ending}). */
    private volatile boolean ending;
    /** A restore's window was taken by something not a session of this process ({@link #windowTakenInProcess}). */
    private boolean takenInProcess;
    /** One window per device, made at its first allocation. */
    private final Map<Integer, AddressWindow> windows = new HashMap<>();
    /** Every live allocation, by base. */
    private final TreeMap<Long, Allocation> allocations = new TreeMap<>();
    private final StablePools pools = new StablePools(this);
    /** A restore: where the next allocation must lie (0: anywhere), and why the last placement failed. */
    private long placeAt;
    private String placeFailure;
    /** The guest's managed range the windows lie in ({@link #confine}); size 0: none. */
    private long confinedBase, confinedSize;
    private boolean onlyInRange;
    /** A restore: the window bases the checkpointed session had, by device. */
    private final Map<Integer, Long> windowAt = new HashMap<>();
    /** Reservations the program made itself inside a window ({@link #reserveInWindow}), by base: their window and size. */
    private final Map<Long, ProgramReservation> programReservations = new HashMap<>();

    private record ProgramReservation(AddressWindow window, long size) {
    }

    /** Allocations a captured cuMemFreeAsync freed: no longer the program's, released only at the session's end. */
    private final List<Allocation> keptUntilEnd = new ArrayList<>();
    /** Every physical allocation mapped in the windows, by address ({@link #back}, {@link #unback}). */
    private final TreeMap<Long, PhysicalMemory> backed = new TreeMap<>();
    /** Whether each device's allocations are made exportable ({@link #prop}). */
    private final Map<Integer, Boolean> exportableDevices = new HashMap<>();
    /** A hand-over's restore: imported handles (and their sizes) by address, not yet mapped ({@link #adopt}); else null. */
    private Map<Long, Long> adopted, adoptedSizes;
    /** A hand-over's restore: the program's own allocations, {imported handle or 0, size}, in cuMemCreate order; else null. */
    private java.util.ArrayDeque<long[]> adoptedProgram;
    private final Map<PitchKey, Long> pitches = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<PitchKey, Long> eldest) {
            return size() > PITCHES_KEPT;
        }
    };

    StableAddresses(CudaDriver real, long sessionId) {
        super(real);
        this.sessionId = sessionId;
    }

    CudaDriver real() {
        return delegate;
    }

    @Override
    public synchronized int cuMemAlloc(MemorySegment dptr, long bytesize) {
        long at = takePlace();
        if (bytesize <= 0) {
            return delegate.cuMemAlloc(dptr, bytesize);
        }
        try (Arena arena = Arena.ofConfined()) {
            long[] where = current(arena);
            if (where == null) {
                return delegate.cuMemAlloc(dptr, bytesize); // no context: the driver's answer
            }
            return placePlain(arena, dptr, at, bytesize, (int) where[0], where[1], SMALLEST, Kind.PLAIN);
        }
    }

    /**
     * The driver's pitch for the width and element size (see the class comment); the driver validates them.
     * {@code pitch * height} then goes where a {@code cuMemAlloc} of that size would.
     */
    @Override
    public synchronized int cuMemAllocPitch(MemorySegment dptr, MemorySegment pPitch, long widthInBytes, long height,
                                            int elementSizeBytes) {
        long at = takePlace();
        if (height <= 0 || widthInBytes <= 0) {
            return delegate.cuMemAllocPitch(dptr, pPitch, widthInBytes, height, elementSizeBytes);
        }
        try (Arena arena = Arena.ofConfined()) {
            long[] where = current(arena);
            if (where == null) {
                return delegate.cuMemAllocPitch(dptr, pPitch, widthInBytes, height, elementSizeBytes);
            }
            PitchKey key = new PitchKey((int) where[0], widthInBytes, elementSizeBytes);
            Long pitch = pitches.get(key);
            if (pitch == null) {
                MemorySegment probe = arena.allocate(8), probePitch = arena.allocate(8);
                int r = delegate.cuMemAllocPitch(probe, probePitch, widthInBytes, 1, elementSizeBytes);
                if (r != CuResult.CUDA_SUCCESS) {
                    return r;
                }
                delegate.cuMemFree(probe.get(JAVA_LONG, 0));
                pitch = probePitch.get(JAVA_LONG, 0);
                pitches.put(key, pitch);
            }
            if (Math.multiplyHigh(pitch, height) != 0 || pitch * height < 0) {
                return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
            }
            int r = placePlain(arena, dptr, at, pitch * height, (int) where[0], where[1], PITCHED_SMALLEST, Kind.PITCHED);
            if (r == CuResult.CUDA_SUCCESS) {
                pPitch.set(JAVA_LONG, 0, pitch);
            }
            return r;
        }
    }

    /** {device, context} of the calling thread's current context; null when there is none. */
    private long[] current(Arena arena) {
        MemorySegment out = arena.allocate(8);
        if (delegate.cuCtxGetDevice(out) != CuResult.CUDA_SUCCESS) {
            return null;
        }
        int device = out.get(JAVA_INT, 0);
        if (delegate.cuCtxGetCurrent(out) != CuResult.CUDA_SUCCESS || out.get(JAVA_LONG, 0) == 0) {
            return null;
        }
        return new long[] {device, out.get(JAVA_LONG, 0)};
    }

    /**
     * A plain or pitched allocation of {@code bytesize} in the device's window, written to {@code dptr}: at {@code at}
     * (a restore), or where there is room when 0.
     */
    private int placePlain(Arena arena, MemorySegment dptr, long at, long bytesize, int device, long context, long smallest,
                           Kind kind) {
        AddressWindow w = window(arena, device);
        if (w == null) {
            return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
        }
        Allocation a;
        if (at != 0) {
            a = placedAt(arena, w, w.slabs, at, bytesize, context, smallest);
        } else if (bytesize >= w.granule / 4) {
            long length = granules(w, bytesize);
            long free = w.take(length);
            a = free == 0 ? null : placeLarge(arena, w, free, length, bytesize, context);
        } else {
            long block = sizeClass(bytesize, smallest);
            List<AddressWindow.Slab> list = AddressWindow.slabsOf(w.slabs, context, block);
            a = placeSmall(arena, w, list, block, bytesize, context);
        }
        if (a == null) {
            return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
        }
        a = a.as(kind, bytesize, null, 0);
        allocations.put(a.base(), a);
        dptr.set(JAVA_LONG, 0, a.base());
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * A graph memory node's allocation ({@link StableGraphMemory}): {@code bytesize} placed like a {@code cuMemAlloc}
     * in the window of the current context's device, which must be {@code device} (CUDA_ERROR_NOT_SUPPORTED
     * otherwise; no context: CUDA_ERROR_INVALID_CONTEXT), at a restore's {@link #placeNext} address when one is
     * set. Freed only by {@link #releaseGraphMemory}; a context's destruction leaves it.
     */
    synchronized int allocateGraphMemory(MemorySegment dptr, long bytesize, int device) {
        long at = takePlace();
        try (Arena arena = Arena.ofConfined()) {
            long[] where = current(arena);
            if (where == null) {
                return CuResult.CUDA_ERROR_INVALID_CONTEXT;
            }
            if (where[0] != device) {
                placeFailure = "graph memory for device " + device + " from a context of device " + where[0];
                return CuResult.CUDA_ERROR_NOT_SUPPORTED;
            }
            return placePlain(arena, dptr, at, bytesize, device, where[1], SMALLEST, Kind.GRAPH);
        }
    }

    /** Gives back the graph memory at {@code base} ({@link #allocateGraphMemory}); false when there is none. */
    synchronized boolean releaseGraphMemory(long base) {
        Allocation a = allocations.get(base);
        if (a == null || a.kind() != Kind.GRAPH) {
            return false;
        }
        allocations.remove(base);
        release(a);
        return true;
    }

    static long granules(AddressWindow w, long bytes) {
        return (bytes + w.granule - 1) / w.granule * w.granule;
    }

    static long sizeClass(long bytes, long smallest) {
        return Math.max(smallest, Long.highestOneBit(bytes - 1) << 1);
    }

    /** The device's window, reserved at its first use; null when it cannot be. */
    AddressWindow window(Arena arena, int device) {
        AddressWindow w = windows.get(device);
        if (w == null) {
            w = openWindow(arena, device);
            if (w != null) {
                windows.put(device, w);
            }
        }
        return w;
    }

    /** The device's window, or null before its first allocation. */
    AddressWindow existingWindow(int device) {
        return windows.get(device);
    }

    /**
     * Which of the {@code slots} windows of a device's size ({@code WINDOWS_SPAN / size}, size the device's memory
     * rounded up to a power of two) the session {@code sessionId} ({@link SessionIds}) takes on {@code device} of a
     * backend with {@code devices} devices:
     * <pre>
     *   (counter * 7919 + fleet * devices + device) mod slots
     * </pre>
     * With fleet id 0 that is {@code (sessionId * 7919 + device) mod slots}, as before fleet ids. A backend's
     * devices take neighbouring slots, and each fleet id the block of {@code devices} slots above the previous one's,
     * so the sessions of one counter on backends of a fleet with the same device count never share a window while
     * {@code (largest fleet id + 1) * devices <= slots}; consecutive counters move 7919 slots on (a prime, so a
     * backend's sessions visit every slot before one repeats when slots is not a multiple of it). How many windows
     * there are: {@code WINDOWS_SPAN} (1020 GiB) over the device's memory rounded up to a power of two: 127 on the
     * emulated device's 8 GiB, 31 on a 24 GiB card, 7 on an 80 GiB H100, 3 on a 141 GiB H200. Sessions of
     * different counters may share a slot; that only matters in one process: a new session whose window is taken
     * gets one where the driver puts it (logged), and a restore whose recorded window is taken is refused, naming
     * the device and the address.
     */
    static long windowSlot(long sessionId, int device, int devices, long slots) {
        return Math.floorMod(SessionIds.counter(sessionId) * 7919 + (long) SessionIds.fleet(sessionId) * devices + device,
                slots);
    }

    /** Reserves the device's window at this session's address (or where the driver puts it); null when it cannot. */
    private AddressWindow openWindow(Arena arena, int device) {
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
        long want;
        if (pinned == null && confinedSize != 0 && (long) device * size <= confinedSize - size) {
            // the guest's managed range (ManagedRange): window d at d sizes in
            AddressWindow w = openInRange(out, device, confinedBase + device * size, size, granule);
            if (w != null || onlyInRange) {
                return w; // null: placeFailure says why
            }
            LOG.log(System.Logger.Level.INFO, "session " + sessionId + ": " + placeFailure + "; the window goes to its slot"
                    + " instead (managed memory in it is mapped where the guest has nothing)");
            placeFailure = null;
        } else if (pinned == null && confinedSize != 0 && onlyInRange) {
            placeFailure = String.format("device %d's window (0x%x bytes, the device's memory to a power of two) does not"
                    + " fit in the guest's managed range 0x%x+0x%x (GPUSOCKETS_MANAGED_RANGE)", device, size, confinedBase,
                    confinedSize);
            return null;
        }
        if (pinned != null) {
            want = pinned;
        } else {
            if (delegate.cuDeviceGetCount(out) != CuResult.CUDA_SUCCESS) {
                return null;
            }
            long windowsBase;
            try {
                windowsBase = StableWindows.base(); // checked when the backend starts (BackendSettings)
            } catch (IllegalArgumentException e) {
                placeFailure = e.getMessage();
                return null;
            }
            want = windowsBase + windowSlot(sessionId, device, out.get(JAVA_INT, 0), slots) * size;
        }
        if (pinned != null) {
            String holder = awaitRelease(device, want, size);
            if (holder != null) {
                placeFailure = "the address window of device " + device + " is taken at 0x" + Long.toHexString(want)
                        + " by " + holder;
                return null;
            }
        }
        if (delegate.cuMemAddressReserve(out, size, granule, want, 0) != CuResult.CUDA_SUCCESS) {
            placeFailure = "the address window of device " + device + " could not be reserved at 0x" + Long.toHexString(want);
            return null;
        }
        long base = out.get(JAVA_LONG, 0);
        if (pinned != null && base != want) {
            delegate.cuMemAddressFree(base, size);
            takenInProcess = true;
            placeFailure = "the address window of device " + device + " is taken at 0x" + Long.toHexString(want)
                    + " (the driver offered 0x" + Long.toHexString(base) + ")" + ProcessMappings.within(want, size);
            return null;
        }
        if (base != want) {
            LOG.log(System.Logger.Level.WARNING, "session " + sessionId + ": the address window for device " + device
                    + " is at 0x" + Long.toHexString(base) + ", not at 0x" + Long.toHexString(want) + " (taken)");
        }
        return held(device, base, size, granule);
    }

    /** The window reserved at {@code [base, base + size)} on {@code device}, known process-wide from now on. */
    private AddressWindow held(int device, long base, long size, long granule) {
        synchronized (HELD) {
            HELD.computeIfAbsent(delegate, d -> new ArrayList<>()).add(new Held(device, base, size, this));
        }
        return new AddressWindow(device, base, size, granule);
    }

    /**
     * A new window at {@code want} in the guest's managed range ({@link #confine}): reserved there, or null with
     * {@link #placeFailure} naming the range and what holds the place: another session of this process (its window;
     * no wait, a new session's place is not worth waiting for) or a mapping of the process itself
     * ({@link ProcessMappings}; logged as a warning when the range is all managed memory may use).
     */
    private AddressWindow openInRange(MemorySegment out, int device, long want, long size, long granule) {
        String holder = null;
        synchronized (HELD) {
            for (Held x : HELD.getOrDefault(delegate, List.of())) {
                if (x.owner() != this && x.base() < want + size && want < x.base() + x.size()) {
                    holder = String.format("the window 0x%x+0x%x of session %d", x.base(), x.size(), x.owner().sessionId);
                    break;
                }
            }
        }
        if (holder == null && delegate.cuMemAddressReserve(out, size, granule, want, 0) == CuResult.CUDA_SUCCESS) {
            long base = out.get(JAVA_LONG, 0);
            if (base == want) {
                return held(device, base, size, granule);
            }
            delegate.cuMemAddressFree(base, size);
            holder = String.format("(the driver offered 0x%x)%s", base, ProcessMappings.within(want, size));
        } else if (holder == null) {
            holder = "(the driver reserved nothing there)";
        }
        placeFailure = String.format("the guest's managed range 0x%x+0x%x is taken in the backend process: device %d's"
                + " window at 0x%x could not be reserved there: %s", confinedBase, confinedSize, device, want, holder);
        if (onlyInRange) {
            LOG.log(System.Logger.Level.WARNING, "session " + sessionId + ": " + placeFailure);
        }
        return null;
    }

    /**
     * A restore's wait for the sessions of this process (on the same driver) whose windows overlap
     * {@code [want, want + size)} on {@code device} to release them ({@link #close}): at most {@link #windowWait}.
     * Returns null once none holds any of it, else which session still does (and whether it is ending).
     */
    private String awaitRelease(int device, long want, long size) {
        long deadline = System.nanoTime() + windowWait().toNanos();
        synchronized (HELD) {
            while (true) {
                Held h = null;
                for (Held x : HELD.getOrDefault(delegate, List.of())) {
                    if (x.owner() != this && x.device() == device && x.base() < want + size && want < x.base() + x.size()) {
                        h = x;
                        break;
                    }
                }
                if (h == null) {
                    return null;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return "session " + h.owner().sessionId + " of this backend, " + (h.owner().ending
                            ? "still ending after " : "still running after ") + windowWait().toMillis() + " ms (its window"
                            + String.format(" 0x%x+0x%x", h.base(), h.size()) + "; " + WAIT_PROPERTY + " sets the wait)";
                }
                waiting++;
                try {
                    HELD.wait(Math.max(1, left / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return "session " + h.owner().sessionId + " of this backend (interrupted while waiting for its end)";
                } finally {
                    waiting--;
                }
            }
        }
    }

    /** How long a restore waits for a session of this process to release the window it needs ({@value #WAIT_PROPERTY}). */
    static java.time.Duration windowWait() {
        return java.time.Duration.ofSeconds(Math.max(0, Long.getLong(WAIT_PROPERTY, WAIT_SECONDS_DEFAULT)));
    }

    /**
     * Whether a restore's window was refused because the driver put it elsewhere while no session of this process held
     * it: the process's own memory or the driver's own allocations are there, which another process (a fresh worker,
     * its address space laid out at random anew) may not have.
     */
    synchronized boolean windowTakenInProcess() {
        return takenInProcess;
    }

    /** Restores waiting in {@link #awaitRelease} now (tests). */
    static int waitingForWindows() {
        synchronized (HELD) {
            return waiting;
        }
    }

    /**
     * Marks the session as ending (its {@link #close} follows once its lanes are out of the driver): a restore waiting for
     * this session's windows says so if the wait runs out.
     */
    void ending() {
        ending = true;
    }

    /**
     * Granules of its own at {@code at} (taken from the window by the caller), mapped and made accessible; null
     * when they cannot be had (the range then goes back to the window).
     */
    Allocation placeLarge(Arena arena, AddressWindow w, long at, long length, long bytesize, long context) {
        long handle = back(arena, w, at, length);
        if (handle == 0) {
            w.give(at, length);
            return null;
        }
        return new Allocation(at, bytesize, context, w, null, -1, length, handle, Kind.PLAIN, null, 0);
    }

    /** A free block of {@code block} bytes in one of {@code list}'s slabs, or in a new one; null when no granule can be had. */
    Allocation placeSmall(Arena arena, AddressWindow w, List<AddressWindow.Slab> list, long block, long bytesize, long context) {
        for (AddressWindow.Slab s : list) {
            int i = s.takeBlock();
            if (i >= 0) {
                return inBlock(w, s, i, bytesize, context);
            }
        }
        AddressWindow.Slab s = newSlab(arena, w, block, context);
        if (s == null) {
            return null;
        }
        list.add(s);
        return inBlock(w, s, s.takeBlock(), bytesize, context);
    }

    /** Block {@code i} of {@code s} (already marked used) as an allocation: the place a restore names. */
    static Allocation inBlock(AddressWindow w, AddressWindow.Slab s, int i, long bytesize, long context) {
        return new Allocation(s.base + i * s.blockSize, bytesize, context, w, s, i, s.blockSize, 0, Kind.PLAIN, null, 0);
    }

    /**
     * A restore: the allocation at exactly {@code at}, granules of its own (from a quarter granule up) or block
     * {@code at} of a slab of its size class in {@code slabs} (the window's, or a pool's), whose range or block must
     * be free; null, with {@link #placeFailure} saying why, when it is not.
     */
    Allocation placedAt(Arena arena, AddressWindow w, Map<AddressWindow.SlabKey, List<AddressWindow.Slab>> slabs, long at,
                        long bytesize, long context, long smallest) {
        if (at < w.base || at >= w.base + w.size) {
            placeFailure = String.format("0x%x is outside the address window at 0x%x", at, w.base);
            return null;
        }
        if (bytesize >= w.granule / 4) {
            long length = granules(w, bytesize);
            if ((at - w.base) % w.granule != 0 || !w.takeAt(at, length)) {
                placeFailure = String.format("0x%x+%d is not a free granule range of the window", at, bytesize);
                return null;
            }
            Allocation a = placeLarge(arena, w, at, length, bytesize, context);
            if (a == null) {
                placeFailure = String.format("0x%x+%d could not be mapped", at, bytesize);
            }
            return a;
        }
        long block = sizeClass(bytesize, smallest);
        long granule = at - Math.floorMod(at - w.base, w.granule);
        if ((at - granule) % block != 0) {
            placeFailure = String.format("0x%x is not a %d-byte block of the window", at, block);
            return null;
        }
        List<AddressWindow.Slab> list = AddressWindow.slabsOf(slabs, context, block);
        AddressWindow.Slab s = list.stream().filter(x -> x.base == granule).findFirst().orElse(null);
        if (s == null) {
            if (!w.takeAt(granule, w.granule)) {
                placeFailure = String.format("the granule at 0x%x is taken (by another size class, pool or allocation)", granule);
                return null;
            }
            s = slabAt(arena, w, granule, block, context);
            if (s == null) {
                placeFailure = String.format("the granule at 0x%x could not be mapped", granule);
                return null;
            }
            list.add(s);
        }
        int i = (int) ((at - granule) / block);
        if (!s.takeBlock(i)) {
            placeFailure = String.format("the block at 0x%x is taken", at);
            return null;
        }
        return inBlock(w, s, i, bytesize, context);
    }

    /** The place the next allocation must have (a restore's {@link #placeNext}), 0 for anywhere; cleared. */
    private long takePlace() {
        long at = placeAt;
        placeAt = 0;
        return at;
    }

    /** A restore: the next allocation (cuMemAlloc, cuMemAllocPitch, or from a pool) must be placed at {@code base}. */
    synchronized void placeNext(long base) {
        placeAt = base;
        placeFailure = null;
    }

    /** Why the last placement ({@link #placeNext}) failed, or null. */
    synchronized String placeFailure() {
        return placeFailure;
    }

    /**
     * The guest's managed range ({@link io.gpusockets.protocol.api.ManagedRange}): windows opened from now on lie in
     * {@code [base, base + size)}, device d's window at {@code base + d * windowSize}, unless a restore pins it
     * ({@link #windowAt}); a window whose place there is taken in this process is refused (null from {@link #window},
     * {@link #placeFailure} naming the range and what the process maps there). A device whose window does not fit in the
     * range is refused too when {@code onlyInRange} (managed memory without address-stable windows), else its window
     * goes where it would without a range. Windows already open stay where they are.
     */
    synchronized void confine(long base, long size, boolean onlyInRange) {
        this.confinedBase = base;
        this.confinedSize = size;
        this.onlyInRange = onlyInRange;
    }

    /** Whether {@code p} lies in a live allocation of the windows. */
    synchronized boolean covers(long p) {
        return holding(p) != null;
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

    /** Where the live allocation at {@code base} was made: its context (real value), or 0. */
    synchronized long contextOf(long base) {
        Allocation a = allocations.get(base);
        return a == null ? 0 : a.context();
    }

    /** Whether a live allocation of this session's windows starts at {@code base}. */
    synchronized boolean holds(long base) {
        return allocations.containsKey(base);
    }

    /**
     * The device memory the live allocation at {@code base} holds on its own: its granules ({@code length}) when it has
     * granules of its own, 0 for a block of a shared slab or an address not allocated here (a managed allocation's
     * charge covers its granules: {@code ManagedCalls}).
     */
    synchronized long ownGranuleBytes(long base) {
        Allocation a = allocations.get(base);
        return a == null || a.slab() != null ? 0 : a.length();
    }

    /** A granule of blocks of {@code block} bytes taken from the window and mapped; null when none can be had. */
    AddressWindow.Slab newSlab(Arena arena, AddressWindow w, long block, long context) {
        long at = w.take(w.granule);
        return at == 0 ? null : slabAt(arena, w, at, block, context);
    }

    /**
     * A granule of blocks of {@code block} bytes at {@code at} (taken from the window by the caller), mapped; null
     * when it cannot be backed (the range then goes back to the window).
     */
    AddressWindow.Slab slabAt(Arena arena, AddressWindow w, long at, long block, long context) {
        long handle = back(arena, w, at, w.granule);
        if (handle == 0) {
            w.give(at, w.granule);
            return null;
        }
        return new AddressWindow.Slab(at, block, handle, context, (int) (w.granule / block));
    }

    /**
     * Physical memory for {@code [at, at + length)}, mapped read-write for the window's device; 0 when it fails. During
     * a hand-over's restore ({@link #adopt}) the memory is the source's, imported: the handle imported for {@code at}
     * (at least {@code length} bytes) is mapped instead of a new one made; a range with none fails (its contents would
     * be lost).
     */
    private long back(Arena arena, AddressWindow w, long at, long length) {
        long handle;
        if (adopted != null) {
            Long imported = adopted.remove(at);
            long size = imported == null ? 0 : adoptedSizes.remove(at);
            if (imported == null || size < length) {
                placeFailure = String.format("0x%x+%d was not handed over as one physical allocation%s", at, length,
                        imported == null ? "" : " (the one handed over holds " + size + " bytes)");
                if (imported != null) {
                    delegate.cuMemRelease(imported);
                }
                return 0;
            }
            handle = imported;
        } else {
            MemorySegment out = arena.allocate(8);
            int r = delegate.cuMemCreate(out, length, prop(arena, w.device), 0);
            if (refusedExportable(r, w.device)) {
                r = delegate.cuMemCreate(out, length, prop(arena, w.device), 0); // plain, now
            }
            if (r != CuResult.CUDA_SUCCESS) {
                return 0;
            }
            handle = out.get(JAVA_LONG, 0);
        }
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
        backed.put(at, new PhysicalMemory(at, length, handle, w.device));
        return handle;
    }

    /** Unmaps and releases {@code [at, at + length)} and gives the range back to {@code w}. */
    void unback(AddressWindow w, long at, long length, long handle) {
        backed.remove(at);
        delegate.cuMemUnmap(at, length);
        delegate.cuMemRelease(handle);
        w.give(at, length);
    }

    /**
     * Whether the live allocation at {@code base} has granules of its own (at least a quarter granule: not a block of
     * a slab, whose granule other allocations share): what another session may map ({@link IpcCalls}).
     */
    synchronized boolean ownGranules(long base) {
        Allocation a = allocations.get(base);
        return a != null && a.slab() == null && a.pool() == null;
    }

    /**
     * Every physical allocation backing the windows now (granules of plain, pitched and graph allocations, slabs,
     * pools' memory, cached or in use), by address: what a hand-over ({@code HandOver}) exports. Consistent only while
     * the session is drained.
     */
    synchronized List<PhysicalMemory> physical() {
        return new ArrayList<>(backed.values());
    }

    /**
     * Whether allocations on {@code device} are made exportable as POSIX descriptors: the device says it can
     * (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, asked once per device).
     */
    synchronized boolean exportable(int device) {
        Boolean exportable = exportableDevices.get(device);
        if (exportable == null) {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment v = arena.allocate(4);
                exportable = delegate.cuDeviceGetAttribute(v, ATTRIBUTE_POSIX_FD_HANDLES, device) == CuResult.CUDA_SUCCESS
                        && v.get(JAVA_INT, 0) == 1;
            }
            exportableDevices.put(device, exportable);
        }
        return exportable;
    }

    /**
     * Whether {@code r}, a cuMemCreate's answer, is a refusal of the exportable handle type on a device that said it
     * has it (CUDA_ERROR_NOT_SUPPORTED or CUDA_ERROR_INVALID_VALUE, not a lack of memory): the device's allocations are
     * made plain from then on (the caller tries again), and a hand-over of the session is refused, naming the device.
     */
    synchronized boolean refusedExportable(int r, int device) {
        if ((r != CuResult.CUDA_ERROR_NOT_SUPPORTED && r != CuResult.CUDA_ERROR_INVALID_VALUE) || !exportable(device)) {
            return false;
        }
        exportableDevices.put(device, false);
        LOG.log(System.Logger.Level.WARNING, "session " + sessionId + ": device " + device + " refused exportable memory ("
                + CuResult.name(r) + ") though it says it has it: plain memory from now on, and no hand-over");
        return true;
    }

    /**
     * A hand-over's restore: the physical allocations the source exported, imported here ({@code handles}: address to
     * the imported handle, {@code sizes}: address to its size); every window range the replay backs must be one of
     * them ({@link #back}). {@link #endAdoption} releases those the replay did not use. {@code programAllocations}
     * null (a migration's landing, {@link MigrationLanding}): the program's own allocations are made anew.
     */
    synchronized void adopt(Map<Long, Long> handles, Map<Long, Long> sizes, List<long[]> programAllocations) {
        adopted = new HashMap<>(handles);
        adoptedSizes = new HashMap<>(sizes);
        adoptedProgram = programAllocations == null ? null : new java.util.ArrayDeque<>(programAllocations);
    }

    /**
     * A hand-over's restore: what the replay of the program's next {@code cuMemCreate} of {@code size} bytes takes
     * instead of a new allocation ({@link VmmCalls#cuMemCreate}; the records make them in the order the source handed
     * them over, {@link CheckpointVmm#records}): the imported handle, 0 when the source handed none for it (its
     * contents come with the image), or -1 when no hand-over is being restored. A size that differs from the one
     * handed over throws IllegalStateException, naming both.
     */
    synchronized long takeProgramAllocation(long size) {
        if (adoptedProgram == null) {
            return -1;
        }
        long[] next = adoptedProgram.poll();
        if (next == null) {
            throw new IllegalStateException("a cuMemCreate of " + size + " bytes beyond the program allocations handed over");
        }
        if (next[1] != size) {
            if (next[0] != 0) {
                delegate.cuMemRelease(next[0]);
            }
            throw new IllegalStateException("a cuMemCreate of " + size + " bytes where the program allocation handed over"
                    + " holds " + next[1]);
        }
        return next[0];
    }

    /**
     * Ends a hand-over's restore: releases the imported handles no replayed allocation took (free memory a pool kept,
     * say); returns how many.
     */
    /**
     * Whether a hand-over's or migration's restore is adopting memory ({@link #adopt}, until {@link #endAdoption}): the
     * allocations replayed now hold the source's contents, which nothing may clear (a managed allocation's zeroing).
     */
    synchronized boolean adopting() {
        return adopted != null;
    }

    synchronized int endAdoption() {
        int unused = 0;
        if (adopted != null) {
            for (long h : adopted.values()) {
                delegate.cuMemRelease(h);
                unused++;
            }
        }
        if (adoptedProgram != null) {
            for (long[] h : adoptedProgram) {
                if (h[0] != 0) {
                    delegate.cuMemRelease(h[0]);
                    unused++;
                }
            }
        }
        adopted = null;
        adoptedSizes = null;
        adoptedProgram = null;
        return unused;
    }

    /**
     * CUmemAllocationProp: pinned device memory on {@code device}, no flags, and CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
     * in requestedHandleTypes where the device has it (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
     * asked once per device), so that a hand-over can export the memory to another backend process on the host.
     */
    private MemorySegment prop(Arena arena, int device) {
        boolean exportable = exportable(device);
        MemorySegment p = arena.allocate(32, 8).fill((byte) 0);
        p.set(JAVA_INT, 0, 1); // CU_MEM_ALLOCATION_TYPE_PINNED
        p.set(JAVA_INT, 4, exportable ? MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : MemoryProps.HANDLE_TYPE_NONE);
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
        if (a.pool() != null) {
            pools.freed(a);
            pools.reusable(a);
        } else {
            release(a);
        }
        return CuResult.CUDA_SUCCESS;
    }

    /** Gives back what a plain or pitched {@code a} held: its block, or its granules (unmapped and released). */
    void release(Allocation a) {
        AddressWindow w = a.window();
        if (a.slab() == null) {
            unback(w, a.base(), a.length(), a.handle());
            return;
        }
        AddressWindow.Slab s = a.slab();
        s.used.clear(a.block());
        if (s.used.isEmpty()) {
            unback(w, s.base, w.granule, s.handle);
            w.slabs.get(new AddressWindow.SlabKey(s.context, s.blockSize)).remove(s);
        }
    }

    // ---- the program's own reservations -------------------------------------------------------------------------

    /**
     * A reservation of the program's ({@code cuMemAddressReserve}) inside the window of {@code device}: {@code size}
     * bytes (a granule multiple) aligned to {@code alignment} (0: the granule; else a power of two, at least the
     * granule), at {@code addr} when that is in the window, aligned and free, else at the lowest free aligned range.
     * Returns its base, or 0 with {@link #placeFailure} saying why.
     */
    synchronized long reserveInWindow(int device, long size, long alignment, long addr) {
        placeFailure = null;
        try (Arena arena = Arena.ofConfined()) {
            AddressWindow w = window(arena, device);
            if (w == null) {
                placeFailure = placeFailure != null ? placeFailure : "the address window of device " + device + " cannot be had";
                return 0;
            }
            if (size <= 0 || size % w.granule != 0) {
                placeFailure = "size=" + size + " is not a positive multiple of the granularity " + w.granule;
                return 0;
            }
            if (alignment < 0 || alignment != 0 && Long.bitCount(alignment) != 1) {
                placeFailure = "alignment=" + alignment + " is not 0 or a power of two";
                return 0;
            }
            long align = Math.max(alignment, w.granule);
            long at = 0;
            if (addr != 0 && addr >= w.base && (addr - w.base) % align == 0 && addr - w.base <= w.size - size
                    && w.takeAt(addr, size)) {
                at = addr;
            }
            if (at == 0) {
                at = w.takeAligned(size, align);
            }
            if (at == 0) {
                placeFailure = String.format("no free range of %d bytes aligned to %d in the session's address window of"
                        + " device %d (0x%x, %d bytes): a reservation must lie in it", size, align, device, w.base, w.size);
                return 0;
            }
            programReservations.put(at, new ProgramReservation(w, size));
            return at;
        }
    }

    /** Whether {@code [base, base + size)} is a reservation the program made in a window. */
    synchronized boolean isProgramReservation(long base, long size) {
        ProgramReservation r = programReservations.get(base);
        return r != null && r.size() == size;
    }

    /** A reservation the program made in a window goes back to it (its mappings went first); others are the driver's. */
    @Override
    public synchronized int cuMemAddressFree(long ptr, long size) {
        ProgramReservation r = programReservations.get(ptr);
        if (r == null || r.size() != size) {
            return delegate.cuMemAddressFree(ptr, size);
        }
        programReservations.remove(ptr);
        r.window().give(ptr, size);
        return CuResult.CUDA_SUCCESS;
    }

    // ---- stream-ordered allocation (StablePools holds the pools' state) ----------------------------------------

    @Override
    public synchronized int cuMemPoolCreate(MemorySegment pool, MemorySegment poolProps) {
        int r = delegate.cuMemPoolCreate(pool, poolProps);
        if (r == CuResult.CUDA_SUCCESS) {
            pools.created(pool.get(JAVA_LONG, 0), poolProps);
        }
        return r;
    }

    @Override
    public synchronized int cuMemAllocFromPoolAsync(MemorySegment dptr, long bytesize, long pool, long hStream) {
        long at = takePlace();
        StablePools.Pool p = pools.pool(pool);
        if (p == null || bytesize <= 0 || capturing(hStream)) {
            return delegate.cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
        }
        try (Arena arena = Arena.ofConfined()) {
            long[] where = current(arena);
            if (where == null || where[0] != p.device) {
                return delegate.cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream); // the driver's answer
            }
            AddressWindow w = window(arena, p.device);
            Allocation a = w == null ? null : pools.allocate(arena, p, w, at, bytesize, where[1], hStream);
            if (a == null) {
                return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
            }
            allocations.put(a.base(), a);
            dptr.set(JAVA_LONG, 0, a.base());
            return CuResult.CUDA_SUCCESS;
        }
    }

    /**
     * Memory in the window goes back in stream order: it stays mapped until the stream reaches the free (an event
     * recorded there), then returns to its pool (a plain allocation is unmapped).
     */
    @Override
    public synchronized int cuMemFreeAsync(long dptr, long hStream) {
        Allocation a = allocations.get(dptr);
        if (a == null) {
            return delegate.cuMemFreeAsync(dptr, hStream);
        }
        if (capturing(hStream)) {
            // The driver cannot put a free of an address it never handed out into the graph: the free is taken and
            // the memory kept (mapped, and charged, as a captured free's charge already is) until the session ends.
            allocations.remove(dptr);
            keptUntilEnd.add(a);
            return CuResult.CUDA_SUCCESS;
        }
        try (Arena arena = Arena.ofConfined()) {
            long[] where = current(arena);
            int r = pools.freeAsync(arena, a, hStream, where == null ? 0 : where[1]);
            if (r == CuResult.CUDA_SUCCESS) {
                allocations.remove(dptr);
            }
            return r;
        }
    }

    /** Whether {@code hStream} is capturing (or the driver cannot say): then the driver's pools serve it. */
    private boolean capturing(long hStream) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment status = arena.allocate(4);
            return delegate.cuStreamIsCapturing(hStream, status) != CuResult.CUDA_SUCCESS || status.get(JAVA_INT, 0) != 0;
        }
    }

    @Override
    public synchronized int cuMemPoolDestroy(long pool) {
        int r = delegate.cuMemPoolDestroy(pool);
        if (r == CuResult.CUDA_SUCCESS) {
            pools.destroyed(pool);
        }
        return r;
    }

    @Override
    public synchronized int cuMemPoolTrimTo(long pool, long minBytesToKeep) {
        int r = delegate.cuMemPoolTrimTo(pool, minBytesToKeep);
        if (r == CuResult.CUDA_SUCCESS) {
            pools.trim(pool, minBytesToKeep);
        }
        return r;
    }

    @Override
    public synchronized int cuMemPoolSetAttribute(long pool, int attr, MemorySegment value) {
        int r = delegate.cuMemPoolSetAttribute(pool, attr, value);
        if (r == CuResult.CUDA_SUCCESS) {
            pools.attributeSet(pool, attr, value);
        }
        return r;
    }

    @Override
    public synchronized int cuMemPoolGetAttribute(long pool, int attr, MemorySegment value) {
        int r = delegate.cuMemPoolGetAttribute(pool, attr, value);
        if (r == CuResult.CUDA_SUCCESS) {
            pools.answer(pool, attr, value);
        }
        return r;
    }

    @Override
    public int cuStreamSynchronize(long hStream) {
        return synchronised(delegate.cuStreamSynchronize(hStream));
    }

    @Override
    public int cuCtxSynchronize() {
        return synchronised(delegate.cuCtxSynchronize());
    }

    @Override
    public int cuCtxSynchronize_v2(long ctx) {
        return synchronised(delegate.cuCtxSynchronize_v2(ctx));
    }

    @Override
    public int cuEventSynchronize(long hEvent) {
        return synchronised(delegate.cuEventSynchronize(hEvent));
    }

    /** After a synchronisation (which waited outside this object's lock): the pools' synchronisation point. */
    private int synchronised(int r) {
        synchronized (this) {
            pools.synchronisationPoint();
        }
        return r;
    }

    @Override
    public synchronized int cuCtxDestroy(long ctx) {
        int r = delegate.cuCtxDestroy(ctx);
        if (r == CuResult.CUDA_SUCCESS) {
            // the context's work is done (destroying waited for it); its plain allocations go with it, as the
            // driver's do; pool allocations outlive it, as the driver's do
            // graph memory (StableGraphMemory) belongs to its graph, which outlives contexts: it goes with the graph
            List<Allocation> gone = allocations.values().stream()
                    .filter(a -> a.context() == ctx && a.pool() == null && a.kind() != Kind.GRAPH).toList();
            for (Allocation a : gone) {
                allocations.remove(a.base());
                release(a);
            }
            pools.contextDestroyed(ctx);
        }
        return r;
    }

    // ---- what the program sees ----------------------------------------------------------------------------------

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

    // ---- the session's view and end -----------------------------------------------------------------------------

    /** Every live allocation in the windows, by base (what a checkpoint saves; freed ones not yet reached are not live). */
    synchronized List<Live> live() {
        List<Live> all = new ArrayList<>(allocations.size());
        for (Allocation a : allocations.values()) {
            all.add(new Live(a.base(), a.size(), a.window().device, a.context(), a.kind(),
                    a.pool() == null ? 0 : a.pool().real, a.stream()));
        }
        return all;
    }

    /** At the session's end, after its contexts: every mapping and the windows go. */
    synchronized void close() {
        List<Allocation> inPools = new ArrayList<>();
        List<Allocation> all = new ArrayList<>(allocations.values());
        all.addAll(keptUntilEnd);
        keptUntilEnd.clear();
        for (Allocation a : all) {
            if (a.pool() == null) {
                release(a);
            } else {
                inPools.add(a);
            }
        }
        allocations.clear();
        programReservations.clear(); // the session's cleanup freed them (the windows go below in any case)
        pools.close(inPools);
        for (AddressWindow w : windows.values()) {
            delegate.cuMemAddressFree(w.base, w.size);
        }
        windows.clear();
        synchronized (HELD) {
            List<Held> held = HELD.get(delegate);
            if (held != null) {
                held.removeIf(h -> h.owner() == this);
                if (held.isEmpty()) {
                    HELD.remove(delegate);
                }
            }
            HELD.notifyAll(); // a restore waiting for these windows tries again
        }
    }

    /** The base of the window on {@code device}, or 0 before its first allocation (tests, status). */
    synchronized long windowBase(int device) {
        AddressWindow w = windows.get(device);
        return w == null ? 0 : w.base;
    }
}
