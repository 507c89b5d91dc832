package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiInvoker;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ForwardingCudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.LaunchConfigRequest;
import io.gpusockets.protocol.calls.PointerAttributeRequest;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.List;

/**
 * Several backends as one driver (GPUSOCKETS_SERVER=uri1,uri2): their devices form one list of
 * ordinals, backend 0's first. Each call goes to one backend, chosen from its API table entry:
 * <ul>
 *   <li>an input handle goes back to the backend that issued it. Handles leave this class tagged
 *       with their backend in the top 8 bits and are stripped on the way in:
 *       <pre>
 *   63      56 55                                       0
 *   | b + 1  |  the handle as backend b issued it       |   0 in the tag: not ours (0, the special streams)
 *       </pre>
 *       Inputs from two backends in one call are refused (CUDA_ERROR_INVALID_HANDLE);</li>
 *   <li>a {@code dev} input (global ordinal) goes to the backend that has that device, renumbered to
 *       its local ordinal; {@code dev} outputs are renumbered back;</li>
 *   <li>everything else (copies, allocations, launches by current context, synchronisation) goes to
 *       the backend of the calling thread's current context: device pointers are real addresses of
 *       one backend, so only the context can say whose they are;</li>
 *   <li>an entry with a merge rule goes to all: {@code merge=all} (cuInit) answers the first error,
 *       {@code merge=lowest} (cuDriverGetVersion) the lowest answer, {@code merge=sum}
 *       (cuDeviceGetCount) the sum; local calls (host memory, error strings) go to backend 0.</li>
 * </ul>
 * The context stack of each thread is kept here, as the driver keeps it, by the entries' context rules; each backend's lane for
 * the thread holds at most one context, the top of this stack when it is that backend's, else
 * none. A handle of another backend than the current context's therefore meets no current context
 * there and is refused by that backend, as the real driver refuses another context's handle.
 */
public final class MultiBackendDriver extends ForwardingCudaDriver implements AutoCloseable {
    /** At most this many backends: the tag is one byte and 0 means untagged. */
    public static final int MAX_BACKENDS = 255;
    private static final int TAG_SHIFT = 56;
    private static final long HANDLE_MASK = (1L << TAG_SHIFT) - 1;
    /** A lane whose current context is not known (after a failed switch): cleared before use. */
    private static final long UNKNOWN = -1;

    private final CudaDriver[] backends;
    private final ThreadLocal<ThreadContexts> contexts;
    /** Devices per backend, once asked; null before. */
    private volatile int[] deviceCounts;

    /** One thread's context stack (tagged handles, top first) and what each backend's lane has current. */
    private static final class ThreadContexts {
        final ArrayDeque<Long> stack = new ArrayDeque<>();
        final long[] lane;

        ThreadContexts(int backends) {
            lane = new long[backends];
        }
    }

    MultiBackendDriver(List<? extends CudaDriver> backends) {
        if (backends.size() < 2 || backends.size() > MAX_BACKENDS) {
            throw new IllegalArgumentException("backends=" + backends.size() + ": must be 2.." + MAX_BACKENDS);
        }
        this.backends = backends.toArray(new CudaDriver[0]);
        this.contexts = ThreadLocal.withInitial(() -> new ThreadContexts(this.backends.length));
    }

    public int backendCount() {
        return backends.length;
    }

    /** The backend that issued a handle this driver returned, or -1 when it carries no tag. */
    public static int backendOf(long handle) {
        return (int) (handle >>> TAG_SHIFT) - 1;
    }

    static long tag(long handle, int backend) {
        return handle == 0 ? 0 : handle | ((long) (backend + 1) << TAG_SHIFT);
    }

