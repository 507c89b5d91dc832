package io.gpusockets.cli.workloads;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.protocol.api.CudaDriver;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

/**
 * The project's PTX module (frontend resource {@value #PTX_RESOURCE}, built from
 * gpusockets_kernels.cu) loaded with cuModuleLoadData into the current context, and its functions.
 * {@link #close()} unloads the module.
 */
public final class Kernels implements AutoCloseable {
    public static final String PTX_RESOURCE = "/io/gpusockets/kernels/gpusockets_kernels.ptx";

    public static final String VECTOR_ADD = "gpus_vector_add";
    public static final String BLOCK_SUM = "gpus_block_sum";
    public static final String MIXED12 = "gpus_mixed12";

    private final CudaDriver cu;
    private final long module;
    private final Map<String, Long> functions = new HashMap<>();
    private boolean unloaded;

    private Kernels(CudaDriver cu, long module) {
        this.cu = cu;
        this.module = module;
    }

    /** Loads the shipped PTX into the context current on this thread. */
    public static Kernels load(CudaDriver cu) {
        byte[] ptx = ptx();
        try (Arena arena = Arena.ofConfined()) {
            // cuModuleLoadData reads PTX as a C string: copy it to native memory with a trailing NUL
            MemorySegment image = arena.allocate(ptx.length + 1L);
            MemorySegment.copy(ptx, 0, image, JAVA_BYTE, 0, ptx.length);
            image.set(JAVA_BYTE, ptx.length, (byte) 0);
            MemorySegment out = arena.allocate(JAVA_LONG);
            Cu.check(cu.cuModuleLoadData(out, image), "cuModuleLoadData(" + PTX_RESOURCE + ")");
            return new Kernels(cu, out.get(JAVA_LONG, 0));
        }
    }

    /** The PTX text, from the classpath. */
    public static byte[] ptx() {
        try (InputStream in = Kernels.class.getResourceAsStream(PTX_RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException("kernel resource missing from the classpath: " + PTX_RESOURCE
                        + " (it ships in the gpusockets-frontend jar)");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + PTX_RESOURCE, e);
        }
    }

    /** The CUmodule handle. */
    public long module() {
        return module;
    }

    /** cuModuleGetFunction, cached. */
    public long function(String name) {
        Long f = functions.get(name);
        if (f == null) {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment out = arena.allocate(JAVA_LONG);
                Cu.check(cu.cuModuleGetFunction(out, module, arena.allocateFrom(name)), "cuModuleGetFunction(" + name + ")");
                f = out.get(JAVA_LONG, 0);
            }
            functions.put(name, f);
        }
        return f;
    }

    /**
     * cuLaunchKernel on the default stream (1-D grid and block), then cuCtxSynchronize so that a
     * failure in the kernel is reported here, against this launch.
     */
    public void launchAndSync(String name, int gridX, int blockX, int sharedMemBytes, MemorySegment kernelParams) {
        long f = function(name);
        Cu.check(cu.cuLaunchKernel(f, gridX, 1, 1, blockX, 1, 1, sharedMemBytes, 0L, kernelParams, MemorySegment.NULL),
                "cuLaunchKernel(" + name + ", grid=" + gridX + ", block=" + blockX + ")");
        Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize after " + name);
    }

    @Override
    public void close() {
        if (!unloaded) {
            unloaded = true;
            functions.clear();
            Cu.check(cu.cuModuleUnload(module), "cuModuleUnload");
        }
    }
}
