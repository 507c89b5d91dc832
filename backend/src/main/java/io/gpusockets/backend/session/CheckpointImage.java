package io.gpusockets.backend.session;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.zip.CRC32C;

/**
 * The file a checkpoint writes and a restore reads (issue 22): versioned and self-describing, all numbers
 * big-endian ({@link DataOutputStream}), strings as modified UTF-8 with a u16 length.
 *
 * <pre>
 * magic "GPUSCKPT", u32 version (5 for a session of a group that imported another's shareable VMM handle, 4 for
 *          one that shares otherwise with others of its group, else 3; versions 1 and 2 are read too)
 * u64 session id, utf tenant
 * u32 n, n x (i32 device, u64 window base)            the address windows
 * u64 next handle id
 * resume:  u32 token length, token, utf identity, u64 grace seconds, i32 features,
 *          u32 n, n x (i32 lane, u64 last request id, u64 DATA frames of it)          received
 *          u32 n, n x (i32 lane, u64 request id, u32 frames, frames x (i32 opcode, i32 flags, u32 length, bytes))
 *                                                       complete replies not yet acknowledged
 * u32 n, n x (i32 references, i32 flags)               primary contexts, by device
 * u32 n, n x (i32 lane, u32 depth, depth x u64 context id)   lanes' context stacks, bottom first
 * u32 n, n x record:  u8 kind (0 make, 1 alloc, 2 global, 3 set), i32 opcode, u64 context id,
 *          u32 length, request body, u32 length, DATA bytes, u32 n, n x u64 issued id, u64 base, u64 size,
 *          u64 target, utf key ("" for none)
 * u32 n, n x (i32 device, utf name, i32 compute capability as major * 10 + minor, -1 unknown)   the devices' models,
 *          which a restore checks the module images against ({@link RestoreModels}); not in versions 1 and 2
 * versions 4 and 5, the IPC memory shared within a group checkpointed together ({@link Shares}):
 *          u32 n, n x export (u8 kind (1 memory, 2 event, 3 VMM), i64 token id, 16 bytes token secret, u64 object
 *                   (memory: the allocation's address; event: its handle id; VMM: the allocation's handle id), u64 size
 *                   (event: 0))
 *          u32 n, n x opened memory (64 bytes token, u64 base, u64 size, u64 reservation, u64 span, i32 device)
 *          u32 n, n x opened event (64 bytes token, u64 event handle id, u64 context id)
 * version 5 only, the shareable VMM handles imported from another session of the group ({@link Imported}):
 *          u32 n, n x imported (64 bytes token, u64 handle id (0: the program released it), i32 references, u64 size,
 *                   u32 n, n x mapping (u64 base, u64 size, u64 offset))
 *          u32 n, n x access setting over them (u64 base, u64 size, u64 context id, i32 device, u32 length, bytes
 *                   CUmemAccessDesc list)
 * u32 n, n x range:  u8 kind (0 device memory, 1 CUDA array, 2 a mipmapped array's level), u64 base (memory: the
 *          address; an array or mipmapped array: its handle id), u32 level (kind 2; else 0), u64 size, then chunks of
 *          at most {@link #CHUNK_BYTES} until size is covered: u32 length, bytes, u32 CRC32C of the bytes
 *          allocations', globals', then arrays' contents (an array's: its elements packed, x fastest, then rows,
 *          then slices (3D depth, layers, cubemap faces), in chunks of whole slices, whole rows of one slice, or
 *          part of one row: {@link CheckpointArrays.Geometry})
 * magic "GPUSEND!"
 * </pre>
 *
 * Version 1 (written before CUDA arrays were captured) has no kind and no level in a range: all its ranges are
 * device memory. Versions 1 and 2 have no device models (a restore then checks the modules against its devices
 * without naming the checkpointing one). A restore reads all three; other versions are refused, naming the version.
 *
 * Everything but the contents is read into memory first (it is bounded by the recorder's bound); the contents
 * are streamed through a channel, each chunk checked against its hash before it is used ({@link ContentsReader}), or,
 * from a file, handed out chunk by chunk with their positions ({@link ChunkIndex}) to threads that read and check
 * them at those positions; {@link CheckpointContents} moves them between the device and the file. Where each chunk
 * lies follows from the ranges and the chunks' lengths alone ({@link #RANGE_BYTES}, {@link #CHUNK_FRAMING}), so
 * threads that write chunks at their own positions write the same image, byte for byte, as one thread writing in
 * order: the format is unchanged by how many threads wrote it.
 */