    @Override
    protected int forward(ApiFunction f, Object... args) {
        if (f.local()) {
            return ApiInvoker.invoke(backends[0], f.index(), args);
        }
        switch (f.merge()) {
            case ALL -> {
                return everyBackend(f, args);
            }
            case LOWEST -> {
                return lowestOf(f, (MemorySegment) args[0]);
            }
            case SUM -> {
                return deviceCount((MemorySegment) args[0]);
            }
            case NONE -> {
            }
        }
        return switch (f.context()) {
            case CREATE -> createContext(f, args);
            case DESTROY -> destroyContext(f, args);
            case SET -> setCurrent((Long) args[0]);
            case PUSH -> pushCurrent((Long) args[0]);
            case POP -> popCurrent((MemorySegment) args[0]);
            case GET, RELEASE, RESET, NONE -> switch (f.codec()) {
                case POINTER_ATTRIBUTE -> pointerAttribute(f, args);
                case LAUNCH_CONFIG -> launchConfig(f, args);
                default -> routed(f, args);
            };
        };
    }

    // ---- the generic route ----

    /** Routes by the call's parameters, runs it there and renumbers its outputs. */
    private int routed(ApiFunction f, Object[] args) {
        int b = route(f, args);
        if (b < 0) {
            return -b;
        }
        int r = ApiInvoker.invoke(backends[b], f.index(), args);
        return r == CuResult.CUDA_SUCCESS ? outputs(f, args, b) : r;
    }

    /**
     * The backend a call goes to, rewriting its handle and {@code dev} inputs in {@code args} (the
     * facade's own array) to that backend's values; a negative CUresult when it cannot go anywhere.
     */
    private int route(ApiFunction f, Object[] args) {
        int target = -1;
        List<ApiParam> params = f.params();
        for (int i = 0; i < params.size(); i++) {
            ApiParam p = params.get(i);
            if (p.out()) {
                continue;
            }
            int b;
            if (p.type().isHandle()) {
                long h = (Long) args[i];
                b = backendOf(h);
                if (b < 0) {
                    continue; // 0, a special stream, or a value nobody issued: the backend judges it
                }
                if (b >= backends.length || target >= 0 && target != b) {
                    return -(p.type() == ParamType.CTX ? CuResult.CUDA_ERROR_INVALID_CONTEXT : CuResult.CUDA_ERROR_INVALID_HANDLE);
                }
                args[i] = h & HANDLE_MASK;
            } else if (p.type() == ParamType.DEV) {
                int[] counts = deviceCounts();
                if (counts == null) {
                    return -deviceCountFailure();
                }
                int ordinal = (Integer) args[i];
                b = 0;
                while (b < counts.length && ordinal >= counts[b]) {
                    ordinal -= counts[b];
                    b++;
                }
                if ((Integer) args[i] < 0 || b == counts.length || target >= 0 && target != b) {
                    return -CuResult.CUDA_ERROR_INVALID_DEVICE;
                }
                args[i] = ordinal;
            } else {
                continue;
            }
            target = b;
        }
        return target >= 0 ? target : currentBackend();
    }

    /** Tags handle outputs and renumbers device outputs of a successful call on backend {@code b}. */
    private int outputs(ApiFunction f, Object[] args, int b) {
        List<ApiParam> params = f.params();
        for (int i = 0; i < params.size(); i++) {
            ApiParam p = params.get(i);
            if (!p.out() || p.type() != ParamType.DEV && !p.type().isHandle()) {
                continue;
            }
            MemorySegment out = (MemorySegment) args[i];
            if (out.isNative() && out.address() == 0) {
                continue;
            }
            int r = p.type() == ParamType.DEV ? globalDevice(out, b) : tagHandle(out, b);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
        }
        return CuResult.CUDA_SUCCESS;
    }

