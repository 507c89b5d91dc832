package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.WritableByteChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.zip.CRC32C;

/**
 * Moves a checkpoint's contents (every allocation's, global's and CUDA array's bytes) between the device and the image file in
 * {@link CheckpointImage#CHUNK_BYTES} chunks, in one of two ways:
 * <ul>
 *   <li>To or from a file ({@link #write(FileChannel, List, Device, CheckpointProgress, long, int)},
 *   {@link #read(FileChannel, int, Device, CheckpointProgress, long, int)}) with {@link CheckpointIo#threads()}
 *   threads (property {@value CheckpointIo#THREADS_PROP}, default min({@value CheckpointIo#DEFAULT_MAX_THREADS},
 *   cores)): each worker takes the next chunk in image order with its position in the file (known ahead:
 *   {@link CheckpointImage}), copies it off the device into a host buffer of its own and hashes and writes it there,
 *   or reads and checks it there and copies it onto the device; so several device copies and several file writes
 *   or reads are in flight at once. At a checkpoint the contents are written through a mapping of the file or with
 *   {@link FileChannel#write(java.nio.ByteBuffer, long)} ({@link CheckpointIo#mappedWrites}: Linux serialises
 *   {@code pwrite}s to one file, while a mapping's page faults run in parallel at a higher cost each); a file that
 *   cannot be mapped (e.g. a hand-over's image, opened for writing only) gets positional writes. A restore
 *   reads with positional reads, which run in parallel. The image is byte for byte the one a single thread writes.
 *   A failure of any worker stops the others after their chunk in hand and fails the whole move.</li>
 *   <li>To any other channel (a migration's array contents), or with one thread: pipelined through {@link #BUFFERS}
 *   host buffers: at a checkpoint the calling thread copies the next chunk off the device while a thread of the
 *   checkpoint's own hashes and writes the previous ones; at a restore that thread reads and verifies the next chunks
 *   while the calling thread copies the previous one onto the device.</li>
 * </ul>
 * Either way a chunk reaches the device only after its hash matched ({@link CheckpointImage.ContentsReader},
 * {@link CheckpointImage#checkHash}). Device memory is cut into
 * chunks of {@link CheckpointImage#CHUNK_BYTES} (the last one shorter); a CUDA array's range is cut and copied as
 * the {@link Device} says ({@link CheckpointArrays.Device}: whole slices or rows through cuMemcpy3D).
 *
 * <p>The buffers are page-locked with cuMemHostRegister (portable: any context may copy into them), so a real
 * GPU moves them by DMA at full speed, and charged to the session's tenant's pinned memory while they exist (as
 * the session's other page-locked memory is: {@link SessionWindow}, {@link HostCallbackGates}). Where the tenant is
 * at its pinned limit or the driver cannot page-lock (the emulated device answers CUDA_ERROR_NOT_SUPPORTED), a
 * buffer is plain native memory, uncharged: the contents still move, more slowly on a GPU. At most
 * max({@link #BUFFERS}, threads) x {@code CHUNK_BYTES} of host memory (24 MiB, 64 MiB with 8 threads; threads at
 * most {@value CheckpointIo#MAX_THREADS}) and that many extra threads per checkpoint or restore in progress; the moves
 * wait for their threads and copies before they return, and {@link #close} gives the buffers back.
 */
