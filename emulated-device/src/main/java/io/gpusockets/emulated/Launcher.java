package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;

import io.gpusockets.emulated.ptx.DeviceLaunches;
import io.gpusockets.emulated.ptx.PtxKernel;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Functions and launches: resolving a CUfunction (or a CUkernel, which stands for its function in
 * the current context), answering its attributes and parameter layout, and queuing a launch. An
 * entry with a Java kernel ({@link EmulatedKernels}) runs that; any other runs from its PTX
 * (io.gpusockets.emulated.ptx: compiled to JVM bytecode, else interpreted), and one the interpreter
 * cannot run fails at once with CUDA_ERROR_NOT_SUPPORTED naming the instruction and line; a fault
 * while the kernel runs becomes the context's sticky error.
 */
final class Launcher {
    private static final System.Logger LOG = System.getLogger(Launcher.class.getName());

    private final Handles handles;
    private final Contexts contexts;
    private final Streams streams;
    private final Modules modules;
    private final EmulatedMemory memory;
    private final Set<String> warnedKernels = ConcurrentHashMap.newKeySet();

    Launcher(Handles handles, Contexts contexts, Streams streams, Modules modules, EmulatedMemory memory) {
        this.handles = handles;
        this.contexts = contexts;
        this.streams = streams;
        this.modules = modules;
        this.memory = memory;
    }

