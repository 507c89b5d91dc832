package io.gpusockets.backend.testing;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.StableWindows;
import io.gpusockets.protocol.api.UnsupportedCudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;

/**
 * Just enough of a device, in host memory, to run the workloads without a GPU: allocations at
 * device-like addresses, synchronous copies, and the three kernels the workloads launch
 * (implemented here as the .cu describes them). Not the emulated device: a test double whose
 * faults can be switched on.
 *
 * <p>Contexts made with cuCtxCreate, streams and events live as the driver's do, and every call on
 * them, or on an allocation, checks that what it uses exists when it starts and still exists when it
 * returns: a use of something destroyed, or something destroyed under a running call, is recorded in
 * {@link #misuses()} (on a real driver, a use-after-free). {@link #hold} makes the calls that wait
 * (cuStreamSynchronize, cuCtxSynchronize, cuMemsetD8) stop until it is opened, so that a test can
 * race a destroy against a call that is inside the driver.
 */
public final class FakeGpu extends UnsupportedCudaDriver {
    private static final long BASE = StableWindows.DEFAULT_BASE; // device pointers where a window's would lie
    private static final long CONTEXT = 0xC0C0L;
    private static final long MODULE = 0x0D0DL;
    private static final Map<String, Long> FUNCTIONS = Map.of("gpus_vector_add", 1L, "gpus_block_sum", 2L, "gpus_mixed12", 3L);
    private static final int[] MIXED12_SIZES = {1, 2, 4, 8, 4, 8, 8, 16, 2, 4, 16, 8};

    private final Arena arena = Arena.ofShared();
    private final TreeMap<Long, MemorySegment> allocations = new TreeMap<>();
    private final Map<Long, String> functionNames = new HashMap<>();
    private long next = BASE;
    private long current;
    private int retains;
    private int modules;

    /** Live contexts (cuCtxCreate), streams and events; guarded by {@link #objects}. */
    private final Set<Long> contexts = new HashSet<>(), streams = new HashSet<>(), events = new HashSet<>();
    private final Object objects = new Object();
    private final List<String> misuses = new ArrayList<>();
    private final ThreadLocal<Long> threadContext = ThreadLocal.withInitial(() -> 0L);
    private long nextObject = 0x1_0000;

    /** When set, the waiting calls stop on it (outside any lock) after {@link #held} is released once for each. */
    public volatile CountDownLatch hold;
    /** Released once by each waiting call that reached {@link #hold}. */
    public final Semaphore held = new Semaphore(0);

    /** Makes cuCtxCreate give the lowest value no live context has, as a driver may reuse a destroyed one's. */
    public volatile boolean reuseContextValues;

    /** Makes cuLaunchKernel fail with CUDA_ERROR_LAUNCH_FAILED. */
    public volatile boolean failLaunches;
    /** Adds one ulp to the first block sum: still within tolerance, but not byte-identical. */
    public volatile boolean perturbBlockSum;

    public synchronized int liveAllocations() {
        return allocations.size();
    }

    public synchronized int retainedContexts() {
        return retains;
    }

    public synchronized int loadedModules() {
        return modules;
    }

