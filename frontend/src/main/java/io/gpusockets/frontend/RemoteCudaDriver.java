package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.WindowSlots;
import io.gpusockets.protocol.wire.WireValues;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.ref.Cleaner;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The CUDA driver API of a remote GPU. Every call goes to the backend except those the API table
 * marks local (host memory, error strings). Usable from any JVM program:
 * <pre>{@code
 *   try (RemoteCudaDriver cu = RemoteCudaDriver.connect("tcp://gpu-host:7070")) {
 *       cu.cuInit(0); ...
 *   }
 * }</pre>
 * Each client thread is its own lane: its calls run in order on the backend, and a blocking call on
 * one thread never delays another thread's calls. Calls the table marks async are pipelined (sent
 * without waiting) unless GPUSOCKETS_ASYNC=0; their errors come back from the next synchronizing call.
 */
public final class RemoteCudaDriver extends GeneratedRemoteDriver implements AutoCloseable {
    /** What every call returns once the backend is gone. */
    public static final int CONNECTION_LOST = CuResult.CUDA_ERROR_DEVICE_UNAVAILABLE;
    private static final Cleaner LANE_CLEANER = Cleaner.create();
    private static final int REQUEST_BUFFER = 64 << 10;
    private static final ThreadLocal<ByteBuffer> REQUEST =
            ThreadLocal.withInitial(() -> ByteBuffer.allocate(REQUEST_BUFFER).order(ByteOrder.LITTLE_ENDIAN));
    private static final ApiFunction LAUNCH = ApiTable.get().byName("cuLaunchKernel");
    private static final ApiFunction POINTER_ATTRIBUTE = ApiTable.get().byName("cuPointerGetAttribute");

    private final BackendConnection connection;
    private final FrontendConfig config;
    private final AtomicInteger laneIds = new AtomicInteger(1);
    private final ThreadLocal<LaneTicket> lane = ThreadLocal.withInitial(this::newLane);
    private final LocalCalls local = new LocalCalls();
    private final RemoteMemory memory = new RemoteMemory(this);
    private final Map<Long, long[]> paramSizes = new ConcurrentHashMap<>();
    private final AtomicBoolean lossReported = new AtomicBoolean();
    private final StreamCallbacks callbacks =
            new StreamCallbacks((f, request) -> exchange(f, request, List.of(), List.of(), false));

    /** A client thread's lane; when the thread is gone the backend is told to end the lane. */
    private static final class LaneTicket {
        final int id;

        LaneTicket(int id) {
            this.id = id;
        }
    }

    private RemoteCudaDriver(BackendConnection connection, FrontendConfig config) {
        this.connection = connection;
        this.config = config;
    }

    /** Connects to one backend ({@code tcp://host:port}, {@code unix:///path}, ...) with settings from the environment. */
    public static RemoteCudaDriver connect(String uri) throws IOException {
        return connect(FrontendConfig.forServer(uri));
    }

    /** Connects to the first backend of {@code config} ({@link FrontendDrivers#connect} merges them all). */
    public static RemoteCudaDriver connect(FrontendConfig config) throws IOException {
        String uri = config.servers().getFirst();
        return new RemoteCudaDriver(BackendConnection.open(uri, config), config);
    }

    /** Connects to GPUSOCKETS_SERVER. */
    public static RemoteCudaDriver fromEnvironment() throws IOException {
        return connect(FrontendConfig.fromEnvironment(Map.of()));
    }

    /** The backend's own description of its driver (it says when the device is emulated). */
    public String backendDescription() {
        return connection.welcome().description();
    }

    public long sessionId() {
        return connection.welcome().sessionId();
    }

    public String backendUri() {
        return connection.uri().toString();
    }

    /** Whether async calls are pipelined on this connection (asked for and granted). */
    public boolean pipelining() {
        return connection.async();
    }

    private LaneTicket newLane() {
        int id = laneIds.getAndIncrement();
        LaneTicket ticket = new LaneTicket(id);
        BackendConnection conn = connection;
        LANE_CLEANER.register(ticket, () -> {
            try {
                conn.send(Opcodes.LANE_END, 0, id, 0);
            } catch (IOException ignored) {
                // the connection is gone, and the lane with it
            }
        });
        return ticket;
    }