final class CheckpointImage {
    static final byte[] MAGIC = "GPUSCKPT".getBytes(StandardCharsets.US_ASCII);
    static final byte[] END = "GPUSEND!".getBytes(StandardCharsets.US_ASCII);
    static final int VERSION = 5;
    /** The first version that records the devices' models. */
    static final int DEVICES_VERSION = 3;
    /** The first version that records shares ({@link Shares}); an image without shares is written as version 3. */
    static final int SHARES_VERSION = 4;
    /**
     * The first version that records imported shareable VMM handles ({@link Shares#imported}); an image without them is
     * written as version 4 or 3.
     */
    static final int IMPORTS_VERSION = 5;
    /** The oldest version a restore reads. */
    static final int OLDEST_VERSION = 1;
    /** The chunk size contents are copied and hashed in. */
    static final int CHUNK_BYTES = 8 << 20;
    /** Bounds a reader applies to what it allocates for one item (an image is not trusted more than a peer). */
    private static final int MAX_ITEMS = 1 << 24;
    private static final int MAX_BYTES = 1 << 30;
    /** The most bytes of one access setting's descriptors ({@link PoolCalls#MAX_ACCESS_DESCS} of 12 bytes). */
    private static final int MAX_ACCESS_DESC_BYTES = (int) PoolCalls.MAX_ACCESS_DESCS * 12;

    /** A resumable session's state: what {@link Session.Resume} and {@link ResumeLog} hold. */
    record ResumeState(byte[] token, String identity, long graceSeconds, int features, Map<Integer, long[]> received,
                       List<ResumeLog.Kept> kept) {
    }

    /**
     * Everything but the contents; {@code version}: the image's (a header to write has {@link #VERSION}, and is written
     * as {@link #SHARES_VERSION} when it has shares, else as {@link #DEVICES_VERSION}).
     */
    record Header(long sessionId, String tenant, Map<Integer, Long> windows, long nextHandleId, ResumeState resume,
                  int[][] primary, Map<Integer, long[]> laneContexts, List<CheckpointRecorder.Record> records,
                  List<DeviceModel> devices, Shares shares, int version) {
        /** A header of this backend's {@link #VERSION}, without shares. */
        Header(long sessionId, String tenant, Map<Integer, Long> windows, long nextHandleId, ResumeState resume,
               int[][] primary, Map<Integer, long[]> laneContexts, List<CheckpointRecorder.Record> records,
               List<DeviceModel> devices) {
            this(sessionId, tenant, windows, nextHandleId, resume, primary, laneContexts, records, devices, Shares.NONE,
                    VERSION);
        }

        /** This header with {@code s} as its shares. */
        Header withShares(Shares s) {
            return new Header(sessionId, tenant, windows, nextHandleId, resume, primary, laneContexts, records, devices, s,
                    version);
        }
    }

    /**
     * The IPC memory a session of a group checkpointed together shares with the others (version 4): what it exported
     * that is restored as a share again, under the same token, once its allocation is back ({@code exports}), and the
     * exporters' memory it had opened, re-mapped at the same address on restore ({@code opened}).
     */
    record Shares(List<Export> exports, List<Opened> opened, List<OpenedEvent> openedEvents, List<Imported> imported,
                  List<ImportedAccess> importedAccesses) {
        static final Shares NONE = new Shares(List.of(), List.of(), List.of(), List.of(), List.of());

        Shares(List<Export> exports, List<Opened> opened, List<OpenedEvent> openedEvents) {
            this(exports, opened, openedEvents, List.of(), List.of());
        }

        boolean isEmpty() {
            return exports.isEmpty() && opened.isEmpty() && openedEvents.isEmpty() && imported.isEmpty()
                    && importedAccesses.isEmpty();
        }
    }

