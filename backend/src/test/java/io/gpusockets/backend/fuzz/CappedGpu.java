package io.gpusockets.backend.fuzz;

import io.gpusockets.backend.testing.FakeGpu;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiInvoker;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ForwardingCudaDriver;
import io.gpusockets.protocol.calls.ModuleImageKind;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@link FakeGpu} made fit for fuzzing the backend: bounded memory, and the contexts the backend makes
 * per session. FakeGpu backs each cuMemAlloc with host memory of its arena that only returns when the
 * arena closes, so here one allocation may be at most {@link #MAX_ALLOCATION} bytes and all of them
 * together {@link #MAX_TOTAL} (past that CUDA_ERROR_OUT_OF_MEMORY, as a full device answers). FakeGpu
 * has no cuCtxCreate/Destroy/Push/Pop; here they keep a per-thread context stack, and, as the real
 * driver does, memory and modules are made in the current context (none current: CUDA_ERROR_INVALID_CONTEXT)
 * and destroying a context frees the allocations and unloads the modules made in it. Everything
 * else goes to the FakeGpu, but kernels, which FakeGpu runs trusting their parameters, are not run, and a
 * module image is checked to end within its bytes (as a driver would read it) before FakeGpu reads it.
 * {@link #held()} says what is still held on the "device".
 */
final class CappedGpu extends ForwardingCudaDriver {
    static final long MAX_ALLOCATION = 64 << 10;
    static final long MAX_TOTAL = 256L << 20;
    private static final long FIRST_CONTEXT = 0xC7_0000L;

    final FakeGpu fake = new FakeGpu();
    private final AtomicLong allocated = new AtomicLong();
    private final ThreadLocal<ArrayDeque<Long>> stack = ThreadLocal.withInitial(ArrayDeque::new);
    /** Live contexts made by cuCtxCreate, each with the allocations and module count made in it. */
    private final Map<Long, Owned> contexts = new HashMap<>();
    private long nextContext = FIRST_CONTEXT;
    /** Images handed to the driver that it would read past their end (a finding: see DispatcherFuzzTest). */
    final List<String> unboundedImages = new java.util.concurrent.CopyOnWriteArrayList<>();

    private static final class Owned {
        final List<Long> allocations = new ArrayList<>();
        int modules;
    }

    @Override
    protected synchronized int forward(ApiFunction f, Object... a) {
        return switch (f.name()) {
            case "cuCtxCreate" -> create((MemorySegment) a[0]);
            case "cuCtxCreate_v2" -> create((MemorySegment) a[0]);
            case "cuCtxDestroy" -> destroy((Long) a[0]);
            case "cuCtxPushCurrent" -> push((Long) a[0]);
            case "cuCtxPopCurrent" -> pop((MemorySegment) a[0]);
            case "cuCtxSetCurrent" -> setCurrent((Long) a[0]);
            case "cuCtxGetCurrent" -> {
                ((MemorySegment) a[0]).set(ValueLayout.JAVA_LONG, 0, current());
                yield CuResult.CUDA_SUCCESS;
            }
            case "cuMemAlloc" -> alloc((MemorySegment) a[0], (Long) a[1]);
            case "cuMemFree" -> {
                int r = fake.cuMemFree((Long) a[0]);
                if (r == CuResult.CUDA_SUCCESS) {
                    contexts.values().forEach(o -> o.allocations.remove(a[0]));
                }
                yield r;
            }
            case "cuLaunchKernel" -> CuResult.CUDA_SUCCESS; // FakeGpu's kernels trust their parameters: not run here
            case "cuDeviceGetName" -> {
                // as the driver: the name cut to the room given (FakeGpu writes it whole)
                MemorySegment name = ((MemorySegment) a[0]).reinterpret(Math.max(0, (Integer) a[1]));
                byte[] n = "Fake GPU".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
                for (int i = 0; i < name.byteSize(); i++) {
                    name.set(ValueLayout.JAVA_BYTE, i, i < n.length ? n[i] : 0);
                }
                yield CuResult.CUDA_SUCCESS;
            }
            case "cuModuleLoadFatBinary" -> {
                MemorySegment image = (MemorySegment) a[1];
                MemorySegment copy = MemorySegment.ofArray(image.toArray(ValueLayout.JAVA_BYTE));
                if (copy.byteSize() == 0 || ModuleImageKind.length(copy) < 0) {
                    unboundedImages.add("cuModuleLoadFatBinary given an image of " + image.byteSize()
                            + " bytes whose end is not within them (" + ModuleImageKind.of(copy) + ")");
                }
                yield CuResult.CUDA_ERROR_NOT_SUPPORTED; // FakeGpu loads PTX only
            }
            case "cuModuleLoadData" -> {
                // The driver reads an image as far as its content says (a PTX string to its NUL, a fatbin or
                // cubin as its header gives): the backend must hand it no image that ends past its bytes.
                MemorySegment image = (MemorySegment) a[1];
                MemorySegment copy = MemorySegment.ofArray(image.toArray(ValueLayout.JAVA_BYTE));
                long length = copy.byteSize() == 0 ? -1 : ModuleImageKind.length(copy);
                if (length < 0) {
                    unboundedImages.add("cuModuleLoadData given an image of " + image.byteSize()
                            + " bytes whose end is not within them (" + ModuleImageKind.of(copy) + ")");
                    yield CuResult.CUDA_ERROR_INVALID_IMAGE;
                }
                if (ModuleImageKind.of(copy) != ModuleImageKind.PTX) {
                    yield CuResult.CUDA_ERROR_INVALID_IMAGE; // FakeGpu loads PTX only
                }
                Owned o = contexts.get(current());
                if (o == null && current() != 0xC0C0L) {
                    yield CuResult.CUDA_ERROR_INVALID_CONTEXT; // as the driver: a module is loaded into the current context
                }
                int r = fake.cuModuleLoadData((MemorySegment) a[0], image);
                if (r == CuResult.CUDA_SUCCESS && o != null) {
                    o.modules++;
                }
                yield r;
            }
            case "cuModuleUnload" -> {
                int r = fake.cuModuleUnload((Long) a[0]);
                if (r == CuResult.CUDA_SUCCESS) {
                    contexts.values().stream().filter(o -> o.modules > 0).findFirst().ifPresent(o -> o.modules--);
                }
                yield r;
            }
            default -> ApiInvoker.invoke(fake, f.index(), a);
        };
    }

    private long current() {
        Long top = stack.get().peek();
        return top == null ? 0 : top;
    }

    private int create(MemorySegment pctx) {
        long ctx = nextContext++;
        contexts.put(ctx, new Owned());
        stack.get().push(ctx);
        fake.cuCtxSetCurrent(ctx);
        pctx.set(ValueLayout.JAVA_LONG, 0, ctx);
        return CuResult.CUDA_SUCCESS;
    }

    private int destroy(long ctx) {
        Owned o = contexts.remove(ctx);
        if (o == null) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        for (long dptr : o.allocations) {
            fake.cuMemFree(dptr);
        }
        for (int i = 0; i < o.modules; i++) {
            fake.cuModuleUnload(0x0D0DL); // FakeGpu's one module handle
        }
        stack.get().removeIf(c -> c == ctx);
        return CuResult.CUDA_SUCCESS;
    }

    private int push(long ctx) {
        if (!contexts.containsKey(ctx) && ctx != 0xC0C0L) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        stack.get().push(ctx);
        fake.cuCtxSetCurrent(ctx);
        return CuResult.CUDA_SUCCESS;
    }

    private int pop(MemorySegment pctx) {
        Long top = stack.get().poll();
        if (top == null) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        if (pctx.address() != 0 || !pctx.isNative()) {
            pctx.set(ValueLayout.JAVA_LONG, 0, top);
        }
        fake.cuCtxSetCurrent(current());
        return CuResult.CUDA_SUCCESS;
    }

    private int setCurrent(long ctx) {
        ArrayDeque<Long> s = stack.get();
        s.poll();
        if (ctx != 0) {
            s.push(ctx);
        }
        return fake.cuCtxSetCurrent(ctx);
    }

    private int alloc(MemorySegment dptr, long bytes) {
        Owned o = contexts.get(current());
        if (o == null) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        if (bytes < 0 || bytes > MAX_ALLOCATION || allocated.addAndGet(bytes) > MAX_TOTAL) {
            return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
        }
        int r = fake.cuMemAlloc(dptr, bytes);
        if (r == CuResult.CUDA_SUCCESS) {
            o.allocations.add(dptr.get(ValueLayout.JAVA_LONG, 0));
        }
        return r;
    }

    /** What the backend still holds on the device, or null when nothing. */
    synchronized String held() {
        int allocations = fake.liveAllocations(), retained = fake.retainedContexts(), modules = fake.loadedModules();
        return allocations == 0 && retained == 0 && modules == 0 && contexts.isEmpty() ? null
                : contexts.size() + " context(s), " + allocations + " allocation(s), " + retained
                + " retained primary context(s), " + modules + " module(s)";
    }
}
