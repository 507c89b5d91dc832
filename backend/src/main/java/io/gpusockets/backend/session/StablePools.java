package io.gpusockets.backend.session;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.backend.session.StableAddresses.Allocation;
import io.gpusockets.backend.session.StableAddresses.Kind;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.PoolAttributeRequest;
import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The session's memory pools in its address windows ({@link StableAddresses}): a pool's allocations are made in
 * the window of its device as cuMemAlloc's are (granules of their own from a quarter granule up, size-class
 * blocks in the pool's own slabs below), and the pool keeps the driver's semantics:
 * <ul>
 * <li>An allocation is mapped at the call, so work queued after it in its stream (or anywhere) may use it.</li>
 * <li>{@code cuMemFreeAsync} records an event on the stream; the memory stays mapped and is reused only once
 *     that event has completed, except by a later allocation on the same stream, which may take it at once (the
 *     stream orders them), as the driver's pool does. With CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC on (the
 *     default) a completed free is reused at the next allocation; off, only after a synchronisation point saw
 *     it complete. REUSE_FOLLOW_EVENT_DEPENDENCIES and REUSE_ALLOW_INTERNAL_DEPENDENCIES are kept by the driver's
 *     pool and never lead to earlier reuse here (conservative: no reuse before the driver could).</li>
 * <li>At a synchronisation point ({@code cuStreamSynchronize}, {@code cuCtxSynchronize}, {@code cuEventSynchronize}),
 *     completed frees come back, and memory no allocation holds is unmapped and released (whole granules, largest
 *     first) until the pool holds no more than its CU_MEMPOOL_ATTR_RELEASE_THRESHOLD; {@code cuMemPoolTrimTo}
 *     does the same down to its argument. A pool's props.maxSize, when set, caps what it holds.</li>
 * <li>RESERVED_MEM_CURRENT/HIGH count the granules the pool holds mapped (in use, cached, or freed and not yet
 *     reached); USED_MEM_CURRENT/HIGH the sizes asked of its live allocations. The other attributes are the
 *     driver pool's (set there too, and remembered here).</li>
 * </ul>
 * A granule cached by a pool is reused only by allocations of the context it was mapped in (the emulated device
 * reaches mapped memory from that context). Not thread-safe: {@link StableAddresses}' lock guards it.
 */
final class StablePools {
    private static final int CU_EVENT_DISABLE_TIMING = 0x2;

    /** A pool in the window (real handle). */
    static final class Pool {
        final long real;
        final int device;
        /** props.maxSize: the most the pool may hold mapped; 0 for no cap. */
        final long maxSize;
        long releaseThreshold;
        boolean opportunistic = true;
        boolean destroyed;
        long reserved;
        long reservedHigh;
        long used;
        long usedHigh;
        int live;
        /** Granules of their own that no allocation holds. */
        final List<Chunk> cached = new ArrayList<>();
        final Map<AddressWindow.SlabKey, List<AddressWindow.Slab>> slabs = new HashMap<>();

        Pool(long real, int device, long maxSize) {
            this.real = real;
            this.device = device;
            this.maxSize = maxSize;
        }
    }

    /** Granules of their own, mapped, held by no allocation. */
    private record Chunk(long base, long length, long handle, long context) {
    }

    /** A free its stream has not yet reached (as far as known): {@code event} recorded after it (0 once gone with its context). */
    private record Pending(Allocation a, long event, long stream, long context) {
    }

    private final StableAddresses owner;
    private final Map<Long, Pool> pools = new LinkedHashMap<>();
    private final List<Pending> pending = new ArrayList<>();

    StablePools(StableAddresses owner) {
        this.owner = owner;
    }

    /** A pool made by the driver: in the window if device-located, pinned and without IPC handle types. */
    void created(long real, MemorySegment props) {
        MemorySegment p = props.reinterpret(MemoryProps.POOL_PROPS_SIZE);
        if (p.get(JAVA_INT, MemoryProps.TYPE) == MemoryProps.ALLOCATION_TYPE_PINNED
                && p.get(JAVA_INT, MemoryProps.HANDLE_TYPES) == MemoryProps.HANDLE_TYPE_NONE
                && p.get(JAVA_INT, MemoryProps.LOCATION) == MemoryProps.LOCATION_TYPE_DEVICE) {
            pools.put(real, new Pool(real, p.get(JAVA_INT, MemoryProps.LOCATION + 4), p.get(JAVA_LONG, MemoryProps.POOL_MAX_SIZE)));
        }
    }

