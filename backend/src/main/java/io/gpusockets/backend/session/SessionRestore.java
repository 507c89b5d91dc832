package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import java.io.DataInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * Restores a checkpointed session ({@link CheckpointImage}) into this backend, which never had it: a session
 * made detached under the image's id once every recorded module image was found to carry code its device here can
 * run ({@link RestoreModels}: else the restore is refused before anything is made), with address-stable memory whatever the backend's and its tenant's setting
 * for new sessions, and its address windows at the image's bases (one taken here refuses the restore, naming it); the records replayed in
 * order on an internal lane whose replies are discarded, each through the dispatcher as the frontend's frame
 * was, with every handle id it issues pinned to the recorded one and every allocation placed at its recorded
 * address (both checked, as is every VMM reservation and mapping the program made, {@link CheckpointVmm}; texture
 * and surface objects, whose ids are the driver's values, must come back with their recorded values, else the
 * restore is refused naming the object). Module globals live where the driver loads them, which a new process
 * chooses: a global that came back elsewhere is translated from then on ({@link GlobalTranslation}: the program keeps
 * its recorded address), and one that came back with another size than recorded refuses the restore, naming it (a
 * byte-for-byte translation would be unsound; the module is not the one checkpointed); then every allocation's,
 * global's, CUDA array's and mipmapped array level's contents written back ({@link CheckpointArrays}), each chunk
 * checked against its hash first; then the lanes' context stacks, the primary contexts' references and
 * the resume state (received ids, unacknowledged replies). The caller registers the session as resumable under
 * its token; its frontend resumes it through the ordinary resume path. A restore that fails part-way ends the
 * session it made, which frees everything made so far. A hand-over's restore ({@link Handed}) and a migration's whose
 * window memory the target landed ({@link Landed}, {@link MigrationLanding}) map that memory where the replay backs
 * it ({@link StableAddresses#adopt}) instead of making it, and write contents only for what the image carries.
 */
public final class SessionRestore {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");

    private SessionRestore() {
    }

    /**
     * The image's session id and tenant, read from its start (to refuse a taken id before anything is made), and whether
     * it carries shares of a group checkpoint ({@link GroupCheckpoint}), which a group restore makes again.
     */
    public record Identity(long sessionId, String tenant, boolean shares) {
    }

    /** A restored session, not yet serving, and what the restore did. */
    public record Restored(Session session, int records, long contentBytes) {
    }

    /** Opens an image and reads its header (session id, tenant) without making anything. */
    public static Identity peek(java.nio.file.Path file) throws IOException {
        try (DataInputStream in = open(file)) {
            CheckpointImage.Header h = CheckpointImage.readHeader(in);
            return new Identity(h.sessionId(), h.tenant(), !h.shares().isEmpty());
        }
    }

    /** The shares of a group checkpoint the image in {@code file} carries ({@link GroupCheckpoint#imageShares}). */
    static CheckpointImage.Shares sharesOf(java.nio.file.Path file) throws IOException {
        try (DataInputStream in = open(file)) {
            return CheckpointImage.readHeader(in).shares();
        }
    }

    /** Counts the bytes read through it (the header's length, so that the contents are read from right after it). */
    private static final class CountingInputStream extends java.io.FilterInputStream {
        long count;

        CountingInputStream(java.io.InputStream in) {
            super(in);
        }

        @Override
        public int read() throws IOException {
            int b = super.read();
            count += b < 0 ? 0 : 1;
            return b;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            int n = super.read(b, off, len);
            count += Math.max(n, 0);
            return n;
        }

        @Override
        public long skip(long n) throws IOException {
            long k = super.skip(n);
            count += k;
            return k;
        }
    }

    private static DataInputStream open(java.nio.file.Path file) throws IOException {
        return new DataInputStream(new java.io.BufferedInputStream(java.nio.file.Files.newInputStream(file), 1 << 20));
    }

    /**
     * Restores the image in {@code file} as a session of {@code tenant}. Throws CheckpointRefused (a replay, a
     * placement, an id or a hash that does not match; the message says which) or IOException (the image cannot
     * be read); either way nothing of it is left.
     */
    public static Restored restore(java.nio.file.Path file, DriverHost host, BackendSettings settings, ContextPool pool,
                                   io.gpusockets.backend.tenant.TenantAccount tenant, long retainBytes,
                                   CheckpointProgress progress)
            throws CheckpointRefused, IOException {
        return restore(file, host, settings, pool, tenant, retainBytes, progress, java.util.List.of());
    }

    /**
     * One physical allocation a hand-over brought (issue 23): {@code size} bytes the source mapped at {@code address}
     * in its window, or with address 0 one of the program's own allocations, in the order the image's records make
     * them ({@link Session#programMemory}); {@code fd} the POSIX descriptor (the caller's: the restore imports it and
     * never closes it), or -1 for a program allocation not handed over (made anew, its contents in the image).
     */
    public record Handed(long address, long size, int fd) {
    }

    /**
     * {@link #restore} of a hand-over's image: the window memory of the session is not made and filled but imported
     * from {@code handed} (cuMemImportFromShareableHandle) and mapped where the source had it; every window range the
     * replay backs must be one of them (else the restore is refused, naming it); those no replayed allocation takes
     * (a pool's free memory) are released. The image carries the rest of the contents as a checkpoint does.
     */
    public static Restored restore(java.nio.file.Path file, DriverHost host, BackendSettings settings, ContextPool pool,
                                   io.gpusockets.backend.tenant.TenantAccount tenant, long retainBytes,
                                   CheckpointProgress progress, java.util.List<Handed> handed)
            throws CheckpointRefused, IOException {
        return restore(file, host, settings, pool, tenant, retainBytes, progress, handed, null);
    }

    /**
     * What a migration's target landed ({@link MigrationLanding#handOff}): physical allocations of this process, by the
     * address the source had them at, holding their contents; {@code adopted} is run once the restore took them (from
     * then on the session releases them, however the restore ends; before, the caller does).
     */
    public record Landed(java.util.List<PhysicalMemory> memory, Runnable adopted) {
    }

    /**
     * {@link #restore} of a migration's image whose window memory was landed ({@code landed}, not null): the replay
     * maps the landed allocations where it backs those ranges, as a hand-over's restore maps the imported ones (every
     * window range it backs must be one of them), and the image carries the contents of the rest only.
     */
    public static Restored restore(java.nio.file.Path file, DriverHost host, BackendSettings settings, ContextPool pool,
                                   io.gpusockets.backend.tenant.TenantAccount tenant, long retainBytes,
                                   CheckpointProgress progress, java.util.List<Handed> handed, Landed landed)
            throws CheckpointRefused, IOException {
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(file)) {
            CountingInputStream counted = new CountingInputStream(new java.io.BufferedInputStream(
                    java.nio.channels.Channels.newInputStream(ch), 1 << 20));
            CheckpointImage.Header h = CheckpointImage.readHeader(new DataInputStream(counted));
            ch.position(counted.count); // the contents are read from the channel, not through the buffered stream
            RestoreModels.check(h, host, file); // before anything is made
            Session s = Session.detached(h.sessionId(), host, settings, pool, tenant, h.resume().features());
            boolean ok = false;
            try {
                if (!handed.isEmpty()) {
                    importHanded(s, handed);
                } else if (landed != null) {
                    Map<Long, Long> handles = new java.util.HashMap<>(), sizes = new java.util.HashMap<>();
                    for (PhysicalMemory m : landed.memory()) {
                        handles.put(m.address(), m.handle());
                        sizes.put(m.address(), m.size());
                    }
                    s.stable().adopt(handles, sizes, null);
                    landed.adopted().run();
                }
                try {
                    replay(s, h, progress);
                } finally {
                    int unused = s.stable().endAdoption();
                    if (unused > 0) {
                        LOG.log(System.Logger.Level.DEBUG, "session " + h.sessionId() + ": " + unused
                                + " handed-over allocation(s) held no live allocation (released)");
                    }
                }
                long total = 0;
                for (CheckpointRecorder.Record r : h.records()) {
                    if (r.kind == CheckpointRecorder.Kind.ALLOC || r.kind == CheckpointRecorder.Kind.GLOBAL) {
                        total += r.size;
                    }
                }
                for (CheckpointVmm.Piece piece : CheckpointVmm.contents(s)) {
                    total += piece.size(); // the program's VMM memory, as replayed
                }
                long bytes = writeContents(s, h, ch, progress, total);
                for (Map.Entry<Integer, long[]> l : h.laneContexts().entrySet()) {
                    long[] reals = new long[l.getValue().length];
                    for (int i = 0; i < reals.length; i++) {
                        reals[i] = contextReal(s, l.getValue()[i]);
                    }
                    s.lanes().restore(l.getKey(), reals);
                }
                s.primary().restoreRefs(h.primary());
                s.restoredShares(h.shares()); // made again once the session has its share broker (GroupCheckpoint)
                CheckpointImage.ResumeState r = h.resume();
                s.resumable(new Session.Resume(r.token(), r.identity(), java.time.Duration.ofSeconds(r.graceSeconds()),
                        r.features(), ResumeLog.restored(retainBytes, r.received(), r.kept())));
                ok = true;
                LOG.log(System.Logger.Level.INFO, "session " + h.sessionId() + " restored from " + file + ": "
                        + h.records().size() + " records replayed, " + bytes + " bytes of contents; waiting for its frontend");
                return new Restored(s, h.records().size(), bytes);
            } catch (ProtocolFault e) {
                throw new CheckpointRefused("restore of session " + h.sessionId() + " from " + file + " refused: "
                        + e.getMessage(), s.stable() != null && s.stable().windowTakenInProcess());
            } catch (IOException e) {
                throw new IOException("restore of session " + h.sessionId() + " from " + file + " failed: " + e.getMessage(), e);
            } finally {
                if (!ok) {
                    s.end("restore failed"); // everything it made goes
                }
            }
        }
    }

    /** Imports every handed-over allocation and gives them to the session's windows to map ({@link StableAddresses#adopt}). */
    private static void importHanded(Session s, java.util.List<Handed> handed) throws ProtocolFault {
        java.util.Map<Long, Long> handles = new java.util.HashMap<>(), sizes = new java.util.HashMap<>();
        java.util.List<long[]> program = new java.util.ArrayList<>();
        io.gpusockets.protocol.api.CudaDriver real = s.stable().real();
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment out = arena.allocate(8);
            for (Handed m : handed) {
                if (m.fd() < 0) {
                    program.add(new long[] {0, m.size()});
                    continue;
                }
                int r = real.cuMemImportFromShareableHandle(out, java.lang.foreign.MemorySegment.ofAddress(m.fd()),
                        io.gpusockets.protocol.structs.MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
                if (r != CuResult.CUDA_SUCCESS || (m.address() != 0 && handles.containsKey(m.address()))) {
                    handles.values().forEach(real::cuMemRelease);
                    program.stream().filter(h -> h[0] != 0).forEach(h -> real.cuMemRelease(h[0]));
                    if (r == CuResult.CUDA_SUCCESS) {
                        real.cuMemRelease(out.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0));
                    }
                    throw new ProtocolFault(String.format("the memory handed over for 0x%x (%d bytes) %s", m.address(),
                            m.size(), r != CuResult.CUDA_SUCCESS ? "cannot be imported: " + CuResult.name(r) : "came twice"));
                }
                long h = out.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0);
                if (m.address() == 0) {
                    program.add(new long[] {h, m.size()});
                } else {
                    handles.put(m.address(), h);
                    sizes.put(m.address(), m.size());
                }
            }
        }
        s.stable().adopt(handles, sizes, program);
    }

    /** A replay that does not reproduce the checkpointed session. */
    private static final class ProtocolFault extends Exception {
        ProtocolFault(String message) {
            super(message);
        }
    }

    private static long contextReal(Session s, long id) throws ProtocolFault {
        if (id == 0) {
            return 0;
        }
        SessionHandles.Entry e = s.handles().get(id, ParamType.CTX);
        if (e == null) {
            throw new ProtocolFault("context " + id + " is not there after the replay");
        }
        return e.real();
    }

    private static void replay(Session s, CheckpointImage.Header h, CheckpointProgress progress)
            throws ProtocolFault, IOException {
        StableAddresses stable = s.stable();
        h.windows().forEach(stable::windowAt);
        GlobalTranslation translation = new GlobalTranslation();
        s.translation(translation); // the globals that come back elsewhere, from the first replayed one
        s.primary().restoreFlags(h.primary());
        Lane lane = new Lane(s, -1, true);
        ExecutionThread exec = ExecutionThread.current(s.chunkBytes(), s.hostBuffers());
        ApiTable table = ApiTable.get();
        long requestId = 0;
        int n = 0;
        try {
            for (CheckpointRecorder.Record r : h.records()) {
                ApiFunction f = table.byOpcode(r.opcode);
                if (f == null) {
                    throw new ProtocolFault("record " + r.seq + ": opcode " + r.opcode + " unknown to this backend");
                }
                if (f.name().equals("cuIpcOpenEventHandle") && !h.shares().openedEvents().isEmpty()) {
                    continue; // made again, joined to its exporter's share, once that is restored (GroupCheckpoint)
                }
                lane.contextStack(r.context == 0 ? new long[0] : new long[] {contextReal(s, r.context)});
                if (r.kind == CheckpointRecorder.Kind.ALLOC) {
                    stable.placeNext(r.base);
                }
                translation.expect(r.kind == CheckpointRecorder.Kind.GLOBAL ? r.base : 0);
                CheckpointRecorder.Issued pin = new CheckpointRecorder.Issued(r.ids);
                CheckpointRecorder.ISSUED.set(pin);
                long req = ++requestId;
                int chunk = s.chunkBytes();
                int partStart = 0;
                for (int part : dataParts(f, r.body, r.data.length)) {
                    for (int off = partStart; off < partStart + part; off += chunk) {
                        int len = Math.min(chunk, partStart + part - off);
                        ByteBuffer b = ByteBuffer.wrap(r.data, off, len).slice().order(ByteOrder.LITTLE_ENDIAN);
                        lane.offerData(new Inbound(new FrameHeader(len, Opcodes.DATA, 0, lane.id, req), b, 0));
                    }
                    partStart += part;
                }
                ByteBuffer body = ByteBuffer.wrap(r.body.clone()).order(ByteOrder.LITTLE_ENDIAN);
                if (r.kind == CheckpointRecorder.Kind.ALLOC) {
                    streamsGoneToLegacy(s, f, body);
                }
                lane.replayResult = CuResult.CUDA_ERROR_UNKNOWN;
                try {
                    s.dispatcher().execute(lane, new Inbound(new FrameHeader(r.body.length, r.opcode, 0, lane.id, req), body, 0),
                            exec);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted during the replay");
                } finally {
                    CheckpointRecorder.ISSUED.remove();
                }
                if (lane.replayResult != CuResult.CUDA_SUCCESS) {
                    String placement = r.kind == CheckpointRecorder.Kind.ALLOC ? stable.placeFailure() : null;
                    throw new ProtocolFault("replaying " + f.name() + " (record " + r.seq + ") failed: "
                            + CuResult.name(lane.replayResult) + (placement != null ? " (" + placement + ")" : ""));
                }
                if (!java.util.Arrays.equals(pin.ids(), r.ids)) {
                    String object = driverValued(f);
                    if (object != null) {
                        throw new ProtocolFault(String.format("the %s 0x%x (record %d, %s) came back from the driver as %s:"
                                + " kernels and device memory may hold its value, and a restore never changes it",
                                object, r.ids.length > 0 ? r.ids[0] : 0, r.seq, f.name(), pin.ids().length > 0
                                        ? String.format("0x%x", pin.ids()[0]) : "nothing"));
                    }
                    throw new ProtocolFault("replaying " + f.name() + " (record " + r.seq + ") issued handle ids "
                            + java.util.Arrays.toString(pin.ids()) + ", not the recorded " + java.util.Arrays.toString(r.ids));
                }
                if (r.kind == CheckpointRecorder.Kind.ALLOC && s.memory().allocationAt(r.base) == null) {
                    throw new ProtocolFault(String.format("replaying %s (record %d) did not place the allocation at 0x%x%s",
                            f.name(), r.seq, r.base, stable.placeFailure() == null ? "" : ": " + stable.placeFailure()));
                }
                String vmmWrong = CheckpointVmm.replayed(s, f, r);
                if (vmmWrong != null) {
                    throw new ProtocolFault("replaying " + f.name() + " (record " + r.seq + "): " + vmmWrong);
                }
                if (r.kind == CheckpointRecorder.Kind.GLOBAL) {
                    // where the driver placed it now: at its recorded address, or elsewhere (then translated)
                    long real = translation.toReal(r.base);
                    SessionMemory.Range g = s.memory().at(real);
                    if (g == null) {
                        throw new ProtocolFault(String.format("the module global %s (0x%x, %d bytes) did not come back"
                                + " when its module was loaded again", globalName(f, r.body), r.base, r.size));
                    }
                    if (g.size() != r.size) {
                        // a translation maps the recorded range onto the new one byte for byte: unsound for another size
                        throw new ProtocolFault(String.format("the module global %s has %d bytes after its module was"
                                + " loaded again, not the recorded %d (at 0x%x): its module is not the one checkpointed",
                                globalName(f, r.body), g.size(), r.size, r.base));
                    }
                    if (real != r.base) {
                        LOG.log(System.Logger.Level.DEBUG, () -> String.format("session %d: module global %s at 0x%x"
                                + " now lies at 0x%x: translated", s.id(), globalName(f, r.body), r.base, real));
                    }
                }
                progress.progress("replay", ++n, h.records().size());
            }
        } finally {
            translation.expect(0);
            s.uses().unregister(lane.uses);
            ExecutionThread.end();
        }
        if (translation.isEmpty()) {
            s.translation(null); // every global in its place: no call pays for translating
        } else {
            LOG.log(System.Logger.Level.INFO, "session " + s.id() + ": " + translation.snapshot().size() + " module"
                    + " globals lie elsewhere than the program knows them: their addresses are translated");
        }
        if (stable.windowBases().entrySet().stream().anyMatch(e -> !e.getValue().equals(h.windows().get(e.getKey())))) {
            throw new ProtocolFault("the address windows are at " + stable.windowBases() + ", not at " + h.windows());
        }
        s.handles().continueFrom(h.nextHandleId());
    }

    /**
     * The lengths of the DATA parameters a record's bytes hold, in order: a DATA frame never crosses from one into
     * the next (the frontend sends each in frames of its own). A generically decoded call's are its bulk
     * inputs' lengths (cuTexObjectCreate's descriptors), as its body gives them (cuGraphAddMemcpyNode: the dependencies, then the copy; the edges of
     * cuGraphAddDependencies); cuGraphAddMemAllocNode's (GraphRequest: body graph, numDependencies, ...) are the
     * dependencies, the pool properties and the access descriptors; any other call's DATA is one part.
     */
    private static int[] dataParts(ApiFunction f, byte[] body, int length) throws ProtocolFault {
        if (length == 0) {
            return new int[0];
        }
        if (f.name().equals("cuGraphAddMemAllocNode")) {
            long deps = 8 * ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN).getLong(8);
            long props = io.gpusockets.protocol.structs.MemoryProps.POOL_PROPS_SIZE;
            if (deps < 0 || deps + props > length) {
                throw new ProtocolFault("a cuGraphAddMemAllocNode record of " + length + " DATA bytes for " + deps / 8
                        + " dependencies");
            }
            return new int[] {(int) deps, (int) props, (int) (length - deps - props)};
        }
        if (f.codec() != io.gpusockets.protocol.api.WireCodec.GENERIC) {
            return new int[] {length};
        }
        long[] in = CheckpointRecorder.inputs(f, body);
        java.util.List<Integer> parts = new java.util.ArrayList<>();
        long sum = 0;
        for (var p : f.params()) {
            if (!p.out() && p.type().isBulk() && in[p.index()] > 0) {
                parts.add((int) in[p.index()]);
                sum += in[p.index()];
            }
        }
        return sum == length ? parts.stream().mapToInt(Integer::intValue).toArray() : new int[] {length};
    }

    /**
     * A stream-ordered allocation's stream may have been destroyed since (its allocation lives on): it is replayed on
     * the legacy stream instead. The checkpoint's drain synchronised every context, so the allocation was complete
     * and its stream order no longer matters; the restored allocation, mapped at the call, is ready at once.
     */
    private static void streamsGoneToLegacy(Session s, ApiFunction f, ByteBuffer body) {
        int at = 0;
        for (var p : f.params()) {
            if (p.out()) {
                continue;
            }
            switch (p.type()) {
                case NULL, ZERO, PTR, HOSTPTR -> { }
                case CSTR -> at += 4 + body.getInt(at);
                case BYTES, IMAGE -> at += 8;
                default -> {
                    if (p.type() == ParamType.STREAM && body.getLong(at) != 0
                            && s.handles().get(body.getLong(at), ParamType.STREAM) == null) {
                        body.putLong(at, 0);
                    }
                    at += p.type().wireBytes();
                }
            }
        }
    }

    /**
     * "texture object" or "surface object" when {@code f} makes one (its id is the driver's value, which a replay
     * cannot pin, only compare), else null.
     */
    private static String driverValued(ApiFunction f) {
        for (var p : f.params()) {
            if (p.out() && p.type().isIdentityHandle()) {
                return p.type() == ParamType.TEX ? "texture object" : "surface object";
            }
        }
        return null;
    }

    /** The name a cuModuleGetGlobal / cuLibraryGetGlobal request asked for. */
    private static String globalName(ApiFunction f, byte[] body) {
        ByteBuffer b = ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN);
        for (var p : f.params()) {
            if (p.out()) {
                continue;
            }
            if (p.type() == ParamType.CSTR) {
                int len = b.getInt();
                return "'" + new String(body, b.position(), len, StandardCharsets.UTF_8) + "'";
            }
            if (p.type() != ParamType.NULL && p.type() != ParamType.ZERO) {
                b.position(b.position() + p.type().wireBytes());
            }
        }
        return "(unnamed)";
    }

    /**
     * Streams the contents into the device from {@code ch} (positioned after the header) with
     * {@link CheckpointIo#threads()} workers ({@link CheckpointContents}): each chunk checked against its hash
     * first and written only into the session's own ranges.
     */
    private static long writeContents(Session s, CheckpointImage.Header h, java.nio.channels.FileChannel ch,
                                      CheckpointProgress progress, long total) throws IOException, ProtocolFault {
        Map<Long, Long> contextOf = new java.util.HashMap<>();
        long first = 0;
        for (CheckpointRecorder.Record r : h.records()) {
            if (r.kind == CheckpointRecorder.Kind.ALLOC || r.kind == CheckpointRecorder.Kind.GLOBAL) {
                long ctx = r.kind == CheckpointRecorder.Kind.ALLOC ? s.stable().contextOf(r.base) : 0;
                contextOf.put(r.base, ctx != 0 ? ctx : contextReal(s, r.context));
                first = first != 0 ? first : contextOf.get(r.base);
            }
        }
        java.util.List<CheckpointImage.Range> arrays = CheckpointArrays.ranges(s.driver(), s.handles());
        for (CheckpointImage.Range a : arrays) {
            total += a.size();
        }
        int threads = CheckpointIo.threads();
        try (CheckpointContents contents = new CheckpointContents(s.driver(), s.id(), first, s.quota(), threads);
             CheckpointContents.DriverDevice memoryDevice = new CheckpointContents.DriverDevice(s.driver(), (address, length) -> {
                 // the image's addresses are the program's; a moved global's contents go where it lies now
                 SessionMemory.Range r = s.memory().covering(s.toReal(address), length);
                 Long ctx = r == null ? null : r.owner() == SessionMemory.MAPPING ? (Long) CheckpointVmm.contextOf(s, address)
                         : contextOf.get(s.toProgram(r.base()));
                 if (ctx == null || ctx == 0) {
                     throw new IOException(String.format("contents for 0x%x+%d, outside the restored allocations", address,
                             length));
                 }
                 return ctx;
             }, s::toReal);
             CheckpointArrays.Device device = new CheckpointArrays.Device(s.driver(), memoryDevice,
                     range -> CheckpointArrays.resolve(s.driver(), s.handles(), range))) {
            long bytes = contents.read(ch, h.version(), device, progress, total, threads);
            java.util.List<String> missing = device.missing(arrays);
            if (!missing.isEmpty()) {
                throw new ProtocolFault("the image holds no contents, or not all, for " + String.join(", ", missing));
            }
            return bytes;
        }
    }
}
