package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.structs.DecompressParams;
import io.gpusockets.protocol.wire.ProtocolException;
import io.gpusockets.protocol.wire.WindowSlots;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code copies}: copies between the program's host memory and the device, streamed chunk by
 * chunk between the transport and the device. To the device a chunk is handed to the driver as it
 * arrives: in place when it is in the page-locked shared window, else through two pinned staging
 * buffers (a synchronous copy of several chunks) or as received. To the host chunks are
 * double-buffered through pinned staging, or placed in the shared window's output slots. Hardware
 * decompression batches (cuMemBatchDecompressAsync) are device to device, every range checked.
 */
final class CopyCalls implements BackendHandlers.Copies {
    private final Session session;
    private final CudaDriver driver;

    CopyCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
    }

    @Override
    public int cuMemcpyHtoD(Call c, long dstDevice, long srcHost, long byteCount)
            throws ProtocolException, InterruptedException {
        return copyIn(c, dstDevice, srcHost, byteCount, false, 0);
    }

    @Override
    public int cuMemcpyHtoDAsync(Call c, long dstDevice, long srcHost, long byteCount, long hStream)
            throws ProtocolException, InterruptedException, CallRejected {
        session.captureGuard().refuseHostWork(c, session.driver(), hStream, "cuMemcpyHtoDAsync");
        return copyIn(c, dstDevice, srcHost, byteCount, true, hStream);
    }

    @Override
    public int cuMemcpyDtoH(Call c, long srcDevice, long byteCount) throws IOException, InterruptedException {
        return copyOut(c, srcDevice, byteCount, false, 0);
    }

    @Override
    public int cuMemcpyDtoHAsync(Call c, long srcDevice, long byteCount, long hStream)
            throws IOException, InterruptedException, CallRejected {
        session.captureGuard().refuseHostWork(c, session.driver(), hStream, "cuMemcpyDtoHAsync");
        return copyOut(c, srcDevice, byteCount, true, hStream);
    }

    /**
     * A copy of {@code count} bytes to {@code dst} (checked), whose data follows in DATA frames of
     * {@code bulk} bytes in all; {@code stream} (translated) for the async variant.
     */
    private int copyIn(Call c, long dst, long bulk, long count, boolean async, long stream)
            throws ProtocolException, InterruptedException {
        if (bulk != count) {
            throw new ProtocolException(c.name() + ": data length " + bulk + " differs from ByteCount " + count);
        }
        if (count > 0 && c.peekChunk().bytesInWindow() && c.peekChunk().window().pin(c.lane.topContext())) {
            return copyInFromWindow(c, dst, count, async ? stream : 0);
        }
        if (!async && count > session.chunkBytes()) {
            StagingPool.Buffer first = session.staging().acquire(c.lane.topContext());
            if (first.pinned()) {
                return copyInStaged(c, dst, count, first);
            }
            session.staging().release(first);
        }
        // Each chunk is pageable memory: the driver has taken it once the call returns, async or not.
        return eachChunk(c, count, (in, len, off, result) -> result != CuResult.CUDA_SUCCESS ? result
                : async ? driver.cuMemcpyHtoDAsync(dst + off, MemorySegment.ofBuffer(in.body()), len, stream)
                : driver.cuMemcpyHtoD(dst + off, MemorySegment.ofBuffer(in.body()), len));
    }

    /** What a copy to the device does with one DATA chunk of {@code len} bytes bound for offset {@code off}. */
    @FunctionalInterface
    private interface ChunkStep {
        /** Returns the call's result so far, given the result before this chunk. */
        int take(Inbound in, int len, long off, int result) throws ProtocolException, InterruptedException;
    }

    /**
     * Takes the call's {@code count} bytes of DATA off the lane chunk by chunk, in order, hands each to
     * {@code step} with the result so far and releases it after. Chunks after a failure are still taken
     * (and dropped by the step), so that the frames stay in step. Returns the last result.
     */
    private static int eachChunk(Call c, long count, ChunkStep step) throws ProtocolException, InterruptedException {
        int result = CuResult.CUDA_SUCCESS;
        for (long off = 0; off < count; ) {
            Inbound in = c.nextChunk();
            try {
                int len = in.body().remaining();
                result = step.take(in, len, off, result);
                off += len;
            } finally {
                c.release(in);
            }
        }
        return result;
    }

    /**
     * A copy to the device out of the page-locked shared window: the device reads each chunk by DMA
     * where the frontend put it, with no copy on this side. The frontend refills a slot once its
     * chunk is released, so each chunk is released only after an event behind its DMA has completed
     * (the DMA of 1 MiB takes a fraction of the time the frontend needs to fill the next slot). The
     * copy runs on its stream: the legacy default stream for the synchronous variant, where
     * cuMemcpyHtoD runs; the caller's stream for the asynchronous one, which only a frontend that does
     * not pipeline sends this way. A chunk that is not in the window is pageable memory, which the
     * driver has taken by the time its call returns.
     */
    private int copyInFromWindow(Call c, long dst, long count, long stream) throws ProtocolException, InterruptedException {
        long[] done = new long[1];
        try {
            return eachChunk(c, count, (in, len, off, result) -> {
                if (result != CuResult.CUDA_SUCCESS) {
                    return result;
                }
                int r = driver.cuMemcpyHtoDAsync(dst + off, MemorySegment.ofBuffer(in.body()), len, stream);
                if (r == CuResult.CUDA_SUCCESS && in.header().inWindow()) {
                    r = record(c, done, 0, stream);
                    r = r == CuResult.CUDA_SUCCESS ? driver.cuEventSynchronize(done[0]) : r;
                    if (r != CuResult.CUDA_SUCCESS) {
                        driver.cuStreamSynchronize(stream); // the slot is not given back while the device reads it
                    }
                }
                return r;
            });
        } finally {
            if (done[0] != 0) {
                driver.cuEventDestroy(done[0]);
            }
        }
    }

    /** cuEventCreate flag: no timing, the cheapest event, enough to wait for. */
    private static final int EVENT_DISABLE_TIMING = 0x2;

    /**
     * A synchronous copy of more than one DATA chunk, staged through two pinned buffers. Each chunk is
     * copied into the current buffer and handed to the device at once by cuMemcpyHtoDAsync on the
     * legacy default stream, which is where cuMemcpyHtoD runs (so it still follows earlier work in
     * the context's blocking streams). The DMA of one chunk thus overlaps the receiving and copying of
     * the next, and the driver never sees pageable memory, which it would copy once more into its own
     * staging, synchronously, chunk by chunk.
     *
     * <p>A buffer is refilled only after an event recorded behind its last DMA has completed; the
     * call returns once an event behind the last chunk has, and no buffer goes back to the pool while
     * the device may still read it. After a failed call the rest of the data is still taken off the
     * lane (and dropped), so that the frames stay in step.
     */
    private int copyInStaged(Call c, long dst, long count, StagingPool.Buffer first)
            throws ProtocolException, InterruptedException {
        StagedIn staged = new StagedIn(c, dst, first);
        try {
            int result = eachChunk(c, count, staged::take);
            return result == CuResult.CUDA_SUCCESS ? staged.finish() : result;
        } finally {
            staged.close();
        }
    }

    /** The state of one {@link #copyInStaged}: two staging buffers, each with an event behind its DMAs. */
    private final class StagedIn {
        private final Call c;
        private final long dst;
        private final long context;
        private final StagingPool.Buffer[] buf = new StagingPool.Buffer[2];
        private final long[] done = new long[2];       // per buffer: an event behind its last DMA (0: none made yet)
        private final boolean[] busy = new boolean[2]; // per buffer: DMA issued from it and not yet waited for
        private int cur;
        private long fill;

        StagedIn(Call c, long dst, StagingPool.Buffer first) {
            this.c = c;
            this.dst = dst;
            this.context = c.lane.topContext();
            buf[0] = first;
        }

        int take(Inbound in, int len, long off, int result) {
            if (result != CuResult.CUDA_SUCCESS) {
                return result;
            }
            if (len > session.staging().bufferBytes()) {
                // Larger than a staging buffer (a frontend with bigger frames): the driver stages it.
                return driver.cuMemcpyHtoDAsync(dst + off, MemorySegment.ofBuffer(in.body()), len, 0);
            }
            if (fill + len > buf[cur].segment().byteSize()) {
                int r = record(c, done, cur);
                cur ^= 1;
                fill = 0;
                if (buf[cur] == null) {
                    buf[cur] = session.staging().acquire(context);
                } else if (r == CuResult.CUDA_SUCCESS && busy[cur]) {
                    r = driver.cuEventSynchronize(done[cur]);
                    busy[cur] = r != CuResult.CUDA_SUCCESS;
                }
                if (r != CuResult.CUDA_SUCCESS) {
                    return r;
                }
            }
            MemorySegment slot = buf[cur].segment().asSlice(fill, len);
            MemorySegment.copy(MemorySegment.ofBuffer(in.body()), 0, slot, 0, len);
            int r = driver.cuMemcpyHtoDAsync(dst + off, slot, len, 0);
            busy[cur] |= r == CuResult.CUDA_SUCCESS;
            fill += len;
            return r;
        }

        /** Waits, through an event behind the last chunk, for every DMA of the copy (stream order). */
        int finish() {
            int r = record(c, done, cur);
            if (r == CuResult.CUDA_SUCCESS) {
                r = driver.cuEventSynchronize(done[cur]);
                busy[0] = busy[1] = r != CuResult.CUDA_SUCCESS;
            }
            return r;
        }

        /** Gives the buffers back, after any DMA a failure or an abort left in flight, and destroys the events. */
        void close() {
            if (busy[0] || busy[1]) {
                driver.cuStreamSynchronize(0);
            }
            for (long event : done) {
                if (event != 0) {
                    driver.cuEventDestroy(event);
                }
            }
            session.staging().release(buf[0]);
            session.staging().release(buf[1]);
        }
    }

    /** Records buffer {@code i}'s event (made on first use) on the legacy default stream, behind its DMAs. */
    private int record(Call c, long[] done, int i) {
        return record(c, done, i, 0);
    }

    /** Records event {@code done[i]} (made on first use) on {@code stream}. */
    private int record(Call c, long[] done, int i, long stream) {
        if (done[i] == 0) {
            MemorySegment cell = c.scratch(8);
            int r = driver.cuEventCreate(cell, EVENT_DISABLE_TIMING);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            done[i] = cell.get(ValueLayout.JAVA_LONG, 0);
        }
        return driver.cuEventRecord(done[i], stream);
    }

    /** Copies out of at most this many bytes stage through the thread's own buffer, in one piece. */
    static final int SMALL_COPY_OUT = 64 << 10;

    /**
     * A copy of {@code count} bytes from {@code src} (checked) to the frontend, whose data goes back in
     * DATA frames before the reply; {@code stream} (translated) for the async variant.
     *
     * <p>A large copy is double-buffered through two of the session's staging buffers: while chunk n is
     * being sent, chunk n+1 is already being copied from the device by cuMemcpyDtoHAsync, and
     * cuStreamSynchronize waits for it only once chunk n is sent (at that point it is the only copy
     * this call has outstanding). A copy of up to 1 MiB is one chunk; above that the first
     * chunk is small (a quarter of the copy, at most 1 MiB) so that sending starts early, and the
     * others fill a staging buffer (4 MiB). With pinned staging the real driver runs the
     * DMA while this thread is in the transport; with pageable memory it would copy synchronously and
     * the pipeline would degrade to today's serial order, never to a wrong one.
     *
     * <p>Stream semantics: the async variant queues every chunk on the caller's stream, as one
     * cuMemcpyDtoHAsync would. The synchronous variant queues its chunks on the legacy default stream
     * (handle 0), which is where cuMemcpyDtoH runs: each chunk still waits for all earlier work in the
     * context's blocking streams, and the call returns only after the last chunk is complete and sent.
     * A private stream would not do: it would not wait for work the client queued on its own streams.
     */
    private int copyOut(Call c, long src, long count, boolean async, long stream) throws IOException, InterruptedException {
        if (count == 0) {
            return CuResult.CUDA_SUCCESS;
        }
        if (count <= SMALL_COPY_OUT) {
            MemorySegment part = c.exec.staging().asSlice(0, count);
            int r = copyChunk(part, src, async, stream);
            if (r == CuResult.CUDA_SUCCESS) {
                c.sendDataWithReply(part); // in the reply's write: the frontend's reader takes both at once
            }
            return r;
        }
        SessionWindow w = c.header.inWindow() ? c.window : null;
        if (w != null && w.tryUse()) { // not retired: the call came on the connection the session still has
            try {
                int slots = WindowSlots.outputSlots(w.segment().byteSize(), session.chunkBytes());
                if (slots > 0) {
                    return copyOutWindow(c, w, slots, src, count, async, stream);
                }
            } finally {
                w.doneUsing();
            }
        }
        StagingPool pool = session.staging();
        long context = c.lane.topContext();
        long copyStream = async ? stream : 0;
        StagingPool.Buffer[] buf = new StagingPool.Buffer[2];
        try {
            buf[0] = pool.acquire(context);
            long off = 0;
            int len = firstChunk(count, Math.min(session.chunkBytes(), pool.bufferBytes()));
            int r = copyChunk(buf[0].segment().asSlice(0, len), src, async, stream);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            for (int cur = 0; ; cur ^= 1) {
                long nextOff = off + len;
                int nextLen = (int) Math.min(pool.bufferBytes(), count - nextOff);
                int next = CuResult.CUDA_SUCCESS;
                if (nextLen > 0) {
                    if (buf[cur ^ 1] == null) {
                        buf[cur ^ 1] = pool.acquire(context);
                    }
                    next = driver.cuMemcpyDtoHAsync(buf[cur ^ 1].segment().asSlice(0, nextLen), src + nextOff, nextLen,
                            copyStream);
                }
                try {
                    c.sendData(buf[cur].segment().asSlice(0, len));
                } catch (IOException | RuntimeException e) {
                    if (nextLen > 0 && next == CuResult.CUDA_SUCCESS) {
                        driver.cuStreamSynchronize(copyStream); // the buffer is not given back while the device writes it
                    }
                    throw e;
                }
                if (nextLen == 0) {
                    return CuResult.CUDA_SUCCESS;
                }
                if (next == CuResult.CUDA_SUCCESS) {
                    next = driver.cuStreamSynchronize(copyStream);
                }
                if (next != CuResult.CUDA_SUCCESS) {
                    return next;
                }
                off = nextOff;
                len = nextLen;
            }
        } finally {
            pool.release(buf[0]);
            pool.release(buf[1]);
        }
    }

    /**
     * A copy to the host placed in the shared window, as the frontend asked (it holds the window for
     * this call until the reply): the device writes each chunk by DMA into the next of the window's
     * {@code slots} output slots (page-locked), and the frontend is told where it lies; while it copies
     * that chunk into the program's memory, the next chunk is already on its way into the next slot.
     * A slot is reused once the frontend says it has taken the chunk in it. When the window is retired
     * meanwhile (its connection was lost; the session resumes on a new one), the rest goes through the
     * byte stream ({@link #copyOutRest}).
     */
    private int copyOutWindow(Call c, SessionWindow w, int slots, long src, long count, boolean async, long stream)
            throws IOException, InterruptedException {
        long slotBytes = session.chunkBytes();
        MemorySegment window = w.segment();
        w.pin(c.lane.topContext()); // page-locked, the device writes the window itself
        for (long off = 0; off < count; ) {
            int len = (int) Math.min(slotBytes, count - off);
            long slot = w.nextOutputSlot(slots, slotBytes);
            if (slot < 0) {
                return copyOutRest(c, src + off, count - off, slotBytes, async, stream);
            }
            int r = copyChunk(window.asSlice(slot, len), src + off, async, stream);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            c.sendWindowData(w, slot, len);
            off += len;
        }
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * The rest of a copy to the host whose window was retired mid-copy: in chunks of {@code chunk} bytes as through
     * the window (the same driver calls), each through a staging buffer and the byte stream.
     */
    private int copyOutRest(Call c, long src, long count, long chunk, boolean async, long stream)
            throws IOException, InterruptedException {
        StagingPool pool = session.staging();
        StagingPool.Buffer buf = pool.acquire(c.lane.topContext());
        try {
            for (long off = 0; off < count; ) {
                int len = (int) Math.min(Math.min(chunk, pool.bufferBytes()), count - off);
                MemorySegment part = buf.segment().asSlice(0, len);
                int r = copyChunk(part, src + off, async, stream);
                if (r != CuResult.CUDA_SUCCESS) {
                    return r;
                }
                c.sendData(part);
                off += len;
            }
            return CuResult.CUDA_SUCCESS;
        } finally {
            pool.release(buf);
        }
    }

    /**
     * The first chunk of a copy: the whole copy up to {@code max} (one receive chunk, 1 MiB: splitting
     * it costs a frame and a synchronisation more than the overlap wins back on the emulated device);
     * above that a quarter of the copy, at most {@code max}, a multiple of 4 KiB, so that sending
     * starts early and the following chunks (up to a staging buffer each) overlap their sending.
     */
    static int firstChunk(long count, int max) {
        if (count <= max) {
            return (int) count;
        }
        long quarter = Math.max(SMALL_COPY_OUT, (count / 4) & ~4095L);
        return (int) Math.min(count, Math.min(quarter, max));
    }

    /** One chunk into {@code part}, complete when this returns. */
    private int copyChunk(MemorySegment part, long src, boolean async, long stream) {
        long len = part.byteSize();
        if (!async) {
            return driver.cuMemcpyDtoH(part, src, len);
        }
        int r = driver.cuMemcpyDtoHAsync(part, src, len, stream);
        return r == CuResult.CUDA_SUCCESS ? driver.cuStreamSynchronize(stream) : r;
    }


    /**
     * Hardware decompression: the array's length as announced, its operations following as DATA. Each is
     * checked before the driver sees any ({@link DecompressParams#shapeRefusal}: a known algorithm, zero
     * padding, sizes given, no NULL pointer), and its source [src, src+srcNumBytes), destination
     * [dst, dst+dstNumBytes) and dstActBytes (4 bytes) must each lie in the session's device memory; flags
     * must be 0. dstNumBytes, only a hint to the driver, is required here: it is the bound of the range a
     * guest may have written. The driver's errorIndex is not asked (the frontend answers it: the operation
     * it found wrong, else SIZE_MAX).
     */
    @Override
    public int cuMemBatchDecompressAsync(Call c, long paramsArrayLength, long count, int flags, long stream)
            throws ProtocolException, CallRejected, InterruptedException {
        if (count <= 0 || count > DecompressParams.MAX_COUNT || paramsArrayLength != count * DecompressParams.SIZE) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "count=" + count + " with " + paramsArrayLength
                    + " bytes (1 to " + DecompressParams.MAX_COUNT + " operations)");
        }
        if (flags != 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "flags=" + flags + " (must be 0)");
        }
        MemorySegment params = c.receiveBulk(paramsArrayLength);
        for (long i = 0; i < count; i++) {
            String refusal = DecompressParams.shapeRefusal(params, i);
            if (refusal != null) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "paramsArray[" + i + "]: " + refusal);
            }
            long[][] fields = {{DecompressParams.SRC, DecompressParams.at(params, i, DecompressParams.SRC_BYTES)},
                    {DecompressParams.DST, DecompressParams.at(params, i, DecompressParams.DST_BYTES)},
                    {DecompressParams.DST_ACT_BYTES, 4}};
            for (long[] field : fields) {
                long real = c.deviceRange(DecompressParams.at(params, i, field[0]), field[1]);
                params.set(ValueLayout.JAVA_LONG_UNALIGNED, i * DecompressParams.SIZE + field[0], real);
            }
        }
        return driver.cuMemBatchDecompressAsync(params, count, 0, MemorySegment.NULL, stream);
    }
}