    EmulatedFunction function(long handle) {
        contexts.requireInit();
        EmulatedFunction f = handles.find(handle, EmulatedFunction.class);
        if (f != null) {
            return f;
        }
        EmulatedLibrary.Kernel k = handles.find(handle, EmulatedLibrary.Kernel.class);
        if (k != null) {
            return modules.function(modules.libraryModule(k.library(), contexts.current()), k.name());
        }
        throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "function=0x" + Long.toHexString(handle) + " is not a live function");
    }

    /**
     * Refuses a CUkernel where only a CUfunction is taken: the real driver (580, seen on the H200)
     * answers cuFuncGetAttribute and cuFuncGetParamInfo of a CUkernel with CUDA_ERROR_INVALID_HANDLE
     * (cuKernelGetAttribute and cuKernelGetParamInfo take those), though it launches one.
     */
    void requireNotKernel(long handle) {
        contexts.requireInit();
        if (handles.find(handle, EmulatedLibrary.Kernel.class) != null) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "function=0x" + Long.toHexString(handle)
                    + " is a CUkernel: the driver takes it here only through the cuKernel* queries");
        }
    }

    int attribute(long hfunc, int attrib) {
        Integer value = function(hfunc).attribute(attrib);
        if (value == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attrib=" + attrib + " is no CUfunction_attribute");
        }
        return value;
    }

    void setAttribute(long hfunc, int attrib, int value) {
        if (!function(hfunc).setAttribute(attrib, value)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attrib=" + attrib + " value=" + value + " cannot be set");
        }
    }

    PtxModule.Param param(long func, long index) {
        List<PtxModule.Param> params = function(func).entry.params();
        if (index < 0 || index >= params.size()) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "paramIndex=" + index + " of " + params.size() + " parameters");
        }
        return params.get((int) index);
    }

    int occupancy(long func, int blockSize, long dynamicSharedBytes) {
        EmulatedFunction f = function(func);
        if (blockSize <= 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "blockSize=" + blockSize);
        }
        return Occupancy.blocksPerMultiprocessor(f.entry.maxThreadsPerBlock(), blockSize, dynamicSharedBytes);
    }

    void launch(long f, int gx, int gy, int gz, int bx, int by, int bz, int shared, long hStream,
                MemorySegment kernelParams, MemorySegment extra) {
        EmulatedContext c = contexts.current();
        Prepared p = prepare(c, f, gx, gy, gz, bx, by, bz, shared, kernelParams, extra);
        EmulatedStream s = streams.resolve(hStream, c);
        if (s.capture != null) {   // a kernel node that cuGraphKernelNodeGetParams can answer
            EmulatedGraph.Node n = c.capture(s, p.op(), p.what());
            boolean isFunction = handles.find(f, EmulatedFunction.class) != null;
            n.params = Graphs.paramsOf(p, isFunction ? f : 0, isFunction ? 0 : f, 0, new int[] {gx, gy, gz, bx, by, bz}, shared);
            return;
        }
        c.settings.growStack(function(f).attribute(EmulatedFunction.LOCAL_SIZE_BYTES), memory, c);   // the driver grows the stack at the launch (not at a capture)
        c.enqueue(s, null, p.op(), p.what());
    }

    /**
     * A cooperative launch of an entry that synchronises its grid (it reads the grid workspace, %envreg1/2) is refused:
     * the emulated device runs a grid's blocks a few at a time, so a grid-wide barrier would wait forever.
     */
    void refuseGridBarrier(long f) {
        EmulatedFunction fn = function(f);
        if (fn.kernel == null && fn.interpreted().readsGridWorkspace()) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "a cooperative launch of " + fn.entry.name() + ", which synchronises "
                    + "its grid (cooperative groups' grid_group::sync): the emulated device has no grid-wide barrier");
        }
    }

    /**
     * The entries of {@code module} that its kernels may launch from the device, by the address a kernel takes of one
     * ({@link PtxKernel#functionAddress}); an entry with a Java kernel or PTX the engines cannot run is refused with
     * CUDA_ERROR_NOT_SUPPORTED.
     */
    private DeviceLaunches.Runtime children(EmulatedModule module) {
        List<String> names = List.copyOf(module.ptx.entries.keySet());
        return address -> {
            int index = PtxKernel.functionIndex(address);
            if (index < 0 || index >= names.size()) {
                return null;
            }
            EmulatedFunction child = modules.function(module, names.get(index));
            if (child.kernel != null) {
                throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "a device-side launch of " + child.entry.name()
                        + ", which the emulated device runs as Java code");
            }
            return new DeviceLaunches.Child(child.entry.name(), child.interpreted(), child.entry.paramBufferSize(),
                    child.entry.maxThreadsPerBlock());
        };
    }

    /** A launch checked and its parameters copied, ready to run (and to run again: graph nodes replay it). */
    record Prepared(EmulatedFunction function, KernelLaunch launch, Runnable op, String what) {
    }

    /** Checks a launch of {@code f} in {@code c} and copies its parameters, as cuLaunchKernel does at the call. */
    Prepared prepare(EmulatedContext c, long f, int gx, int gy, int gz, int bx, int by, int bz, int shared,
                     MemorySegment kernelParams, MemorySegment extra) {
        EmulatedFunction fn = function(f);
        if (fn.module.context != c) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "function " + fn.entry.name() + " belongs to another context");
        }
        String name = fn.entry.name();
        if (fn.kernel == null) {
            PtxKernel program;
            try {
                program = fn.interpreted();
            } catch (CudaError e) {
                if (warnedKernels.add(name)) {   // once per name: a program may retry in a loop
                    LOG.log(Level.WARNING, e.getMessage());
                }
                throw e;
            }
            KernelLaunch launch = KernelLaunch.prepare(gx, gy, gz, bx, by, bz, shared, fn.maxDynamicShared(), fn.entry,
                    kernelParams, extra, c, memory);
            String tooBig = program.resourceProblem(launch.blockX * launch.blockY * launch.blockZ, launch.sharedMemBytes,
                    DeviceProperties.SHARED_MEMORY_PER_BLOCK_OPTIN);
            if (tooBig != null) {
                throw new CudaError(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, tooBig);
            }
            c.throwIfFaulted();
            DeviceLaunches.Runtime children = children(fn.module);
            for (long named : program.functionsNamed()) {
                children.child(named);   // an entry it may launch that cannot run here fails this launch now, not midway
            }
            PtxKernel.Launch run = new PtxKernel.Launch(launch.gridX, launch.gridY, launch.gridZ, launch.blockX, launch.blockY,
                    launch.blockZ, launch.sharedMemBytes, launch.paramBuffer(), new KernelMemory(c, memory, handles), children);
            return new Prepared(fn, launch, () -> program.run(run), "kernel " + name);
        }
        String mismatch = fn.kernel.mismatch(fn.entry);
        if (mismatch != null) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, mismatch);
        }
        KernelLaunch launch = KernelLaunch.prepare(gx, gy, gz, bx, by, bz, shared, fn.maxDynamicShared(), fn.entry,
                kernelParams, extra, c, memory);
        c.throwIfFaulted();
        EmulatedKernels.Body body = fn.kernel.body();
        return new Prepared(fn, launch, () -> body.run(launch), "kernel " + name);
    }
}