    @Override
    public int cuInit(int flags) {
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuDriverGetVersion(MemorySegment v) {
        v.set(JAVA_INT, 0, 13000);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuDeviceGet(MemorySegment device, int ordinal) {
        if (ordinal != 0) {
            return CuResult.CUDA_ERROR_INVALID_DEVICE;
        }
        device.set(JAVA_INT, 0, 0);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuDeviceGetCount(MemorySegment count) {
        count.set(JAVA_INT, 0, 1);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuDeviceGetName(MemorySegment name, int len, int dev) {
        name.reinterpret(len).setString(0, "Fake GPU");
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuDeviceGetAttribute(MemorySegment pi, int attrib, int dev) {
        pi.set(JAVA_INT, 0, switch (attrib) {
            case 75 -> 9;
            case 76 -> 0;
            case 16 -> 132;
            default -> 0;
        });
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuDeviceTotalMem(MemorySegment bytes, int dev) {
        bytes.set(JAVA_LONG, 0, 1L << 30);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuDevicePrimaryCtxRetain(MemorySegment pctx, int dev) {
        retains++;
        pctx.set(JAVA_LONG, 0, CONTEXT);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuDevicePrimaryCtxRelease(int dev) {
        if (retains == 0) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        retains--;
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuCtxSetCurrent(long ctx) {
        current = ctx;
        threadContext.set(ctx);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuCtxGetDevice(MemorySegment device) {
        if (current == 0) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        device.set(JAVA_INT, 0, 0);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuCtxSynchronize() {
        long ctx = threadContext.get();
        if (ctx == 0 || ctx == CONTEXT) {
            return CuResult.CUDA_SUCCESS;
        }
        return use("cuCtxSynchronize", contexts, ctx);
    }

    /** What was used after it was destroyed, or destroyed while a call used it; empty when nothing was. */
    public List<String> misuses() {
        synchronized (objects) {
            return List.copyOf(misuses);
        }
    }

    public int liveContexts() {
        synchronized (objects) {
            return contexts.size();
        }
    }

    public int liveStreams() {
        synchronized (objects) {
            return streams.size();
        }
    }

    public int liveEvents() {
        synchronized (objects) {
            return events.size();
        }
    }

    private long make(Set<Long> into) {
        synchronized (objects) {
            long v = nextObject += 0x10;
            into.add(v);
            return v;
        }
    }

    /** Whether {@code v} lives in {@code set}; records a misuse by {@code call} when it does not. */
    private boolean alive(String call, String when, Set<Long> set, long v) {
        synchronized (objects) {
            if (set.contains(v)) {
                return true;
            }
            misuses.add(call + " " + when + " 0x" + Long.toHexString(v));
            return false;
        }
    }

    /**
     * A call that uses {@code v} of {@code set}: it must exist before and after, the call stopping on
     * {@link #hold} between.
     */
    private int use(String call, Set<Long> set, long v) {
        if (!alive(call, "used destroyed", set, v)) {
            return CuResult.CUDA_ERROR_INVALID_HANDLE;
        }
        waitHere();
        alive(call, "destroyed while in use:", set, v);
        return CuResult.CUDA_SUCCESS;
    }

    private void waitHere() {
        CountDownLatch h = hold;
        if (h != null) {
            held.release();
            try {
                h.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    @Override
    public int cuCtxCreate(MemorySegment pctx, MemorySegment params, int flags, int dev) {
        long ctx;
        if (reuseContextValues) {
            synchronized (objects) {
                ctx = 0x7000_0000L;
                while (contexts.contains(ctx)) {
                    ctx += 0x10;
                }
                contexts.add(ctx);
            }
        } else {
            ctx = make(contexts);
        }
        threadContext.set(ctx);
        synchronized (this) {
            current = ctx;
        }
        pctx.set(JAVA_LONG, 0, ctx);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuCtxDestroy(long ctx) {
        synchronized (objects) {
            if (!contexts.remove(ctx)) {
                misuses.add("cuCtxDestroy used destroyed 0x" + Long.toHexString(ctx));
                return CuResult.CUDA_ERROR_INVALID_CONTEXT;
            }
        }
        if (threadContext.get() == ctx) {
            threadContext.set(0L);
        }
        return CuResult.CUDA_SUCCESS;
    }

    /** Streams and events are made in the calling thread's context, which must be alive. */
    private int makeInContext(String call, Set<Long> into, MemorySegment out) {
        long ctx = threadContext.get();
        if (ctx != CONTEXT && (ctx == 0 || !alive(call, "in destroyed context", contexts, ctx))) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        out.set(JAVA_LONG, 0, make(into));
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuStreamCreate(MemorySegment phStream, int flags) {
        return makeInContext("cuStreamCreate", streams, phStream);
    }

    @Override
    public int cuEventCreate(MemorySegment phEvent, int flags) {
        return makeInContext("cuEventCreate", events, phEvent);
    }

    @Override
    public int cuStreamDestroy(long stream) {
        synchronized (objects) {
            if (!streams.remove(stream)) {
                misuses.add("cuStreamDestroy used destroyed 0x" + Long.toHexString(stream));
                return CuResult.CUDA_ERROR_INVALID_HANDLE;
            }
        }
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuEventDestroy(long event) {
        synchronized (objects) {
            if (!events.remove(event)) {
                misuses.add("cuEventDestroy used destroyed 0x" + Long.toHexString(event));
                return CuResult.CUDA_ERROR_INVALID_HANDLE;
            }
        }
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuStreamSynchronize(long stream) {
        if (stream == 0 || stream == 1 || stream == 2) {
            waitHere();
            return CuResult.CUDA_SUCCESS;
        }
        return use("cuStreamSynchronize", streams, stream);
    }

    @Override
    public int cuEventRecord(long event, long stream) {
        return use("cuEventRecord", events, event);
    }

    @Override
    public int cuMemsetD8(long dst, byte value, long n) {
        synchronized (this) {
            if (device(dst, n) == null) {
                synchronized (objects) {
                    misuses.add("cuMemsetD8 used freed 0x" + Long.toHexString(dst));
                }
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
        }
        waitHere();
        synchronized (this) {
            MemorySegment d = device(dst, n);
            if (d == null) {
                synchronized (objects) {
                    misuses.add("cuMemsetD8 freed while in use: 0x" + Long.toHexString(dst));
                }
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            d.fill(value);
        }
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuModuleLoadData(MemorySegment module, MemorySegment image) {
        String ptx = image.reinterpret(Integer.MAX_VALUE).getString(0);
        if (!ptx.contains(".entry gpus_mixed12")) {
            return CuResult.CUDA_ERROR_INVALID_PTX;
        }
        modules++;
        module.set(JAVA_LONG, 0, MODULE);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuModuleUnload(long hmod) {
        if (hmod != MODULE || modules == 0) {
            return CuResult.CUDA_ERROR_INVALID_HANDLE;
        }
        modules--;
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuModuleGetFunction(MemorySegment hfunc, long hmod, MemorySegment name) {
        String n = name.reinterpret(1024).getString(0);
        Long f = FUNCTIONS.get(n);
        if (hmod != MODULE || f == null) {
            return CuResult.CUDA_ERROR_NOT_FOUND;
        }
        functionNames.put(f, n);
        hfunc.set(JAVA_LONG, 0, f);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuMemAlloc(MemorySegment dptr, long bytes) {
        long address = next;
        next += (bytes + 255) & ~255L;
        allocations.put(address, arena.allocate(Math.max(1, bytes), 256));
        dptr.set(JAVA_LONG, 0, address);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuMemFree(long dptr) {
        return allocations.remove(dptr) == null ? CuResult.CUDA_ERROR_INVALID_VALUE : CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuMemcpyHtoD(long dst, MemorySegment src, long n) {
        MemorySegment d = device(dst, n);
        if (d == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment.copy(src, 0, d, 0, n);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuMemcpyDtoH(MemorySegment dst, long src, long n) {
        MemorySegment s = device(src, n);
        if (s == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment.copy(s, 0, dst, 0, n);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuLaunchKernel(long f, int gx, int gy, int gz, int bx, int by, int bz, int shared, long stream,
                                           MemorySegment params, MemorySegment extra) {
        if (failLaunches) {
            return CuResult.CUDA_ERROR_LAUNCH_FAILED;
        }
        String name = functionNames.get(f);
        if (name == null) {
            return CuResult.CUDA_ERROR_INVALID_HANDLE;
        }
        MemorySegment p = params.reinterpret(ADDRESS.byteSize() * 12);
        return switch (name) {
            case "gpus_vector_add" -> vectorAdd(p);
            case "gpus_block_sum" -> shared < bx * Float.BYTES ? CuResult.CUDA_ERROR_ILLEGAL_ADDRESS : blockSum(p, gx, bx);
            case "gpus_mixed12" -> mixed12(p);
            default -> CuResult.CUDA_ERROR_NOT_SUPPORTED;
        };
    }

    private int vectorAdd(MemorySegment p) {
        int n = arg(p, 3, 4).get(JAVA_INT, 0);
        MemorySegment a = device(arg(p, 0, 8).get(JAVA_LONG, 0), 4L * n);
        MemorySegment b = device(arg(p, 1, 8).get(JAVA_LONG, 0), 4L * n);
        MemorySegment c = device(arg(p, 2, 8).get(JAVA_LONG, 0), 4L * n);
        for (long i = 0; i < n; i++) {
            c.setAtIndex(JAVA_FLOAT, i, a.getAtIndex(JAVA_FLOAT, i) + b.getAtIndex(JAVA_FLOAT, i));
        }
        return CuResult.CUDA_SUCCESS;
    }

    private int blockSum(MemorySegment p, int grid, int block) {
        int n = arg(p, 2, 4).get(JAVA_INT, 0);
        MemorySegment in = device(arg(p, 0, 8).get(JAVA_LONG, 0), 4L * n);
        MemorySegment out = device(arg(p, 1, 8).get(JAVA_LONG, 0), 4L * grid);
        float[] partial = new float[block];
        for (int b = 0; b < grid; b++) {
            for (int t = 0; t < block; t++) {
                long i = (long) b * block + t;
                partial[t] = i < n ? in.getAtIndex(JAVA_FLOAT, i) : 0.0f;
            }
            for (int s = block / 2; s > 0; s >>= 1) {
                for (int t = 0; t < s; t++) {
                    partial[t] += partial[t + s];
                }
            }
            float sum = partial[0];
            if (b == 0 && perturbBlockSum) {
                sum = Math.nextUp(sum);
            }
            out.setAtIndex(JAVA_FLOAT, b, sum);
        }
        return CuResult.CUDA_SUCCESS;
    }

    private int mixed12(MemorySegment p) {
        MemorySegment out = device(arg(p, 11, 8).get(JAVA_LONG, 0), 176);
        out.fill((byte) 0);
        for (int k = 0; k < 11; k++) {
            MemorySegment.copy(arg(p, k, MIXED12_SIZES[k]), 0, out, 16L * k, MIXED12_SIZES[k]);
        }
        return CuResult.CUDA_SUCCESS;
    }

    private static MemorySegment arg(MemorySegment params, int index, int size) {
        return params.getAtIndex(ADDRESS, index).reinterpret(size);
    }

    private MemorySegment device(long address, long n) {
        Map.Entry<Long, MemorySegment> e = allocations.floorEntry(address);
        if (e == null || address - e.getKey() + n > e.getValue().byteSize()) {
            return null;
        }
        return e.getValue().asSlice(address - e.getKey(), n);
    }
}