    private int lost(IOException e) {
        if (lossReported.compareAndSet(false, true)) {
            System.err.println("gpusockets: " + e.getMessage() + "; CUDA calls now fail with "
                    + CuResult.name(CONNECTION_LOST));
        }
        return CONNECTION_LOST;
    }

    @Override
    protected int call(ApiFunction f, Object... args) {
        List<ApiParam> params = f.params();
        ByteBuffer req = REQUEST.get().clear();
        List<MemorySegment> bulk = new ArrayList<>(1);
        List<MemorySegment> outBytes = new ArrayList<>(1);
        for (int i = 0; i < params.size(); i++) {
            ApiParam p = params.get(i);
            Object a = args[i];
            if (p.out()) {
                if (p.type() == ParamType.BYTES) {
                    long n = ApiParam.evaluate(p.lengthExpression(), name -> longValue(args[f.paramIndex(name)]));
                    if (n < 0) {
                        return CuResult.CUDA_ERROR_INVALID_VALUE;
                    }
                    if (n > 0) {
                        outBytes.add(WireValues.sized((MemorySegment) a, n).asSlice(0, n));
                    }
                } else if (((MemorySegment) a).isNative() && ((MemorySegment) a).address() == 0
                        && !optionalOut(f, p)) {
                    return CuResult.CUDA_ERROR_INVALID_VALUE;
                }
                continue;
            }
            switch (p.type()) {
                case NULL -> {
                    if (((MemorySegment) a).address() != 0) {
                        return CuResult.CUDA_ERROR_NOT_SUPPORTED;
                    }
                }
                case ZERO -> {
                    if ((Integer) a != 0) {
                        return CuResult.CUDA_ERROR_NOT_SUPPORTED;
                    }
                }
                case CSTR -> {
                    byte[] s = cString((MemorySegment) a);
                    if (s == null) {
                        return CuResult.CUDA_ERROR_INVALID_VALUE;
                    }
                    req.putInt(s.length).put(s);
                }
                case BYTES -> {
                    if (p.has("nullable") && ((MemorySegment) a).isNative() && ((MemorySegment) a).address() == 0) {
                        req.putLong(0);
                        continue;
                    }
                    long n = ApiParam.evaluate(p.lengthExpression(), name -> longValue(args[f.paramIndex(name)]));
                    if (n < 0) {
                        return CuResult.CUDA_ERROR_INVALID_VALUE;
                    }
                    req.putLong(n);
                    if (n > 0) {
                        bulk.add(WireValues.sized((MemorySegment) a, n).asSlice(0, n));
                    }
                }
                case IMAGE -> {
                    MemorySegment image = ModuleImages.image((MemorySegment) a);
                    if (image == null) {
                        return CuResult.CUDA_ERROR_INVALID_IMAGE;
                    }
                    req.putLong(image.byteSize());
                    bulk.add(image);
                }
                default -> WireValues.putScalar(req, p.type(), a);
            }
        }
        // A copy whose data comes back must be waited for even when async: its bytes land in the
        // program's memory before the call returns (pipelined DtoH is left to the sync that follows).
        boolean noReply = f.async() && connection.async() && outBytes.isEmpty();
        Reply reply = exchange(f, req.flip(), bulk, outBytes, noReply);
        if (reply.result() == CuResult.CUDA_SUCCESS) {
            long[] outs = new long[params.size()];
            if (reply.body() != null) {
                ByteBuffer body = reply.body();
                for (int i = 0; i < params.size(); i++) {
                    ApiParam p = params.get(i);
                    if (p.out() && p.type() != ParamType.BYTES) {
                        outs[i] = WireValues.outWireBytes(p.type()) == 4 ? body.getInt(body.position()) : body.getLong(body.position());
                        WireValues.getOut(body, p.type(), (MemorySegment) args[i]);
                    }
                }
            }
            memory.ranges().afterCall(f, args, reply.body() != null ? outs : null);
        }
        return reply.result();
    }

