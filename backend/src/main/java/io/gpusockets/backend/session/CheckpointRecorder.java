package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CheckpointRule;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.WireValues;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * What a session with address-stable memory keeps so that it can be checkpointed and restored (issue 22,
 * items 3 to 5): the request frames of the calls that made its live objects and set their state, in order.
 * A restore ({@link SessionRestore}) replays them in a fresh session, each handle id pinned to its recorded
 * value and each allocation placed at its recorded address.
 *
 * <p>A call is recorded after it succeeded when it issued new handle ids (kind {@link Kind#MAKE}: streams,
 * events, modules, functions, contexts, graphs, nodes...), allocated device memory inside the session's
 * address window ({@link Kind#ALLOC}), obtained a module global ({@link Kind#GLOBAL}, once per address), or is
 * a setter the API table marks {@code checkpoint=set|append} ({@link Kind#SET}; see {@link CheckpointRule}).
 * Texture and surface objects are recorded as the calls that made them, with the driver's value as their id
 * ({@link SessionHandles#intern}): a restore asserts that the driver gives the same value again. CUDA arrays and
 * mipmapped arrays are MAKE records like any handle; their contents are not recorded but copied at the checkpoint
 * ({@link CheckpointArrays}).
 * A handle a call makes on the side (the session's stand-in for a device's default pool, which cuMemAllocAsync
 * makes at its first use) is recorded as the call that makes it alone ({@link #madeBy}).
 * A record keeps the opcode, the request body, the DATA bytes the call consumed (module images), the lane's
 * context id at the time, the ids it issued (a MAKE's, and a GLOBAL's: cuLibraryGetGlobal makes the library's
 * module handle on its first use), and its allocation or global. It goes when what it made goes:
 * a MAKE record when every id it issued was dropped ({@link #handleGone}), an ALLOC or GLOBAL record with
 * its range ({@link #rangeGone}), a setter with its target, or when a later call of the same target and key
 * supersedes it, unless a call that copies state (instantiating, cloning or updating from a graph, a child graph node,
 * copying attributes: {@link #reads}) was recorded between them and its record lives: then it stays until that
 * record goes, so that the replay in order gives the copy the state it read. A stream-ordered free drops its allocation's record
 * at the call ({@link #rangeGone}): the memory is no longer the program's, and the checkpoint's drain has every
 * stream reach its frees before the image is written.
 *
 * <p>The records' memory is bounded ({@link #DEFAULT_BOUND_BYTES}, property
 * {@code gpusockets.backend.checkpointRecordBytes}): past it the session is marked not checkpointable, with
 * the reason, and records nothing more; no call fails for it. What cannot be captured is found when a
 * checkpoint is asked for ({@link #refusals}): handles of kinds not replayed, ranges not recorded (outside the
 * window: managed memory, graph memory of a capture), graph memory nodes outside the window, graph memory of a
 * destroyed graph whose exec graph lives, allocations of a destroyed pool, a device malloc heap in use. A graph
 * memory node in the window ({@link StableGraphMemory}) is recorded as an allocation that issued the node's id. The VMM objects the program makes itself are not recorded: {@link CheckpointVmm} saves their state at the
 * checkpoint. The session adds what only it
 * knows (capture in progress, host callbacks pending).
 *
 * <p>Thread-safety: calls of many lanes record at once; every method takes this object's monitor.
 */
final class CheckpointRecorder {
    /** Default bound on the records' bytes per session. */
    static final long DEFAULT_BOUND_BYTES = 256L << 20;
    /** The property that sets the bound. */
    static final String BOUND_PROPERTY = "gpusockets.backend.checkpointRecordBytes";
    /** Handle kinds whose objects a restore makes again by replay. */
    static final Set<ParamType> REPLAYED = EnumSet.of(ParamType.CTX, ParamType.MOD, ParamType.FUNC, ParamType.STREAM,
            ParamType.EVENT, ParamType.LIB, ParamType.KERNEL, ParamType.GRAPH, ParamType.GNODE, ParamType.GEXEC,
            ParamType.POOL, ParamType.ARRAY, ParamType.MIPMAP, ParamType.TEX, ParamType.SURF);
    /** CU_LIMIT_MALLOC_HEAP_SIZE. */
    private static final int LIMIT_MALLOC_HEAP_SIZE = 2;

    enum Kind { MAKE, ALLOC, GLOBAL, SET }

    /** One recorded call. {@code ids}: the handle ids it issued, in order; {@code base}/{@code size}: its range. */
    static final class Record {
        final long seq;
        final Kind kind;
        final int opcode;
        final byte[] body;
        final byte[] data;
        final long context;
        final long[] ids;
        final long base;
        final long size;
        /** Setters: the target id (handle or context) and the key within it. */
        final long target;
        final String key;
        int liveIds;

        Record(long seq, Kind kind, int opcode, byte[] body, byte[] data, long context, long[] ids, long base, long size,
               long target, String key) {
            this.seq = seq;
            this.kind = kind;
            this.opcode = opcode;
            this.body = body;
            this.data = data;
            this.context = context;
            this.ids = ids;
            this.base = base;
            this.size = size;
            this.target = target;
            this.key = key;
            this.liveIds = ids.length;
        }

        long bytes() {
            return 96L + body.length + data.length + 8L * ids.length + (key == null ? 0 : key.length());
        }

        String name() {
            ApiFunction f = ApiTable.get().byOpcode(opcode);
            return f == null ? "opcode " + opcode : f.name();
        }

        @Override
        public String toString() {
            return "Record[" + seq + " " + kind + " " + name() + " ids=" + java.util.Arrays.toString(ids)
                    + (size > 0 ? String.format(" 0x%x+%d", base, size) : "") + "]";
        }
    }

    /**
     * The handle ids one call on this thread issued ({@link SessionHandles#intern}), and at a restore the
     * ids it must issue ({@code pinned}), in order. Set by the dispatcher around a watched call.
     */
    static final class Issued {
        final long[] pinned;
        int next;
        long[] got = new long[4];
        int count;

        Issued(long[] pinned) {
            this.pinned = pinned;
        }

        /** The id to issue next: the pinned one when it is free, else {@code fallback}. */
        long take(long fallback, java.util.function.LongPredicate taken) {
            long id = fallback;
            if (pinned != null && next < pinned.length && !taken.test(pinned[next])) {
                id = pinned[next];
            }
            if (pinned != null) {
                next++;
            }
            return id;
        }

        void add(long id) {
            if (count == got.length) {
                got = java.util.Arrays.copyOf(got, count * 2);
            }
            got[count++] = id;
        }

        long[] ids() {
            return java.util.Arrays.copyOf(got, count);
        }
    }

    static final ThreadLocal<Issued> ISSUED = new ThreadLocal<>();

    private final long boundBytes;
    /** By table index: whether a call may be recorded (so its body is kept until it ends). */
    private final boolean[] watched;
    /** By table index: a launch (for the malloc heap check). */
    private final boolean[] launch;
    /**
     * By table index: a setter whose change no record keeps (a host node's parameters: host nodes are the guest's
     * work, which a checkpoint refuses anyway; pointer attributes: their target is an allocation, which setter records
     * do not follow); once one succeeded, checkpoints are refused naming it, rather than a restore silently coming
     * back without the change.
     */
    private final boolean[] unkept;
    /**
     * By table index: a call that reads state setters changed (instantiating, cloning or updating from a graph,
     * a child graph node, copying attributes): a setter superseded after such a call was recorded is kept while
     * that record lives ({@link #readers}), so that the replay gives the call the state it read.
     */
    private final boolean[] reads;
    /** The live records of {@link #reads} calls, by seq. */
    private final java.util.TreeSet<Long> readers = new java.util.TreeSet<>();
    /** Setters superseded but kept for a reader after them, by their seq. */
    private final Map<Long, Shadow> shadows = new LinkedHashMap<>();
    /** The unkept setters that succeeded in this session, by name. */
    private final Set<String> changedBy = new java.util.TreeSet<>();
    private final TreeMap<Long, Record> records = new TreeMap<>();
    private final Map<Long, Record> byId = new HashMap<>();
    private final Map<Long, Record> byBase = new HashMap<>();
    /** Setters by target, then key. */
    private final Map<Long, Map<String, Record>> setters = new HashMap<>();
    /** Allocations outside the window, by base: the function that made them. */
    private final Map<Long, String> outside = new HashMap<>();
    /** Graph memory nodes made with cuGraphAddMemAllocNode, by node id (refused: their memory is the driver's). */
    private final Set<Long> graphMemoryNodes = new java.util.HashSet<>();
    private long seq;
    private long bytes;
    private String notCheckpointable;
    private boolean mallocHeap;
    private boolean launched;

    CheckpointRecorder(long boundBytes) {
        this.boundBytes = boundBytes;
        List<ApiFunction> fs = ApiTable.get().functions();
        this.watched = new boolean[fs.size()];
        this.launch = new boolean[fs.size()];
        this.unkept = new boolean[fs.size()];
        this.reads = new boolean[fs.size()];
        for (ApiFunction f : fs) {
            unkept[f.index()] = f.checkpoint() == CheckpointRule.NONE && (f.name().matches("cuGraph\\w*(SetParams|SetEvent)")
                    || f.name().startsWith("cuGraphExecUpdate") || f.name().equals("cuCtxSetFlags")
                    || f.name().equals("cuMemPoolSetAccess") || f.name().equals("cuPointerSetAttribute"));
            reads[f.index()] = f.name().startsWith("cuGraphInstantiate") || f.name().equals("cuGraphClone")
                    || f.name().equals("cuGraphAddChildGraphNode") || f.name().startsWith("cuGraphExecUpdate")
                    || f.name().equals("cuGraphExecChildGraphNodeSetParams") || f.name().endsWith("CopyAttributes");
            // codec=graph entries return the nodes they add through a ptr, not a declared out handle
            boolean w = f.checkpoint() != CheckpointRule.NONE || f.name().equals("cuCtxSetLimit")
                    || f.codec() == io.gpusockets.protocol.api.WireCodec.GRAPH;
            for (ApiParam p : f.params()) {
                w |= p.out() && (p.type().isHandle() || p.type() == ParamType.DPTR);
            }
            watched[f.index()] = w && !CheckpointVmm.SAVED_AS_STATE.contains(f.name()); // saved from SessionVmm instead
            launch[f.index()] = f.name().startsWith("cuLaunch") || f.name().startsWith("cuGraphLaunch");
        }
    }

    /** The bound from {@link #BOUND_PROPERTY}, or the default. */
    static long configuredBound() {
        return Long.getLong(BOUND_PROPERTY, DEFAULT_BOUND_BYTES);
    }

    /** Whether calls of table entry {@code index} may be recorded (an array look-up per call). */
    boolean watches(int index) {
        return watched[index] || launch[index] || unkept[index];
    }

    /** Whether the entry may make a record (its request body is then copied before it runs). */
    boolean records(int index) {
        return watched[index];
    }

    /**
     * A watched call succeeded. {@code body}: its whole request body; {@code data}: the DATA bytes it consumed;
     * {@code outs}: its reply's outputs (as sent); {@code issued}: the ids it issued; {@code context}: the lane's
     * context id; {@code inWindow}: whether an address lies in the session's address window.
     */
    synchronized void succeeded(ApiFunction f, byte[] body, byte[] data, ByteBuffer outs, long[] issued, long context,
                                java.util.function.LongPredicate inWindow) {
        if (launch[f.index()]) {
            launched = true;
        }
        if (unkept[f.index()]) {
            changedBy.add(f.name());
            return;
        }
        if (!watched[f.index()] || body == null) {
            return;
        }
        if (f.name().startsWith("cuGraphExecUpdate") && (outs == null || outs.remaining() < 4
                || outs.duplicate().order(ByteOrder.LITTLE_ENDIAN).getInt(outs.position()) != 0)) {
            return; // the driver refused the update (its reply says so as an output): the exec graph is unchanged
        }
        if (f.name().equals("cuCtxSetLimit") && body.length >= 4
                && ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN).getInt(0) == LIMIT_MALLOC_HEAP_SIZE) {
            mallocHeap = true;
        }
        if (notCheckpointable != null) {
            return;
        }
        if (f.name().equals("cuGraphAddMemAllocNode") && graphMemoryNode(f, body, data, outs, issued, context, inWindow)) {
            return;
        }
        long base = 0, size = 0;
        Kind kind = null;
        ApiParam dptr = outDptr(f);
        if (dptr != null && outs != null) {
            long[] outValues = outValues(f, outs);
            base = outValues[dptr.index()];
            if (base != 0 && dptr.alloc() != null) {
                if (!inWindow.test(base)) {
                    outside.put(base, f.name());
                } else {
                    kind = Kind.ALLOC;
                    size = dptr.rangeSize().evaluate(k -> outValues[k] != Long.MIN_VALUE ? outValues[k] : inputValue(f, body, k));
                }
            } else if (base != 0 && dptr.global() != null) {
                if (byBase.containsKey(base)) {
                    return; // this global is recorded already
                }
                kind = Kind.GLOBAL;
                size = dptr.rangeSize().evaluate(k -> outValues[k] != Long.MIN_VALUE ? outValues[k] : inputValue(f, body, k));
            } else if (base != 0 && !inWindow.test(base)) {
                outside.put(base, f.name());
            }
        }
        if (kind == null && issued.length > 0) {
            kind = Kind.MAKE;
        }
        long target = 0;
        String key = null;
        if (kind == null && f.checkpoint() != CheckpointRule.NONE) {
            kind = Kind.SET;
            long[] in = inputs(f, body);
            StringBuilder k = new StringBuilder();
            int others = 0;
            long first = 0;
            for (ApiParam p : f.params()) {
                if (p.out()) {
                    continue;
                }
                if (p.type().isHandle()) {
                    if (target == 0 && k.isEmpty()) {
                        target = in[p.index()];
                        continue;
                    }
                    k.append('h').append(in[p.index()]).append(',');
                } else if (p.type() == ParamType.DEV) {
                    k.append('d').append(in[p.index()]).append(',');
                } else {
                    if (others++ == 0) {
                        first = in[p.index()];
                    }
                }
            }
            if (target == 0) {
                target = context;
            }
            if (f.checkpoint() == CheckpointRule.APPEND) {
                key = "#" + seq;
            } else {
                key = k.append(others >= 2 ? "v" + first : "").toString();
            }
        }
        if (kind == null) {
            return;
        }
        Record r = new Record(seq++, kind, f.opcode(), body, data == null ? new byte[0] : data, context,
                kind == Kind.MAKE || kind == Kind.GLOBAL ? issued : new long[0], base, size, target, key);
        if (overBound(r)) {
            return;
        }
        if (kind == Kind.MAKE && f.name().startsWith("cuGraphAddMemAllocNode")) {
            for (long id : issued) {
                graphMemoryNodes.add(id);
            }
        }
        add(r);
        if (reads[f.index()]) {
            readers.add(r.seq);
        }
    }

    /**
     * A graph memory allocation node whose memory lies in the window ({@link StableGraphMemory}): recorded as an
     * allocation (its contents saved, its replay placed at its address) that also issued the node's id (pinned at the
     * replay). Its life is its range's: it goes when the memory goes back with its graph, not with the node's id (an
     * exec graph may hold the memory after its graph's destruction; {@link #refusals} names that case). Request body
     * (GraphRequest): graph, numDependencies, accessDescCount, bytesize; outputs: the node's id, the address.
     * Returns false when the memory is the driver's (then refused as before).
     */
    private boolean graphMemoryNode(ApiFunction f, byte[] body, byte[] data, ByteBuffer outs, long[] issued, long context,
                                    java.util.function.LongPredicate inWindow) {
        if (outs == null || body.length < 32) {
            return false;
        }
        ByteBuffer o = outs.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        if (o.remaining() < 16) {
            return false;
        }
        o.getLong();
        long base = o.getLong();
        long size = ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN).getLong(24);
        if (base == 0 || !inWindow.test(base)) {
            return false;
        }
        Record r = new Record(seq++, Kind.ALLOC, f.opcode(), body, data == null ? new byte[0] : data, context, issued, base,
                size, 0, null);
        if (!overBound(r)) {
            add(r);
        }
        return true;
    }

    /** Whether {@code r} would take the records past their bound: then the session is marked and they all go. */
    private boolean overBound(Record r) {
        if (bytes + r.bytes() <= boundBytes) {
            return false;
        }
        notCheckpointable = "its checkpoint records would exceed " + boundBytes + " bytes (" + BOUND_PROPERTY + ")";
        records.clear();
        byId.clear();
        byBase.clear();
        setters.clear();
        readers.clear();
        shadows.clear();
        graphMemoryNodes.clear();
        bytes = 0;
        return true;
    }

    private void add(Record r) {
        records.put(r.seq, r);
        bytes += r.bytes();
        for (long id : r.ids) {
            byId.put(id, r);
        }
        if (r.kind == Kind.ALLOC || r.kind == Kind.GLOBAL) {
            Record old = byBase.put(r.base, r);
            if (old != null) {
                drop(old);
            }
        }
        if (r.kind == Kind.SET) {
            Map<String, Record> byKey = setters.computeIfAbsent(r.target, t -> new LinkedHashMap<>());
            Record old = byKey.put(r.key, r);
            if (old != null) {
                Long reader = readers.higher(old.seq);
                if (reader == null) {
                    drop(old);
                } else {
                    // a call recorded since read the state old set: old stays (with its target) while a reader
                    // between it and r lives
                    String kept = r.key + "@" + old.seq;
                    byKey.put(kept, old);
                    shadows.put(old.seq, new Shadow(old, kept, r.seq));
                }
            }
        }
    }

    /** A setter {@code record} superseded by the one of seq {@code until}, kept under {@code key} for readers between. */
    private record Shadow(Record record, String key, long until) {
    }

    private void drop(Record r) {
        if (records.remove(r.seq) != null) {
            bytes -= r.bytes();
        }
        shadows.remove(r.seq);
        if (readers.remove(r.seq)) {
            // setters kept for this reader alone go
            List<Shadow> free = new ArrayList<>();
            for (Shadow sh : shadows.values()) {
                if (sh.record.seq < r.seq && r.seq < sh.until && readers.subSet(sh.record.seq, false, sh.until, false).isEmpty()) {
                    free.add(sh);
                }
            }
            for (Shadow sh : free) {
                Map<String, Record> byKey = setters.get(sh.record.target);
                if (byKey != null) {
                    byKey.remove(sh.key);
                }
                drop(sh.record);
            }
        }
    }

    /**
     * Handle {@code id} was made on the side of another call: recorded as the call {@code maker} with request
     * {@code body} (generically encoded), in context {@code context}, that makes it alone and issues just it.
     */
    synchronized void madeBy(ApiFunction maker, byte[] body, long context, long id) {
        if (notCheckpointable != null) {
            return;
        }
        Record r = new Record(seq++, Kind.MAKE, maker.opcode(), body, new byte[0], context, new long[] {id}, 0, 0, 0, null);
        if (!overBound(r)) {
            add(r);
        }
    }

    /** A handle was dropped: a record that issued it goes once all its ids went, and setters targeting it go. */
    synchronized void handleGone(long id) {
        graphMemoryNodes.remove(id);
        Record r = byId.remove(id);
        if (r != null && --r.liveIds <= 0 && r.kind != Kind.ALLOC) { // a graph memory node's record goes with its range
            drop(r);
        }
        Map<String, Record> s = setters.remove(id);
        if (s != null) {
            new ArrayList<>(s.values()).forEach(this::drop);
        }
    }

    /** A device range was dropped (freed, or its context or module went). */
    synchronized void rangeGone(long base) {
        outside.remove(base);
        Record r = byBase.remove(base);
        if (r != null) {
            drop(r);
            if (r.kind == Kind.ALLOC) {
                for (long id : r.ids) {
                    byId.remove(id, r); // a graph memory node whose memory the program freed: its id is unrecorded now
                }
            }
        }
    }

    /** The records in order, for an image. */
    synchronized List<Record> snapshot() {
        return new ArrayList<>(records.values());
    }

    /** Bytes the records hold now. */
    synchronized long bytes() {
        return bytes;
    }

    /**
     * What cannot be captured now, each named (empty: none): the recorder's own findings and what the session's
     * handles and ranges show that was not recorded. The session is drained (no call in flight).
     */
    synchronized List<String> refusals(SessionHandles handles, SessionMemory memory) {
        return refusals(handles, memory, true);
    }

    /**
     * As {@link #refusals(SessionHandles, SessionMemory)}; with {@code settled} false, while calls may be in flight
     * (the early check before a drain), a handle or a range that the recorder has no record of yet is not counted: a
     * call in flight has made it in the driver and is about to record it (a program thread allocating and freeing
     * during a take-over was refused for "1 allocations outside the session's address window (not cuMemAlloc)" on
     * an H100). The check after the drain counts them.
     */
    synchronized List<String> refusals(SessionHandles handles, SessionMemory memory, boolean settled) {
        List<String> out = new ArrayList<>();
        if (notCheckpointable != null) {
            out.add(notCheckpointable);
        }
        if (mallocHeap && launched) {
            out.add("the device malloc heap (cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE) was set and kernels were launched:"
                    + " they may hold device-side malloc memory, which a checkpoint cannot see)");
        }
        Map<ParamType, Integer> unreplayed = new TreeMap<>();
        Map<String, Integer> unrecorded = new TreeMap<>();
        for (ParamType t : ParamType.values()) {
            if (!t.isHandle()) {
                continue;
            }
            if (t == ParamType.MEMH) {
                continue; // the program's VMM objects: CheckpointVmm saves them and says what it cannot
            }
            for (SessionHandles.Entry e : handles.all(t)) {
                if (!REPLAYED.contains(t)) {
                    unreplayed.merge(t, 1, Integer::sum);
                } else if (!byId.containsKey(e.id()) && notCheckpointable == null && settled) {
                    unrecorded.merge(kindName(t), 1, Integer::sum);
                }
            }
        }
        unreplayed.forEach((t, n) -> out.add(n + " " + kindName(t) + " handle(s), which a checkpoint does not capture yet"));
        if (!changedBy.isEmpty()) {
            out.add("changes made with " + String.join(", ", changedBy) + " earlier in this session, which a checkpoint"
                    + " does not capture (a restore would bring back the state as it was made: a host node's parameters"
                    + " are the guest's work; a pointer attribute's target is an allocation, which setter records do not"
                    + " follow)");
        }
        if (!graphMemoryNodes.isEmpty()) {
            out.add(graphMemoryNodes.size() + " graph memory node(s) (cuGraphAddMemAllocNode: graph memory lies outside the"
                    + " session's address window)");
        }
        long orphanedGraphMemory = byBase.values().stream().filter(r -> r.kind == Kind.ALLOC && r.ids.length > 0
                && r.liveIds <= 0).count();
        if (orphanedGraphMemory > 0) {
            out.add(orphanedGraphMemory + " graph memory allocation(s) of a destroyed graph whose exec graph lives (a"
                    + " restore makes graph memory again with its node, in its graph)");
        }
        int orphans = 0;
        for (Record r : byBase.values()) {
            if (r.kind == Kind.ALLOC) {
                ApiFunction f = ApiTable.get().byOpcode(r.opcode);
                long[] in = inputs(f, r.body);
                for (ApiParam p : f.params()) {
                    if (!p.out() && p.type() == ParamType.POOL && handles.get(in[p.index()], ParamType.POOL) == null) {
                        orphans++;
                    }
                }
            }
        }
        if (orphans > 0) {
            out.add(orphans + " allocation(s) of a memory pool the program destroyed (a restore makes allocations in"
                    + " their pool)");
        }
        if (!unrecorded.isEmpty()) {
            out.add(unrecorded.values().stream().mapToInt(Integer::intValue).sum() + " handle(s) made by calls a checkpoint"
                    + " does not replay " + unrecorded);
        }
        Map<String, Integer> outsideBy = new TreeMap<>();
        for (SessionMemory.Range r : memory.ranges()) {
            if (byBase.containsKey(r.base())) {
                continue;
            }
            if (r.owner() == SessionMemory.MAPPING) {
                continue; // the program's own mappings: CheckpointVmm saves them
            } else if (r.freeable()) {
                String by = outside.get(r.base());
                if (by == null && !settled) {
                    continue; // made by a call in flight, or one that is: the check after the drain decides
                }
                outsideBy.merge("allocations outside the session's address window (" + (by == null ? "not cuMemAlloc" : by)
                        + (by != null && by.equals("cuMemAllocManaged") ? ": managed memory" : "")
                        + (by != null && by.startsWith("cuMemAlloc") && by.endsWith("Async")
                                ? ": graph memory of a stream capture, or a pool's allocation on another device" : "")
                        + ")", 1, Integer::sum);
            }
            // a global not asked for by the program is made again with its module, contents included
        }
        outsideBy.forEach((what, n) -> out.add(n + " " + what));
        return out;
    }

    private static String kindName(ParamType t) {
        return switch (t) {
            case ARRAY -> "CUDA array";
            case MIPMAP -> "mipmapped array";
            case TEX -> "texture object";
            case SURF -> "surface object";
            case POOL -> "memory pool";
            case LINK -> "link state";
            case MEMH -> "VMM allocation (cuMemCreate by the program)";
            default -> t.name().toLowerCase(java.util.Locale.ROOT);
        };
    }

    /** The dptr output of an entry, or null. */
    private static ApiParam outDptr(ApiFunction f) {
        for (ApiParam p : f.params()) {
            if (p.out() && p.type() == ParamType.DPTR) {
                return p;
            }
        }
        return null;
    }

    /** The reply's outputs by parameter index (Long.MIN_VALUE for inputs and bulk outputs). */
    static long[] outValues(ApiFunction f, ByteBuffer outs) {
        long[] v = new long[f.params().size()];
        java.util.Arrays.fill(v, Long.MIN_VALUE);
        ByteBuffer b = outs.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        for (ApiParam p : f.params()) {
            if (!p.out() || p.type() == ParamType.BYTES) {
                continue;
            }
            int n = p.type().isHandle() ? 8 : WireValues.outWireBytes(p.type());
            if (b.remaining() < n) {
                break;
            }
            v[p.index()] = n == 4 ? b.getInt() : b.getLong();
        }
        return v;
    }

    private static long inputValue(ApiFunction f, byte[] body, int index) {
        return inputs(f, body)[index];
    }

    /** The scalar inputs of a generically decoded request by parameter index (bulk: their length; strings: 0). */
    static long[] inputs(ApiFunction f, byte[] body) {
        long[] v = new long[f.params().size()];
        ByteBuffer b = ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN);
        for (ApiParam p : f.params()) {
            if (p.out()) {
                continue;
            }
            switch (p.type()) {
                case NULL, ZERO, PTR, HOSTPTR -> { }
                case CSTR -> {
                    int n = b.getInt();
                    b.position(b.position() + n);
                }
                case BYTES, IMAGE -> v[p.index()] = b.getLong();
                default -> v[p.index()] = ((Number) WireValues.getScalar(b, p.type())).longValue();
            }
        }
        return v;
    }
}