    /** The pool in the window with this real handle, or null (not one, or destroyed). */
    Pool pool(long real) {
        Pool p = pools.get(real);
        return p == null || p.destroyed ? null : p;
    }

    /**
     * An allocation of {@code bytesize} from {@code p} on {@code stream}, at {@code at} when not 0 (a restore: through
     * {@link StableAddresses#placedAt}, in the pool's own slabs, never from its cache); null when the window or the
     * pool's cap is full, or the place is not free.
     */
    Allocation allocate(Arena arena, Pool p, AddressWindow w, long at, long bytesize, long context, long stream) {
        if (p.opportunistic) {
            reclaim();
        }
        Allocation a = at != 0 ? placed(arena, p, w, at, bytesize, context)
                : bytesize >= w.granule / 4 ? large(arena, p, w, bytesize, context, stream)
                : small(arena, p, w, bytesize, context, stream);
        if (a == null) {
            return null;
        }
        p.used += bytesize;
        p.usedHigh = Math.max(p.usedHigh, p.used);
        p.live++;
        return a.as(Kind.POOL, bytesize, p, stream);
    }

    /** A restore's allocation at {@code at}; what it maps counts as the pool's (under its maxSize). */
    private Allocation placed(Arena arena, Pool p, AddressWindow w, long at, long bytesize, long context) {
        boolean large = bytesize >= w.granule / 4;
        long mapped = large ? StableAddresses.granules(w, bytesize) : w.granule;
        if (!large) {
            long granule = at - Math.floorMod(at - w.base, w.granule);
            long block = StableAddresses.sizeClass(bytesize, StableAddresses.SMALLEST);
            if (AddressWindow.slabsOf(p.slabs, context, block).stream().anyMatch(s -> s.base == granule)) {
                mapped = 0; // a block of a slab the pool holds already
            }
        }
        if (mapped > 0 && !room(p, mapped)) {
            return null;
        }
        Allocation a = owner.placedAt(arena, w, p.slabs, at, bytesize, context, StableAddresses.SMALLEST);
        if (a != null && mapped > 0) {
            held(p, mapped);
        }
        return a;
    }

    private Allocation large(Arena arena, Pool p, AddressWindow w, long bytesize, long context, long stream) {
        long length = StableAddresses.granules(w, bytesize);
        // first a free on this very stream, the latest: later work of the stream comes after it
        for (var it = pending.listIterator(pending.size()); it.hasPrevious(); ) {
            Pending f = it.previous();
            Allocation a = f.a();
            if (a.pool() == p && a.slab() == null && f.stream() == stream && a.context() == context
                    && a.length() >= length && a.length() <= 2 * length) {
                it.remove();
                destroyEvent(f);
                return new Allocation(a.base(), bytesize, context, w, null, -1, a.length(), a.handle(), Kind.POOL, p, stream);
            }
        }
        // a cached chunk of this context, no more than twice the size (the smallest such)
        Chunk best = null;
        for (Chunk c : p.cached) {
            if (c.context() == context && c.length() >= length && c.length() <= 2 * length
                    && (best == null || c.length() < best.length())) {
                best = c;
            }
        }
        if (best != null) {
            p.cached.remove(best);
            return new Allocation(best.base(), bytesize, context, w, null, -1, best.length(), best.handle(), Kind.POOL, p, stream);
        }
        if (!room(p, length)) {
            return null;
        }
        long at = w.take(length);
        Allocation a = at == 0 ? null : owner.placeLarge(arena, w, at, length, bytesize, context);
        if (a != null) {
            held(p, length);
        }
        return a;
    }

    private Allocation small(Arena arena, Pool p, AddressWindow w, long bytesize, long context, long stream) {
        long block = StableAddresses.sizeClass(bytesize, StableAddresses.SMALLEST);
        List<AddressWindow.Slab> list = AddressWindow.slabsOf(p.slabs, context, block);
        for (var it = pending.listIterator(pending.size()); it.hasPrevious(); ) {
            Pending f = it.previous();
            Allocation a = f.a();
            if (a.pool() == p && a.slab() != null && a.slab().blockSize == block && a.context() == context && f.stream() == stream) {
                it.remove();
                destroyEvent(f);
                return StableAddresses.inBlock(w, a.slab(), a.block(), bytesize, context); // its bit is still set
            }
        }
        for (AddressWindow.Slab s : list) {
            int i = s.takeBlock();
            if (i >= 0) {
                return StableAddresses.inBlock(w, s, i, bytesize, context);
            }
        }
        if (!room(p, w.granule)) {
            return null;
        }
        AddressWindow.Slab s = owner.newSlab(arena, w, block, context);
        if (s == null) {
            return null;
        }
        held(p, w.granule);
        list.add(s);
        return StableAddresses.inBlock(w, s, s.takeBlock(), bytesize, context);
    }

