package io.gpusockets.emulated.ptx;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * An entry of a PTX module, parsed; each launch runs it compiled to JVM bytecode ({@link JitCompiler},
 * at its first compiled run) or interpreted, as {@link PtxEngine} picks. {@link #compile} throws
 * {@link PtxUnsupported} for anything outside the covered subset; {@link #run} executes a grid,
 * its CTAs spread over the host's cores (the launching thread takes part), and rethrows the first
 * fault a CTA raised (the others stop at their next CTA).
 */
public final class PtxKernel {
    /** One launch: grid and block dimensions, dynamic shared bytes, parameter bytes, device memory. */
    public record Launch(long gridX, long gridY, long gridZ, int blockX, int blockY, int blockZ, long dynamicShared,
                         MemorySegment params, GlobalMemory memory, DeviceLaunches.Runtime runtime) {
        /** A launch whose kernel launches none (no entry of its module can be named). */
        public Launch(long gridX, long gridY, long gridZ, int blockX, int blockY, int blockZ, long dynamicShared, MemorySegment params,
                      GlobalMemory memory) {
            this(gridX, gridY, gridZ, blockX, blockY, blockZ, dynamicShared, params, memory, null);
        }
    }

    /**
     * Where the addresses of a module's entries lie (what {@code mov.u64 %rd, entry} gives, for device-side launches):
     * a window no device allocation reaches, 256 bytes per entry in the module's order.
     */
    public static final long FUNCTION_WINDOW = 0x5200_0000_0000L;

    /** The address of the module's {@code index}-th entry. */
    public static long functionAddress(int index) {
        return FUNCTION_WINDOW + 256L * index;
    }

    /** The index of the entry at {@code address}, or -1. */
    public static int functionIndex(long address) {
        long k = address - FUNCTION_WINDOW;
        return k < 0 || k % 256 != 0 || k / 256 > Integer.MAX_VALUE ? -1 : (int) (k / 256);
    }

    private static final int CORES = Runtime.getRuntime().availableProcessors();
    private static final ExecutorService POOL = Executors.newFixedThreadPool(Math.max(1, CORES - 1), r -> {
        Thread t = new Thread(r, "gpusockets-ptx-cta");
        t.setDaemon(true);
        return t;
    });

    /** What runs a launch's CTAs on one host thread: the interpreter's {@link Cta} or the compiled {@link JitCta}. */
    interface CtaRunner {
        /** Runs CTA {@code index} (x fastest) to completion. */
        void run(long index);

        /** Thread-instructions run so far. */
        long instructions();

        /** True once a CTA stopped because the context is being destroyed: the launch stops. */
        boolean cancelled();
    }

    private static final System.Logger LOG = System.getLogger("gpusockets.emulated");

    private final Program program;
    /** The compiled entry once compiled, {@link #NOT_COMPILED} when the compiler does not take it. */
    private volatile Object compiled;
    private static final Object NOT_COMPILED = new Object();

    private PtxKernel(Program program) {
        this.program = program;
    }

    /** The compiled entry, compiling it on first use; null when the compiler does not take it (logged why). */
    private JitCompiler.Compiled compiled() {
        Object c = compiled;
        if (c == null) {
            synchronized (this) {
                c = compiled;
                if (c == null) {
                    try {
                        c = JitCompiler.compile(program);
                    } catch (PtxUnsupported e) {
                        LOG.log(System.Logger.Level.DEBUG, () -> "interpreted, not compiled: " + e.getMessage());
                        c = NOT_COMPILED;
                    } catch (RuntimeException | LinkageError e) {
                        // the class file API refusing the code (a method over 64 KiB) or the JVM refusing the
                        // class: the interpreter runs the entry; the results are the same, only slower
                        LOG.log(System.Logger.Level.WARNING, () -> "interpreted, not compiled: " + program.entry
                                + ": the compiler failed: " + e);
                        c = NOT_COMPILED;
                    }
                    compiled = c;
                }
            }
        }
        return c instanceof JitCompiler.Compiled k ? k : null;
    }

    /**
     * Parses an entry body.
     *
     * @param params       parameter name to its offset in the parameter buffer
     * @param globals      module variable (.global/.const) name to its device address
     * @param moduleShared module-scope .shared declarations, each with its line
     */
    public static PtxKernel compile(String entry, String body, int firstLine, Map<String, Long> params,
                                    Map<String, Long> globals, List<Map.Entry<String, Integer>> moduleShared) throws PtxUnsupported {
        return compile(entry, body, firstLine, params, globals, moduleShared, Map.of(), java.util.Set.of());
    }

    /**
     * Parses an entry body and the device functions it calls.
     *
     * @param funcs   the module's .func definitions by name
     * @param externs the module's .extern .func names
     */
    public static PtxKernel compile(String entry, String body, int firstLine, Map<String, Long> params,
                                    Map<String, Long> globals, List<Map.Entry<String, Integer>> moduleShared,
                                    Map<String, PtxFunction> funcs, java.util.Set<String> externs) throws PtxUnsupported {
        return new PtxKernel(PtxParser.parse(entry, body, firstLine, params, globals, moduleShared, funcs, externs));
    }

    /** Most .local memory a thread may have, as on the device (512 KiB). */
    static final long MAX_LOCAL_PER_THREAD = 512 << 10;
    /**
     * Most host memory one CTA's registers and .local memory may take. A CTA runs on each of the
     * host's cores at once, so a launch holds at most this times the core count.
     */
    static final long MAX_CTA_STATE_BYTES = 64L << 20;

    /**
     * Why a block of {@code threads} threads with {@code dynamicShared} bytes of dynamic shared memory
     * cannot be run (the driver's CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES), or null: shared memory over
     * what a block may have ({@code maxSharedPerBlock}), .local over the device's per-thread limit,
     * or registers and .local together over {@link #MAX_CTA_STATE_BYTES}.
     */
    public String resourceProblem(int threads, long dynamicShared, long maxSharedPerBlock) {
        long shared = program.staticShared + dynamicShared;
        if (shared > maxSharedPerBlock) {
            return program.entry + " uses " + shared + " bytes of shared memory (" + program.staticShared + " static), over the "
                    + maxSharedPerBlock + " a block may have";
        }
        if (program.localBytes > MAX_LOCAL_PER_THREAD) {
            return program.entry + " uses " + program.localBytes + " bytes of local memory per thread, over "
                    + MAX_LOCAL_PER_THREAD;
        }
        long lanes = (threads + 31L) / 32 * 32;
        long state = lanes * program.slots * 8L + program.localBytes * threads;
        if (state > MAX_CTA_STATE_BYTES) {
            return program.entry + " needs " + state + " bytes of registers and local memory for a block of " + threads
                    + " threads, over the emulated device's " + MAX_CTA_STATE_BYTES;
        }
        return null;
    }

    /**
     * The bytes of shared memory a block's accesses may touch: what it has, rounded up to 8. A GPU
     * allocates shared memory in far larger units and faults only past those; both engines bound
     * accesses by this, so that they agree, and the compiled one's words hold every byte of it.
     */
    static long sharedBound(long bytes) {
        return (bytes + 7) & ~7L;
    }

    /**
     * Whether the entry reads the grid workspace (%envreg1/%envreg2: cooperative groups' grid_group, whose sync() is a
     * grid-wide barrier). Such an entry reads 0 there, as in a launch that is not cooperative; a cooperative launch of
     * it is refused, since the emulated device runs a grid's blocks a few at a time and has no grid-wide barrier.
     */
    public boolean readsGridWorkspace() {
        for (int kind : program.specialKinds) {
            if (kind == Program.GRID_WORKSPACE) {
                return true;
            }
        }
        return false;
    }

    /** Bytes of static shared memory the entry declares. */
    public long staticSharedBytes() {
        return program.staticShared;
    }

    /** Bytes of .local memory a thread of the entry has: its frame's .local variables and call-site parameters. */
    public long localBytes() {
        return program.localBytes;
    }

    /** Runs the grid with the engine {@link PtxEngine#current} picks; returns the thread-instructions executed. */
    public long run(Launch launch) {
        return run(launch, 0);
    }

    /** Runs a grid at nesting depth {@code depth} (0: launched from the host), then the kernels it launched. */
    long run(Launch launch, int depth) {
        if (program.launchesKernels) {   // calls are interpreted: the compiler takes no entry with calls
            DeviceLaunches children = new DeviceLaunches(launch.runtime(), launch.memory(), depth);
            long executed = run(launch, false, () -> {
                Cta cta = new Cta(program, launch);
                cta.launches = children;
                return cta;
            });
            return executed + children.runChildren();
        }
        JitCompiler.Compiled jit = PtxEngine.current() == PtxEngine.INTERPRETER ? null : compiled();
        if (jit == null) {
            return run(launch, false, () -> new Cta(program, launch));
        }
        return run(launch, true, () -> new JitCta(program, jit, launch));
    }

    /** The entries this one names by address ({@code mov.u64 %rd, entry}): the kernels it may launch. */
    public long[] functionsNamed() {
        java.util.List<Long> out = new ArrayList<>();
        for (long v : program.constValues) {
            if (functionIndex(v) >= 0 && v - FUNCTION_WINDOW < (1L << 32)) {
                out.add(v);
            }
        }
        return out.stream().mapToLong(Long::longValue).toArray();
    }

    private long run(Launch launch, boolean compiledEngine, java.util.function.Supplier<CtaRunner> runners) {
        long ctas = launch.gridX() * launch.gridY() * launch.gridZ();
        int workers = (int) Math.min(CORES, ctas);
        AtomicLong next = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<RuntimeException> failure = new AtomicReference<>();
        AtomicLong executed = new AtomicLong();
        Runnable worker = () -> {
            try {
                CtaRunner cta = runners.get();
                long i;
                while (!stop.get() && (i = next.getAndIncrement()) < ctas) {
                    cta.run(i);
                    if (cta.cancelled()) {
                        stop.set(true);
                    }
                }
                executed.addAndGet(cta.instructions());
            } catch (Throwable e) {
                stop.set(true);
                failure.compareAndSet(null, e instanceof RuntimeException re ? re : new IllegalStateException(e));
            }
        };
        // A helper that has not started once the launching thread ran out of CTAs is skipped, not awaited.
        List<AtomicBoolean> claims = new ArrayList<>();
        List<CompletableFuture<Void>> done = new ArrayList<>();
        for (int k = 1; k < workers; k++) {
            AtomicBoolean claim = new AtomicBoolean();
            CompletableFuture<Void> finished = new CompletableFuture<>();
            claims.add(claim);
            done.add(finished);
            POOL.execute(() -> {
                if (claim.compareAndSet(false, true)) {
                    worker.run();
                    finished.complete(null);
                }
            });
        }
        worker.run();
        for (int k = 0; k < claims.size(); k++) {
            if (!claims.get(k).compareAndSet(false, true)) {
                done.get(k).join();
            }
        }
        PtxEngine.count(compiledEngine, executed.get());
        if (failure.get() != null) {
            throw failure.get();
        }
        return executed.get();
    }
}