    /** cuModuleGetGlobal may be asked for only the pointer or only the size. */
    private static boolean optionalOut(ApiFunction f, ApiParam p) {
        return f.name().equals("cuModuleGetGlobal");
    }

    /** A call's CUresult and, when it waited, the rest of the reply body (its outputs). */
    record Reply(int result, ByteBuffer body) {
    }

    /** This thread's request buffer, cleared (for hand-written calls of this package). */
    static ByteBuffer request() {
        return REQUEST.get().clear();
    }

    /** Frames gather at most this many pieces of bulk input (IOV_MAX is 1024). */
    private static final int MAX_GATHER = 1000;

    /** Sends one request (and its bulk inputs, each in frames of its own), then, unless pipelined, waits for the reply. */
    private Reply exchange(ApiFunction f, ByteBuffer request, List<MemorySegment> bulk, List<MemorySegment> outBytes,
                           boolean noReply) {
        return exchange(f, request, bulk, false, outBytes, noReply);
    }

    /**
     * Sends one request and its bulk input as DATA frames of up to a chunk each, then, unless
     * pipelined, waits for the reply; bulk outputs land in {@code outBytes} in order. With
     * {@code gather} the bulk segments are the pieces of one input (the rows of a pitched copy) and
     * consecutive pieces share frames; without it each segment is a parameter of its own and starts a
     * new frame, as the backend's generic dispatch reads them.
     */
    Reply exchange(ApiFunction f, ByteBuffer request, List<MemorySegment> bulk, boolean gather,
                   List<MemorySegment> outBytes, boolean noReply) {
        if (callbacks.runningHere()) {
            // A stream callback waiting on the stream it holds would never return; CUDA forbids the call too.
            return new Reply(CuResult.CUDA_ERROR_NOT_PERMITTED, null);
        }
        int laneId = lane.get().id;
        MemorySegment window = noReply ? null : windowFor(bulk, outBytes);
        try {
            BackendConnection.Pending p = noReply ? null : connection.expect(outBytes);
            long requestId = p != null ? p.requestId : connection.nextRequestId();
            int flags = (noReply ? FrameHeader.FLAG_NO_REPLY : 0) | (window != null ? FrameHeader.FLAG_WINDOW : 0);
            connection.send(f.opcode(), flags, laneId, requestId, request);
            int chunk = connection.maxBody() / 4;
            List<ByteBuffer> frame = new ArrayList<>();
            long frameBytes = 0;
            long slot = -1; // with the window: where the current frame's bytes go
            for (MemorySegment b : bulk) {
                for (long off = 0; off < b.byteSize(); ) {
                    long n = Math.min(chunk - frameBytes, b.byteSize() - off);
                    if (window != null) {
                        if (slot < 0) {
                            slot = connection.nextInputSlot();
                        }
                        SplitCopier.copy(b, off, window, slot + frameBytes, n);
                        frame.add(EMPTY); // a placeholder: the frame's bytes are in the window
                    } else {
                        frame.add(b.asSlice(off, n).asByteBuffer());
                    }
                    frameBytes += n;
                    off += n;
                    if (frameBytes == chunk || frame.size() == MAX_GATHER || (!gather && off == b.byteSize())) {
                        sendData(laneId, requestId, frame, window != null ? slot : -1, frameBytes);
                        frame.clear();
                        frameBytes = 0;
                        slot = -1;
                    }
                }
            }
            if (!frame.isEmpty()) {
                sendData(laneId, requestId, frame, window != null ? slot : -1, frameBytes);
            }
            if (p == null) {
                return new Reply(CuResult.CUDA_SUCCESS, null);
            }
            ByteBuffer body = connection.await(p).order(ByteOrder.LITTLE_ENDIAN);
            return new Reply(body.getInt(), body);
        } catch (IOException e) {
            return new Reply(lost(e), null);
        } finally {
            if (window != null) {
                connection.releaseWindow();
            }
        }
    }