    /** Whether {@code p} may map {@code length} more bytes under its maxSize, after giving back what it caches. */
    private boolean room(Pool p, long length) {
        if (p.maxSize == 0) {
            return true;
        }
        if (p.reserved + length > p.maxSize) {
            releaseDownTo(p, p.maxSize - length);
        }
        return p.reserved + length <= p.maxSize;
    }

    private static void held(Pool p, long length) {
        p.reserved += length;
        p.reservedHigh = Math.max(p.reservedHigh, p.reserved);
    }

    /** The program is done with pool allocation {@code a} (freed, by cuMemFree or cuMemFreeAsync). */
    void freed(Allocation a) {
        Pool p = a.pool();
        p.used -= a.size();
        p.live--;
    }

    /** {@code a}'s memory may be reused: back to its pool's cache (its stream reached the free, or cuMemFree waited). */
    void reusable(Allocation a) {
        Pool p = a.pool();
        if (a.slab() == null) {
            p.cached.add(new Chunk(a.base(), a.length(), a.handle(), a.context()));
        } else {
            a.slab().used.clear(a.block());
        }
    }

    /**
     * A stream-ordered free of {@code a} (plain or pool) on {@code stream}, called in context {@code context}: an
     * event recorded on the stream tells when the memory may go. When no event can be recorded there, the stream is
     * synchronised instead (conservative), and an error of that is the call's.
     */
    int freeAsync(Arena arena, Allocation a, long stream, long context) {
        MemorySegment out = arena.allocate(8);
        long event = 0;
        if (owner.real().cuEventCreate(out, CU_EVENT_DISABLE_TIMING) == CuResult.CUDA_SUCCESS) {
            event = out.get(JAVA_LONG, 0);
            if (owner.real().cuEventRecord(event, stream) != CuResult.CUDA_SUCCESS) {
                owner.real().cuEventDestroy(event);
                event = 0;
            }
        }
        if (event == 0) {
            int r = owner.real().cuStreamSynchronize(stream);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
        }
        if (a.pool() != null) {
            freed(a);
        }
        Pending f = new Pending(a, event, stream, context);
        if (event == 0) {
            done(f);
        } else {
            pending.add(f);
        }
        return CuResult.CUDA_SUCCESS;
    }

    /** Frees whose stream has reached them come back (their pool's cache, or unmapped for a plain allocation). */
    private void reclaim() {
        for (Iterator<Pending> it = pending.iterator(); it.hasNext(); ) {
            Pending f = it.next();
            if (f.event() == 0 || owner.real().cuEventQuery(f.event()) != CuResult.CUDA_ERROR_NOT_READY) {
                it.remove();
                destroyEvent(f);
                done(f);
            }
        }
    }

    private void done(Pending f) {
        if (f.a().pool() != null) {
            reusable(f.a());
        } else {
            owner.release(f.a());
        }
    }

    private void destroyEvent(Pending f) {
        if (f.event() != 0) {
            owner.real().cuEventDestroy(f.event());
        }
    }

    /** A synchronisation point: completed frees come back, each pool keeps no more than its release threshold. */
    void synchronisationPoint() {
        if (pools.isEmpty() && pending.isEmpty()) {
            return;
        }
        reclaim();
        for (Iterator<Pool> it = pools.values().iterator(); it.hasNext(); ) {
            Pool p = it.next();
            releaseDownTo(p, p.destroyed ? 0 : p.releaseThreshold);
            if (gone(p)) {
                it.remove();
            }
        }
    }

    /** A destroyed pool is forgotten once nothing of it is live or pending, and all it held is released. */
    private boolean gone(Pool p) {
        return p.destroyed && p.live == 0 && p.reserved == 0 && pending.stream().noneMatch(f -> f.a().pool() == p);
    }

    /** cuMemPoolTrimTo: completed frees come back, then cached memory goes until {@code keep} bytes are held. */
    void trim(long real, long keep) {
        Pool p = pools.get(real);
        if (p != null) {
            reclaim();
            releaseDownTo(p, keep);
        }
    }

