package io.gpusockets.backend.session;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The target's landing of a migration (issue 23 item 1): device memory made while the pre-copy runs, into which the
 * migrated session's window memory is written as its chunks arrive, so that the restore at COMMIT takes it over
 * instead of making and filling new memory (the downtime no longer grows with the session's memory).
 *
 * <p>The source sends a layout ({@link #decode}) before each round: the physical allocations backing its address
 * windows ({@link StableAddresses#physical}: device, address, size). {@link #apply} makes, for each one not landed
 * yet, a physical allocation of that size on that device (cuMemCreate, pinned device memory, exportable as POSIX
 * descriptors where the device can, as a session's own is) and maps it at an
 * address of the driver's choosing (its own reservation, read-write, in the device's primary context, which the
 * landing retains while it holds memory there, or a context of its own where the driver has no primary context);
 * one gone from the layout is unmapped and released. A chunk that lies
 * wholly in a landed allocation is written there ({@link #write}, cuMemcpyHtoD through one host buffer of a chunk);
 * others are the caller's to keep. At COMMIT {@link #handOff} unmaps everything and gives the physical allocations,
 * by the address the source had them at, to the restore ({@link SessionRestore#restore} with {@code landed}:
 * {@link StableAddresses#adopt}), which maps each where the replay backs that range: its contents are already there.
 *
 * <p>Bounds (the layout is the peer's: never trusted): at most {@link #MAX_ENTRIES} entries, in ascending address
 * order without overlap, each a positive multiple of its device's allocation granularity on a device this backend
 * has, and no more on a device than its memory; a layout that breaks one is refused ({@link ProtocolException},
 * naming the entry) before anything is made or released. Landed memory is charged to no tenant until the restore
 * adopts it (the restored session's allocations are then charged as a restore's are). {@link #close} releases all
 * the landing still holds, however the migration ends.
 */
public final class MigrationLanding implements AutoCloseable {
    /** Entries of one layout at most (a layout of 8 GiB in 2 MiB granules has 4096). */
    public static final int MAX_ENTRIES = 1 << 16;
    /** Bytes of one entry on the wire: i32 device, u64 address, u64 size. */
    public static final int ENTRY_BYTES = 20;

    /** One landed physical allocation: where the source had it, and where it is mapped here. */
    private record Landed(int device, long address, long size, long handle, long mappedAt) {
    }

    private final CudaDriver driver;
    private final int deviceCount;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment scratch = arena.allocate(16, 8);
    private final MemorySegment staging;
    /** Landed allocations by the source's address. */
    private final TreeMap<Long, Landed> landed = new TreeMap<>();
    /** Primary contexts retained, by device. */
    private final Map<Integer, Long> contexts = new HashMap<>();
    private final Map<Integer, long[]> deviceFacts = new HashMap<>();
    /** Devices whose context the landing made (not a primary context). */
    private final java.util.Set<Integer> created = new java.util.HashSet<>();
    private long writtenBytes;
    private boolean handedOff;

    /** A landing on {@code driver} (the backend's real driver), staging chunks of up to {@code chunkBytes}. */
    public MigrationLanding(CudaDriver driver, int deviceCount, int chunkBytes) {
        this.driver = driver;
        this.deviceCount = deviceCount;
        this.staging = arena.allocate(chunkBytes, 4096);
    }

    /** One entry of a layout: {@code size} bytes backing the source's window of {@code device} at {@code address}. */
    public record Entry(int device, long address, long size) {
    }

    /** Encodes a layout: u32 n, n x (i32 device, u64 address, u64 size); the physical memory's order kept. */
    public static ByteBuffer encode(List<PhysicalMemory> layout) {
        ByteBuffer b = ByteBuffer.allocate(4 + ENTRY_BYTES * layout.size()).putInt(layout.size());
        for (PhysicalMemory m : layout) {
            b.putInt(m.device()).putLong(m.address()).putLong(m.size());
        }
        return b.flip();
    }

    /** Decodes a layout as {@link #encode} wrote it (the count checked against the body; the entries by {@link #apply}). */
    public static List<Entry> decode(ByteBuffer b) throws ProtocolException {
        if (b.remaining() < 4) {
            throw new ProtocolException("migration: a layout of " + b.remaining() + " bytes");
        }
        int n = b.getInt();
        if (n < 0 || n > MAX_ENTRIES || (long) n * ENTRY_BYTES != b.remaining()) {
            throw new ProtocolException("migration: a layout of " + n + " entries in " + b.remaining() + " bytes (at most "
                    + MAX_ENTRIES + ")");
        }
        List<Entry> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(new Entry(b.getInt(), b.getLong(), b.getLong()));
        }
        return out;
    }

    /**
     * Makes the landing match {@code layout}: checks it whole first (see the class; a refusal changes nothing), then
     * releases what is landed under an entry no longer there (or there with another device or size) and lands each
     * entry not landed yet. Returns the addresses newly landed (their contents are not there yet).
     */
    public List<Long> apply(List<Entry> layout) throws ProtocolException, IOException {
        check();
        validate(layout);
        Map<Long, Entry> wanted = new HashMap<>();
        for (Entry e : layout) {
            wanted.put(e.address(), e);
        }
        for (Landed l : new ArrayList<>(landed.values())) {
            Entry e = wanted.get(l.address());
            if (e == null || e.device() != l.device() || e.size() != l.size()) {
                landed.remove(l.address());
                unmap(l);
                release(l);
            }
        }
        List<Long> made = new ArrayList<>();
        for (Entry e : layout) {
            if (!landed.containsKey(e.address())) {
                landed.put(e.address(), land(e));
                made.add(e.address());
            }
        }
        return made;
    }

    private void validate(List<Entry> layout) throws ProtocolException, IOException {
        if (layout.size() > MAX_ENTRIES) {
            throw new ProtocolException("migration: a layout of " + layout.size() + " entries (at most " + MAX_ENTRIES + ")");
        }
        Map<Integer, Long> perDevice = new HashMap<>();
        long end = Long.MIN_VALUE;
        for (int i = 0; i < layout.size(); i++) {
            Entry e = layout.get(i);
            if (e.device() < 0 || e.device() >= deviceCount) {
                throw new ProtocolException("migration: layout entry " + i + " is on device " + e.device() + " (this backend"
                        + " has " + deviceCount + ")");
            }
            long[] facts = facts(e.device());
            if (e.size() <= 0 || e.size() % facts[0] != 0 || e.address() % facts[0] != 0
                    || e.address() + e.size() < e.address()) {
                throw new ProtocolException(String.format("migration: layout entry %d (0x%x, %d bytes) is not a positive"
                        + " range in whole granules of %d bytes", i, e.address(), e.size(), facts[0]));
            }
            if (i > 0 && Long.compareUnsigned(e.address(), end) < 0) {
                throw new ProtocolException(String.format("migration: layout entry %d (0x%x) overlaps or precedes the one"
                        + " before it (which ends at 0x%x)", i, e.address(), end));
            }
            end = e.address() + e.size();
            long total = perDevice.merge(e.device(), e.size(), Long::sum);
            if (total > facts[1]) {
                throw new ProtocolException("migration: the layout holds " + total + " bytes on device " + e.device()
                        + ", which has " + facts[1]);
            }
        }
    }

    /** The device's allocation granularity and memory. */
    private long[] facts(int device) throws IOException {
        long[] f = deviceFacts.get(device);
        if (f == null) {
            MemorySegment prop = prop(device);
            if (driver.cuMemGetAllocationGranularity(scratch, prop, 0) != CuResult.CUDA_SUCCESS) {
                throw new IOException("migration: the allocation granularity of device " + device + " is not known");
            }
            long granule = scratch.get(JAVA_LONG, 0);
            if (driver.cuDeviceTotalMem(scratch, device) != CuResult.CUDA_SUCCESS) {
                throw new IOException("migration: the memory of device " + device + " is not known");
            }
            f = new long[] {Math.max(granule, 1), scratch.get(JAVA_LONG, 0)};
            deviceFacts.put(device, f);
        }
        return f;
    }

    /**
     * Devices whose memory is made exportable as POSIX descriptors, as {@link StableAddresses} makes a session's (so
     * that the restored session's memory can be exported again: an IPC export a group migration makes again, a later
     * hand-over); asked once per device, false once such a cuMemCreate is refused.
     */
    private final Map<Integer, Boolean> exportable = new HashMap<>();

    private boolean exportable(int device) {
        return exportable.computeIfAbsent(device, d -> {
            MemorySegment v = arena.allocate(4);
            return driver.cuDeviceGetAttribute(v, StableAddresses.ATTRIBUTE_POSIX_FD_HANDLES, d) == CuResult.CUDA_SUCCESS
                    && v.get(JAVA_INT, 0) == 1;
        });
    }

    private MemorySegment prop(int device) {
        MemorySegment p = arena.allocate(32, 8).fill((byte) 0);
        p.set(JAVA_INT, 0, 1); // CU_MEM_ALLOCATION_TYPE_PINNED
        if (exportable(device)) {
            p.set(JAVA_INT, 4, io.gpusockets.protocol.structs.MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        }
        p.set(JAVA_INT, 8, 1); // location: CU_MEM_LOCATION_TYPE_DEVICE
        p.set(JAVA_INT, 12, device);
        return p;
    }

    /** Makes and maps one entry's memory. */
    private Landed land(Entry e) throws IOException {
        long ctx = context(e.device());
        push(ctx);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(8);
            int r = driver.cuMemCreate(out, e.size(), prop(e.device()), 0);
            if ((r == CuResult.CUDA_ERROR_NOT_SUPPORTED || r == CuResult.CUDA_ERROR_INVALID_VALUE)
                    && exportable(e.device())) {
                exportable.put(e.device(), false); // the device said it could: plain memory from now on
                r = driver.cuMemCreate(out, e.size(), prop(e.device()), 0);
            }
            if (r != CuResult.CUDA_SUCCESS) {
                throw new IOException(String.format("migration: landing 0x%x (%d bytes) on device %d: cuMemCreate: %s",
                        e.address(), e.size(), e.device(), CuResult.name(r)));
            }
            long handle = out.get(JAVA_LONG, 0);
            r = driver.cuMemAddressReserve(out, e.size(), 0, 0, 0);
            if (r != CuResult.CUDA_SUCCESS) {
                driver.cuMemRelease(handle);
                throw new IOException("migration: no address range of " + e.size() + " bytes to land in: " + CuResult.name(r));
            }
            long va = out.get(JAVA_LONG, 0);
            r = driver.cuMemMap(va, e.size(), 0, handle, 0);
            if (r == CuResult.CUDA_SUCCESS) {
                MemorySegment access = a.allocate(12, 4);
                access.set(JAVA_INT, 0, 1); // CU_MEM_LOCATION_TYPE_DEVICE
                access.set(JAVA_INT, 4, e.device());
                access.set(JAVA_INT, 8, 3); // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                r = driver.cuMemSetAccess(va, e.size(), access, 1);
                if (r != CuResult.CUDA_SUCCESS) {
                    driver.cuMemUnmap(va, e.size());
                }
            }
            if (r != CuResult.CUDA_SUCCESS) {
                driver.cuMemAddressFree(va, e.size());
                driver.cuMemRelease(handle);
                throw new IOException(String.format("migration: mapping the landing of 0x%x (%d bytes): %s", e.address(),
                        e.size(), CuResult.name(r)));
            }
            return new Landed(e.device(), e.address(), e.size(), handle, va);
        } finally {
            pop();
        }
    }

    /** The landed allocation holding all of {@code [address, address + length)}, or null. */
    private Landed holding(long address, long length) {
        Map.Entry<Long, Landed> e = landed.floorEntry(address);
        if (e == null) {
            return null;
        }
        Landed l = e.getValue();
        return address - l.address() + length <= l.size() ? l : null;
    }

    /** Whether {@code [address, address + length)} lies wholly in one landed allocation. */
    public boolean holds(long address, long length) {
        return !handedOff && holding(address, length) != null;
    }

    /**
     * Writes {@code bytes} (at most a chunk) at the source's {@code address} into the landing; false (nothing written)
     * when they do not lie wholly in one landed allocation.
     */
    public boolean write(long address, MemorySegment bytes) throws IOException {
        check();
        Landed l = holding(address, bytes.byteSize());
        if (l == null) {
            return false;
        }
        MemorySegment.copy(bytes, 0, staging, 0, bytes.byteSize());
        push(contexts.get(l.device()));
        try {
            int r = driver.cuMemcpyHtoD(l.mappedAt() + (address - l.address()), staging, bytes.byteSize());
            if (r != CuResult.CUDA_SUCCESS) {
                throw new IOException(String.format("migration: writing %d bytes at 0x%x into the landing: %s",
                        bytes.byteSize(), address, CuResult.name(r)));
            }
        } finally {
            pop();
        }
        writtenBytes += bytes.byteSize();
        return true;
    }

    /** Reads {@code length} bytes at the source's {@code address} from the landing into {@code to} (they must be {@link #holds held}). */
    public void read(long address, MemorySegment to, long length) throws IOException {
        check();
        Landed l = holding(address, length);
        if (l == null) {
            throw new IOException(String.format("migration: 0x%x+%d is not landed", address, length));
        }
        push(contexts.get(l.device()));
        try {
            int r = driver.cuMemcpyDtoH(staging, l.mappedAt() + (address - l.address()), length);
            if (r != CuResult.CUDA_SUCCESS) {
                throw new IOException(String.format("migration: reading %d bytes at 0x%x from the landing: %s", length,
                        address, CuResult.name(r)));
            }
        } finally {
            pop();
        }
        MemorySegment.copy(staging, 0, to, 0, length);
    }

    /** Bytes written into the landing so far. */
    public long writtenBytes() {
        return writtenBytes;
    }

    /** Bytes landed now. */
    public long landedBytes() {
        long n = 0;
        for (Landed l : landed.values()) {
            n += l.size();
        }
        return n;
    }

    /**
     * Unmaps every landed allocation and returns them, by the source's address, with their handles, for a restore to
     * adopt ({@link SessionRestore#restore}): the caller calls {@link #adopted} once the restore took them; until then
     * {@link #close} still releases them. The landing takes no more chunks.
     */
    public List<PhysicalMemory> handOff() {
        check();
        handedOff = true;
        List<PhysicalMemory> out = new ArrayList<>(landed.size());
        for (Landed l : landed.values()) {
            unmap(l);
            out.add(new PhysicalMemory(l.address(), l.size(), l.handle(), l.device()));
        }
        return out;
    }

    /** The restore adopted the memory {@link #handOff} gave it: the landing no longer releases it. */
    public void adopted() {
        landed.clear();
    }

    /** Releases what the landing still holds and the primary contexts it retained. */
    @Override
    public void close() {
        for (Landed l : landed.values()) {
            if (!handedOff) {
                unmap(l);
            }
            release(l);
        }
        landed.clear();
        contexts.forEach((device, ctx) -> {
            if (created.contains(device)) {
                driver.cuCtxDestroy(ctx);
            } else {
                driver.cuDevicePrimaryCtxRelease(device);
            }
        });
        contexts.clear();
        handedOff = true;
        arena.close();
    }

    private void unmap(Landed l) {
        boolean pushed = driver.cuCtxPushCurrent(contexts.get(l.device())) == CuResult.CUDA_SUCCESS;
        try {
            driver.cuMemUnmap(l.mappedAt(), l.size());
            driver.cuMemAddressFree(l.mappedAt(), l.size());
        } finally {
            if (pushed) {
                pop();
            }
        }
    }

    private void release(Landed l) {
        driver.cuMemRelease(l.handle());
    }

    private void check() {
        if (handedOff) {
            throw new IllegalStateException("the landing was handed off");
        }
    }

    /**
     * The context the landing works in on {@code device}: its primary context, retained, or where the driver has none
     * (the emulated device) a context of the landing's own (cuCtxCreate), destroyed by {@link #close}.
     */
    private long context(int device) throws IOException {
        Long c = contexts.get(device);
        if (c == null) {
            int r = driver.cuDevicePrimaryCtxRetain(scratch, device);
            if (r == CuResult.CUDA_ERROR_NOT_SUPPORTED) {
                r = driver.cuCtxCreate(scratch, MemorySegment.NULL, 0, device);
                if (r == CuResult.CUDA_SUCCESS) {
                    c = scratch.get(JAVA_LONG, 0);
                    pop(); // cuCtxCreate made it current
                    created.add(device);
                }
            } else if (r == CuResult.CUDA_SUCCESS) {
                c = scratch.get(JAVA_LONG, 0);
            }
            if (r != CuResult.CUDA_SUCCESS) {
                throw new IOException("migration: no context on device " + device + " to land in: " + CuResult.name(r));
            }
            contexts.put(device, c);
        }
        return c;
    }

    private void push(long ctx) throws IOException {
        int r = driver.cuCtxPushCurrent(ctx);
        if (r != CuResult.CUDA_SUCCESS) {
            throw new IOException(String.format("migration: the landing's context 0x%x cannot be made current: %s", ctx,
                    CuResult.name(r)));
        }
    }

    private void pop() {
        try (Arena a = Arena.ofConfined()) {
            driver.cuCtxPopCurrent(a.allocate(8));
        }
    }
}