    private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);

    /**
     * Bulk data of at least this many bytes (in or out) goes through the connection's shared window
     * when it has one: it is copied once, into a few slots the backend's device reads (or writes)
     * where they are, instead of through a ring and out again. Smaller data rides in the byte stream.
     */
    static final long WINDOW_MIN_BYTES = 64 << 10;

    /** The shared window for a call with this bulk data, held until the reply; null to use the byte stream. */
    private MemorySegment windowFor(List<MemorySegment> bulk, List<MemorySegment> outBytes) {
        long in = 0, out = 0;
        for (MemorySegment b : bulk) {
            in += b.byteSize();
        }
        for (MemorySegment o : outBytes) {
            out += o.byteSize();
        }
        return Math.max(in, out) >= WINDOW_MIN_BYTES ? connection.acquireWindow(in > 0) : null;
    }

    /**
     * Sends one DATA frame: {@code frame}'s buffers, or, when {@code slot} is a window offset, a
     * reference to the {@code bytes} already copied there.
     */
    private void sendData(int laneId, long requestId, List<ByteBuffer> frame, long slot, long bytes) throws IOException {
        if (slot < 0) {
            connection.send(Opcodes.DATA, 0, laneId, requestId, frame.toArray(ByteBuffer[]::new));
            return;
        }
        connection.send(Opcodes.DATA, FrameHeader.FLAG_WINDOW, laneId, requestId, WindowSlots.ref(slot, bytes));
        connection.inputSent();
    }

    // ---- hand-written calls (custom=frontend in the API table) ----

    /** JIT options are not forwarded; log-size options come back as 0 and log buffers empty. */
    @Override
    public int cuModuleLoadDataEx(MemorySegment module, MemorySegment image, int numOptions, MemorySegment options,
                                  MemorySegment optionValues) {
        int r = cuModuleLoadData(module, image);
        if (numOptions > 0 && options.address() != 0 && optionValues.address() != 0) {
            MemorySegment opts = WireValues.sized(options, 4L * numOptions);
            MemorySegment vals = WireValues.sized(optionValues, 8L * numOptions);
            for (int i = 0; i < numOptions; i++) {
                int opt = opts.getAtIndex(ValueLayout.JAVA_INT, i);
                if (opt == JIT_INFO_LOG_BUFFER_SIZE_BYTES || opt == JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
                    vals.setAtIndex(ValueLayout.JAVA_LONG, i, 0);
                } else if (opt == JIT_INFO_LOG_BUFFER || opt == JIT_ERROR_LOG_BUFFER) {
                    MemorySegment buf = vals.getAtIndex(ValueLayout.ADDRESS, i);
                    if (buf.address() != 0) {
                        buf.reinterpret(1).set(ValueLayout.JAVA_BYTE, 0, (byte) 0);
                    }
                }
            }
        }
        return r;
    }

    private static final int JIT_INFO_LOG_BUFFER = 3;
    private static final int JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
    private static final int JIT_ERROR_LOG_BUFFER = 5;
    private static final int JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

    @Override
    public int cuPointerGetAttribute(MemorySegment data, int attribute, long ptr) {
        int size = switch (attribute) {
            case 1, 3, 7, 11, 12 -> 8; // context, device pointer, buffer id, range start, range size
            case 2, 6, 8, 9, 13 -> 4;  // memory type, sync memops, is managed, device ordinal, mapped
            default -> 0;
        };
        if (size == 0) {
            return CuResult.CUDA_ERROR_NOT_SUPPORTED;
        }
        if (data.isNative() && data.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ByteBuffer req = REQUEST.get().clear().putInt(attribute).putLong(ptr).flip();
        Reply reply = exchange(POINTER_ATTRIBUTE, req, List.of(), List.of(), false);
        if (reply.result() == CuResult.CUDA_SUCCESS) {
            long v = reply.body().getLong();
            MemorySegment d = WireValues.sized(data, size);
            if (size == 8) {
                d.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, v);
            } else {
                d.set(ValueLayout.JAVA_INT_UNALIGNED, 0, (int) v);
            }
        }
        return reply.result();
    }

    /**
     * Kernel parameters are copied at the call, as the driver does: sizes come from the backend
     * (cuFuncGetParamInfo) once per function; {@code extra} launches send the packed buffer as is.
     */
    @Override
    public int cuLaunchKernel(long f, int gridDimX, int gridDimY, int gridDimZ, int blockDimX, int blockDimY,
                              int blockDimZ, int sharedMemBytes, long hStream, MemorySegment kernelParams,
                              MemorySegment extra) {
        boolean hasParams = kernelParams.address() != 0 || (!kernelParams.isNative() && kernelParams.byteSize() > 0);
        boolean hasExtra = extra.address() != 0 || (!extra.isNative() && extra.byteSize() > 0);
        if (hasParams && hasExtra) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        long[] sizes = null;
        if (!hasExtra) {
            // Asked before the request buffer is filled: the query is a call of its own and uses it too.
            sizes = paramSizes.get(f);
            if (sizes == null) {
                sizes = queryParamSizes(f);
                if (sizes == null) {
                    return CuResult.CUDA_ERROR_INVALID_HANDLE;
                }
                paramSizes.put(f, sizes);
            }
            if (sizes.length > 0 && !hasParams) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
        }
        ByteBuffer req = REQUEST.get().clear();
        req.putLong(f).putInt(gridDimX).putInt(gridDimY).putInt(gridDimZ)
                .putInt(blockDimX).putInt(blockDimY).putInt(blockDimZ).putInt(sharedMemBytes).putLong(hStream);
        if (hasExtra) {
            int r = putExtra(req, extra);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
        } else {
            req.putInt(0).putInt(sizes.length);
            MemorySegment array = WireValues.sized(kernelParams, 8L * sizes.length);
            for (int i = 0; i < sizes.length; i++) {
                MemorySegment value = array.getAtIndex(ValueLayout.ADDRESS, i).reinterpret(sizes[i]);
                req.putInt((int) sizes[i]);
                req.put(value.asByteBuffer());
            }
        }
        boolean noReply = connection.async();
        return exchange(LAUNCH, req.flip(), List.of(), List.of(), noReply).result();
    }

    private static final int LAUNCH_PARAM_END = 0;
    private static final int LAUNCH_PARAM_BUFFER_POINTER = 1;
    private static final int LAUNCH_PARAM_BUFFER_SIZE = 2;
    private static final int MAX_EXTRA_WORDS = 64;

    private static int putExtra(ByteBuffer req, MemorySegment extra) {
        MemorySegment e = WireValues.sized(extra, 8L * MAX_EXTRA_WORDS);
        MemorySegment buffer = null;
        long size = -1;
        for (int i = 0; i + 1 < MAX_EXTRA_WORDS; i += 2) {
            long key = e.getAtIndex(ValueLayout.JAVA_LONG, i);
            if (key == LAUNCH_PARAM_END) {
                break;
            }
            MemorySegment value = e.getAtIndex(ValueLayout.ADDRESS, i + 1);
            if (key == LAUNCH_PARAM_BUFFER_POINTER) {
                buffer = value;
            } else if (key == LAUNCH_PARAM_BUFFER_SIZE) {
                size = value.reinterpret(8).get(ValueLayout.JAVA_LONG, 0);
            } else {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
        }
        if (buffer == null || size < 0 || size > 32764 || size + 64 > req.remaining()) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        req.putInt(1).putInt((int) size).put(buffer.reinterpret(size).asByteBuffer());
        return CuResult.CUDA_SUCCESS;
    }

    /** Parameter sizes of a function, from cuFuncGetParamInfo until it answers INVALID_VALUE. */
    private long[] queryParamSizes(long f) {
        try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment offset = a.allocate(8), size = a.allocate(8);
            List<Long> sizes = new ArrayList<>();
            for (int i = 0; i < 1024; i++) {
                int r = cuFuncGetParamInfo(f, i, offset, size);
                if (r == CuResult.CUDA_ERROR_INVALID_VALUE) {
                    break;
                }
                if (r != CuResult.CUDA_SUCCESS) {
                    return null;
                }
                sizes.add(size.get(ValueLayout.JAVA_LONG, 0));
            }
            return sizes.stream().mapToLong(Long::longValue).toArray();
        }
    }

    /** The file is read here, in the guest, and sent as an image (see {@link ModuleFiles}). */
    @Override
    public int cuModuleLoad(MemorySegment module, MemorySegment fname) {
        return ModuleFiles.load(this, module, fname);
    }

    /**
     * Runs {@code callback} in this process, in stream order, on a callback thread of this driver
     * (see {@link StreamCallbacks}); the caller continues at once.
     */
    @Override
    public int cuStreamAddCallback(long hStream, MemorySegment callback, MemorySegment userData, int flags) {
        return callbacks.addCallback(hStream, callback, userData, flags);
    }

    /** As {@link #cuStreamAddCallback}, without a status; skipped if the stream failed. */
    @Override
    public int cuLaunchHostFunc(long hStream, MemorySegment fn, MemorySegment userData) {
        return callbacks.launchHostFunc(hStream, fn, userData);
    }

    // ---- copies with unified addressing and pitched copies (RemoteMemory) ----

    @Override
    public int cuMemcpy(long dst, long src, long byteCount) {
        return memory.copy(dst, src, byteCount, 0, false);
    }

    @Override
    public int cuMemcpyAsync(long dst, long src, long byteCount, long hStream) {
        return memory.copy(dst, src, byteCount, hStream, true);
    }

    @Override
    public int cuMemcpy2D(MemorySegment pCopy) {
        return memory.copyPitched(pCopy, 0, false, false);
    }

    @Override
    public int cuMemcpy2DAsync(MemorySegment pCopy, long hStream) {
        return memory.copyPitched(pCopy, hStream, false, true);
    }

    @Override
    public int cuMemcpy3D(MemorySegment pCopy) {
        return memory.copyPitched(pCopy, 0, true, false);
    }

    @Override
    public int cuMemcpy3DAsync(MemorySegment pCopy, long hStream) {
        return memory.copyPitched(pCopy, hStream, true, true);
    }

    // ---- answered locally (local in the API table) ----

    @Override
    public int cuMemAllocHost(MemorySegment pp, long bytesize) {
        return local.allocHost(pp, bytesize, 0);
    }

    @Override
    public int cuMemHostAlloc(MemorySegment pp, long bytesize, int flags) {
        return local.allocHost(pp, bytesize, flags);
    }

    @Override
    public int cuMemHostRegister(MemorySegment p, long bytesize, int flags) {
        return local.register(p, bytesize, flags);
    }

    @Override
    public int cuMemHostUnregister(MemorySegment p) {
        return local.unregister(p);
    }

    @Override
    public int cuMemHostGetDevicePointer(MemorySegment pdptr, MemorySegment p, int flags) {
        return local.devicePointer();
    }

    @Override
    public int cuMemHostGetFlags(MemorySegment pFlags, MemorySegment p) {
        return local.flags(pFlags, p);
    }

    @Override
    public int cuMemFreeHost(MemorySegment p) {
        return local.freeHost(p);
    }

    @Override
    public int cuGetErrorName(int error, MemorySegment pStr) {
        return local.errorText(error, pStr, true);
    }

    @Override
    public int cuGetErrorString(int error, MemorySegment pStr) {
        return local.errorText(error, pStr, false);
    }

    private static long longValue(Object o) {
        return o instanceof Number n ? n.longValue() : 0;
    }

    private static byte[] cString(MemorySegment s) {
        if (s.isNative() && s.address() == 0) {
            return null;
        }
        MemorySegment m = WireValues.sized(s, WireValues.MAX_CSTR + 1);
        long limit = Math.min(m.byteSize(), WireValues.MAX_CSTR + 1);
        for (long i = 0; i < limit; i++) {
            if (m.get(ValueLayout.JAVA_BYTE, i) == 0) {
                return m.asSlice(0, i).toArray(ValueLayout.JAVA_BYTE);
            }
        }
        return null;
    }

    @Override
    public void close() {
        lossReported.set(true);   // closing on purpose: nothing to report
        callbacks.close();
        connection.close();
        local.close();
    }
}
