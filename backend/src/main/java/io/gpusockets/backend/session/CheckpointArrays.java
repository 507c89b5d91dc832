package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import io.gpusockets.protocol.structs.Memcpy3D;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The contents of a session's CUDA arrays and mipmapped arrays in a checkpoint (issue 22, item 3). The arrays
 * themselves are made again by replaying their records ({@link CheckpointRecorder}: cuArrayCreate, cuArray3DCreate,
 * cuMipmappedArrayCreate, and cuMipmappedArrayGetLevel for the level handles the program holds); this class says which
 * contents go into the image ({@link #ranges}: every array the program made, and every level of every mipmapped
 * array, whether or not the program asked for its handle; a level handle and a plane handle are parts of another and
 * are not copied twice), refuses what it cannot copy ({@link #refusals}), and copies the contents between the device
 * and the pipelined host buffers of {@link CheckpointContents} ({@link Device}).
 *
 * <p>An array's contents are its elements packed without padding (x fastest, then rows, then slices: a 3D array's
 * depth, a layered array's layers, a cubemap's faces), as cuArray3DGetDescriptor describes them, cut into chunks of
 * whole slices, else whole rows of one slice, else part of one row, each at most {@link CheckpointImage#CHUNK_BYTES}
 * ({@link Geometry}), and copied with one synchronous cuMemcpy3D per chunk in the array's context (the copy engine
 * handles the array's layout; every layer and cubemap face is a slice). At a restore each chunk must be exactly the
 * one the restored array's geometry puts at its offset, and every array the replay made must have received all of its
 * bytes, else the restore fails naming the array.
 *
 * <p>Refused, by name: sparse and deferred-mapping arrays (their memory is the VMM allocations mapped into them) and
 * arrays of formats whose element size is not known here (block-compressed, multi-planar video formats).
 */
final class CheckpointArrays {
    /** Level handles probed per mipmapped array at most (a driver makes no more than 1 + log2 of 2^63). */
    private static final int MAX_LEVELS = 64;

    private CheckpointArrays() {
    }

    /** One chunk of an array: a box of {@code width} bytes by {@code height} rows by {@code depth} slices at (x bytes, y, z). */
    record Piece(long x, long y, long z, long width, long height, long depth) {
        long bytes() {
            return width * height * depth;
        }
    }

    /**
     * An array's packed contents ({@code rowBytes} per row, {@code rows} per slice, {@code slices}) and how they are cut
     * into chunks of at most {@code chunk} bytes: as many whole slices as fit, else as many whole rows of one slice,
     * else part of one row. Both sides compute the same cuts from the same descriptor.
     */
    record Geometry(long rowBytes, long rows, long slices, long chunk) {
        Geometry {
            if (rowBytes <= 0 || rows <= 0 || slices <= 0 || chunk <= 0) {
                throw new IllegalArgumentException("rowBytes=" + rowBytes + " rows=" + rows + " slices=" + slices + " chunk=" + chunk);
            }
        }

        /** The geometry of an array of descriptor {@code d} in chunks of {@code chunk}, or null when its element size is not known. */
        static Geometry of(Array3DDescriptor d, long chunk) {
            int element = ArrayDescriptor.elementBytes(d.format(), d.numChannels());
            if (element <= 0 || d.width() <= 0) {
                return null;
            }
            return new Geometry(Math.multiplyExact(d.width(), element), d.rows(), d.slices(), chunk);
        }

        long bytes() {
            return Math.multiplyExact(Math.multiplyExact(rowBytes, rows), slices);
        }

        /** The chunk that starts at {@code offset}; throws when no chunk starts there. */
        Piece at(long offset) throws IOException {
            long total = bytes();
            if (offset < 0 || offset >= total) {
                throw new IOException("offset " + offset + " outside the array's " + total + " bytes");
            }
            long slice = rowBytes * rows;
            if (slice <= chunk) {
                long perChunk = chunk / slice;
                if (offset % (perChunk * slice) != 0) {
                    throw new IOException("no chunk starts at offset " + offset);
                }
                long z = offset / slice;
                return new Piece(0, 0, z, rowBytes, rows, Math.min(perChunk, slices - z));
            }
            long z = offset / slice, within = offset % slice;
            if (rowBytes <= chunk) {
                long perChunk = chunk / rowBytes;
                if (within % (perChunk * rowBytes) != 0) {
                    throw new IOException("no chunk starts at offset " + offset);
                }
                long y = within / rowBytes;
                return new Piece(0, y, z, rowBytes, Math.min(perChunk, rows - y), 1);
            }
            long y = within / rowBytes, x = within % rowBytes;
            if (x % chunk != 0) {
                throw new IOException("no chunk starts at offset " + offset);
            }
            return new Piece(x, y, z, Math.min(chunk, rowBytes - x), 1, 1);
        }
    }

    /** A range's array on the driver: the real CUarray, the real context it lives in, and its geometry. */
    record Target(long array, long context, Geometry geometry) {
    }

    /**
     * The contents ranges of the session's arrays, in handle id order: every array that is no part of another, then
     * every level of every mipmapped array. Each range's size is its geometry's bytes. Throws when an array cannot be
     * read (a checkpoint refused it first: {@link #refusals}).
     */
    static List<CheckpointImage.Range> ranges(CudaDriver driver, SessionHandles handles) throws IOException {
        List<CheckpointImage.Range> out = new ArrayList<>();
        for (SessionHandles.Entry e : sorted(handles.all(ParamType.ARRAY))) {
            if (e.owner() == 0) {
                CheckpointImage.Range r = new CheckpointImage.Range(CheckpointImage.ARRAY, e.id(), 0, 0);
                out.add(new CheckpointImage.Range(r.kind(), r.base(), 0, resolve(driver, handles, r).geometry().bytes()));
            }
        }
        for (SessionHandles.Entry e : sorted(handles.all(ParamType.MIPMAP))) {
            long ctx = contextOf(handles, e);
            int levels = levels(driver, ctx, e.real());
            for (int l = 0; l < levels; l++) {
                CheckpointImage.Range r = new CheckpointImage.Range(CheckpointImage.MIPMAP_LEVEL, e.id(), l, 0);
                out.add(new CheckpointImage.Range(r.kind(), r.base(), l, resolve(driver, handles, r).geometry().bytes()));
            }
        }
        return out;
    }

    /** What a checkpoint cannot capture among the session's arrays, each named (empty: nothing). */
    static List<String> refusals(CudaDriver driver, SessionHandles handles) {
        Map<String, List<Long>> why = new TreeMap<>();
        List<SessionHandles.Entry> arrays = new ArrayList<>();
        for (SessionHandles.Entry e : sorted(handles.all(ParamType.ARRAY))) {
            if (e.owner() == 0) {
                arrays.add(e);
            }
        }
        arrays.addAll(sorted(handles.all(ParamType.MIPMAP)));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment desc = arena.allocate(Array3DDescriptor.SIZE, 8), out = arena.allocate(8);
            for (SessionHandles.Entry e : arrays) {
                String kind = e.kind() == ParamType.ARRAY ? "CUDA array" : "mipmapped array";
                try {
                    long ctx = contextOf(handles, e);
                    long array = e.kind() == ParamType.ARRAY ? e.real() : level(driver, ctx, e.real(), 0, out);
                    Array3DDescriptor d = descriptor(driver, ctx, array, desc);
                    if (d.unbacked()) {
                        why.computeIfAbsent(kind + "(s) made sparse or with deferred mapping (their memory is the VMM"
                                + " allocations mapped into them)", k -> new ArrayList<>()).add(e.id());
                    } else if (Geometry.of(d, CheckpointImage.CHUNK_BYTES) == null) {
                        why.computeIfAbsent(String.format("%s(s) of format 0x%x with %d channel(s), whose element size a"
                                + " checkpoint does not know (block-compressed or multi-planar formats)", kind, d.format(),
                                d.numChannels()), k -> new ArrayList<>()).add(e.id());
                    }
                } catch (IOException x) {
                    why.computeIfAbsent(kind + "(s) whose shape cannot be read (" + x.getMessage() + ")",
                            k -> new ArrayList<>()).add(e.id());
                }
            }
        }
        List<String> out = new ArrayList<>();
        why.forEach((what, ids) -> out.add(ids.size() + " " + what + " " + ids));
        return out;
    }

    /** The driver's array, context and geometry of range {@code r} of a session's handles. */
    static Target resolve(CudaDriver driver, SessionHandles handles, CheckpointImage.Range r) throws IOException {
        ParamType kind = r.kind() == CheckpointImage.ARRAY ? ParamType.ARRAY : ParamType.MIPMAP;
        SessionHandles.Entry e = r.memory() ? null : handles.get(r.base(), kind);
        if (e == null) {
            throw new IOException("no " + r.describe() + " in the session");
        }
        long ctx = contextOf(handles, e);
        try (Arena arena = Arena.ofConfined()) {
            long array = kind == ParamType.ARRAY ? e.real() : level(driver, ctx, e.real(), r.level(), arena.allocate(8));
            Array3DDescriptor d = descriptor(driver, ctx, array, arena.allocate(Array3DDescriptor.SIZE, 8));
            Geometry g = d.unbacked() ? null : Geometry.of(d, CheckpointImage.CHUNK_BYTES);
            if (g == null) {
                throw new IOException(r.describe() + " (format 0x" + Integer.toHexString(d.format()) + ", flags 0x"
                        + Integer.toHexString(d.flags()) + ") has contents a checkpoint does not copy");
            }
            return new Target(array, ctx, g);
        }
    }

    private static List<SessionHandles.Entry> sorted(List<SessionHandles.Entry> entries) {
        entries.sort(Comparator.comparingLong(SessionHandles.Entry::id));
        return entries;
    }

    private static long contextOf(SessionHandles handles, SessionHandles.Entry e) throws IOException {
        SessionHandles.Entry c = e.context() == 0 ? null : handles.get(e.context(), ParamType.CTX);
        if (c == null) {
            throw new IOException("the context of " + (e.kind() == ParamType.ARRAY ? "CUDA array " : "mipmapped array ")
                    + e.id() + " is gone");
        }
        return c.real();
    }

    /** How many levels the mipmapped array {@code mipmap} has: those cuMipmappedArrayGetLevel answers, from 0. */
    private static int levels(CudaDriver driver, long ctx, long mipmap) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            push(driver, ctx);
            try {
                int n = 0;
                while (n < MAX_LEVELS && driver.cuMipmappedArrayGetLevel(out, mipmap, n) == CuResult.CUDA_SUCCESS) {
                    n++;
                }
                if (n == 0) {
                    throw new IOException("a mipmapped array answers no level");
                }
                return n;
            } finally {
                driver.cuCtxPopCurrent(out);
            }
        }
    }

    private static long level(CudaDriver driver, long ctx, long mipmap, int level, MemorySegment out) throws IOException {
        push(driver, ctx);
        int r;
        try {
            r = driver.cuMipmappedArrayGetLevel(out, mipmap, level);
        } finally {
            popContext(driver);
        }
        if (r != CuResult.CUDA_SUCCESS) {
            throw new IOException("cuMipmappedArrayGetLevel(" + level + "): " + CuResult.name(r));
        }
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    private static Array3DDescriptor descriptor(CudaDriver driver, long ctx, long array, MemorySegment desc) throws IOException {
        push(driver, ctx);
        int r;
        try {
            r = driver.cuArray3DGetDescriptor(desc, array);
        } finally {
            popContext(driver);
        }
        if (r != CuResult.CUDA_SUCCESS) {
            throw new IOException("cuArray3DGetDescriptor: " + CuResult.name(r));
        }
        return Array3DDescriptor.read(desc);
    }

    private static void push(CudaDriver driver, long ctx) throws IOException {
        int r = driver.cuCtxPushCurrent(ctx);
        if (r != CuResult.CUDA_SUCCESS) {
            throw new IOException("cuCtxPushCurrent: " + CuResult.name(r));
        }
    }

    private static void popContext(CudaDriver driver) {
        try (Arena a = Arena.ofConfined()) {
            driver.cuCtxPopCurrent(a.allocate(8));
        }
    }

    /** Finds a range's array on the driver ({@link #resolve} over a session's handles). */
    interface Resolver {
        Target resolve(CheckpointImage.Range r) throws IOException;
    }

    /**
     * A {@link CheckpointContents.Device} that copies arrays' chunks itself (cuMemcpy3D between the array and the host
     * buffer, in the array's context) and device memory through {@code memory}. At a restore it counts what each array
     * received ({@link #missing}). Safe for several threads at once (a checkpoint's or restore's workers).
     */
    static final class Device implements CheckpointContents.Device, AutoCloseable {
        private final CudaDriver driver;
        private final CheckpointContents.Device memory;
        private final Resolver resolver;
        private final Map<CheckpointImage.Range, Target> targets = new java.util.concurrent.ConcurrentHashMap<>();
        /** Bytes written into each array range at a restore. */
        private final Map<CheckpointImage.Range, Long> received = new java.util.concurrent.ConcurrentHashMap<>();

        Device(CudaDriver driver, CheckpointContents.Device memory, Resolver resolver) {
            this.driver = driver;
            this.memory = memory;
            this.resolver = resolver;
        }

        @Override
        public void copyOut(long address, MemorySegment to, int length, boolean pageLocked) throws IOException {
            memory.copyOut(address, to, length, pageLocked);
        }

        @Override
        public void copyIn(long address, MemorySegment from, int length, boolean pageLocked) throws IOException {
            memory.copyIn(address, from, length, pageLocked);
        }

        private Target target(CheckpointImage.Range r) throws IOException {
            Target t = targets.get(r);
            if (t == null) {
                t = resolver.resolve(new CheckpointImage.Range(r.kind(), r.base(), r.level(), 0));
                if (t.geometry().bytes() != r.size()) {
                    throw new IOException(r.describe() + " holds " + t.geometry().bytes() + " bytes, not the image's "
                            + r.size());
                }
                targets.putIfAbsent(r, t); // two threads may resolve it at once: the same array either way
            }
            return t;
        }

        @Override
        public int chunkLength(CheckpointImage.Range r, long offset) throws IOException {
            return r.memory() ? memory.chunkLength(r, offset) : (int) target(r).geometry().at(offset).bytes();
        }

        @Override
        public void copyOut(CheckpointImage.Range r, long offset, MemorySegment to, int length, boolean pageLocked)
                throws IOException {
            if (r.memory()) {
                memory.copyOut(r, offset, to, length, pageLocked);
            } else {
                copy(r, offset, to, length, true);
            }
        }

        @Override
        public void copyIn(CheckpointImage.Range r, long offset, MemorySegment from, int length, boolean pageLocked)
                throws IOException {
            if (r.memory()) {
                memory.copyIn(r, offset, from, length, pageLocked);
            } else {
                copy(r, offset, from, length, false);
                received.merge(r, (long) length, Long::sum);
            }
        }

        private void copy(CheckpointImage.Range r, long offset, MemorySegment host, int length, boolean out) throws IOException {
            Target t = target(r);
            Piece p = t.geometry().at(offset);
            if (p.bytes() != length) {
                throw new IOException("a chunk of " + length + " bytes at " + r.describe() + "+" + offset + ", where the"
                        + " array's chunk has " + p.bytes());
            }
            Memcpy3D.Side array = new Memcpy3D.Side(Memcpy3D.ARRAY, p.x(), p.y(), p.z(), 0, 0, 0, t.array(), 0, 0, 0);
            Memcpy3D.Side buffer = new Memcpy3D.Side(Memcpy3D.HOST, 0, 0, 0, 0, host.address(), 0, 0, p.width(), p.height(), 0);
            int res;
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment copy = arena.allocate(Memcpy3D.SIZE_3D, 8);
                (out ? new Memcpy3D(array, buffer, p.width(), p.height(), p.depth())
                        : new Memcpy3D(buffer, array, p.width(), p.height(), p.depth())).write3D(copy);
                push(driver, t.context());
                try {
                    res = driver.cuMemcpy3D(copy);
                } finally {
                    popContext(driver);
                }
            }
            if (res != CuResult.CUDA_SUCCESS) {
                throw new IOException((out ? "copying " : "writing ") + r.describe() + "+" + offset + " (" + length
                        + " bytes) failed: " + CuResult.name(res));
            }
        }

        /**
         * After a restore: the arrays of {@code expected} (the restored session's {@link #ranges}) that did not receive
         * all their bytes from the image, described; empty when each did.
         */
        List<String> missing(List<CheckpointImage.Range> expected) {
            List<String> out = new ArrayList<>();
            for (CheckpointImage.Range r : expected) {
                long got = received.getOrDefault(r, 0L);
                if (got != r.size()) {
                    out.add(r.describe() + " (" + got + " of " + r.size() + " bytes)");
                }
            }
            return out;
        }

        @Override
        public void close() {
            // nothing held: the copies' descriptors live for one copy each
        }
    }
}