    /** Releases whole granules {@code p} holds for no allocation, largest first, until it holds {@code keep} or less. */
    private void releaseDownTo(Pool p, long keep) {
        if (p.reserved <= keep) {
            return;
        }
        AddressWindow w = owner.existingWindow(p.device);
        p.cached.sort(Comparator.comparingLong(Chunk::length).reversed());
        for (Iterator<Chunk> it = p.cached.iterator(); it.hasNext() && p.reserved > keep; ) {
            Chunk c = it.next();
            it.remove();
            owner.unback(w, c.base(), c.length(), c.handle());
            p.reserved -= c.length();
        }
        for (List<AddressWindow.Slab> list : p.slabs.values()) {
            for (Iterator<AddressWindow.Slab> it = list.iterator(); it.hasNext() && p.reserved > keep; ) {
                AddressWindow.Slab s = it.next();
                if (s.used.isEmpty()) {
                    it.remove();
                    owner.unback(w, s.base, w.granule, s.handle);
                    p.reserved -= w.granule;
                }
            }
        }
    }

    void destroyed(long real) {
        Pool p = pools.get(real);
        if (p != null) {
            p.destroyed = true; // outstanding allocations stay valid until freed, as in the driver
            releaseDownTo(p, 0);
            if (gone(p)) {
                pools.remove(real);
            }
        }
    }

    /** After a successful cuMemPoolSetAttribute: what the window's pool honours itself. */
    void attributeSet(long real, int attr, MemorySegment value) {
        Pool p = pools.get(real);
        if (p == null) {
            return;
        }
        switch (attr) {
            case PoolAttributeRequest.RELEASE_THRESHOLD -> p.releaseThreshold = value.reinterpret(8).get(JAVA_LONG, 0);
            case PoolAttributeRequest.REUSE_ALLOW_OPPORTUNISTIC -> p.opportunistic = value.reinterpret(4).get(JAVA_INT, 0) != 0;
            case PoolAttributeRequest.RESERVED_MEM_HIGH -> p.reservedHigh = p.reserved;
            case PoolAttributeRequest.USED_MEM_HIGH -> p.usedHigh = p.used;
            default -> {
            }
        }
    }

    /** After a successful cuMemPoolGetAttribute: the window's accounting replaces the driver pool's (which holds nothing). */
    void answer(long real, int attr, MemorySegment value) {
        Pool p = pools.get(real);
        if (p == null) {
            return;
        }
        long v;
        switch (attr) {
            case PoolAttributeRequest.RESERVED_MEM_CURRENT -> v = p.reserved;
            case PoolAttributeRequest.RESERVED_MEM_HIGH -> v = p.reservedHigh;
            case PoolAttributeRequest.USED_MEM_CURRENT -> v = p.used;
            case PoolAttributeRequest.USED_MEM_HIGH -> v = p.usedHigh;
            default -> {
                return;
            }
        }
        value.reinterpret(8).set(JAVA_LONG, 0, v);
    }

    /**
     * Context {@code ctx} was destroyed (its work done): its pending frees are reached, their events gone with it;
     * what its pools cache for it is released (a later context may get the same handle).
     */
    void contextDestroyed(long ctx) {
        for (Iterator<Pending> it = pending.iterator(); it.hasNext(); ) {
            Pending f = it.next();
            if (f.context() == ctx) {
                it.remove();
                done(f);
            }
        }
        for (Pool p : pools.values()) {
            AddressWindow w = owner.existingWindow(p.device);
            for (Iterator<Chunk> it = p.cached.iterator(); it.hasNext(); ) {
                Chunk c = it.next();
                if (c.context() == ctx) {
                    it.remove();
                    owner.unback(w, c.base(), c.length(), c.handle());
                    p.reserved -= c.length();
                }
            }
            for (var e : p.slabs.entrySet()) {
                if (e.getKey().context() == ctx) {
                    for (Iterator<AddressWindow.Slab> it = e.getValue().iterator(); it.hasNext(); ) {
                        AddressWindow.Slab s = it.next();
                        if (s.used.isEmpty()) {
                            it.remove();
                            owner.unback(w, s.base, w.granule, s.handle);
                            p.reserved -= w.granule;
                        }
                    }
                }
            }
        }
    }

    /** At the session's end, after its contexts (so every stream has reached its frees): everything is released. */
    void close(List<Allocation> live) {
        for (Allocation a : live) {
            freed(a);
            reusable(a);
        }
        for (Pending f : List.copyOf(pending)) {
            destroyEvent(f);
            done(f);
        }
        pending.clear();
        for (Pool p : pools.values()) {
            AddressWindow w = owner.existingWindow(p.device);
            for (Chunk c : p.cached) {
                owner.unback(w, c.base(), c.length(), c.handle());
            }
            for (List<AddressWindow.Slab> list : p.slabs.values()) {
                for (AddressWindow.Slab s : list) {
                    owner.unback(w, s.base, w.granule, s.handle);
                }
            }
        }
        pools.clear();
    }
}
