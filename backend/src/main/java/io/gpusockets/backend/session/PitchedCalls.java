package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.PitchedCopyRequest;
import io.gpusockets.protocol.structs.Memcpy3D.Side;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * Area {@code pitched}: 2D and 3D copies, cuMemcpy2DUnaligned among them (the driver's own call each time). Their struct names memory, so each named device span is
 * checked against the session's ranges and each array handle translated before the driver sees it.
 *
 * <p>Copies with a host side never touch guest addresses: the host side becomes this lane's staging
 * buffer, rows packed without gaps, and the copy is cut into pieces that fit it (whole slices, else
 * whole rows, else parts of a row), each piece a driver call of its own.
 */
final class PitchedCalls implements BackendHandlers.Pitched {
    private final Session session;
    private final CudaDriver driver;

    PitchedCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
    }

    @Override
    public int cuMemcpy2D(Call c) throws ProtocolException, CallRejected, InterruptedException, IOException {
        return copy(c, false, false);
    }

    @Override
    public int cuMemcpy2DUnaligned(Call c) throws ProtocolException, CallRejected, InterruptedException, IOException {
        return copy(c, false, false);
    }

    @Override
    public int cuMemcpy2DAsync(Call c) throws ProtocolException, CallRejected, InterruptedException, IOException {
        return copy(c, false, true);
    }

    @Override
    public int cuMemcpy3D(Call c) throws ProtocolException, CallRejected, InterruptedException, IOException {
        return copy(c, true, false);
    }

    @Override
    public int cuMemcpy3DAsync(Call c) throws ProtocolException, CallRejected, InterruptedException, IOException {
        return copy(c, true, true);
    }

    /**
     * The request is {@link PitchedCopyRequest}'s; a host source's rows follow as DATA (packed), a
     * host destination's go back as DATA before the reply.
     */
    private int copy(Call c, boolean is3D, boolean async)
            throws ProtocolException, CallRejected, InterruptedException, IOException {
        PitchedCopyRequest.Request q = PitchedCopyRequest.read(c.body, async);
        Memcpy3D m = q.copy();
        long streamId = q.stream();
        long bulk = q.bulkBytes();
        c.expectEnd();
        c.expectBulk(bulk);
        long total = m.totalBytes();
        if (total < 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "copy extent out of range");
        }
        boolean hostIn = m.src().memoryType() == Memcpy3D.HOST;
        boolean hostOut = m.dst().memoryType() == Memcpy3D.HOST;
        boolean unaligned = c.function == io.gpusockets.protocol.api.ApiEntries.cuMemcpy2DUnaligned;
        if (bulk != (hostIn ? total : 0)) {
            throw new ProtocolException(c.name() + ": data length " + bulk + " does not match the copy (" + total + " bytes from "
                    + (hostIn ? "the host" : "the device") + ")");
        }
        if (!is3D && (m.depth() != 1 || !flat(m.src()) || !flat(m.dst()))) {
            throw new ProtocolException(c.name() + ": a 2D copy with 3D fields");
        }
        if (hostIn && hostOut) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "host-to-host copies stay on the frontend");
        }
        long stream = c.handle(ParamType.STREAM, streamId, true);
        if (async && (hostIn || hostOut)) {
            session.captureGuard().refuseHostWork(c, session.driver(), stream, c.name());
        }
        Memcpy3D checked = m.with(checkSide(c, m, m.src()), checkSide(c, m, m.dst()));
        MemorySegment desc = c.scratch(Memcpy3D.SIZE_3D);
        if (!hostIn && !hostOut) {
            return driverCopy(checked, desc, is3D, async, stream, unaligned);
        }
        try (Pieces pieces = new Pieces(c, checked, desc, is3D, async, stream, hostIn, unaligned)) {
            return pieces.run();
        }
    }

    private static boolean flat(Side s) {
        return s.z() == 0 && s.lod() == 0 && s.height() == 0;
    }

    /** A device side's whole touched span must lie in one session range; an array side's handle is translated. */
    static Side checkSide(Call c, Memcpy3D m, Side s) throws CallRejected {
        switch (s.memoryType()) {
            case Memcpy3D.HOST -> {
                return s;
            }
            case Memcpy3D.DEVICE, Memcpy3D.UNIFIED -> {
                long start = Memcpy3D.startOffset(s);
                long extent = m.extent(s);
                if (start < 0 || extent < 0 || s.device() + start < s.device()) {
                    throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "device side out of range");
                }
                long device = c.deviceRange(s.device() + start, extent) - start;
                Side r = s.resolved(Memcpy3D.DEVICE);
                return device == r.device() ? r : new Side(r.memoryType(), r.x(), r.y(), r.z(), r.lod(), r.host(), device,
                        r.array(), r.pitch(), r.height(), r.reserved());
            }
            case Memcpy3D.ARRAY -> {
                return s.withArray(c.handle(ParamType.ARRAY, s.array(), false));
            }
            default -> throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "memory type " + s.memoryType());
        }
    }

    private int driverCopy(Memcpy3D m, MemorySegment desc, boolean is3D, boolean async, long stream, boolean unaligned) {
        if (is3D) {
            m.write3D(desc);
            return async ? driver.cuMemcpy3DAsync(desc, stream) : driver.cuMemcpy3D(desc);
        }
        m.write2D(desc);
        if (unaligned) {
            return driver.cuMemcpy2DUnaligned(desc);
        }
        return async ? driver.cuMemcpy2DAsync(desc, stream) : driver.cuMemcpy2D(desc);
    }

    /** A copy with a host side, cut into pieces that fit the lane's staging buffer. */
    private final class Pieces implements AutoCloseable {
        private final Call c;
        private final Memcpy3D m;
        private final MemorySegment desc;
        private final boolean is3D;
        private final boolean async;
        private final long stream;
        private final boolean hostIn;
        private final boolean unaligned;
        private final MemorySegment staging;
        private Inbound chunk;

        Pieces(Call c, Memcpy3D m, MemorySegment desc, boolean is3D, boolean async, long stream, boolean hostIn,
               boolean unaligned) {
            this.c = c;
            this.m = m;
            this.desc = desc;
            this.is3D = is3D;
            this.async = async;
            this.stream = stream;
            this.hostIn = hostIn;
            this.unaligned = unaligned;
            this.staging = c.exec.staging();
        }

        int run() throws ProtocolException, InterruptedException, IOException {
            long w = m.width(), h = m.height(), d = m.depth();
            long room = staging.byteSize();
            if (m.totalBytes() <= room) {
                return piece(0, 0, 0, w, h, d);
            }
            int r = CuResult.CUDA_SUCCESS;
            if (w * h <= room) {
                long k = room / (w * h);
                for (long z = 0; z < d && r == CuResult.CUDA_SUCCESS; z += k) {
                    r = piece(0, 0, z, w, h, Math.min(k, d - z));
                }
            } else if (w <= room) {
                long k = room / w;
                for (long z = 0; z < d && r == CuResult.CUDA_SUCCESS; z++) {
                    for (long y = 0; y < h && r == CuResult.CUDA_SUCCESS; y += k) {
                        r = piece(0, y, z, w, Math.min(k, h - y), 1);
                    }
                }
            } else {
                for (long z = 0; z < d && r == CuResult.CUDA_SUCCESS; z++) {
                    for (long y = 0; y < h && r == CuResult.CUDA_SUCCESS; y++) {
                        for (long x = 0; x < w && r == CuResult.CUDA_SUCCESS; x += room) {
                            r = piece(x, y, z, Math.min(room, w - x), 1, 1);
                        }
                    }
                }
            }
            return r;
        }

        /** One driver call for the block at (x, y, z) of pw bytes by ph rows by pd slices; the host side is staging. */
        private int piece(long x, long y, long z, long pw, long ph, long pd)
                throws ProtocolException, InterruptedException, IOException {
            MemorySegment buf = staging.asSlice(0, pw * ph * pd);
            Memcpy3D p;
            if (hostIn) {
                fill(buf);
                p = new Memcpy3D(m.src().asHost(buf.address(), pw, ph), m.dst().offset(x, y, z), pw, ph, pd);
            } else {
                p = new Memcpy3D(m.src().offset(x, y, z), m.dst().asHost(buf.address(), pw, ph), pw, ph, pd);
            }
            int r = driverCopy(p, desc, is3D, async, stream, unaligned);
            if (r == CuResult.CUDA_SUCCESS && !hostIn) {
                if (async) {
                    r = driver.cuStreamSynchronize(stream);
                }
                if (r == CuResult.CUDA_SUCCESS) {
                    c.sendData(buf);
                }
            }
            return r;
        }

        /** Fills {@code dst} from this call's DATA frames, which need not line up with the pieces. */
        private void fill(MemorySegment dst) throws ProtocolException, InterruptedException {
            long off = 0;
            while (off < dst.byteSize()) {
                if (chunk == null || !chunk.body().hasRemaining()) {
                    close();
                    chunk = c.nextChunk();
                }
                ByteBuffer body = chunk.body();
                int n = (int) Math.min(body.remaining(), dst.byteSize() - off);
                MemorySegment.copy(MemorySegment.ofBuffer(body), 0, dst, off, n);
                body.position(body.position() + n);
                off += n;
            }
        }

        /** Gives back a partly used DATA frame; the dispatcher drains what a failed copy left unread. */
        @Override
        public void close() {
            if (chunk != null) {
                c.release(chunk);
                chunk = null;
            }
        }
    }
}
