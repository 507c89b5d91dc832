package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The VMM objects the program made itself ({@code cuMemAddressReserve}, {@code cuMemCreate}, {@code cuMemMap},
 * {@code cuMemSetAccess}, {@code cuMemRetainAllocationHandle}) in a checkpoint of a session with address-stable
 * memory (issue 22, item 2). Those calls are not recorded as they happen ({@link #SAVED_AS_STATE}); at the
 * checkpoint their present state ({@link SessionVmm}) is written as the calls that make it again ({@link #records}),
 * in this order, each in the context it was made in: every reservation (at its address: the program's reservations
 * lie in the session's address window, {@link StableAddresses#reserveInWindow}), every allocation the driver still
 * holds (its properties and flags; its handle id pinned, a fresh id for one the program released but still maps),
 * every mapping (address, size, offset), every access setting in force, then one {@code cuMemRetainAllocationHandle}
 * per extra reference and one {@code cuMemRelease} for each allocation the program holds no reference to any more.
 * They go right after the record that made the last of the contexts they need, so before anything made later that
 * may name their addresses. A released or unmapped object thus leaves nothing behind, and the records are bounded
 * by what is live.
 *
 * <p>Contents ({@link #contents}): each allocation's mapped, accessible bytes once, even where two mappings show the
 * same bytes, copied through the first such mapping in the context whose access setting made it reachable. A restore
 * checks each reservation and mapping against its address ({@link #replayed}).
 *
 * <p>An allocation the session imported from another session's shareable handle ({@link SessionShares#carriedVmm},
 * isolation context and shared) is not its own: neither its import, its mappings, the access settings over them nor
 * its contents are written here (the exporter's image holds the allocation and its contents); {@link #imported} gives
 * them for the image's shares instead ({@link CheckpointImage.Imported}), made again by {@link GroupCheckpoint#reOpen}
 * once the exporter's export is back.
 *
 * <p>Refused, by name ({@link #refusals}): an allocation whose memory an unmap made unreachable while it lived on
 * and that is not all mapped now (its contents would be lost), extra references on an allocation no longer mapped
 * (a restore makes references through a mapping), a reservation outside the window, and objects made in a context
 * that is gone with no other context of the session on their device.
 */
final class CheckpointVmm {
    /**
     * The calls whose effect is saved from the session's state at the checkpoint, not recorded as they happen (an
     * import of the session's own export is one more reference; of another session's, {@link #imported}).
     */
    static final Set<String> SAVED_AS_STATE = Set.of("cuMemAddressReserve", "cuMemCreate", "cuMemRetainAllocationHandle",
            "cuMemMap", "cuMemSetAccess", "cuMemImportFromShareableHandle");
    /** cuda.h CUmemAccess_flags: none. */
    private static final int ACCESS_NONE = 0;

    /** Bytes whose contents a checkpoint saves, at {@code address}, copied in the context {@code context} (id). */
    record Piece(long address, long size, long context) {
    }

    private CheckpointVmm() {
    }

    /** What of the program's VMM objects cannot be captured now, each named (empty: none). */
    static List<String> refusals(Session s) {
        SessionVmm vmm = s.vmm();
        List<String> out = new ArrayList<>();
        long outside = vmm.reservations().stream().filter(r -> r.device < 0).count();
        if (outside > 0) {
            out.add(outside + " VMM reservation(s) outside the session's address window");
        }
        Map<Long, Integer> refs = vmm.references();
        List<SessionVmm.Mapping> mappings = vmm.mappings();
        int retainedUnmapped = 0, lost = 0;
        Map<Long, Long> covered = coveredBytes(vmm, own(s, mappings));
        for (Map.Entry<Long, Long> e : vmm.sizes().entrySet()) {
            long handle = e.getKey();
            if (refs.getOrDefault(handle, 0) > 1 && mappings.stream().noneMatch(m -> m.handle() == handle)) {
                retainedUnmapped++;
            }
            if (!s.sharing().imported(handle) && vmm.unmappedWhileAccessible(handle)
                    && covered.getOrDefault(handle, 0L) < e.getValue()) {
                lost++;
            }
        }
        List<SessionVmm.Access> accesses = vmm.accesses();
        for (int i = 0; i < accesses.size(); i++) {
            SessionVmm.Access a = accesses.get(i);
            if (!overImported(s, a, mappings)) {
                continue;
            }
            for (SessionVmm.Access later : accesses.subList(i + 1, accesses.size())) {
                if (!overImported(s, later, mappings) && later.base() < a.end() && a.base() < later.end()) {
                    out.add("a VMM access setting over the session's own mappings made after one over an imported"
                            + " shareable allocation's mapping that it overlaps (a restore sets the latter last)");
                    break;
                }
            }
        }
        if (retainedUnmapped > 0) {
            out.add(retainedUnmapped + " VMM allocation(s) with extra references (cuMemRetainAllocationHandle) and no"
                    + " mapping (a restore makes a reference again through a mapping)");
        }
        if (lost > 0) {
            out.add(lost + " VMM allocation(s) whose memory an unmap made unreachable while it lived on and that is not"
                    + " all mapped with access now (its contents outside the mappings would be lost)");
        }
        try {
            records(s, List.of(), 0);
        } catch (IllegalStateException e) {
            out.add(e.getMessage());
        }
        return out;
    }

    /**
     * {@code recorded} with the calls that make the program's VMM state again inserted (see the class comment);
     * {@code nextId}: the session's next handle id (fresh ids for allocations without one are taken from there up).
     * Throws IllegalStateException, naming it, when an object's context is gone and no other is on its device.
     */
    static List<CheckpointRecorder.Record> records(Session s, List<CheckpointRecorder.Record> recorded, long nextId) {
        SessionVmm vmm = s.vmm();
        SessionHandles handles = s.handles();
        List<CheckpointRecorder.Record> made = new ArrayList<>();
        Contexts contexts = new Contexts(s);
        for (SessionVmm.Reservation r : vmm.reservations()) {
            made.add(record("cuMemAddressReserve", CheckpointRecorder.Kind.SET, contexts.on(r.context, r.device, "reservation"),
                    new byte[0], new long[0], r.size, 0, r.base, 0));
        }
        Map<Long, Long> ids = new HashMap<>();
        Map<Long, Long> contextOf = new HashMap<>();
        Map<Long, Integer> refs = vmm.references();
        long fresh = nextId;
        for (Map.Entry<Long, Long> e : new TreeMap<>(vmm.sizes()).entrySet()) {
            long handle = e.getKey();
            if (s.sharing().imported(handle)) {
                continue; // another session's allocation: imported again (imported, GroupCheckpoint#reOpen)
            }
            SessionVmm.Made m = vmm.madeOf(handle);
            if (m == null) {
                throw new IllegalStateException("a VMM allocation whose making was not kept");
            }
            long id = refs.containsKey(handle) ? handles.idOf(ParamType.MEMH, handle) : 0;
            id = id != 0 ? id : fresh++;
            ids.put(handle, id);
            long ctx = contexts.on(m.context(), ByteBuffer.wrap(m.prop()).order(ByteOrder.LITTLE_ENDIAN).getInt(12), "allocation");
            contextOf.put(handle, ctx);
            made.add(record("cuMemCreate", CheckpointRecorder.Kind.MAKE, ctx, m.prop(), new long[] {id}, e.getValue(),
                    m.prop().length, m.flags()));
        }
        List<SessionVmm.Mapping> all = vmm.mappings();
        List<SessionVmm.Mapping> mappings = own(s, all);
        for (SessionVmm.Mapping m : mappings) {
            made.add(record("cuMemMap", CheckpointRecorder.Kind.SET, contextOf.getOrDefault(m.handle(), 0L), new byte[0],
                    new long[0], m.base(), m.size(), m.offset(), ids.getOrDefault(m.handle(), 0L), 0));
        }
        for (SessionVmm.Access a : vmm.accesses()) {
            if (overImported(s, a, all)) {
                continue; // made again after the imported mappings it lies over (imported)
            }
            made.add(record("cuMemSetAccess", CheckpointRecorder.Kind.SET, contexts.on(a.context(), a.device(), "access setting"),
                    a.desc(), new long[0], a.base(), a.size(), a.desc().length, a.desc().length / 12));
        }
        for (Map.Entry<Long, Long> h : ids.entrySet()) {
            int n = refs.getOrDefault(h.getKey(), 0);
            SessionVmm.Mapping at = mappings.stream().filter(m -> m.handle() == h.getKey()).findFirst().orElse(null);
            for (int i = 1; i < n && at != null; i++) {
                made.add(record("cuMemRetainAllocationHandle", CheckpointRecorder.Kind.SET, contextOf.get(h.getKey()),
                        new byte[0], new long[0], at.base()));
            }
            if (n == 0) {
                made.add(record("cuMemRelease", CheckpointRecorder.Kind.SET, contextOf.get(h.getKey()), new byte[0],
                        new long[0], h.getValue()));
            }
        }
        if (made.isEmpty()) {
            return recorded;
        }
        int after = -1;
        for (CheckpointRecorder.Record r : made) {
            for (int i = 0; i < recorded.size(); i++) {
                CheckpointRecorder.Record c = recorded.get(i);
                if (r.context != 0 && java.util.Arrays.stream(c.ids).anyMatch(id -> id == r.context)) {
                    after = Math.max(after, i);
                }
            }
        }
        List<CheckpointRecorder.Record> out = new ArrayList<>(recorded.subList(0, after + 1));
        out.addAll(made);
        out.addAll(recorded.subList(after + 1, recorded.size()));
        return out;
    }

    /** {@code mappings} without those of allocations the session imported from another session. */
    private static List<SessionVmm.Mapping> own(Session s, List<SessionVmm.Mapping> mappings) {
        return mappings.stream().filter(m -> !s.sharing().imported(m.handle())).toList();
    }

    /** Whether access setting {@code a} lies over a mapping of an allocation the session imported. */
    private static boolean overImported(Session s, SessionVmm.Access a, List<SessionVmm.Mapping> mappings) {
        for (SessionVmm.Mapping m : mappings) {
            if (m.base() < a.end() && a.base() < m.end() && s.sharing().imported(m.handle())) {
                return true;
            }
        }
        return false;
    }

    /**
     * The allocations drained session {@code s} imported from other sessions' shareable handles, with the token each was
     * imported with, its handle id (0: released, only mapped), references, size and mappings, and the access settings
     * over their mappings in order, their contexts live ones: for the image's shares ({@link GroupCheckpoint}). Throws
     * IllegalStateException, naming it, when a setting's context is gone and no other is on its device.
     */
    static CheckpointImage.Shares imported(Session s) {
        SessionVmm vmm = s.vmm();
        Map<Long, byte[]> tokens = s.sharing().carriedVmm();
        if (tokens.isEmpty()) {
            return CheckpointImage.Shares.NONE;
        }
        Map<Long, Integer> refs = vmm.references();
        List<SessionVmm.Mapping> mappings = vmm.mappings();
        List<CheckpointImage.Imported> imported = new ArrayList<>();
        for (Map.Entry<Long, byte[]> t : tokens.entrySet()) {
            long real = t.getKey();
            long size = vmm.sizeOf(real);
            if (size < 0) {
                continue; // gone meanwhile
            }
            int n = refs.getOrDefault(real, 0);
            long id = n > 0 ? s.handles().idOf(ParamType.MEMH, real) : 0;
            List<CheckpointImage.ImportedMapping> maps = new ArrayList<>();
            for (SessionVmm.Mapping m : mappings) {
                if (m.handle() == real) {
                    maps.add(new CheckpointImage.ImportedMapping(m.base(), m.size(), m.offset()));
                }
            }
            imported.add(new CheckpointImage.Imported(t.getValue(), id, n, size, List.copyOf(maps)));
        }
        Contexts contexts = new Contexts(s);
        List<CheckpointImage.ImportedAccess> accesses = new ArrayList<>();
        for (SessionVmm.Access a : vmm.accesses()) {
            if (overImported(s, a, mappings)) {
                accesses.add(new CheckpointImage.ImportedAccess(a.base(), a.size(),
                        contexts.on(a.context(), a.device(), "access setting"), a.device(), a.desc()));
            }
        }
        return new CheckpointImage.Shares(List.of(), List.of(), List.of(), List.copyOf(imported), List.copyOf(accesses));
    }

    /** A record of {@code name} with its inputs in order (bytes inputs: their length), generically encoded. */
    private static CheckpointRecorder.Record record(String name, CheckpointRecorder.Kind kind, long context, byte[] data,
                                                    long[] ids, long... inputs) {
        ApiFunction f = ApiTable.get().byName(name);
        ByteBuffer b = ByteBuffer.allocate(8 * inputs.length).order(ByteOrder.LITTLE_ENDIAN);
        int i = 0;
        for (ApiParam p : f.params()) {
            if (p.out()) {
                continue;
            }
            if (p.type() == ParamType.BYTES) {
                b.putLong(inputs[i++]);
            } else if (p.type().wireBytes() == 8) {
                WireValues.putScalar(b, p.type(), inputs[i++]);
            } else {
                throw new IllegalStateException(name + ": parameter " + p.name() + " of " + p.type().wireBytes() + " bytes");
            }
        }
        if (i != inputs.length) {
            throw new IllegalStateException(name + ": " + inputs.length + " inputs for " + i + " parameters");
        }
        return new CheckpointRecorder.Record(0, kind, f.opcode(), b.array(), data, context, ids, 0, 0, 0, null);
    }

    /** Live contexts of the session by device, to stand in for one that is gone. */
    private static final class Contexts {
        private final Session s;
        private Map<Integer, Long> byDevice;

        Contexts(Session s) {
            this.s = s;
        }

        /** {@code id} when it is a live context of the session, else a live one on {@code device}. */
        long on(long id, int device, String what) {
            if (id != 0 && s.handles().get(id, ParamType.CTX) != null) {
                return id;
            }
            if (byDevice == null) {
                byDevice = new HashMap<>();
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment out = arena.allocate(8);
                    for (SessionHandles.Entry e : s.handles().all(ParamType.CTX)) {
                        if (s.driver().cuCtxPushCurrent(e.real()) != CuResult.CUDA_SUCCESS) {
                            continue;
                        }
                        if (s.driver().cuCtxGetDevice(out) == CuResult.CUDA_SUCCESS) {
                            byDevice.putIfAbsent(out.get(ValueLayout.JAVA_INT, 0), e.id());
                        }
                        s.driver().cuCtxPopCurrent(out);
                    }
                }
            }
            Long other = byDevice.get(device);
            if (other == null) {
                throw new IllegalStateException("a VMM " + what + " made in a context that is gone, with no other context of"
                        + " the session on device " + device);
            }
            return other;
        }
    }

    /** Bytes of each allocation (real) that accessible mappings show. */
    private static Map<Long, Long> coveredBytes(SessionVmm vmm, List<SessionVmm.Mapping> mappings) {
        Map<Long, Long> out = new HashMap<>();
        for (Shown p : shown(vmm, mappings)) {
            out.merge(p.handle(), p.size(), Long::sum);
        }
        return out;
    }

    /**
     * The contents to save: each allocation's bytes that an accessible mapping shows, once, as pieces at the first
     * mapping showing them, in the context (id) whose access setting made it reachable; not those of an allocation the
     * session imported from another session (its exporter's image holds them).
     */
    static List<Piece> contents(Session s) {
        SessionVmm vmm = s.vmm();
        return shown(vmm, own(s, vmm.mappings())).stream().map(p -> new Piece(p.address(), p.size(), p.access().context())).toList();
    }

    /** Bytes of allocation {@code handle} an accessible mapping shows at {@code address}, reachable through {@code access}. */
    private record Shown(long address, long size, long handle, SessionVmm.Access access) {
    }

    /** What accessible mappings show, each allocation's bytes once, at the first mapping (by address) showing them. */
    private static List<Shown> shown(SessionVmm vmm, List<SessionVmm.Mapping> mappings) {
        List<SessionVmm.Access> accesses = vmm.accesses();
        Map<Long, TreeMap<Long, Long>> seen = new HashMap<>(); // per allocation: offset ranges saved, start to end
        List<Shown> out = new ArrayList<>();
        for (SessionVmm.Mapping m : mappings) {
            SessionVmm.Access a = reachableThrough(accesses, m);
            if (a == null) {
                continue;
            }
            TreeMap<Long, Long> done = seen.computeIfAbsent(m.handle(), k -> new TreeMap<>());
            long at = m.offset(), end = m.offset() + m.size();
            while (at < end) {
                Map.Entry<Long, Long> before = done.floorEntry(at);
                if (before != null && before.getValue() > at) {
                    at = before.getValue();
                    continue;
                }
                Long next = done.higherKey(at);
                long stop = next == null ? end : Math.min(end, next);
                out.add(new Shown(m.base() + at - m.offset(), stop - at, m.handle(), a));
                done.put(at, stop);
                at = stop;
            }
        }
        return out;
    }

    /** The last access setting over {@code m} for its context's device, when it grants access; else null. */
    private static SessionVmm.Access reachableThrough(List<SessionVmm.Access> accesses, SessionVmm.Mapping m) {
        SessionVmm.Access found = null;
        for (SessionVmm.Access a : accesses) {
            if (a.base() <= m.base() && a.end() >= m.end()) {
                int flags = flagsFor(a.desc(), a.device());
                if (flags >= 0) {
                    found = flags == ACCESS_NONE ? null : a;
                }
            }
        }
        return found;
    }

    /** The access flags a descriptor list gives {@code device}, or -1 when it does not name it. */
    private static int flagsFor(byte[] desc, int device) {
        ByteBuffer b = ByteBuffer.wrap(desc).order(ByteOrder.LITTLE_ENDIAN);
        int flags = -1;
        for (int at = 0; at + 12 <= desc.length; at += 12) {
            if (b.getInt(at + 4) == device) {
                flags = b.getInt(at + 8);
            }
        }
        return flags;
    }

    /** The real context to copy the bytes at {@code address} of a mapping through, or 0 when no mapping shows them. */
    static long contextOf(Session s, long address) {
        SessionVmm.Mapping m = s.vmm().mappingAt(address);
        if (m == null) {
            return 0;
        }
        SessionVmm.Access a = reachableThrough(s.vmm().accesses(), m);
        SessionHandles.Entry e = a == null ? null : s.handles().get(a.context(), ParamType.CTX);
        return e == null ? 0 : e.real();
    }

    /**
     * After a restore replayed {@code r} (call {@code f}): why it did not make what the checkpoint had (a reservation
     * or mapping elsewhere), or null.
     */
    static String replayed(Session s, ApiFunction f, CheckpointRecorder.Record r) {
        if (!f.name().equals("cuMemAddressReserve") && !f.name().equals("cuMemMap")) {
            return null;
        }
        long[] in = CheckpointRecorder.inputs(f, r.body);
        if (f.name().equals("cuMemAddressReserve")) {
            long size = in[f.paramIndex("size")], base = in[f.paramIndex("addr")];
            return s.vmm().reservationAt(base, size) != null ? null
                    : String.format("the VMM reservation 0x%x+%d was not made again at its address", base, size);
        }
        long ptr = in[f.paramIndex("ptr")], size = in[f.paramIndex("size")];
        SessionVmm.Mapping m = s.vmm().mappingAt(ptr);
        return m != null && m.base() == ptr && m.size() == size ? null
                : String.format("the VMM mapping 0x%x+%d was not made again at its address", ptr, size);
    }
}