    /**
     * A shareable VMM handle imported from another session of the group ({@code token}, the exporter's export of
     * {@code size} bytes, whose contents are in the exporter's image), under handle id {@code handle} (0: the program
     * released it and only maps it), with {@code references} of the session's references, and its mappings in the
     * session's reservations: imported again and mapped at the same addresses on restore.
     */
    record Imported(byte[] token, long handle, int references, long size, List<ImportedMapping> mappings) {
    }

    /** One mapping of an {@link Imported} handle: [offset, offset+size) of it at [base, base+size). */
    record ImportedMapping(long base, long size, long offset) {
    }

    /**
     * A cuMemSetAccess in force over mappings of which one at least is of an {@link Imported} handle: made again, in
     * order, once they are mapped again; {@code context}: its id, of {@code device}; {@code desc}: the CUmemAccessDesc
     * list.
     */
    record ImportedAccess(long base, long size, long context, int device, byte[] desc) {
    }

    /**
     * An IPC export of {@code kind} ({@link ShareRegistry#KIND_MEMORY}: the allocation at {@code address}, {@code size}
     * bytes; {@link ShareRegistry#KIND_EVENT}: the event whose handle id is {@code address}, size 0): its token's id
     * and secret.
     */
    record Export(byte kind, long tokenId, byte[] secret, long address, long size) {
    }

    /** An IPC event opened with {@code token}: the opener's event (handle id {@code event}) in context {@code context}. */
    record OpenedEvent(byte[] token, long event, long context) {
    }

    /**
     * Opened IPC memory: the token it was opened with, its base and size in the opener, and the opener's reservation
     * ({@code span} bytes at {@code reservation}) that maps the exporter's physical allocations, for device {@code device}.
     */
    record Opened(byte[] token, long base, long size, long reservation, long span, int device) {
    }

    /** A device of the checkpointing backend: its ordinal, name and compute capability (major * 10 + minor, or -1). */
    record DeviceModel(int device, String name, int capability) {
    }

    /** A range of device memory: its contents are at {@code base}. */
    static final int MEMORY = 0;
    /** A CUDA array: {@code base} is its handle id. */
    static final int ARRAY = 1;
    /** Level {@code level} of a mipmapped array: {@code base} is the mipmapped array's handle id. */
    static final int MIPMAP_LEVEL = 2;

    /**
     * A range whose contents follow the header: {@code size} bytes of device memory at {@code base} ({@link #MEMORY}),
     * or the packed elements of a CUDA array ({@link #ARRAY}) or of a mipmapped array's level ({@link #MIPMAP_LEVEL}).
     */
    record Range(int kind, long base, int level, long size) {
        /** Device memory. */
        Range(long base, long size) {
            this(MEMORY, base, 0, size);
        }

        boolean memory() {
            return kind == MEMORY;
        }

        /** For messages: the address, or the array. */
        String describe() {
            return switch (kind) {
                case MEMORY -> String.format("0x%x", base);
                case ARRAY -> "CUDA array " + base;
                default -> "level " + level + " of mipmapped array " + base;
            };
        }
    }

    private CheckpointImage() {
    }