final class CheckpointContents implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** Host buffers per checkpoint or restore: one being copied, one being hashed and written (or read), one spare. */
    static final int BUFFERS = 3;
    /** cuda.h CU_MEMHOSTREGISTER_PORTABLE. */
    private static final int MEMHOSTREGISTER_PORTABLE = 1;

    /**
     * The device side: copies between one chunk's host buffer and the device, returning once the copy is done;
     * {@code pageLocked}: the buffer is page-locked (else plain memory).
     */
    interface Device {
        void copyOut(long address, MemorySegment to, int length, boolean pageLocked) throws IOException;

        void copyIn(long address, MemorySegment from, int length, boolean pageLocked) throws IOException;

        /**
         * The bytes of {@code r}'s chunk that starts at {@code offset}: {@link CheckpointImage#CHUNK_BYTES} or what is
         * left of device memory; a device that copies CUDA arrays cuts theirs as it copies them.
         */
        default int chunkLength(CheckpointImage.Range r, long offset) throws IOException {
            if (!r.memory()) {
                throw new IOException("this checkpoint cannot copy the contents of " + r.describe());
            }
            return (int) Math.min(CheckpointImage.CHUNK_BYTES, r.size() - offset);
        }

        /** Copies {@code r}'s chunk at {@code offset} off the device (device memory: {@link #copyOut(long, MemorySegment, int, boolean)}). */
        default void copyOut(CheckpointImage.Range r, long offset, MemorySegment to, int length, boolean pageLocked)
                throws IOException {
            if (!r.memory()) {
                throw new IOException("this checkpoint cannot copy the contents of " + r.describe());
            }
            copyOut(r.base() + offset, to, length, pageLocked);
        }

        /** Copies {@code r}'s chunk at {@code offset} onto the device (device memory: {@link #copyIn(long, MemorySegment, int, boolean)}). */
        default void copyIn(CheckpointImage.Range r, long offset, MemorySegment from, int length, boolean pageLocked)
                throws IOException {
            if (!r.memory()) {
                throw new IOException("this restore cannot write the contents of " + r.describe());
            }
            copyIn(r.base() + offset, from, length, pageLocked);
        }
    }

    /**
     * {@link Device} on the driver, in the context that holds the address: a copy through a page-locked buffer is
     * issued (cuMemcpyDtoHAsync, cuMemcpyHtoDAsync) on a stream of the checkpoint's own and waited for before the call
     * returns; one through plain memory is a synchronous cuMemcpyDtoH/HtoD (the real driver stages a pageable async
     * copy synchronously anyway, and the emulated device would take a snapshot of the buffer first). Streams are made
     * on first use per context and destroyed by {@link #close}; they synchronise with the context's legacy stream as
     * the synchronous copies do. Safe for several threads at once (a checkpoint's or restore's workers): each thread
     * copies on streams of its own, so their copies are in flight together.
     */
    static final class DriverDevice implements Device, AutoCloseable {
        /** The real context the {@code length} bytes at {@code address} belong to; throws when they are nobody's. */
        interface Contexts {
            long of(long address, int length) throws IOException;
        }

        private final CudaDriver driver;
        private final Contexts contexts;
        /** Streams by (thread id, context). */
        private final java.util.Map<StreamKey, Long> streams = new java.util.concurrent.ConcurrentHashMap<>();

        private record StreamKey(long thread, long context) {
        }

        DriverDevice(CudaDriver driver, Contexts contexts) {
            this(driver, contexts, address -> address);
        }

        /**
         * As above, for an image whose addresses are the program's where they differ from the real ones
         * ({@link GlobalTranslation}): {@code real} gives the real address of one, which the copies use; the contexts
         * are asked with the image's.
         */
        DriverDevice(CudaDriver driver, Contexts contexts, java.util.function.LongUnaryOperator real) {
            this.driver = driver;
            this.contexts = contexts;
            this.real = real;
        }

        private final java.util.function.LongUnaryOperator real;

        @Override
        public void copyOut(long address, MemorySegment to, int length, boolean pageLocked) throws IOException {
            copy(address, to, length, true, pageLocked);
        }

        @Override
        public void copyIn(long address, MemorySegment from, int length, boolean pageLocked) throws IOException {
            copy(address, from, length, false, pageLocked);
        }

        private void copy(long address, MemorySegment host, int length, boolean out, boolean pageLocked) throws IOException {
            long ctx = contexts.of(address, length);
            address = real.applyAsLong(address);
            if (driver.cuCtxPushCurrent(ctx) != CuResult.CUDA_SUCCESS) {
                throw new IOException(String.format("no context for 0x%x", address));
            }
            int r;
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment scratch = arena.allocate(8);
                if (!pageLocked) {
                    r = out ? driver.cuMemcpyDtoH(host, address, length) : driver.cuMemcpyHtoD(address, host, length);
                } else {
                    long stream = stream(ctx, scratch);
                    r = out ? driver.cuMemcpyDtoHAsync(host, address, length, stream)
                            : driver.cuMemcpyHtoDAsync(address, host, length, stream);
                    if (r == CuResult.CUDA_SUCCESS) {
                        r = driver.cuStreamSynchronize(stream);
                    }
                }
            } finally {
                popContext(driver);
            }
            if (r != CuResult.CUDA_SUCCESS) {
                throw new IOException(String.format("%s 0x%x+%d failed: %s", out ? "copying" : "writing", address, length,
                        CuResult.name(r)));
            }
        }

        /** The calling thread's stream of the contents in {@code ctx}, current on it; made on first use. */
        private long stream(long ctx, MemorySegment scratch) throws IOException {
            StreamKey key = new StreamKey(Thread.currentThread().threadId(), ctx);
            Long stream = streams.get(key); // only this thread adds its own keys
            if (stream == null) {
                int r = driver.cuStreamCreate(scratch, 0);
                if (r != CuResult.CUDA_SUCCESS) {
                    throw new IOException("making a stream for the contents failed: " + CuResult.name(r));
                }
                stream = scratch.get(ValueLayout.JAVA_LONG, 0);
                streams.put(key, stream);
            }
            return stream;
        }

        /** Destroys the streams (the copies on them have returned: every thread that copied is done). */
        @Override
        public void close() {
            streams.forEach((key, stream) -> {
                if (driver.cuCtxPushCurrent(key.context()) == CuResult.CUDA_SUCCESS) {
                    driver.cuStreamDestroy(stream);
                    popContext(driver);
                }
            });
            streams.clear();
        }
    }

    private final CudaDriver driver;
    private final long sessionId;
    private final Arena arena = Arena.ofShared();
    private final List<MemorySegment> buffers = new ArrayList<>();
    private final List<MemorySegment> registered = new ArrayList<>();
    /** The context the registrations were made in (pushed again to undo them), 0 for none. */
    private final long registerContext;
    private final SessionQuota quota;

    /**
     * Makes {@link #BUFFERS} buffers, page-locking each in {@code context} (a real context of the session, 0 to leave
     * them plain) and charging it to {@code quota} (null: charged nowhere).
     */
    CheckpointContents(CudaDriver driver, long sessionId, long context, SessionQuota quota) {
        this(driver, sessionId, context, quota, BUFFERS);
    }

    /** As above with max({@link #BUFFERS}, {@code threads}) buffers: one for each of {@code threads} workers. */
    CheckpointContents(CudaDriver driver, long sessionId, long context, SessionQuota quota, int threads) {
        if (threads < 1 || threads > CheckpointIo.MAX_THREADS) {
            throw new IllegalArgumentException("threads=" + threads);
        }
        int count = Math.max(BUFFERS, threads);
        this.driver = driver;
        this.sessionId = sessionId;
        this.registerContext = context;
        this.quota = quota;
        boolean pushed = context != 0 && driver.cuCtxPushCurrent(context) == CuResult.CUDA_SUCCESS;
        try {
            for (int i = 0; i < count; i++) {
                MemorySegment b = arena.allocate(CheckpointImage.CHUNK_BYTES, 4096);
                buffers.add(b);
                if (pushed && registered.size() == i && (quota == null || quota.reservePinned(b.byteSize()))) {
                    int r = driver.cuMemHostRegister(b, b.byteSize(), MEMHOSTREGISTER_PORTABLE);
                    if (r == CuResult.CUDA_SUCCESS) {
                        registered.add(b);
                        continue;
                    }
                    if (quota != null) {
                        quota.releasePinned(b.byteSize());
                    }
                    if (r != CuResult.CUDA_ERROR_NOT_SUPPORTED) {
                        LOG.log(System.Logger.Level.INFO, "session " + sessionId + ": a checkpoint buffer could not be"
                                + " page-locked (" + CuResult.name(r) + "); its contents go through plain memory");
                    }
                }
            }
        } catch (RuntimeException | Error e) {
            if (pushed) {
                popContext();
                pushed = false;
            }
            close(); // what was page-locked and charged so far goes back
            throw e;
        } finally {
            if (pushed) {
                popContext();
            }
        }
    }

    /** How many of the buffers are page-locked. */
    int pinnedBuffers() {
        return registered.size();
    }

    /** A chunk for the helper thread: a range's start (chunk null), a chunk of {@code range}, or the end (all null). */
    private record Job(CheckpointImage.Range starts, MemorySegment buffer, CheckpointImage.Range range, long offset, int length) {
    }

    private static final Job END = new Job(null, null, null, 0, 0);

    /**
     * Writes {@code ranges}' contents to {@code out} (after the header, before the end mark), copied off the device
     * by {@code device} on the calling thread while the helper hashes and writes. Returns the bytes copied.
     */
    long write(WritableByteChannel out, List<CheckpointImage.Range> ranges, Device device, CheckpointProgress progress,
               long total) throws IOException {
        BlockingQueue<MemorySegment> free = new ArrayBlockingQueue<>(buffers.size(), false, buffers);
        BlockingQueue<Job> filled = new ArrayBlockingQueue<>(buffers.size() + 1);
        Helper writer = new Helper("checkpoint-writer", () -> {
            CRC32C crc = new CRC32C();
            for (Job j; (j = filled.take()) != END; ) {
                if (j.starts() != null) {
                    CheckpointImage.writeRange(out, j.starts());
                } else {
                    CheckpointImage.writeChunk(out, j.buffer(), j.length(), crc);
                    free.put(j.buffer());
                }
            }
        });
        long done = 0;
        try {
            for (CheckpointImage.Range r : ranges) {
                writer.put(filled, new Job(r, null, null, 0, 0));
                for (long off = 0; off < r.size(); ) {
                    int n = device.chunkLength(r, off);
                    if (n <= 0 || n > CheckpointImage.CHUNK_BYTES || n > r.size() - off) {
                        throw new IOException("checkpoint contents: a chunk of " + n + " bytes at " + r.describe() + "+" + off);
                    }
                    MemorySegment b = writer.take(free);
                    device.copyOut(r, off, b, n, registered.contains(b));
                    writer.put(filled, new Job(null, b, r, off, n));
                    off += n;
                    done += n;
                    progress.progress("contents", done, total);
                }
            }
            writer.put(filled, END);
            writer.finish();
            return done;
        } finally {
            writer.stop();
        }
    }

    /**
     * Reads the contents from {@code in} (positioned after the header) to its end mark, each chunk read and verified
     * by the helper while the calling thread has {@code device} copy the previous one in. Returns the bytes copied.
     */
    long read(ReadableByteChannel in, Device device, CheckpointProgress progress, long total) throws IOException {
        return read(in, CheckpointImage.VERSION, device, progress, total);
    }

    /** {@link #read(ReadableByteChannel, Device, CheckpointProgress, long)} of an image of {@code version}. */
    long read(ReadableByteChannel in, int version, Device device, CheckpointProgress progress, long total) throws IOException {
        BlockingQueue<MemorySegment> free = new ArrayBlockingQueue<>(buffers.size(), false, buffers);
        BlockingQueue<Job> filled = new ArrayBlockingQueue<>(buffers.size() + 1);
        CheckpointImage.ContentsReader contents = new CheckpointImage.ContentsReader(in, version);
        Helper reader = new Helper("restore-reader", () -> {
            while (true) {
                MemorySegment b = free.take();
                CheckpointImage.Chunk c = contents.next(b);
                if (c == null) {
                    filled.put(END);
                    return;
                }
                filled.put(new Job(null, b, c.range(), c.offset(), c.length()));
            }
        });
        long done = 0;
        try {
            for (Job j; (j = reader.take(filled)) != END; ) {
                device.copyIn(j.range(), j.offset(), j.buffer(), j.length(), registered.contains(j.buffer()));
                free.add(j.buffer());
                done += j.length();
                progress.progress("contents", done, total);
            }
            reader.finish();
            return done;
        } finally {
            reader.stop();
        }
    }

    /** How many buffers there are: the most workers a move to or from a file runs. */
    int buffers() {
        return buffers.size();
    }

    /**
     * Writes {@code ranges}' contents into the file {@code out} from its position (after the header, before the end
     * mark) with {@code threads} workers, each copying chunks off the device and hashing and writing them at their
     * positions (see the class); leaves the channel's position after the contents. With one thread, or more threads
     * than buffers, as {@link #write(WritableByteChannel, List, Device, CheckpointProgress, long)} does; returns the
     * bytes copied. {@code device} must be safe for several threads ({@link DriverDevice}, {@link CheckpointArrays.Device}).
     */
    long write(FileChannel out, List<CheckpointImage.Range> ranges, Device device, CheckpointProgress progress, long total,
               int threads) throws IOException {
        if (threads <= 1 || threads > buffers.size()) {
            return write((WritableByteChannel) out, ranges, device, progress, total);
        }
        long start = out.position();
        long end = start;
        for (CheckpointImage.Range r : ranges) { // where every chunk goes: the lengths the device cuts them in
            end += CheckpointImage.RANGE_BYTES;
            for (long off = 0; off < r.size(); ) {
                int n = chunkLength(device, r, off);
                end += CheckpointImage.CHUNK_FRAMING + n;
                off += n;
            }
        }
        try (Arena map = Arena.ofShared()) {
            Sink sink = sink(out, start, end, map, threads);
            Layout layout = new Layout(ranges, device, start, sink);
            Moved moved = new Moved(progress, total);
            new Crew("checkpoint-writer", threads, (buffer, crc) -> {
                Layout.Item j = layout.next();
                if (j != null) {
                    device.copyOut(j.range(), j.offset(), buffer, j.length(), registered.contains(buffer));
                    crc.reset();
                    crc.update(buffer.asSlice(0, j.length()).asByteBuffer());
                    sink.put(j.position(), MemorySegment.ofArray(new byte[] {(byte) (j.length() >>> 24),
                            (byte) (j.length() >>> 16), (byte) (j.length() >>> 8), (byte) j.length()}));
                    sink.put(j.position() + 4, buffer.asSlice(0, j.length()));
                    int h = (int) crc.getValue();
                    sink.put(j.position() + 4 + j.length(), MemorySegment.ofArray(new byte[] {(byte) (h >>> 24),
                            (byte) (h >>> 16), (byte) (h >>> 8), (byte) h}));
                    moved.add(j.length());
                }
                return j != null;
            }).run();
            if (layout.at != end) {
                throw new IOException("checkpoint contents: the chunks ended at " + layout.at + ", not at " + end);
            }
            out.position(end);
            return moved.done();
        }
    }

    /**
     * Reads the contents from the file {@code in} (positioned after the header of an image of {@code version}) to its
     * end mark with {@code threads} workers, each reading chunks at their positions, checking their hashes and copying
     * them onto the device (see the class). With one thread, or more threads than buffers, as
     * {@link #read(ReadableByteChannel, int, Device, CheckpointProgress, long)} does; returns the bytes copied.
     * {@code device} must be safe for several threads.
     */
    long read(FileChannel in, int version, Device device, CheckpointProgress progress, long total, int threads)
            throws IOException {
        if (threads <= 1 || threads > buffers.size()) {
            return read((ReadableByteChannel) in, version, device, progress, total);
        }
        CheckpointImage.ChunkIndex index = new CheckpointImage.ChunkIndex(in, in.position(), version);
        Moved moved = new Moved(progress, total);
        new Crew("restore-reader", threads, (buffer, crc) -> {
            CheckpointImage.Located c = index.next();
            if (c != null) {
                int n = c.chunk().length();
                java.nio.ByteBuffer data = buffer.asSlice(0, n).asByteBuffer();
                for (long at = c.position(); data.hasRemaining(); ) {
                    int got = in.read(data, at);
                    if (got < 0) {
                        throw new java.io.EOFException("checkpoint image: truncated");
                    }
                    at += got;
                }
                CheckpointImage.checkHash(c.chunk(), buffer, c.hash(), crc);
                device.copyIn(c.chunk().range(), c.chunk().offset(), buffer, n, registered.contains(buffer));
                moved.add(n);
            }
            return c != null;
        }).run();
        return moved.done();
    }

    private static int chunkLength(Device device, CheckpointImage.Range r, long off) throws IOException {
        int n = device.chunkLength(r, off);
        if (n <= 0 || n > CheckpointImage.CHUNK_BYTES || n > r.size() - off) {
            throw new IOException("checkpoint contents: a chunk of " + n + " bytes at " + r.describe() + "+" + off);
        }
        return n;
    }

    /** Where the workers' bytes go: positions in the file. */
    private interface Sink {
        void put(long position, MemorySegment bytes) throws IOException;
    }

    /**
     * The file from {@code start} to {@code end} mapped in {@code arena} (the mapping grows the file to {@code end}; the
     * channel must be open for reading too) where {@link CheckpointIo#mappedWrites} says so for {@code threads};
     * else, or where the file cannot be mapped, positional writes.
     */
    private Sink sink(FileChannel out, long start, long end, Arena arena, int threads) throws IOException {
        if (CheckpointIo.mappedWrites(threads) && end > start) {
            try {
                MemorySegment file = out.map(FileChannel.MapMode.READ_WRITE, start, end - start, arena);
                return (position, bytes) -> {
                    try {
                        MemorySegment.copy(bytes, 0, file, position - start, bytes.byteSize());
                    } catch (InternalError e) { // a fault in the mapping: the file system is full, or the file was cut
                        throw new IOException("writing the checkpoint image at " + position + " failed (is its file system"
                                + " full?): " + e.getMessage(), e);
                    }
                };
            } catch (UnsupportedOperationException | java.nio.channels.NonReadableChannelException | IOException e) {
                LOG.log(System.Logger.Level.INFO, "session " + sessionId + ": the checkpoint image cannot be mapped (" + e
                        + "); its contents are written with positional writes");
            }
        }
        return (position, bytes) -> {
            java.nio.ByteBuffer b = bytes.asByteBuffer();
            for (long at = position; b.hasRemaining(); ) {
                at += out.write(b, at);
            }
        };
    }

    /**
     * The chunks of a checkpoint's ranges in image order, each with its position in the file, for the workers; writes
     * each range's start as it reaches it. Synchronized: one chunk to one worker.
     */
    private static final class Layout {
        record Item(CheckpointImage.Range range, long offset, int length, long position) {
        }

        private final java.util.Iterator<CheckpointImage.Range> ranges;
        private final Device device;
        private final Sink sink;
        private CheckpointImage.Range current;
        private long off;
        /** Where the next range start or chunk goes. */
        long at;

        Layout(List<CheckpointImage.Range> ranges, Device device, long start, Sink sink) {
            this.ranges = ranges.iterator();
            this.device = device;
            this.at = start;
            this.sink = sink;
        }

        synchronized Item next() throws IOException {
            while (current == null || off >= current.size()) {
                if (!ranges.hasNext()) {
                    return null;
                }
                current = ranges.next();
                off = 0;
                sink.put(at, MemorySegment.ofBuffer(CheckpointImage.rangeStart(current)));
                at += CheckpointImage.RANGE_BYTES;
            }
            int n = chunkLength(device, current, off);
            Item item = new Item(current, off, n, at);
            off += n;
            at += CheckpointImage.CHUNK_FRAMING + n;
            return item;
        }
    }

    /** Bytes moved so far, told to the progress listener one report at a time. */
    private static final class Moved {
        private final CheckpointProgress progress;
        private final long total;
        private long done;

        Moved(CheckpointProgress progress, long total) {
            this.progress = progress;
            this.total = total;
        }

        synchronized void add(long bytes) {
            done += bytes;
            progress.progress("contents", done, total);
        }

        synchronized long done() {
            return done;
        }
    }

    /** A worker's step: moves the next chunk through {@code buffer} (the worker's own); false when none was left. */
    private interface Chunks {
        boolean moveOne(MemorySegment buffer, CRC32C crc) throws IOException;
    }

    /**
     * The workers of one move to or from a file: {@code count} platform threads, one buffer each, each moving chunks
     * until none is left. The first failure stops the rest (each after the chunk in hand) and is thrown by
     * {@link #run}, which returns only once every worker has ended.
     */
    private final class Crew {
        private final String name;
        private final int count;
        private final Chunks work;
        private final java.util.concurrent.atomic.AtomicReference<Throwable> failure =
                new java.util.concurrent.atomic.AtomicReference<>();

        Crew(String name, int count, Chunks work) {
            this.name = name;
            this.count = count;
            this.work = work;
        }

        void run() throws IOException {
            List<Thread> threads = new ArrayList<>();
            try {
                for (int i = 0; i < count; i++) {
                    MemorySegment buffer = buffers.get(i);
                    threads.add(Thread.ofPlatform().daemon().name("gpusockets-" + name + "-" + sessionId + "-" + i).start(() -> {
                        try {
                            CRC32C crc = new CRC32C();
                            while (failure.get() == null && work.moveOne(buffer, crc)) {
                                // next chunk
                            }
                        } catch (Throwable t) {
                            failure.compareAndSet(null, t);
                        }
                    }));
                }
            } catch (RuntimeException | Error e) { // a thread could not start: the others stop at their next chunk
                failure.compareAndSet(null, e);
            }
            boolean interrupted = false;
            for (Thread t : threads) {
                while (true) {
                    try {
                        t.join();
                        break;
                    } catch (InterruptedException e) {
                        interrupted = true;
                        failure.compareAndSet(null, new IOException("interrupted while moving the contents"));
                        threads.forEach(Thread::interrupt);
                    }
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            Throwable f = failure.get();
            if (f instanceof IOException io) {
                throw new IOException(io.getMessage(), io);
            }
            if (f != null) {
                throw new IOException("checkpoint contents: " + f, f);
            }
        }
    }

    /** Unpins and frees the buffers (the copies have returned: {@link #write} and {@link #read} wait for theirs). */
    @Override
    public void close() {
        if (!registered.isEmpty()) {
            boolean pushed = driver.cuCtxPushCurrent(registerContext) == CuResult.CUDA_SUCCESS;
            for (MemorySegment b : registered) {
                int r = driver.cuMemHostUnregister(b);
                if (r != CuResult.CUDA_SUCCESS && r != CuResult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) {
                    LOG.log(System.Logger.Level.WARNING, "session " + sessionId + ": cuMemHostUnregister of a checkpoint"
                            + " buffer: " + CuResult.name(r));
                }
                if (quota != null) {
                    quota.releasePinned(b.byteSize());
                }
            }
            registered.clear();
            if (pushed) {
                popContext();
            }
        }
        arena.close();
    }

    private void popContext() {
        popContext(driver);
    }

    private static void popContext(CudaDriver driver) {
        try (Arena a = Arena.ofConfined()) {
            driver.cuCtxPopCurrent(a.allocate(ValueLayout.ADDRESS));
        }
    }

    /** A body for the helper thread; its failure fails the checkpoint or restore. */
    private interface Work {
        void run() throws IOException, InterruptedException;
    }

    /**
     * The helper thread of one {@link #write} or {@link #read}, and the hand-offs with it: a failure on either side
     * ends both, the helper's surfacing on the calling thread at its next hand-off.
     */
    private final class Helper {
        private final Thread thread;
        private volatile Throwable failure;

        Helper(String name, Work work) {
            thread = Thread.ofPlatform().daemon().name("gpusockets-" + name + "-" + sessionId).start(() -> {
                try {
                    work.run();
                } catch (InterruptedException e) {
                    // stopped by the calling thread, which fails on its own
                } catch (Throwable t) {
                    failure = t;
                }
            });
        }

        /** Takes from {@code q}, failing once the helper failed or ended and nothing is left there. */
        <T> T take(BlockingQueue<T> q) throws IOException {
            try {
                while (true) {
                    T t = q.poll(50, java.util.concurrent.TimeUnit.MILLISECONDS);
                    if (t != null) {
                        return t;
                    }
                    throwFailure();
                    if (!thread.isAlive()) {
                        t = q.poll(); // what it put just before it ended
                        if (t != null) {
                            return t;
                        }
                        throwFailure();
                        throw new IOException("checkpoint contents: the " + thread.getName() + " thread ended early");
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while moving the contents");
            }
        }

        /** Puts into {@code q}, failing once the helper failed or ended. */
        <T> void put(BlockingQueue<T> q, T t) throws IOException {
            try {
                while (!q.offer(t, 50, java.util.concurrent.TimeUnit.MILLISECONDS)) {
                    throwFailure();
                    if (!thread.isAlive()) {
                        throw new IOException("checkpoint contents: the " + thread.getName() + " thread ended early");
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while moving the contents");
            }
        }

        /** Throws the helper's failure, if it had one. */
        private void throwFailure() throws IOException {
            Throwable f = failure;
            if (f instanceof IOException io) {
                throw new IOException(io.getMessage(), io);
            }
            if (f != null) {
                throw new IOException("checkpoint contents: " + f, f);
            }
        }

        /** Waits for the helper to end after its END and throws its failure, if any. */
        void finish() throws IOException {
            try {
                thread.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while moving the contents");
            }
            throwFailure();
        }

        /** Ends the helper (interrupting it if it still runs: a failure on the calling thread) and waits for it. */
        void stop() {
            if (thread.isAlive()) {
                thread.interrupt();
            }
            boolean interrupted = false;
            while (true) {
                try {
                    thread.join();
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