    private static int tagHandle(MemorySegment out, int b) {
        MemorySegment s = WireValues.sized(out, 8);
        long h = s.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        if (backendOf(h) >= 0) {
            System.err.println("gpusockets: backend " + b + " issued handle 0x" + Long.toHexString(h)
                    + ", which leaves no room for its tag; the call is refused");
            return CuResult.CUDA_ERROR_NOT_SUPPORTED;
        }
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, tag(h, b));
        return CuResult.CUDA_SUCCESS;
    }

    private int globalDevice(MemorySegment out, int b) {
        int[] counts = deviceCounts();
        if (counts == null) {
            return deviceCountFailure();
        }
        int offset = 0;
        for (int i = 0; i < b; i++) {
            offset += counts[i];
        }
        MemorySegment s = WireValues.sized(out, 4);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 0, offset + s.get(ValueLayout.JAVA_INT_UNALIGNED, 0));
        return CuResult.CUDA_SUCCESS;
    }

    /** The backend of the calling thread's current context; backend 0 when it has none. */
    private int currentBackend() {
        Long top = contexts.get().stack.peekFirst();
        return top == null ? 0 : backendOf(top);
    }

    // ---- calls every backend answers ----

    private int everyBackend(ApiFunction f, Object[] args) {
        int first = CuResult.CUDA_SUCCESS;
        for (CudaDriver d : backends) {
            int r = ApiInvoker.invoke(d, f.index(), args.clone());
            if (first == CuResult.CUDA_SUCCESS) {
                first = r;
            }
        }
        return first;
    }

    /** The lowest of every backend's answer to {@code f}, whose one output is an int (merge=lowest). */
    private int lowestOf(ApiFunction f, MemorySegment out) {
        if (out.isNative() && out.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        int lowest = Integer.MAX_VALUE;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment cell = a.allocate(ValueLayout.JAVA_INT);
            for (CudaDriver d : backends) {
                int r = ApiInvoker.invoke(d, f.index(), new Object[] {cell});
                if (r != CuResult.CUDA_SUCCESS) {
                    return r;
                }
                lowest = Math.min(lowest, cell.get(ValueLayout.JAVA_INT, 0));
            }
        }
        WireValues.sized(out, 4).set(ValueLayout.JAVA_INT_UNALIGNED, 0, lowest);
        return CuResult.CUDA_SUCCESS;
    }

    private int deviceCount(MemorySegment out) {
        if (out.isNative() && out.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        int[] counts = deviceCounts();
        if (counts == null) {
            return deviceCountFailure();
        }
        int sum = 0;
        for (int c : counts) {
            sum += c;
        }
        WireValues.sized(out, 4).set(ValueLayout.JAVA_INT_UNALIGNED, 0, sum);
        return CuResult.CUDA_SUCCESS;
    }

    /** Devices per backend, asked once they answer (after cuInit); null while any refuses. */
    private int[] deviceCounts() {
        int[] counts = deviceCounts;
        if (counts != null) {
            return counts;
        }
        counts = new int[backends.length];
        try (Arena a = Arena.ofConfined()) {
            MemorySegment cell = a.allocate(ValueLayout.JAVA_INT);
            for (int b = 0; b < backends.length; b++) {
                if (backends[b].cuDeviceGetCount(cell) != CuResult.CUDA_SUCCESS) {
                    return null;
                }
                counts[b] = cell.get(ValueLayout.JAVA_INT, 0);
            }
        }
        deviceCounts = counts;
        return counts;
    }

    /** Why {@link #deviceCounts()} gave nothing: the first backend's refusal. */
    private int deviceCountFailure() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment cell = a.allocate(ValueLayout.JAVA_INT);
            for (CudaDriver d : backends) {
                int r = d.cuDeviceGetCount(cell);
                if (r != CuResult.CUDA_SUCCESS) {
                    return r;
                }
            }
        }
        return CuResult.CUDA_ERROR_NOT_INITIALIZED;
    }

    // ---- the context stack ----

    private int createContext(ApiFunction f, Object[] args) {
        int b = route(f, args);
        if (b < 0) {
            return -b;
        }
        ThreadContexts t = contexts.get();
        // The backend pushes the new context on its lane's stack: empty it first so it holds one.
        lane(t, b, 0);
        int r = ApiInvoker.invoke(backends[b], f.index(), args);
        if (r == CuResult.CUDA_SUCCESS) {
            r = outputs(f, args, b);
        }
        if (r == CuResult.CUDA_SUCCESS) {
            long ctx = WireValues.sized((MemorySegment) args[0], 8).get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            t.stack.push(ctx);
            t.lane[b] = ctx & HANDLE_MASK;
        }
        settle(t);
        return r;
    }

    private int destroyContext(ApiFunction f, Object[] args) {
        long ctx = (Long) args[0];
        int b = route(f, args);
        if (b < 0) {
            return -b;
        }
        int r = ApiInvoker.invoke(backends[b], f.index(), args);
        if (r == CuResult.CUDA_SUCCESS) {
            ThreadContexts t = contexts.get();
            if (t.lane[b] == (ctx & HANDLE_MASK)) {
                t.lane[b] = 0; // the backend popped it off the lane, as the driver does for the caller
            }
            if (t.stack.peekFirst() != null && t.stack.peekFirst() == ctx) {
                t.stack.pop();
            }
            settle(t);
        }
        return r;
    }

    private int setCurrent(long ctx) {
        ThreadContexts t = contexts.get();
        if (ctx != 0) {
            int r = makeCurrent(t, ctx);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
        }
        t.stack.pollFirst();
        if (ctx != 0) {
            t.stack.push(ctx);
        }
        settle(t);
        return CuResult.CUDA_SUCCESS;
    }

    private int pushCurrent(long ctx) {
        ThreadContexts t = contexts.get();
        int r = makeCurrent(t, ctx);
        if (r == CuResult.CUDA_SUCCESS) {
            t.stack.push(ctx);
            settle(t);
        }
        return r;
    }

    private int popCurrent(MemorySegment out) {
        if (out.isNative() && out.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ThreadContexts t = contexts.get();
        if (t.stack.isEmpty()) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        long ctx = t.stack.pop();
        WireValues.sized(out, 8).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, ctx);
        settle(t);
        return CuResult.CUDA_SUCCESS;
    }

    /** Makes {@code ctx} current on its backend's lane (which checks it), without touching the stack. */
    private int makeCurrent(ThreadContexts t, long ctx) {
        int b = backendOf(ctx);
        if (b < 0 || b >= backends.length) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        int r = backends[b].cuCtxSetCurrent(ctx & HANDLE_MASK);
        if (r == CuResult.CUDA_SUCCESS) {
            t.lane[b] = ctx & HANDLE_MASK;
        }
        return r;
    }

    /** Brings every backend's lane in line with the top of the stack: its context there, none elsewhere. */
    private void settle(ThreadContexts t) {
        Long top = t.stack.peekFirst();
        int topBackend = top == null ? -1 : backendOf(top);
        for (int b = 0; b < backends.length; b++) {
            lane(t, b, b == topBackend ? top & HANDLE_MASK : 0);
        }
    }

    /** Sets backend {@code b}'s lane current context; one that cannot be set (destroyed) leaves none. */
    private void lane(ThreadContexts t, int b, long ctx) {
        if (t.lane[b] == ctx) {
            return;
        }
        int r = backends[b].cuCtxSetCurrent(ctx);
        if (r != CuResult.CUDA_SUCCESS && ctx != 0) {
            r = backends[b].cuCtxSetCurrent(0);
            ctx = 0;
        }
        t.lane[b] = r == CuResult.CUDA_SUCCESS ? ctx : UNKNOWN;
    }

    // ---- hand-written calls whose outputs the table cannot describe ----

    /** A context or device ordinal comes back through {@code data}: tag or renumber it like any output. */
    private int pointerAttribute(ApiFunction f, Object[] args) {
        int b = route(f, args);
        if (b < 0) {
            return -b;
        }
        int r = ApiInvoker.invoke(backends[b], f.index(), args);
        int attribute = (Integer) args[1];
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        return switch (attribute) {
            case PointerAttributeRequest.CONTEXT -> tagHandle((MemorySegment) args[0], b);
            case PointerAttributeRequest.DEVICE_ORDINAL -> globalDevice((MemorySegment) args[0], b);
            default -> CuResult.CUDA_SUCCESS;
        };
    }

    /**
     * A call taking a CUlaunchConfig (its first pointer): the stream and the event attributes inside
     * it are handles too. They are untagged in a copy of the config and its attributes (the
     * program's structs are left alone) and must name the same backend as the function.
     */
    private int launchConfig(ApiFunction f, Object[] args) {
        int at = -1;
        for (int i = 0; i < f.params().size() && at < 0; i++) {
            if (!f.params().get(i).out() && f.params().get(i).type() == ParamType.PTR) {
                at = i;
            }
        }
        MemorySegment config = (MemorySegment) args[at];
        if (config.isNative() && config.address() == 0) {
            return routed(f, args);
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment c = a.allocate(LaunchConfigRequest.CONFIG_BYTES, 8);
            MemorySegment.copy(WireValues.sized(config, LaunchConfigRequest.CONFIG_BYTES), 0, c, 0, LaunchConfigRequest.CONFIG_BYTES);
            int n = c.get(ValueLayout.JAVA_INT, LaunchConfigRequest.NUM_ATTRS_OFFSET);
            MemorySegment attrs = c.get(ValueLayout.ADDRESS, LaunchConfigRequest.ATTRS_OFFSET);
            if (n < 0 || n > LaunchConfigRequest.MAX_ATTRIBUTES || (n > 0 && attrs.address() == 0)) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            long bytes = (long) n * LaunchConfigRequest.ATTRIBUTE_BYTES;
            MemorySegment copy = a.allocate(Math.max(bytes, 8), 8);
            if (n > 0) {
                MemorySegment.copy(attrs.reinterpret(bytes), 0, copy, 0, bytes);
            }
            c.set(ValueLayout.ADDRESS, LaunchConfigRequest.ATTRS_OFFSET, n == 0 ? MemorySegment.NULL : copy);
            List<Long> handleOffsets = new java.util.ArrayList<>();
            for (int i = 0; i < n; i++) {
                int id = copy.get(ValueLayout.JAVA_INT, (long) i * LaunchConfigRequest.ATTRIBUTE_BYTES);
                if (id == LaunchConfigRequest.PROGRAMMATIC_EVENT || id == LaunchConfigRequest.LAUNCH_COMPLETION_EVENT) {
                    handleOffsets.add((long) i * LaunchConfigRequest.ATTRIBUTE_BYTES + LaunchConfigRequest.VALUE_OFFSET);
                }
            }
            int target = -1;
            for (int k = -1; k < handleOffsets.size(); k++) {
                MemorySegment holder = k < 0 ? c : copy;
                long off = k < 0 ? LaunchConfigRequest.STREAM_OFFSET : handleOffsets.get(k);
                long h = holder.get(ValueLayout.JAVA_LONG, off);
                int b = backendOf(h);
                if (b < 0) {
                    continue;
                }
                if (b >= backends.length || target >= 0 && target != b) {
                    return CuResult.CUDA_ERROR_INVALID_HANDLE;
                }
                target = b;
                holder.set(ValueLayout.JAVA_LONG, off, h & HANDLE_MASK);
            }
            Object[] routedArgs = args.clone();
            routedArgs[at] = c;
            int b = route(f, routedArgs);
            if (b < 0) {
                return -b;
            }
            if (target >= 0 && target != b) {
                return CuResult.CUDA_ERROR_INVALID_HANDLE;
            }
            int r = ApiInvoker.invoke(backends[b], f.index(), routedArgs);
            return r == CuResult.CUDA_SUCCESS ? outputs(f, routedArgs, b) : r;
        }
    }

    @Override
    public void close() {
        for (CudaDriver d : backends) {
            if (d instanceof AutoCloseable c) {
                try {
                    c.close();
                } catch (Exception e) {
                    System.err.println("gpusockets: closing a backend connection failed: " + e.getMessage());
                }
            }
        }
    }
}