    static void writeHeader(DataOutputStream out, Header h, List<Range> ranges) throws IOException {
        boolean shares = !h.shares().isEmpty();
        boolean imports = shares && !(h.shares().imported().isEmpty() && h.shares().importedAccesses().isEmpty());
        out.write(MAGIC);
        // older backends read an image without shares, or without imported VMM handles
        out.writeInt(imports ? IMPORTS_VERSION : shares ? SHARES_VERSION : DEVICES_VERSION);
        out.writeLong(h.sessionId());
        out.writeUTF(h.tenant());
        out.writeInt(h.windows().size());
        for (Map.Entry<Integer, Long> w : h.windows().entrySet()) {
            out.writeInt(w.getKey());
            out.writeLong(w.getValue());
        }
        out.writeLong(h.nextHandleId());
        ResumeState r = h.resume();
        out.writeInt(r.token().length);
        out.write(r.token());
        out.writeUTF(r.identity());
        out.writeLong(r.graceSeconds());
        out.writeInt(r.features());
        out.writeInt(r.received().size());
        for (Map.Entry<Integer, long[]> e : r.received().entrySet()) {
            out.writeInt(e.getKey());
            out.writeLong(e.getValue()[0]);
            out.writeLong(e.getValue()[1]);
        }
        out.writeInt(r.kept().size());
        for (ResumeLog.Kept k : r.kept()) {
            out.writeInt(k.lane());
            out.writeLong(k.requestId());
            out.writeInt(k.heads().size());
            for (int i = 0; i < k.heads().size(); i++) {
                out.writeInt(k.heads().get(i)[0]);
                out.writeInt(k.heads().get(i)[1]);
                out.writeInt(k.bodies().get(i).length);
                out.write(k.bodies().get(i));
            }
        }
        out.writeInt(h.primary().length);
        for (int[] p : h.primary()) {
            out.writeInt(p[0]);
            out.writeInt(p[1]);
        }
        out.writeInt(h.laneContexts().size());
        for (Map.Entry<Integer, long[]> l : h.laneContexts().entrySet()) {
            out.writeInt(l.getKey());
            out.writeInt(l.getValue().length);
            for (long c : l.getValue()) {
                out.writeLong(c);
            }
        }
        out.writeInt(h.records().size());
        for (CheckpointRecorder.Record rec : h.records()) {
            out.writeByte(rec.kind.ordinal());
            out.writeInt(rec.opcode);
            out.writeLong(rec.context);
            out.writeInt(rec.body.length);
            out.write(rec.body);
            out.writeInt(rec.data.length);
            out.write(rec.data);
            out.writeInt(rec.ids.length);
            for (long id : rec.ids) {
                out.writeLong(id);
            }
            out.writeLong(rec.base);
            out.writeLong(rec.size);
            out.writeLong(rec.target);
            out.writeUTF(rec.key == null ? "" : rec.key);
        }
        out.writeInt(h.devices().size());
        for (DeviceModel d : h.devices()) {
            out.writeInt(d.device());
            out.writeUTF(d.name());
            out.writeInt(d.capability());
        }
        if (shares) {
            out.writeInt(h.shares().exports().size());
            for (Export e : h.shares().exports()) {
                out.writeByte(e.kind());
                out.writeLong(e.tokenId());
                out.write(e.secret());
                out.writeLong(e.address());
                out.writeLong(e.size());
            }
            out.writeInt(h.shares().opened().size());
            for (Opened o : h.shares().opened()) {
                out.write(o.token());
                out.writeLong(o.base());
                out.writeLong(o.size());
                out.writeLong(o.reservation());
                out.writeLong(o.span());
                out.writeInt(o.device());
            }
            out.writeInt(h.shares().openedEvents().size());
            for (OpenedEvent o : h.shares().openedEvents()) {
                out.write(o.token());
                out.writeLong(o.event());
                out.writeLong(o.context());
            }
        }
        if (imports) {
            out.writeInt(h.shares().imported().size());
            for (Imported m : h.shares().imported()) {
                out.write(m.token());
                out.writeLong(m.handle());
                out.writeInt(m.references());
                out.writeLong(m.size());
                out.writeInt(m.mappings().size());
                for (ImportedMapping g : m.mappings()) {
                    out.writeLong(g.base());
                    out.writeLong(g.size());
                    out.writeLong(g.offset());
                }
            }
            out.writeInt(h.shares().importedAccesses().size());
            for (ImportedAccess a : h.shares().importedAccesses()) {
                out.writeLong(a.base());
                out.writeLong(a.size());
                out.writeLong(a.context());
                out.writeInt(a.device());
                out.writeInt(a.desc().length);
                out.write(a.desc());
            }
        }
        out.writeInt(ranges.size());
    }

    /** Writes the start of one range's contents: its kind, base, level and size; its chunks follow ({@link #writeChunk}). */
    static void writeRange(WritableByteChannel out, Range r) throws IOException {
        writeFully(out, rangeStart(r));
    }

    /** Bytes of a range's start in this version; {@link #RANGE_BYTES_V1} in version 1. */
    static final int RANGE_BYTES = 21, RANGE_BYTES_V1 = 16;

    /** The start of a range's contents, as {@link #writeRange} writes it: {@link #RANGE_BYTES} bytes. */
    static ByteBuffer rangeStart(Range r) {
        return ByteBuffer.allocate(RANGE_BYTES).put((byte) r.kind()).putLong(r.base()).putInt(r.level()).putLong(r.size())
                .flip();
    }

    /** Bytes around each chunk's data: its u32 length before, its u32 CRC32C after. */
    static final int CHUNK_FRAMING = 8;

    /** Writes one chunk: its length, the first {@code length} bytes of {@code bytes}, their CRC32C (hashed here). */
    static void writeChunk(WritableByteChannel out, MemorySegment bytes, int length, CRC32C crc) throws IOException {
        if (length <= 0 || length > CHUNK_BYTES) {
            throw new IllegalArgumentException("chunk length=" + length);
        }
        ByteBuffer data = bytes.asSlice(0, length).asByteBuffer();
        crc.reset();
        crc.update(data.duplicate());
        writeFully(out, ByteBuffer.allocate(4).putInt(length).flip());
        writeFully(out, data);
        writeFully(out, ByteBuffer.allocate(4).putInt((int) crc.getValue()).flip());
    }

    static void writeEnd(WritableByteChannel out) throws IOException {
        writeFully(out, ByteBuffer.wrap(END));
    }

    private static void writeFully(WritableByteChannel out, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            out.write(b);
        }
    }

    static Header readHeader(DataInputStream in) throws IOException {
        byte[] magic = new byte[MAGIC.length];
        in.readFully(magic);
        if (!java.util.Arrays.equals(magic, MAGIC)) {
            throw new IOException("not a GPUsockets checkpoint image (bad magic)");
        }
        int version = in.readInt();
        if (version < OLDEST_VERSION || version > VERSION) {
            throw new IOException("checkpoint image version " + version + "; this backend reads versions " + OLDEST_VERSION
                    + " to " + VERSION);
        }
        long sessionId = in.readLong();
        String tenant = in.readUTF();
        Map<Integer, Long> windows = new TreeMap<>();
        for (int i = 0, n = count(in); i < n; i++) {
            windows.put(in.readInt(), in.readLong());
        }
        long nextId = in.readLong();
        byte[] token = bytes(in, count(in));
        String identity = in.readUTF();
        long grace = in.readLong();
        int features = in.readInt();
        Map<Integer, long[]> received = new TreeMap<>();
        for (int i = 0, n = count(in); i < n; i++) {
            received.put(in.readInt(), new long[] {in.readLong(), in.readLong()});
        }
        List<ResumeLog.Kept> kept = new ArrayList<>();
        for (int i = 0, n = count(in); i < n; i++) {
            int lane = in.readInt();
            long req = in.readLong();
            List<int[]> heads = new ArrayList<>();
            List<byte[]> bodies = new ArrayList<>();
            for (int j = 0, m = count(in); j < m; j++) {
                heads.add(new int[] {in.readInt(), in.readInt()});
                bodies.add(bytes(in, count(in)));
            }
            kept.add(new ResumeLog.Kept(lane, req, heads, bodies));
        }
        int devices = count(in);
        int[][] primary = new int[devices][];
        for (int d = 0; d < devices; d++) {
            primary[d] = new int[] {in.readInt(), in.readInt()};
        }
        Map<Integer, long[]> lanes = new TreeMap<>();
        for (int i = 0, n = count(in); i < n; i++) {
            int lane = in.readInt();
            long[] stack = new long[count(in)];
            for (int j = 0; j < stack.length; j++) {
                stack[j] = in.readLong();
            }
            lanes.put(lane, stack);
        }
        List<CheckpointRecorder.Record> records = new ArrayList<>();
        CheckpointRecorder.Kind[] kinds = CheckpointRecorder.Kind.values();
        for (int i = 0, n = count(in); i < n; i++) {
            int kind = in.readUnsignedByte();
            if (kind >= kinds.length) {
                throw new IOException("checkpoint image: record " + i + " of unknown kind " + kind);
            }
            int opcode = in.readInt();
            long context = in.readLong();
            byte[] body = bytes(in, count(in));
            byte[] data = bytes(in, count(in));
            long[] ids = new long[count(in)];
            for (int j = 0; j < ids.length; j++) {
                ids[j] = in.readLong();
            }
            long base = in.readLong(), size = in.readLong(), target = in.readLong();
            String key = in.readUTF();
            records.add(new CheckpointRecorder.Record(i, kinds[kind], opcode, body, data, context, ids, base, size, target,
                    key.isEmpty() ? null : key));
        }
        List<DeviceModel> models = new ArrayList<>();
        for (int i = 0, n = version >= DEVICES_VERSION ? count(in) : 0; i < n; i++) {
            models.add(new DeviceModel(in.readInt(), in.readUTF(), in.readInt()));
        }
        Shares shares = Shares.NONE;
        if (version >= SHARES_VERSION) {
            List<Export> exports = new ArrayList<>();
            for (int i = 0, n = count(in); i < n; i++) {
                byte kind = in.readByte();
                if (kind != ShareRegistry.KIND_MEMORY && kind != ShareRegistry.KIND_EVENT && kind != ShareRegistry.KIND_VMM) {
                    throw new IOException("checkpoint image: export " + i + " of unknown kind " + kind);
                }
                exports.add(new Export(kind, in.readLong(), bytes(in, 16), in.readLong(), in.readLong()));
            }
            List<Opened> opened = new ArrayList<>();
            for (int i = 0, n = count(in); i < n; i++) {
                opened.add(new Opened(bytes(in, ShareRegistry.TOKEN_BYTES), in.readLong(), in.readLong(), in.readLong(),
                        in.readLong(), in.readInt()));
            }
            List<OpenedEvent> events = new ArrayList<>();
            for (int i = 0, n = count(in); i < n; i++) {
                events.add(new OpenedEvent(bytes(in, ShareRegistry.TOKEN_BYTES), in.readLong(), in.readLong()));
            }
            List<Imported> imported = new ArrayList<>();
            List<ImportedAccess> accesses = new ArrayList<>();
            if (version >= IMPORTS_VERSION) {
                for (int i = 0, n = count(in); i < n; i++) {
                    byte[] importToken = bytes(in, ShareRegistry.TOKEN_BYTES);
                    long handle = in.readLong();
                    int references = in.readInt();
                    long size = in.readLong();
                    List<ImportedMapping> mappings = new ArrayList<>();
                    for (int j = 0, k = count(in); j < k; j++) {
                        mappings.add(new ImportedMapping(in.readLong(), in.readLong(), in.readLong()));
                    }
                    imported.add(new Imported(importToken, handle, references, size, List.copyOf(mappings)));
                }
                for (int i = 0, n = count(in); i < n; i++) {
                    long base = in.readLong(), size = in.readLong(), context = in.readLong();
                    int device = in.readInt();
                    int length = in.readInt();
                    if (length <= 0 || length > MAX_ACCESS_DESC_BYTES) {
                        throw new IOException("checkpoint image: imported VMM access setting " + i + " of " + length
                                + " bytes of descriptors");
                    }
                    accesses.add(new ImportedAccess(base, size, context, device, bytes(in, length)));
                }
            }
            shares = new Shares(List.copyOf(exports), List.copyOf(opened), List.copyOf(events), List.copyOf(imported),
                    List.copyOf(accesses));
        }
        return new Header(sessionId, tenant, windows, nextId,
                new ResumeState(token, identity, grace, features, received, kept), primary, lanes, records, models, shares,
                version);
    }

    /** One verified chunk of contents: its range, where in the range it goes, and how many bytes it has. */
    record Chunk(Range range, long offset, int length) {
        /** Where on the device a chunk of device memory goes. */
        long address() {
            return range.base() + offset;
        }
    }

    /**
     * Reads the contents that follow the header, one chunk at a time, each checked against its hash before
     * {@link #next} returns it; a chunk whose hash does not match, a range that does not add up, or a missing end
     * fails the read. Reads the channel from where the header ended.
     */
    static final class ContentsReader {
        private final ReadableByteChannel in;
        private final int version;
        private final ByteBuffer small = ByteBuffer.allocate(RANGE_BYTES);
        private final CRC32C crc = new CRC32C();
        private int ranges = -1;
        private int range = -1;
        private Range current;
        private long off;
        private boolean ended;

        /** A reader of contents written in {@link #VERSION}. */
        ContentsReader(ReadableByteChannel in) {
            this(in, VERSION);
        }

        /** A reader of contents written in {@code version} (read from the header). */
        ContentsReader(ReadableByteChannel in, int version) {
            this.in = in;
            this.version = version;
        }

        /**
         * Reads the next chunk into {@code into} (at least {@link #CHUNK_BYTES} long) and returns it once its hash
         * matches; null after the last one, once the end mark has been read.
         */
        Chunk next(MemorySegment into) throws IOException {
            if (ended) {
                return null;
            }
            if (ranges < 0) {
                ranges = readInt();
                if (ranges < 0 || ranges > MAX_ITEMS) {
                    throw new IOException("checkpoint image: count out of range: " + ranges);
                }
            }
            while (current == null || off >= current.size()) {
                if (++range >= ranges) {
                    byte[] end = new byte[END.length];
                    try {
                        readFully(ByteBuffer.wrap(end));
                    } catch (EOFException e) {
                        throw new IOException("checkpoint image: truncated (no end mark)");
                    }
                    if (!java.util.Arrays.equals(end, END)) {
                        throw new IOException("checkpoint image: bad end mark");
                    }
                    ended = true;
                    return null;
                }
                readFully(small.clear().limit(version == 1 ? RANGE_BYTES_V1 : RANGE_BYTES));
                current = range(small, version, range);
                off = 0;
            }
            int n = checkChunkLength(readInt(), current, off);
            ByteBuffer data = into.asSlice(0, n).asByteBuffer();
            readFully(data);
            Chunk c = new Chunk(current, off, n);
            checkHash(c, into, readInt(), crc);
            off += n;
            return c;
        }

        private int readInt() throws IOException {
            readFully(small.clear().limit(4));
            return small.getInt(0);
        }

        private void readFully(ByteBuffer b) throws IOException {
            while (b.hasRemaining()) {
                if (in.read(b) < 0) {
                    throw new EOFException("checkpoint image: truncated");
                }
            }
        }
    }

    /** The range whose start {@code b} holds (from 0, as written in {@code version}), the {@code index}th. */
    static Range range(ByteBuffer b, int version, int index) throws IOException {
        Range r;
        if (version == 1) {
            r = new Range(b.getLong(0), b.getLong(8));
        } else {
            int kind = b.get(0);
            if (kind < MEMORY || kind > MIPMAP_LEVEL) {
                throw new IOException("checkpoint image: range " + index + " of unknown kind " + kind);
            }
            r = new Range(kind, b.getLong(1), b.getInt(9), b.getLong(13));
        }
        if (r.size() < 0) {
            throw new IOException("checkpoint image: range " + index + " of negative size");
        }
        return r;
    }

    /** {@code n}, a chunk's length read at {@code r}+{@code off}, once it fits the range and {@link #CHUNK_BYTES}. */
    static int checkChunkLength(int n, Range r, long off) throws IOException {
        if (n <= 0 || n > CHUNK_BYTES || n > r.size() - off) {
            throw new IOException(String.format("checkpoint image: a chunk of %d bytes at %s+%d does not fit its range",
                    n, r.describe(), off));
        }
        return n;
    }

    /** Checks chunk {@code c}'s bytes (the first {@code c.length()} of {@code data}) against the hash {@code want}. */
    static void checkHash(Chunk c, MemorySegment data, int want, CRC32C crc) throws IOException {
        crc.reset();
        crc.update(data.asSlice(0, c.length()).asByteBuffer());
        if ((int) crc.getValue() != want) {
            throw new IOException(String.format("checkpoint image: the chunk at %s+%d (%d bytes) does not match"
                    + " its hash (the image is damaged)", c.range().describe(), c.offset(), c.length()));
        }
    }

    /** A chunk of contents in a file: where its data starts, and the hash the image holds for it. */
    record Located(Chunk chunk, long position, int hash) {
    }

    /**
     * Hands out the chunks of the contents in a file, in order, each with where its data lies and its hash, reading
     * only the ranges' starts and the chunks' lengths and hashes (positional reads; the data is skipped, for the
     * threads that read it at its position and check it: {@link #checkHash}). The structure is checked as
     * {@link ContentsReader} checks it: counts, kinds, chunks that fit their ranges, the end mark after the last
     * chunk. Holds one range and one position: its memory does not grow with the image.
     * Safe for several threads ({@link #next} is synchronized).
     */
    static final class ChunkIndex {
        private final java.nio.channels.FileChannel in;
        private final int version;
        private final ByteBuffer small = ByteBuffer.allocate(RANGE_BYTES);
        private long position;
        private int ranges = -1;
        private int range = -1;
        private Range current;
        private long off;
        private boolean ended;

        /** The contents of an image of {@code version} in {@code in}, from {@code position} (where the header ended). */
        ChunkIndex(java.nio.channels.FileChannel in, long position, int version) {
            this.in = in;
            this.position = position;
            this.version = version;
        }

        /** The next chunk; null after the last one, once the end mark has been read and checked. */
        synchronized Located next() throws IOException {
            if (ended) {
                return null;
            }
            if (ranges < 0) {
                ranges = readInt();
                if (ranges < 0 || ranges > MAX_ITEMS) {
                    throw new IOException("checkpoint image: count out of range: " + ranges);
                }
            }
            while (current == null || off >= current.size()) {
                if (++range >= ranges) {
                    ByteBuffer end = ByteBuffer.allocate(END.length);
                    try {
                        read(end);
                    } catch (EOFException e) {
                        throw new IOException("checkpoint image: truncated (no end mark)");
                    }
                    if (!java.util.Arrays.equals(end.array(), END)) {
                        throw new IOException("checkpoint image: bad end mark");
                    }
                    ended = true;
                    return null;
                }
                read(small.clear().limit(version == 1 ? RANGE_BYTES_V1 : RANGE_BYTES));
                current = range(small, version, range);
                off = 0;
            }
            int n = checkChunkLength(readInt(), current, off);
            long data = position;
            if (in.size() - data < n + 4L) {
                throw new EOFException("checkpoint image: truncated");
            }
            position += n;
            int hash = readInt();
            Located c = new Located(new Chunk(current, off, n), data, hash);
            off += n;
            return c;
        }

        private int readInt() throws IOException {
            read(small.clear().limit(4));
            return small.getInt(0);
        }

        /** Reads {@code b} fully at the position, and moves past it. */
        private void read(ByteBuffer b) throws IOException {
            while (b.hasRemaining()) {
                int n = in.read(b, position);
                if (n < 0) {
                    throw new EOFException("checkpoint image: truncated");
                }
                position += n;
            }
        }
    }

    private static int count(DataInputStream in) throws IOException {
        int n = in.readInt();
        if (n < 0 || n > MAX_ITEMS && n > MAX_BYTES) {
            throw new IOException("checkpoint image: count out of range: " + n);
        }
        return n;
    }

    private static byte[] bytes(DataInputStream in, int n) throws IOException {
        if (n > MAX_BYTES) {
            throw new IOException("checkpoint image: " + n + " bytes in one item");
        }
        byte[] b = new byte[n];
        in.readFully(b);
        return b;
    }
}
