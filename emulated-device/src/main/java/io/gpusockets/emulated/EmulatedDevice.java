package io.gpusockets.emulated;

import static io.gpusockets.emulated.HostSegments.isNull;
import static io.gpusockets.emulated.HostSegments.putInt;
import static io.gpusockets.emulated.HostSegments.putIntIfPresent;
import static io.gpusockets.emulated.HostSegments.putLong;
import static io.gpusockets.emulated.HostSegments.putLongIfPresent;
import static io.gpusockets.emulated.HostSegments.sized;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_DEVICE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_FOUND;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_READY;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_UNKNOWN;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;

import io.gpusockets.protocol.api.UnsupportedCudaDriver;
import io.gpusockets.protocol.structs.Memcpy3D;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.IntSupplier;

/**
 * A CUDA device in Java, so that everything above the driver (dispatcher, sessions, transports,
 * frontend, the C library) runs and is tested on machines without a GPU. It says so: its name is
 * {@value DeviceProperties#NAME}.
 *
 * <p>What is real: contexts with CUDA's per-thread context stack; memory at device-like addresses
 * backed by native host memory, every access checked against the allocations of the context;
 * streams that run concurrently and keep CUDA's ordering (legacy default stream, per-thread stream,
 * NON_BLOCKING streams, events with real timestamps); modules from PTX text, fatbins (and fatbin
 * wrappers) and cubins that carry PTX ({@link ModuleImage}; an image with SASS only is
 * CUDA_ERROR_NO_BINARY_FOR_GPU), parsed for their entries' parameter layouts and their variables;
 * kernels run from their PTX ({@code io.gpusockets.emulated.ptx}), compiled to JVM bytecode where the
 * compiler covers the entry and interpreted otherwise ({@link io.gpusockets.emulated.ptx.PtxEngine}),
 * except the two of {@link EmulatedKernels}, which run as Java code. A launch of an entry using PTX
 * the interpreter does not cover fails with CUDA_ERROR_NOT_SUPPORTED, and {@link #lastErrorDetail()}
 * names the instruction and its line.
 *
 * <p>Kernel faults (out-of-bounds accesses, a failed device {@code assert}, {@code trap}) become the faulting
 * context's sticky error; by default ({@link FaultScope#PROCESS}) they also poison this whole device as the
 * real driver poisons its process: every other context takes the error and no context can be made any more.
 * One {@code EmulatedDevice} stands for one process's driver.
 *
 * <p>Thread-safe; each calling thread has its own context stack, as in CUDA. Every method returns a
 * CUresult and never throws. Not here, by design: primary contexts (the backend virtualizes them),
 * pinned host memory and error strings (the frontend answers those). This class only adapts the C
 * shapes (out-pointers, NUL-terminated names); the behaviour lives in {@link Contexts},
 * {@link Allocations}, {@link Transfers}, {@link Streams}, {@link Modules} and {@link Launcher}, and for
 * unified and pitched copies, arrays, texture and surface objects in {@link PitchedTransfers},
 * {@link CudaArrays} and {@link Textures} (kernels sample and write them through {@link KernelTextures});
 * pools, virtual memory, graphs, JIT link states and the rest in the classes named for them
 * ({@link MemoryPools}, {@link VirtualMemory}, {@link Graphs}, {@link LinkStates}, ...); IPC memory and event handles,
 * which other processes (other emulated devices, in other JVMs) open, in {@link IpcMemory} and {@link IpcEvents}.
 */
public final class EmulatedDevice extends UnsupportedCudaDriver implements AutoCloseable {
    /** The device name every emulated device reports. */
    public static final String NAME = DeviceProperties.NAME;
    public static final long DEFAULT_MEMORY_BYTES = 8L << 30;

    private static final System.Logger LOG = System.getLogger(EmulatedDevice.class.getName());

    private final int deviceCount;
    private final DeviceProperties properties;
    private final EmulatedMemory memory;
    private final Modules modules;
    private final Contexts contexts;
    private final Allocations allocations;
    private final Transfers transfers;
    private final Streams streams;
    private final Launcher launcher;
    private final HostCallbacks callbacks;
    private final StreamQueries streamQueries;
    private final CudaArrays arrays;
    private final PitchedTransfers pitched;
    private final Textures textures;
    private final MipmappedArrays mipmaps;
    private final KernelQueries kernelQueries;
    private final LaunchOptions launchOptions;
    private final ContextQueries contextQueries;
    private final MemoryPools pools;
    private final VirtualMemory vmm;
    private final StreamMemOps memOps;
    private final PeerCopies peers;
    private final Graphs graphs;
    private final LinkStates links;
    private final IpcMemory ipcMemory;
    private final IpcEvents ipcEvents;
    private final ThreadLocal<String> lastDetail = new ThreadLocal<>();
    private final FaultScope faultScope;
    private final long uuidSeed;

    /** One device advertising 8 GiB. */
    public EmulatedDevice() {
        this(1, DEFAULT_MEMORY_BYTES);
    }

    /**
     * @param deviceCount          devices to present (at least 1)
     * @param memoryBytesPerDevice memory each advertises and may hand out; host memory is used only as allocated
     */
    public EmulatedDevice(int deviceCount, long memoryBytesPerDevice) {
        this(deviceCount, memoryBytesPerDevice, FaultScope.fromSystemProperties());
    }

    /**
     * @param faultScope how far a kernel fault reaches: the whole device, as the real driver's process
     *                   ({@link FaultScope#PROCESS}, the default), or its context alone
     */
    public EmulatedDevice(int deviceCount, long memoryBytesPerDevice, FaultScope faultScope) {
        this(deviceCount, memoryBytesPerDevice, faultScope, new java.security.SecureRandom().nextLong());
    }

    /**
     * @param uuidSeed what the devices' UUIDs derive from ({@link #uuidSeed()}): a backend's worker processes get
     *                 their backend's, so that every session sees the same devices, as on a GPU
     */
    public EmulatedDevice(int deviceCount, long memoryBytesPerDevice, FaultScope faultScope, long uuidSeed) {
        if (deviceCount < 1 || memoryBytesPerDevice < EmulatedMemory.ALIGNMENT) {
            throw new IllegalArgumentException("deviceCount=" + deviceCount + " memoryBytesPerDevice=" + memoryBytesPerDevice);
        }
        Handles handles = new Handles();
        this.deviceCount = deviceCount;
        this.properties = new DeviceProperties(deviceCount, uuidSeed);
        this.uuidSeed = uuidSeed;
        this.memory = new EmulatedMemory(deviceCount, memoryBytesPerDevice);
        this.modules = new Modules(handles, memory);
        this.faultScope = java.util.Objects.requireNonNull(faultScope, "faultScope");
        this.contexts = new Contexts(deviceCount, handles, memory, modules, faultScope);
        this.allocations = new Allocations(contexts, memory);
        this.controls = new ContextControls(contexts, allocations);
        this.transfers = new Transfers(memory);
        this.streams = new Streams(handles, contexts);
        this.launcher = new Launcher(handles, contexts, streams, modules, memory);
        this.callbacks = new HostCallbacks(contexts, streams);
        this.streamQueries = new StreamQueries(contexts, streams);
        this.arrays = new CudaArrays(handles, contexts, memory);
        this.pitched = new PitchedTransfers(contexts, memory, arrays, streams, transfers);
        this.mipmaps = new MipmappedArrays(handles, contexts, memory);
        this.textures = new Textures(handles, contexts, memory, arrays, mipmaps);
        this.kernelQueries = new KernelQueries(contexts, modules, launcher);
        this.launchOptions = new LaunchOptions(launcher);
        this.contextQueries = new ContextQueries(contexts, streams);
        this.pools = new MemoryPools(handles, contexts, streams, memory, deviceCount);
        this.vmm = new VirtualMemory(handles, contexts, memory, deviceCount);
        this.memOps = new StreamMemOps(contexts, streams, memory);
        this.peers = new PeerCopies(contexts, streams, memory);
        this.graphs = new Graphs(handles, contexts, streams, launcher, memory, pools, memOps);
        this.links = new LinkStates(handles, contexts);
        this.ipcMemory = new IpcMemory(contexts, memory, pools);
        this.ipcEvents = new IpcEvents(handles, contexts);
    }

    /**
     * How kernels run here, for banners: from their PTX (compiled to JVM bytecode where the compiler
     * covers them, else interpreted: io.gpusockets.emulated.ptx), but for gpus_sleep and gpus_empty,
     * which run as Java code ({@link EmulatedKernels}).
     */
    public static final String KERNELS = "kernels: run from their PTX (compiled to JVM bytecode, else interpreted); "
            + "gpus_sleep and gpus_empty run as Java code";

    /** One line for logs and banners, saying plainly that there is no GPU behind this driver. */
    public String description() {
        return NAME + ": " + deviceCount + " device(s) of " + (memory.capacity() >> 20) + " MiB host-backed memory,"
                + " compute capability 9.0 as seen by programs; kernels run from their PTX (compiled to JVM bytecode, else"
                + " interpreted), but " + new TreeSet<>(EmulatedKernels.names()) + ", which run as Java code";
    }

    /**
     * Why the calling thread's most recent failed call failed (e.g. which kernel has no Java version,
     * or what faulted), or null. Not cleared by successful calls: read it right after the failure.
     */
    public String lastErrorDetail() {
        return lastDetail.get();
    }

    public int deviceCount() {
        return deviceCount;
    }

    /** What the devices' UUIDs derive from (random unless given): the same seed, the same UUIDs. */
    public long uuidSeed() {
        return uuidSeed;
    }

    /** How far a kernel fault reaches here ({@link FaultScope}). */
    public FaultScope faultScope() {
        return faultScope;
    }

    public long memoryBytesPerDevice() {
        return memory.capacity();
    }

    /** Entry names the emulated device runs as Java code instead of from their PTX. */
    public static Set<String> emulatedKernels() {
        return Set.copyOf(EmulatedKernels.names());
    }

    /** Destroys every context (waiting for their queued work) and library; later calls return CUDA_ERROR_DEINITIALIZED. */
    @Override
    public void close() {
        contexts.close();
        modules.unloadAll();
    }

    /** Runs a driver call: CudaError becomes its code; nothing else may escape to a caller. */
    private int call(String function, IntSupplier body) {
        try {
            return body.getAsInt();
        } catch (CudaError e) {
            lastDetail.set(function + ": " + e.getMessage());
            LOG.log(Level.DEBUG, "{0} -> {1}: {2}", function, e.code, e.getMessage());
            return e.code;
        } catch (RuntimeException e) {
            lastDetail.set(function + ": " + e);
            LOG.log(Level.WARNING, function + " failed unexpectedly", e);
            return CUDA_ERROR_UNKNOWN;
        }
    }

    /** A call with no result but its success. */
    private int run(String function, Runnable body) {
        return call(function, () -> {
            body.run();
            return CUDA_SUCCESS;
        });
    }

    private static String name(MemorySegment name) {
        return HostSegments.cString(name, HostSegments.MAX_NAME, "name");
    }

    // ---- initialization and devices ------------------------------------------------------------

    @Override
    public int cuInit(int flags) {
        return run("cuInit", () -> contexts.init(flags));
    }

    @Override
    public int cuDriverGetVersion(MemorySegment driverVersion) {
        return run("cuDriverGetVersion", () -> putInt(driverVersion, DeviceProperties.DRIVER_VERSION, "driverVersion"));
    }

    @Override
    public int cuDeviceGet(MemorySegment device, int ordinal) {
        return run("cuDeviceGet", () -> {
            contexts.checkDevice(ordinal);
            putInt(device, ordinal, "device");
        });
    }

    @Override
    public int cuDeviceGetCount(MemorySegment count) {
        return run("cuDeviceGetCount", () -> {
            contexts.requireInit();
            putInt(count, deviceCount, "count");
        });
    }

    @Override
    public int cuDeviceGetName(MemorySegment name, int len, int dev) {
        return run("cuDeviceGetName", () -> {
            contexts.checkDevice(dev);
            if (len <= 0) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "len=" + len);
            }
            byte[] text = NAME.getBytes(StandardCharsets.UTF_8);
            int n = Math.min(len - 1, text.length);   // truncated like the real driver, always NUL-terminated
            MemorySegment out = sized(name, n + 1L, "name");
            MemorySegment.copy(MemorySegment.ofArray(text), 0, out, 0, n);
            out.set(ValueLayout.JAVA_BYTE, n, (byte) 0);
        });
    }

    @Override
    public int cuDeviceGetUuid(MemorySegment uuid, int dev) {
        return run("cuDeviceGetUuid", () -> {
            contexts.checkDevice(dev);
            MemorySegment.copy(MemorySegment.ofArray(properties.uuid(dev)), 0, sized(uuid, 16, "uuid"), 0, 16);
        });
    }

    @Override
    public int cuDeviceTotalMem(MemorySegment bytes, int dev) {
        return run("cuDeviceTotalMem", () -> {
            contexts.checkDevice(dev);
            putLong(bytes, memory.capacity(), "bytes");
        });
    }

    @Override
    public int cuDeviceGetAttribute(MemorySegment pi, int attrib, int dev) {
        return run("cuDeviceGetAttribute", () -> {
            contexts.checkDevice(dev);
            Integer value = DeviceProperties.attribute(attrib, dev);
            if (value == null) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attrib=" + attrib + " is no CUdevice_attribute");
            }
            putInt(pi, value, "pi");
        });
    }

    @Override
    public int cuDeviceGetPCIBusId(MemorySegment pciBusId, int len, int dev) {
        return run("cuDeviceGetPCIBusId", () -> {
            contexts.checkDevice(dev);
            if (len < PciBusIds.LENGTH_WITH_NUL) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "len=" + len + " below " + PciBusIds.LENGTH_WITH_NUL);
            }
            MemorySegment out = sized(pciBusId, PciBusIds.LENGTH_WITH_NUL, "pciBusId");
            out.setString(0, PciBusIds.of(dev), StandardCharsets.US_ASCII);
        });
    }

    @Override
    public int cuDeviceGetByPCIBusId(MemorySegment dev, MemorySegment pciBusId) {
        return run("cuDeviceGetByPCIBusId", () -> {
            contexts.requireInit();
            MemorySegment out = sized(dev, 4, "dev");
            String id = HostSegments.cString(pciBusId, HostSegments.MAX_NAME, "pciBusId");
            int ordinal = PciBusIds.ordinal(id, deviceCount);
            if (ordinal < 0) {
                throw new CudaError(CUDA_ERROR_INVALID_DEVICE, "no device at PCI address " + id);
            }
            out.set(HostSegments.INT, 0, ordinal);
        });
    }

    /** Peer access is not emulated (no cuCtxEnablePeerAccess): 0, which is also what a device answers about itself. */
    @Override
    public int cuDeviceCanAccessPeer(MemorySegment canAccessPeer, int dev, int peerDev) {
        return run("cuDeviceCanAccessPeer", () -> {
            contexts.checkDevice(dev);
            contexts.checkDevice(peerDev);
            putInt(canAccessPeer, 0, "canAccessPeer");
        });
    }

    @Override
    public int cuDeviceComputeCapability(MemorySegment major, MemorySegment minor, int dev) {
        return run("cuDeviceComputeCapability", () -> {
            contexts.checkDevice(dev);
            MemorySegment majorOut = sized(major, 4, "major");
            MemorySegment minorOut = sized(minor, 4, "minor");
            majorOut.set(HostSegments.INT, 0, DeviceProperties.attribute(DeviceProperties.COMPUTE_CAPABILITY_MAJOR, dev));
            minorOut.set(HostSegments.INT, 0, DeviceProperties.attribute(DeviceProperties.COMPUTE_CAPABILITY_MINOR, dev));
        });
    }

    /** CUdevprop: 14 ints, which are device attributes 1 to 14 in order. */
    @Override
    public int cuDeviceGetProperties(MemorySegment prop, int dev) {
        return run("cuDeviceGetProperties", () -> {
            contexts.checkDevice(dev);
            MemorySegment out = sized(prop, 4L * DEVPROP_INTS, "prop");
            for (int i = 0; i < DEVPROP_INTS; i++) {
                out.set(HostSegments.INT, 4L * i, DeviceProperties.attribute(i + 1, dev));
            }
        });
    }

    private static final int DEVPROP_INTS = 14;

    // ---- contexts ------------------------------------------------------------------------------

    @Override
    public int cuCtxCreate_v2(MemorySegment pctx, int flags, int dev) {
        return cuCtxCreate(pctx, MemorySegment.NULL, flags, dev);
    }

    @Override
    public int cuCtxCreate(MemorySegment pctx, MemorySegment ctxCreateParams, int flags, int dev) {
        return run("cuCtxCreate", () -> {
            MemorySegment out = sized(pctx, 8, "pctx");
            int checked = io.gpusockets.protocol.structs.CtxCreateParams.check(ctxCreateParams);
            if (checked != CUDA_SUCCESS) {
                throw new CudaError(checked, checked == CUDA_ERROR_NOT_SUPPORTED
                        ? io.gpusockets.protocol.structs.CtxCreateParams.refusal(ctxCreateParams) : "ctxCreateParams");
            }
            out.set(HostSegments.LONG, 0, contexts.create(flags, dev));
        });
    }

    @Override
    public int cuCtxDestroy(long ctx) {
        return run("cuCtxDestroy", () -> contexts.destroy(ctx));
    }

    @Override
    public int cuCtxPushCurrent(long ctx) {
        return run("cuCtxPushCurrent", () -> contexts.push(ctx));
    }

    @Override
    public int cuCtxPopCurrent(MemorySegment pctx) {
        return run("cuCtxPopCurrent", () -> {
            MemorySegment out = isNull(pctx) ? null : sized(pctx, 8, "pctx");
            long popped = contexts.pop().handle;
            if (out != null) {
                out.set(HostSegments.LONG, 0, popped);
            }
        });
    }

    @Override
    public int cuCtxSetCurrent(long ctx) {
        return run("cuCtxSetCurrent", () -> contexts.set(ctx));
    }

    @Override
    public int cuCtxGetCurrent(MemorySegment pctx) {
        return run("cuCtxGetCurrent", () -> putLong(pctx, contexts.currentHandle(), "pctx"));
    }

    @Override
    public int cuCtxGetDevice(MemorySegment device) {
        return run("cuCtxGetDevice", () -> putInt(device, contexts.current().device, "device"));
    }

    @Override
    public int cuCtxSynchronize() {
        return run("cuCtxSynchronize", () -> {
            EmulatedContext c = contexts.current();
            contexts.captures.checkUnsafe("cuCtxSynchronize");
            c.allWork().join();
            c.throwIfFaulted();
        });
    }

    @Override
    public int cuCtxGetApiVersion(long ctx, MemorySegment version) {
        return run("cuCtxGetApiVersion", () -> {
            if (ctx == 0) {
                contexts.current();
            } else {
                contexts.find(ctx);
            }
            putInt(version, DeviceProperties.CONTEXT_API_VERSION, "version");
        });
    }

    @Override
    public int cuCtxGetLimit(MemorySegment pvalue, int limit) {
        return run("cuCtxGetLimit", () -> {
            MemorySegment out = sized(pvalue, 8, "pvalue");
            out.set(HostSegments.LONG, 0, contexts.current().settings.limit(limit));
        });
    }

    @Override
    public int cuCtxSetLimit(int limit, long value) {
        return run("cuCtxSetLimit", () -> {
            EmulatedContext c = contexts.current();
            c.settings.setLimit(limit, value, memory.capacity(), memory, c);
        });
    }

    @Override
    public int cuCtxGetCacheConfig(MemorySegment pconfig) {
        return run("cuCtxGetCacheConfig", () -> {
            MemorySegment out = sized(pconfig, 4, "pconfig");
            out.set(HostSegments.INT, 0, contexts.current().settings.cacheConfig());
        });
    }

    @Override
    public int cuCtxSetCacheConfig(int config) {
        return run("cuCtxSetCacheConfig", () -> contexts.current().settings.cacheConfig(config));
    }

    @Override
    public int cuCtxGetFlags(MemorySegment flags) {
        return run("cuCtxGetFlags", () -> {
            MemorySegment out = sized(flags, 4, "flags");
            out.set(HostSegments.INT, 0, contexts.current().flags);
        });
    }

    // ---- context flags, peer access, SYNC_MEMOPS, RDMA flushes (ContextControls) ---------------------

    private final ContextControls controls;   // made in the constructor, after contexts and allocations

    @Override
    public int cuCtxSetFlags(int flags) {
        return run("cuCtxSetFlags", () -> controls.setFlags(flags));
    }

    @Override
    public int cuCtxEnablePeerAccess(long peerContext, int flags) {
        return run("cuCtxEnablePeerAccess", () -> controls.enablePeerAccess(peerContext, flags));
    }

    @Override
    public int cuCtxDisablePeerAccess(long peerContext) {
        return run("cuCtxDisablePeerAccess", () -> controls.disablePeerAccess(peerContext));
    }

    @Override
    public int cuPointerSetAttribute(MemorySegment value, int attribute, long ptr) {
        return run("cuPointerSetAttribute", () -> controls.setPointerAttribute(value, attribute, ptr));
    }

    @Override
    public int cuFlushGPUDirectRDMAWrites(int target, int scope) {
        return run("cuFlushGPUDirectRDMAWrites", () -> controls.flushRdmaWrites(target, scope));
    }

    // ---- modules and libraries -----------------------------------------------------------------

    @Override
    public int cuModuleLoadData(MemorySegment module, MemorySegment image) {
        return run("cuModuleLoadData", () -> loadModule(module, image));
    }

    /** JIT options have nothing to act on: PTX is not compiled here. */
    @Override
    public int cuModuleLoadDataEx(MemorySegment module, MemorySegment image, int numOptions, MemorySegment options,
                                  MemorySegment optionValues) {
        return run("cuModuleLoadDataEx", () -> loadModule(module, image));
    }

    // ---- JIT linking (LinkStates: PTX in, linked PTX out) ------------------------------------------

    @Override
    public int cuLinkCreate(int numOptions, MemorySegment options, MemorySegment optionValues, MemorySegment stateOut) {
        return run("cuLinkCreate", () -> links.create(numOptions, options, optionValues, stateOut));
    }

    /** The per-input JIT options have nothing to act on here. */
    @Override
    public int cuLinkAddData(long state, int type, MemorySegment data, long size, MemorySegment name, int numOptions,
                             MemorySegment options, MemorySegment optionValues) {
        return run("cuLinkAddData", () -> links.addData(state, type, data, size, name));
    }

    @Override
    public int cuLinkComplete(long state, MemorySegment cubinOut, MemorySegment sizeOut) {
        return run("cuLinkComplete", () -> links.complete(state, cubinOut, sizeOut));
    }

    @Override
    public int cuLinkDestroy(long state) {
        return run("cuLinkDestroy", () -> links.destroy(state));
    }

    @Override
    public int cuModuleLoadFatBinary(MemorySegment module, MemorySegment fatCubin) {
        return run("cuModuleLoadFatBinary", () -> loadModule(module, fatCubin));
    }

    private void loadModule(MemorySegment module, MemorySegment image) {
        MemorySegment out = sized(module, 8, "module");
        out.set(HostSegments.LONG, 0, modules.load(contexts.active(), image, null).handle);
    }

    /** Reads the file on this host; see {@link ModuleFiles} for the errors. */
    @Override
    public int cuModuleLoad(MemorySegment module, MemorySegment fname) {
        return run("cuModuleLoad", () -> {
            sized(module, 8, "module");
            byte[] bytes = ModuleFiles.read(HostSegments.cString(fname, HostSegments.MAX_NAME, "fname"));
            try (Arena arena = Arena.ofConfined()) {
                // NUL-terminated, so that an empty file is an empty image rather than an unsized pointer
                MemorySegment image = arena.allocate(bytes.length + 1L);
                MemorySegment.copy(MemorySegment.ofArray(bytes), 0, image, 0, bytes.length);
                loadModule(module, image);
            }
        });
    }

    @Override
    public int cuModuleUnload(long hmod) {
        return run("cuModuleUnload", () -> {
            EmulatedModule m = contexts.lookup(hmod, EmulatedModule.class, "hmod");
            if (m.library != null) {
                throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "hmod belongs to a library: use cuLibraryUnload");
            }
            modules.unload(m);
        });
    }

    @Override
    public int cuModuleGetFunction(MemorySegment hfunc, long hmod, MemorySegment name) {
        return run("cuModuleGetFunction", () -> {
            EmulatedModule m = contexts.lookup(hmod, EmulatedModule.class, "hmod");
            MemorySegment out = sized(hfunc, 8, "hfunc");
            out.set(HostSegments.LONG, 0, modules.function(m, name(name)).handle);
        });
    }

    @Override
    public int cuModuleGetGlobal(MemorySegment dptr, MemorySegment bytes, long hmod, MemorySegment name) {
        return run("cuModuleGetGlobal", () -> {
            EmulatedModule m = contexts.lookup(hmod, EmulatedModule.class, "hmod");
            String n = name(name);
            Allocation a = m.globals.get(n);
            if (a == null) {
                throw new CudaError(CUDA_ERROR_NOT_FOUND, "no .global or .const variable named " + n + " in the module");
            }
            putLongIfPresent(dptr, a.base(), "dptr");
            putLongIfPresent(bytes, a.size(), "bytes");
        });
    }

    @Override
    public int cuLibraryLoadData(MemorySegment library, MemorySegment code, MemorySegment jitOptions,
                                 MemorySegment jitOptionsValues, int numJitOptions, MemorySegment libraryOptions,
                                 MemorySegment libraryOptionValues, int numLibraryOptions) {
        return run("cuLibraryLoadData", () -> {
            contexts.requireInit();
            MemorySegment out = sized(library, 8, "library");
            out.set(HostSegments.LONG, 0, modules.loadLibrary(code).handle);
        });
    }

    @Override
    public int cuLibraryUnload(long library) {
        return run("cuLibraryUnload", () -> modules.unloadLibrary(contexts.lookup(library, EmulatedLibrary.class, "library")));
    }

    @Override
    public int cuLibraryGetKernel(MemorySegment pKernel, long library, MemorySegment name) {
        return run("cuLibraryGetKernel", () -> {
            EmulatedLibrary lib = contexts.lookup(library, EmulatedLibrary.class, "library");
            MemorySegment out = sized(pKernel, 8, "pKernel");
            out.set(HostSegments.LONG, 0, modules.kernel(lib, name(name)).handle());
        });
    }

    @Override
    public int cuLibraryGetModule(MemorySegment pMod, long library) {
        return run("cuLibraryGetModule", () -> {
            EmulatedLibrary lib = contexts.lookup(library, EmulatedLibrary.class, "library");
            MemorySegment out = sized(pMod, 8, "pMod");
            out.set(HostSegments.LONG, 0, modules.libraryModule(lib, contexts.current()).handle);
        });
    }

    @Override
    public int cuKernelGetFunction(MemorySegment pFunc, long kernel) {
        return run("cuKernelGetFunction", () -> {
            contexts.lookup(kernel, EmulatedLibrary.Kernel.class, "kernel");
            MemorySegment out = sized(pFunc, 8, "pFunc");
            out.set(HostSegments.LONG, 0, launcher.function(kernel).handle);
        });
    }

    // ---- functions and launches ----------------------------------------------------------------

    @Override
    public int cuFuncGetAttribute(MemorySegment pi, int attrib, long hfunc) {
        return run("cuFuncGetAttribute", () -> {
            launcher.requireNotKernel(hfunc);
            putInt(pi, launcher.attribute(hfunc, attrib), "pi");
        });
    }

    @Override
    public int cuFuncSetAttribute(long hfunc, int attrib, int value) {
        return run("cuFuncSetAttribute", () -> launcher.setAttribute(hfunc, attrib, value));
    }

    @Override
    public int cuFuncGetParamInfo(long func, long paramIndex, MemorySegment paramOffset, MemorySegment paramSize) {
        return run("cuFuncGetParamInfo", () -> {
            launcher.requireNotKernel(func);
            PtxModule.Param p = launcher.param(func, paramIndex);
            putLong(paramOffset, p.offset(), "paramOffset");
            putLongIfPresent(paramSize, p.size(), "paramSize");
        });
    }

    @Override
    public int cuOccupancyMaxActiveBlocksPerMultiprocessor(MemorySegment numBlocks, long func, int blockSize,
                                                           long dynamicSMemSize) {
        return run("cuOccupancyMaxActiveBlocksPerMultiprocessor",
                () -> putInt(numBlocks, launcher.occupancy(func, blockSize, dynamicSMemSize), "numBlocks"));
    }

    @Override
    public int cuLaunchKernel(long f, int gridDimX, int gridDimY, int gridDimZ, int blockDimX, int blockDimY, int blockDimZ,
                              int sharedMemBytes, long hStream, MemorySegment kernelParams, MemorySegment extra) {
        return run("cuLaunchKernel", () -> launcher.launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                sharedMemBytes, hStream, kernelParams, extra));
    }

    /** There is no L2 to reset: persisting lines are a hint the emulated device has no use for. */
    @Override
    public int cuCtxResetPersistingL2Cache() {
        return run("cuCtxResetPersistingL2Cache", contexts::current);
    }

    // ---- issue 11: libraries, kernels, launches ----
    // (KernelQueries, LaunchOptions, ContextQueries; cuCtxRecordEvent/cuCtxWaitEvent stay NOT_SUPPORTED:
    // a context-wide event over non-blocking streams is not modelled, and a legacy-stream stand-in would be wrong)

    @Override
    public int cuLibraryGetGlobal(MemorySegment dptr, MemorySegment bytes, long library, MemorySegment name) {
        return run("cuLibraryGetGlobal", () -> {
            Allocation a = kernelQueries.global(library, name(name));
            putLongIfPresent(dptr, a.base(), "dptr");
            putLongIfPresent(bytes, a.size(), "bytes");
        });
    }

    @Override
    public int cuLibraryGetKernelCount(MemorySegment count, long lib) {
        return run("cuLibraryGetKernelCount", () -> putInt(count, kernelQueries.kernelCount(lib), "count"));
    }

    @Override
    public int cuLibraryEnumerateKernels(MemorySegment kernels, int numKernels, long lib) {
        return run("cuLibraryEnumerateKernels",
                () -> KernelQueries.putHandles(kernels, numKernels, kernelQueries.kernels(lib, numKernels)));
    }

    @Override
    public int cuKernelGetAttribute(MemorySegment pi, int attrib, long kernel, int dev) {
        return run("cuKernelGetAttribute", () -> putInt(pi, kernelQueries.kernelAttribute(attrib, kernel, dev), "pi"));
    }

    @Override
    public int cuKernelSetAttribute(int attrib, int val, long kernel, int dev) {
        return run("cuKernelSetAttribute", () -> kernelQueries.setKernelAttribute(attrib, val, kernel, dev));
    }

    @Override
    public int cuKernelSetCacheConfig(long kernel, int config, int dev) {
        return run("cuKernelSetCacheConfig", () -> kernelQueries.kernelCacheConfig(kernel, config, dev));
    }

    @Override
    public int cuKernelGetName(MemorySegment name, long hfunc) {
        return run("cuKernelGetName", () -> sized(name, 8, "name").set(ValueLayout.ADDRESS, 0, kernelQueries.kernelName(hfunc)));
    }

    @Override
    public int cuKernelGetParamInfo(long kernel, long paramIndex, MemorySegment paramOffset, MemorySegment paramSize) {
        return run("cuKernelGetParamInfo", () -> {
            kernelQueries.kernel(kernel);
            PtxModule.Param p = launcher.param(kernel, paramIndex);
            putLong(paramOffset, p.offset(), "paramOffset");
            putLongIfPresent(paramSize, p.size(), "paramSize");
        });
    }

    @Override
    public int cuKernelGetLibrary(MemorySegment pLib, long kernel) {
        return run("cuKernelGetLibrary", () -> putLong(pLib, kernelQueries.kernelLibrary(kernel), "pLib"));
    }

    @Override
    public int cuModuleGetFunctionCount(MemorySegment count, long mod) {
        return run("cuModuleGetFunctionCount", () -> putInt(count, kernelQueries.functionCount(mod), "count"));
    }

    @Override
    public int cuModuleEnumerateFunctions(MemorySegment functions, int numFunctions, long mod) {
        return run("cuModuleEnumerateFunctions",
                () -> KernelQueries.putHandles(functions, numFunctions, kernelQueries.functions(mod, numFunctions)));
    }

    @Override
    public int cuFuncGetModule(MemorySegment hmod, long hfunc) {
        return run("cuFuncGetModule", () -> putLong(hmod, kernelQueries.functionModule(hfunc), "hmod"));
    }

    @Override
    public int cuFuncGetName(MemorySegment name, long hfunc) {
        return run("cuFuncGetName", () -> sized(name, 8, "name").set(ValueLayout.ADDRESS, 0, kernelQueries.functionName(hfunc)));
    }

    @Override
    public int cuFuncIsLoaded(MemorySegment state, long function) {
        return run("cuFuncIsLoaded", () -> putInt(state, kernelQueries.loadingState(function), "state"));
    }

    @Override
    public int cuFuncLoad(long function) {
        return run("cuFuncLoad", () -> kernelQueries.loadingState(function));
    }

    @Override
    public int cuFuncSetCacheConfig(long hfunc, int config) {
        return run("cuFuncSetCacheConfig", () -> kernelQueries.functionCacheConfig(hfunc, config));
    }

    @Override
    public int cuFuncSetSharedMemConfig(long hfunc, int config) {
        return run("cuFuncSetSharedMemConfig", () -> kernelQueries.functionSharedConfig(hfunc, config));
    }

    @Override
    public int cuLaunchCooperativeKernel(long f, int gridDimX, int gridDimY, int gridDimZ, int blockDimX, int blockDimY,
                                         int blockDimZ, int sharedMemBytes, long hStream, MemorySegment kernelParams) {
        return run("cuLaunchCooperativeKernel", () -> launchOptions.cooperative(f, gridDimX, gridDimY, gridDimZ, blockDimX,
                blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams));
    }

    @Override
    public int cuLaunchKernelEx(MemorySegment config, long f, MemorySegment kernelParams, MemorySegment extra) {
        return run("cuLaunchKernelEx", () -> launchOptions.launchEx(config, f, kernelParams, extra));
    }

    @Override
    public int cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(MemorySegment numBlocks, long func, int blockSize,
                                                                    long dynamicSMemSize, int flags) {
        return run("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
                () -> putInt(numBlocks, launchOptions.activeBlocks(func, blockSize, dynamicSMemSize, flags), "numBlocks"));
    }

    @Override
    public int cuOccupancyMaxPotentialBlockSize(MemorySegment minGridSize, MemorySegment blockSize, long func,
                                                MemorySegment blockSizeToDynamicSMemSize, long dynamicSMemSize,
                                                int blockSizeLimit) {
        return cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                dynamicSMemSize, blockSizeLimit, 0);
    }

    @Override
    public int cuOccupancyMaxPotentialBlockSizeWithFlags(MemorySegment minGridSize, MemorySegment blockSize, long func,
                                                         MemorySegment blockSizeToDynamicSMemSize, long dynamicSMemSize,
                                                         int blockSizeLimit, int flags) {
        return run("cuOccupancyMaxPotentialBlockSize", () -> {
            sized(minGridSize, 4, "minGridSize");
            sized(blockSize, 4, "blockSize");
            int[] r = launchOptions.potentialBlockSize(func, blockSizeToDynamicSMemSize, dynamicSMemSize, blockSizeLimit, flags);
            putInt(minGridSize, r[0], "minGridSize");
            putInt(blockSize, r[1], "blockSize");
        });
    }

    @Override
    public int cuOccupancyAvailableDynamicSMemPerBlock(MemorySegment dynamicSmemSize, long func, int numBlocks, int blockSize) {
        return run("cuOccupancyAvailableDynamicSMemPerBlock",
                () -> putLong(dynamicSmemSize, launchOptions.availableDynamicShared(func, numBlocks, blockSize), "dynamicSmemSize"));
    }

    @Override
    public int cuOccupancyMaxPotentialClusterSize(MemorySegment clusterSize, long func, MemorySegment config) {
        return run("cuOccupancyMaxPotentialClusterSize",
                () -> putInt(clusterSize, launchOptions.maxClusterSize(func, config), "clusterSize"));
    }

    @Override
    public int cuOccupancyMaxActiveClusters(MemorySegment numClusters, long func, MemorySegment config) {
        return run("cuOccupancyMaxActiveClusters",
                () -> putInt(numClusters, launchOptions.maxActiveClusters(func, config), "numClusters"));
    }

    @Override
    public int cuCtxGetDevice_v2(MemorySegment device, long ctx) {
        return run("cuCtxGetDevice_v2", () -> putInt(device, contextQueries.context(ctx).device, "device"));
    }

    @Override
    public int cuCtxSynchronize_v2(long ctx) {
        return run("cuCtxSynchronize_v2", () -> contextQueries.synchronize(ctx));
    }

    @Override
    public int cuCtxGetId(long ctx, MemorySegment ctxId) {
        return run("cuCtxGetId", () -> putLong(ctxId, contextQueries.contextId(ctx), "ctxId"));
    }

    @Override
    public int cuStreamGetId(long hStream, MemorySegment streamId) {
        return run("cuStreamGetId", () -> putLong(streamId, contextQueries.streamId(hStream), "streamId"));
    }

    @Override
    public int cuStreamGetCtx(long hStream, MemorySegment pctx) {
        return run("cuStreamGetCtx", () -> putLong(pctx, contextQueries.stream(hStream).context.handle, "pctx"));
    }

    /** No green contexts here: pGreenCtx is NULL. */
    @Override
    public int cuStreamGetCtx_v2(long hStream, MemorySegment pCtx, MemorySegment pGreenCtx) {
        return run("cuStreamGetCtx_v2", () -> {
            long ctx = contextQueries.stream(hStream).context.handle;
            putLongIfPresent(pCtx, ctx, "pCtx");
            putLongIfPresent(pGreenCtx, 0, "pGreenCtx");
        });
    }

    @Override
    public int cuStreamGetDevice(long hStream, MemorySegment device) {
        return run("cuStreamGetDevice", () -> putInt(device, contextQueries.stream(hStream).context.device, "device"));
    }

    @Override
    public int cuCtxGetStreamPriorityRange(MemorySegment leastPriority, MemorySegment greatestPriority) {
        return run("cuCtxGetStreamPriorityRange", () -> {
            contexts.current();
            if (!isNull(leastPriority)) {
                putInt(leastPriority, ContextQueries.LEAST_PRIORITY, "leastPriority");
            }
            if (!isNull(greatestPriority)) {
                putInt(greatestPriority, ContextQueries.GREATEST_PRIORITY, "greatestPriority");
            }
        });
    }

    @Override
    public int cuCtxGetSharedMemConfig(MemorySegment pConfig) {
        return run("cuCtxGetSharedMemConfig", () -> {
            contexts.current();
            putInt(pConfig, ContextQueries.SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE, "pConfig");
        });
    }

    @Override
    public int cuCtxSetSharedMemConfig(int config) {
        return run("cuCtxSetSharedMemConfig", () -> contextQueries.checkSharedMemConfig(config));
    }

    // ---- issue 11: memory pools, VMM ----------------------------------------------------------
    // Stream-ordered allocation and pools (MemoryPools), VMM (VirtualMemory), peer copies (PeerCopies),
    // stream memory operations (StreamMemOps); managed memory is not offered.

    @Override
    public int cuMemAllocAsync(MemorySegment dptr, long bytesize, long hStream) {
        return run("cuMemAllocAsync", () -> sized(dptr, 8, "dptr").set(HostSegments.LONG, 0, pools.allocate(bytesize, 0, hStream)));
    }

    @Override
    public int cuMemAllocFromPoolAsync(MemorySegment dptr, long bytesize, long pool, long hStream) {
        return run("cuMemAllocFromPoolAsync", () -> {
            MemorySegment out = sized(dptr, 8, "dptr");
            if (pool == 0) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "pool is NULL");
            }
            out.set(HostSegments.LONG, 0, pools.allocate(bytesize, pool, hStream));
        });
    }

    @Override
    public int cuMemFreeAsync(long dptr, long hStream) {
        return run("cuMemFreeAsync", () -> pools.freeAsync(dptr, hStream));
    }

    @Override
    public int cuMemPoolCreate(MemorySegment pool, MemorySegment poolProps) {
        return run("cuMemPoolCreate", () -> sized(pool, 8, "pool").set(HostSegments.LONG, 0, pools.create(poolProps)));
    }

    @Override
    public int cuMemPoolDestroy(long pool) {
        return run("cuMemPoolDestroy", () -> pools.destroy(pool));
    }

    @Override
    public int cuMemPoolSetAttribute(long pool, int attr, MemorySegment value) {
        return run("cuMemPoolSetAttribute", () -> pools.setAttribute(pool, attr, value));
    }

    @Override
    public int cuMemPoolGetAttribute(long pool, int attr, MemorySegment value) {
        return run("cuMemPoolGetAttribute", () -> pools.getAttribute(pool, attr, value));
    }

    @Override
    public int cuMemPoolTrimTo(long pool, long minBytesToKeep) {
        return run("cuMemPoolTrimTo", () -> pools.trimTo(pool, minBytesToKeep));
    }

    @Override
    public int cuMemPoolSetAccess(long pool, MemorySegment map, long count) {
        return run("cuMemPoolSetAccess", () -> pools.setAccess(pool, map, count));
    }

    @Override
    public int cuMemPoolGetAccess(MemorySegment flags, long memPool, MemorySegment location) {
        return run("cuMemPoolGetAccess", () -> {
            MemorySegment out = sized(flags, 4, "flags");
            out.set(HostSegments.INT, 0, pools.getAccess(memPool, location));
        });
    }

    @Override
    public int cuDeviceGetDefaultMemPool(MemorySegment poolOut, int dev) {
        return run("cuDeviceGetDefaultMemPool", () -> sized(poolOut, 8, "pool_out").set(HostSegments.LONG, 0, pools.defaultPool(dev)));
    }

    @Override
    public int cuDeviceGetMemPool(MemorySegment pool, int dev) {
        return run("cuDeviceGetMemPool", () -> sized(pool, 8, "pool").set(HostSegments.LONG, 0, pools.currentPool(dev)));
    }

    @Override
    public int cuDeviceSetMemPool(int dev, long pool) {
        return run("cuDeviceSetMemPool", () -> pools.setCurrent(dev, pool));
    }

    /**
     * The location-based forms: a device location with pinned allocations is that device's pool; host
     * locations and managed pools are not emulated (CUDA_ERROR_NOT_SUPPORTED), other values are invalid.
     */
    private int poolDevice(MemorySegment location, int type) {
        io.gpusockets.protocol.structs.MemoryProps.Location l = io.gpusockets.protocol.structs.MemoryProps.Location.read(
                sized(location, io.gpusockets.protocol.structs.MemoryProps.LOCATION_SIZE, "location"), 0);
        if (l.type() >= 2 && l.type() <= 4 || type == 2) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "pools of host or managed memory are not emulated");
        }
        if (l.type() != io.gpusockets.protocol.structs.MemoryProps.LOCATION_TYPE_DEVICE
                || type != io.gpusockets.protocol.structs.MemoryProps.ALLOCATION_TYPE_PINNED) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "location.type=" + l.type() + " type=" + type);
        }
        contexts.checkDevice(l.id());
        return l.id();
    }

    @Override
    public int cuMemGetDefaultMemPool(MemorySegment poolOut, MemorySegment location, int type) {
        return run("cuMemGetDefaultMemPool",
                () -> sized(poolOut, 8, "pool_out").set(HostSegments.LONG, 0, pools.defaultPool(poolDevice(location, type))));
    }

    @Override
    public int cuMemGetMemPool(MemorySegment pool, MemorySegment location, int type) {
        return run("cuMemGetMemPool",
                () -> sized(pool, 8, "pool").set(HostSegments.LONG, 0, pools.currentPool(poolDevice(location, type))));
    }

    @Override
    public int cuMemSetMemPool(MemorySegment location, int type, long pool) {
        return run("cuMemSetMemPool", () -> pools.setCurrent(poolDevice(location, type), pool));
    }

    @Override
    public int cuMemGetAllocationGranularity(MemorySegment granularity, MemorySegment prop, int option) {
        return run("cuMemGetAllocationGranularity", () -> {
            MemorySegment out = sized(granularity, 8, "granularity");
            out.set(HostSegments.LONG, 0, vmm.granularity(prop, option));
        });
    }

    @Override
    public int cuMemCreate(MemorySegment handle, long size, MemorySegment prop, long flags) {
        return run("cuMemCreate", () -> {
            MemorySegment out = sized(handle, 8, "handle");
            out.set(HostSegments.LONG, 0, vmm.create(size, prop, flags));
        });
    }

    @Override
    public int cuMemRelease(long handle) {
        return run("cuMemRelease", () -> vmm.release(handle));
    }

    @Override
    public int cuMemAddressReserve(MemorySegment ptr, long size, long alignment, long addr, long flags) {
        return run("cuMemAddressReserve", () -> {
            MemorySegment out = sized(ptr, 8, "ptr");
            out.set(HostSegments.LONG, 0, vmm.reserve(size, alignment, addr, flags));
        });
    }

    @Override
    public int cuMemAddressFree(long ptr, long size) {
        return run("cuMemAddressFree", () -> vmm.free(ptr, size));
    }

    @Override
    public int cuMemMap(long ptr, long size, long offset, long handle, long flags) {
        return run("cuMemMap", () -> vmm.map(ptr, size, offset, handle, flags));
    }

    @Override
    public int cuMemUnmap(long ptr, long size) {
        return run("cuMemUnmap", () -> vmm.unmap(ptr, size));
    }

    @Override
    public int cuMemSetAccess(long ptr, long size, MemorySegment desc, long count) {
        return run("cuMemSetAccess", () -> vmm.setAccess(ptr, size, desc, count));
    }

    @Override
    public int cuMemGetAccess(MemorySegment flags, MemorySegment location, long ptr) {
        return run("cuMemGetAccess", () -> {
            MemorySegment out = sized(flags, 8, "flags");
            out.set(HostSegments.LONG, 0, vmm.getAccess(location, ptr));
        });
    }

    @Override
    public int cuMemRetainAllocationHandle(MemorySegment handle, long addr) {
        return run("cuMemRetainAllocationHandle", () -> {
            MemorySegment out = sized(handle, 8, "handle");
            out.set(HostSegments.LONG, 0, vmm.retain(addr));
        });
    }

    @Override
    public int cuMemExportToShareableHandle(MemorySegment shareableHandle, long handle, int handleType, long flags) {
        return run("cuMemExportToShareableHandle", () -> vmm.export(shareableHandle, handle, handleType, flags));
    }

    @Override
    public int cuMemImportFromShareableHandle(MemorySegment handle, MemorySegment osHandle, int shHandleType) {
        return run("cuMemImportFromShareableHandle", () -> {
            MemorySegment out = sized(handle, 8, "handle");
            out.set(HostSegments.LONG, 0, vmm.importFrom(osHandle, shHandleType));
        });
    }

    @Override
    public int cuMemGetAllocationPropertiesFromHandle(MemorySegment prop, long handle) {
        return run("cuMemGetAllocationPropertiesFromHandle", () -> vmm.properties(prop, handle));
    }

    @Override
    public int cuPointerGetAttributes(int numAttributes, MemorySegment attributes, MemorySegment data, long ptr) {
        return run("cuPointerGetAttributes", () -> {
            if (numAttributes < 0) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "numAttributes=" + numAttributes);
            }
            MemorySegment attrs = sized(attributes, 4L * numAttributes, "attributes");
            MemorySegment slots = sized(data, 8L * numAttributes, "data");
            boolean known = memory.find(ptr) != null;
            for (int i = 0; i < numAttributes; i++) {
                int attribute = attrs.getAtIndex(HostSegments.INT, i);
                int size = attribute == 4 ? 8 : io.gpusockets.protocol.calls.PointerAttributeRequest.valueBytes(attribute);
                if (size == 0) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attribute=" + attribute + " is not answered by the emulated device");
                }
                MemorySegment slot = MemorySegment.ofAddress(slots.getAtIndex(HostSegments.LONG, i)).reinterpret(size);
                if (!known && attribute == 4) {
                    slot.set(HostSegments.LONG, 0, ptr);   // as the driver: memory it does not know is the host's own
                } else if (!known || attribute == 4) {
                    slot.fill((byte) 0);   // as the driver: a pointer that is no device memory gets NULL values, not an error
                } else {
                    int r = cuPointerGetAttribute(slot, attribute, ptr);
                    if (r != CUDA_SUCCESS) {
                        throw new CudaError(r, "attribute=" + attribute);
                    }
                }
            }
        });
    }

    @Override
    public int cuMemcpyPeer(long dstDevice, long dstContext, long srcDevice, long srcContext, long byteCount) {
        return run("cuMemcpyPeer", () -> peers.copy(dstDevice, dstContext, srcDevice, srcContext, byteCount));
    }

    @Override
    public int cuMemcpyPeerAsync(long dstDevice, long dstContext, long srcDevice, long srcContext, long byteCount, long hStream) {
        return run("cuMemcpyPeerAsync", () -> peers.copyAsync(dstDevice, dstContext, srcDevice, srcContext, byteCount, hStream));
    }

    /** The emulated device offers no managed memory (the backend, which a remote program reaches, refuses it before). */
    @Override
    public int cuMemAllocManaged(MemorySegment dptr, long bytesize, int flags) {
        return call("cuMemAllocManaged", () -> {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "managed memory is not emulated");
        });
    }

    @Override
    public int cuStreamWriteValue32(long stream, long addr, int value, int flags) {
        return run("cuStreamWriteValue32", () -> memOps.writeValue(stream, addr, value, 4, flags));
    }

    @Override
    public int cuStreamWriteValue64(long stream, long addr, long value, int flags) {
        return run("cuStreamWriteValue64", () -> memOps.writeValue(stream, addr, value, 8, flags));
    }

    @Override
    public int cuStreamWaitValue32(long stream, long addr, int value, int flags) {
        return run("cuStreamWaitValue32", () -> memOps.waitValue(stream, addr, value, 4, flags));
    }

    @Override
    public int cuStreamWaitValue64(long stream, long addr, long value, int flags) {
        return run("cuStreamWaitValue64", () -> memOps.waitValue(stream, addr, value, 8, flags));
    }

    @Override
    public int cuStreamBatchMemOp(long stream, int count, MemorySegment paramArray, int flags) {
        return run("cuStreamBatchMemOp", () -> memOps.batch(stream, count, paramArray, flags));
    }

    // The _v2 stream memory operations have the same ABI and meaning (they need no device attribute).

    @Override
    public int cuStreamWriteValue32_v2(long stream, long addr, int value, int flags) {
        return cuStreamWriteValue32(stream, addr, value, flags);
    }

    @Override
    public int cuStreamWriteValue64_v2(long stream, long addr, long value, int flags) {
        return cuStreamWriteValue64(stream, addr, value, flags);
    }

    @Override
    public int cuStreamWaitValue32_v2(long stream, long addr, int value, int flags) {
        return cuStreamWaitValue32(stream, addr, value, flags);
    }

    @Override
    public int cuStreamWaitValue64_v2(long stream, long addr, long value, int flags) {
        return cuStreamWaitValue64(stream, addr, value, flags);
    }

    @Override
    public int cuStreamBatchMemOp_v2(long stream, int count, MemorySegment paramArray, int flags) {
        return cuStreamBatchMemOp(stream, count, paramArray, flags);
    }

    // ---- memory --------------------------------------------------------------------------------

    @Override
    public int cuMemAlloc(MemorySegment dptr, long bytesize) {
        return run("cuMemAlloc", () -> {
            MemorySegment out = sized(dptr, 8, "dptr");
            out.set(HostSegments.LONG, 0, allocations.allocate(bytesize));
        });
    }

    @Override
    public int cuMemAllocPitch(MemorySegment dptr, MemorySegment pPitch, long widthInBytes, long height, int elementSizeBytes) {
        return run("cuMemAllocPitch", () -> {
            MemorySegment out = sized(dptr, 8, "dptr");
            MemorySegment pitchOut = sized(pPitch, 8, "pPitch");
            long[] basePitch = allocations.allocatePitch(widthInBytes, height, elementSizeBytes);
            out.set(HostSegments.LONG, 0, basePitch[0]);
            pitchOut.set(HostSegments.LONG, 0, basePitch[1]);
        });
    }

    @Override
    public int cuMemFree(long dptr) {
        return run("cuMemFree", () -> allocations.free(dptr));
    }

    // ---- issue 24: IPC memory and event handles across processes (IpcMemory, IpcEvents) ----------------------

    @Override
    public int cuIpcGetMemHandle(MemorySegment pHandle, long dptr) {
        return run("cuIpcGetMemHandle", () -> ipcMemory.getHandle(pHandle, dptr));
    }

    @Override
    public int cuIpcOpenMemHandle(MemorySegment pdptr, MemorySegment handle, int flags) {
        return run("cuIpcOpenMemHandle", () -> {
            MemorySegment out = sized(pdptr, 8, "pdptr");
            out.set(HostSegments.LONG, 0, ipcMemory.open(handle, flags));
        });
    }

    @Override
    public int cuIpcCloseMemHandle(long dptr) {
        return run("cuIpcCloseMemHandle", () -> ipcMemory.close(dptr));
    }

    @Override
    public int cuIpcGetEventHandle(MemorySegment pHandle, long event) {
        return run("cuIpcGetEventHandle", () -> ipcEvents.getHandle(pHandle, event));
    }

    @Override
    public int cuIpcOpenEventHandle(MemorySegment phEvent, MemorySegment handle) {
        return run("cuIpcOpenEventHandle", () -> {
            MemorySegment out = sized(phEvent, 8, "phEvent");
            out.set(HostSegments.LONG, 0, ipcEvents.open(handle));
        });
    }

    @Override
    public int cuMemGetInfo(MemorySegment free, MemorySegment total) {
        return run("cuMemGetInfo", () -> {
            long[] info = allocations.info();
            putLong(free, info[0], "free");
            putLong(total, info[1], "total");
        });
    }

    @Override
    public int cuMemGetAddressRange(MemorySegment pbase, MemorySegment psize, long dptr) {
        return run("cuMemGetAddressRange", () -> {
            Allocation a = allocations.range(dptr);
            putLongIfPresent(pbase, a.base(), "pbase");
            putLongIfPresent(psize, a.size(), "psize");
        });
    }

    @Override
    public int cuPointerGetAttribute(MemorySegment data, int attribute, long ptr) {
        return run("cuPointerGetAttribute", () -> {
            Allocation a = allocations.pointer(ptr);
            switch (attribute) {
                case 1 -> putLong(data, a.owner().handle, "data");          // CONTEXT
                case 2 -> putInt(data, 2, "data");                           // MEMORY_TYPE: CU_MEMORYTYPE_DEVICE
                case 3 -> putLong(data, ptr, "data");                        // DEVICE_POINTER
                case 6 -> putInt(data, controls.syncMemops(ptr), "data");    // SYNC_MEMOPS
                case 7 -> putLong(data, a.id(), "data");                     // BUFFER_ID
                case 8 -> putInt(data, 0, "data");                           // IS_MANAGED
                case 9 -> putInt(data, a.owner().device, "data");            // DEVICE_ORDINAL
                case 11 -> putLong(data, a.base(), "data");                  // RANGE_START_ADDR
                case 12 -> putLong(data, a.size(), "data");                  // RANGE_SIZE
                case 13 -> putInt(data, 1, "data");                          // MAPPED
                default -> throw new CudaError(CUDA_ERROR_INVALID_VALUE,
                        "attribute=" + attribute + " is not answered by the emulated device");
            }
        });
    }

    // Synchronous copies and sets wait for the legacy stream's work, so they also report a fault of earlier work.

    @Override
    public int cuMemcpyHtoD(long dstDevice, MemorySegment srcHost, long byteCount) {
        return run("cuMemcpyHtoD", () -> {
            EmulatedContext c = contexts.active();
            if (byteCount != 0) {
                transfers.htod(c, dstDevice, srcHost, byteCount);
            }
            c.throwIfFaulted();
        });
    }

    @Override
    public int cuMemcpyDtoH(MemorySegment dstHost, long srcDevice, long byteCount) {
        return run("cuMemcpyDtoH", () -> {
            EmulatedContext c = contexts.active();
            if (byteCount != 0) {
                transfers.dtoh(c, dstHost, srcDevice, byteCount);
            }
            c.throwIfFaulted();
        });
    }

    @Override
    public int cuMemcpyDtoD(long dstDevice, long srcDevice, long byteCount) {
        return run("cuMemcpyDtoD", () -> {
            EmulatedContext c = contexts.active();
            if (byteCount != 0) {
                transfers.dtod(c, dstDevice, srcDevice, byteCount);
            }
            c.throwIfFaulted();
        });
    }

    @Override
    public int cuMemcpyHtoDAsync(long dstDevice, MemorySegment srcHost, long byteCount, long hStream) {
        return run("cuMemcpyHtoDAsync", () -> {
            EmulatedContext c = contexts.active();
            EmulatedStream s = streams.resolve(hStream, c);
            if (byteCount != 0) {
                transfers.htodAsync(c, s, dstDevice, srcHost, byteCount);
            }
        });
    }

    @Override
    public int cuMemcpyDtoHAsync(MemorySegment dstHost, long srcDevice, long byteCount, long hStream) {
        return run("cuMemcpyDtoHAsync", () -> {
            EmulatedContext c = contexts.active();
            EmulatedStream s = streams.resolve(hStream, c);
            if (byteCount != 0) {
                transfers.dtohAsync(c, s, dstHost, srcDevice, byteCount);
            }
        });
    }

    @Override
    public int cuMemcpyDtoDAsync(long dstDevice, long srcDevice, long byteCount, long hStream) {
        return run("cuMemcpyDtoDAsync", () -> {
            EmulatedContext c = contexts.active();
            EmulatedStream s = streams.resolve(hStream, c);
            if (byteCount != 0) {
                transfers.dtodAsync(c, s, dstDevice, srcDevice, byteCount);
            }
        });
    }

    @Override
    public int cuMemsetD8(long dstDevice, byte uc, long n) {
        return run("cuMemsetD8", () -> memset(dstDevice, uc, 1, n, SYNCHRONOUS));
    }

    @Override
    public int cuMemsetD16(long dstDevice, short us, long n) {
        return run("cuMemsetD16", () -> memset(dstDevice, us, 2, n, SYNCHRONOUS));
    }

    @Override
    public int cuMemsetD32(long dstDevice, int ui, long n) {
        return run("cuMemsetD32", () -> memset(dstDevice, ui, 4, n, SYNCHRONOUS));
    }

    @Override
    public int cuMemsetD8Async(long dstDevice, byte uc, long n, long hStream) {
        return run("cuMemsetD8Async", () -> memset(dstDevice, uc, 1, n, hStream));
    }

    @Override
    public int cuMemsetD16Async(long dstDevice, short us, long n, long hStream) {
        return run("cuMemsetD16Async", () -> memset(dstDevice, us, 2, n, hStream));
    }

    @Override
    public int cuMemsetD32Async(long dstDevice, int ui, long n, long hStream) {
        return run("cuMemsetD32Async", () -> memset(dstDevice, ui, 4, n, hStream));
    }

    /** Stands for "no stream": the synchronous form, on the legacy stream and waited for. */
    private static final long SYNCHRONOUS = -1;

    private void memset(long dst, long value, int width, long n, long hStream) {
        EmulatedContext c = contexts.active();
        boolean async = hStream != SYNCHRONOUS;
        EmulatedStream s = async ? streams.resolve(hStream, c) : c.legacyStream();
        if (n != 0) {
            transfers.set(c, s, async, dst, value, width, n);
        }
        if (!async) {
            c.throwIfFaulted();
        }
    }

    // ---- issue 11: stream capture and graphs ----
    // Capture and graph logic: Captures, EmulatedGraph, EmulatedGraphExec, Graphs.

    @Override
    public int cuStreamBeginCapture(long hStream, int mode) {
        return run("cuStreamBeginCapture", () -> graphs.beginCapture(hStream, mode));
    }

    @Override
    public int cuStreamBeginCapture_v1(long hStream) {
        return run("cuStreamBeginCapture", () -> graphs.beginCapture(hStream, Captures.MODE_GLOBAL));
    }

    @Override
    public int cuStreamEndCapture(long hStream, MemorySegment phGraph) {
        return run("cuStreamEndCapture", () -> {
            MemorySegment out = sized(phGraph, 8, "phGraph");
            out.set(HostSegments.LONG, 0, 0L);
            out.set(HostSegments.LONG, 0, graphs.endCapture(hStream));
        });
    }

    @Override
    public int cuStreamIsCapturing(long hStream, MemorySegment captureStatus) {
        return run("cuStreamIsCapturing", () -> putInt(captureStatus, (int) graphs.captureInfo(hStream)[0], "captureStatus"));
    }

    @Override
    public int cuStreamGetCaptureInfo_v1(long hStream, MemorySegment captureStatus, MemorySegment id) {
        return run("cuStreamGetCaptureInfo", () -> {
            long[] info = graphs.captureInfo(hStream);
            putInt(captureStatus, (int) info[0], "captureStatus_out");
            putLongIfPresent(id, info[1], "id_out");
        });
    }

    @Override
    public int cuStreamGetCaptureInfo_v2(long hStream, MemorySegment captureStatus, MemorySegment id, MemorySegment graph,
                                         MemorySegment dependencies, MemorySegment numDependencies) {
        return cuStreamGetCaptureInfo(hStream, captureStatus, id, graph, dependencies, MemorySegment.NULL, numDependencies);
    }

    /** The dependency array lives in memory of the calling thread's, valid until its next such call, as the driver's. */
    @Override
    public int cuStreamGetCaptureInfo(long hStream, MemorySegment captureStatus, MemorySegment id, MemorySegment graph,
                                      MemorySegment dependencies, MemorySegment edgeData, MemorySegment numDependencies) {
        return run("cuStreamGetCaptureInfo", () -> {
            long[] info = graphs.captureInfo(hStream);
            java.util.List<EmulatedGraph.Node> deps = info[0] == Captures.STATUS_ACTIVE ? graphs.captureDependencies(hStream)
                    : java.util.List.of();
            putIntIfPresent(captureStatus, (int) info[0], "captureStatus_out");
            putLongIfPresent(id, info[1], "id_out");
            putLongIfPresent(graph, info[2], "graph_out");
            MemorySegment array = MemorySegment.NULL;
            MemorySegment data = MemorySegment.NULL;
            if (!deps.isEmpty()) {
                Arena arena = Arena.ofAuto();   // the previous call's arrays may go now
                captureArrays.set(arena);
                array = arena.allocate(8L * deps.size(), 8);
                data = arena.allocate(8L * deps.size(), 8);
                for (int i = 0; i < deps.size(); i++) {
                    array.setAtIndex(ValueLayout.JAVA_LONG, i, deps.get(i).handle);
                }
            }
            putLongIfPresent(dependencies, array.address(), "dependencies_out");
            putLongIfPresent(edgeData, data.address(), "edgeData_out");
            putLongIfPresent(numDependencies, deps.size(), "numDependencies_out");
        });
    }

    /** Per thread: the arrays cuStreamGetCaptureInfo hands out (a fresh auto arena each call; the old one is collected). */
    private final ThreadLocal<Arena> captureArrays = new ThreadLocal<>();

    @Override
    public int cuStreamUpdateCaptureDependencies(long hStream, MemorySegment dependencies, MemorySegment dependencyData,
                                                 long numDependencies, int flags) {
        return run("cuStreamUpdateCaptureDependencies", () -> {
            checkDefaultEdges(dependencyData, numDependencies);
            graphs.updateCaptureDependencies(hStream, dependencies, numDependencies, flags);
        });
    }

    @Override
    public int cuStreamUpdateCaptureDependencies_v1(long hStream, MemorySegment dependencies, long numDependencies, int flags) {
        return run("cuStreamUpdateCaptureDependencies", () -> graphs.updateCaptureDependencies(hStream, dependencies,
                numDependencies, flags));
    }

    /** Edge data other than the default (all zero: full dependency, no ports) is not modelled. */
    private static void checkDefaultEdges(MemorySegment edgeData, long n) {
        if (isNull(edgeData) || n <= 0 || n > Graphs.MAX_NODES) {
            return;
        }
        MemorySegment e = sized(edgeData, 8 * n, "edgeData");
        for (long i = 0; i < n; i++) {
            if (e.get(ValueLayout.JAVA_LONG_UNALIGNED, 8 * i) != 0) {
                throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "edge data other than the default (programmatic edges, ports)");
            }
        }
    }

    @Override
    public int cuThreadExchangeStreamCaptureMode(MemorySegment mode) {
        return run("cuThreadExchangeStreamCaptureMode", () -> {
            MemorySegment m = sized(mode, 4, "mode");
            m.set(ValueLayout.JAVA_INT, 0, contexts.captures.exchangeMode(m.get(ValueLayout.JAVA_INT, 0)));
        });
    }

    @Override
    public int cuGraphCreate(MemorySegment phGraph, int flags) {
        return run("cuGraphCreate", () -> putLong(phGraph, graphs.create(flags), "phGraph"));
    }

    @Override
    public int cuGraphDestroy(long hGraph) {
        return run("cuGraphDestroy", () -> graphs.destroy(hGraph));
    }

    @Override
    public int cuGraphInstantiateWithFlags(MemorySegment phGraphExec, long hGraph, long flags) {
        return run("cuGraphInstantiateWithFlags", () -> putLong(phGraphExec, graphs.instantiate(hGraph, flags), "phGraphExec"));
    }

    @Override
    public int cuGraphLaunch(long hGraphExec, long hStream) {
        return run("cuGraphLaunch", () -> graphs.launch(hGraphExec, hStream));
    }

    @Override
    public int cuGraphUpload(long hGraphExec, long hStream) {
        return run("cuGraphUpload", () -> graphs.upload(hGraphExec, hStream));
    }

    @Override
    public int cuGraphExecDestroy(long hGraphExec) {
        return run("cuGraphExecDestroy", () -> graphs.execDestroy(hGraphExec));
    }

    @Override
    public int cuGraphAddEmptyNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies) {
        return run("cuGraphAddEmptyNode", () -> putLong(phGraphNode,
                graphs.addEmpty(hGraph, dependencies, numDependencies), "phGraphNode"));
    }

    @Override
    public int cuGraphAddKernelNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                    MemorySegment nodeParams) {
        return run("cuGraphAddKernelNode", () -> putLong(phGraphNode,
                graphs.addKernel(hGraph, dependencies, numDependencies, nodeParams), "phGraphNode"));
    }

    @Override
    public int cuGraphKernelNodeGetParams(long hNode, MemorySegment nodeParams) {
        return run("cuGraphKernelNodeGetParams", () -> graphs.kernelGetParams(hNode, nodeParams));
    }

    @Override
    public int cuGraphKernelNodeSetParams(long hNode, MemorySegment nodeParams) {
        return run("cuGraphKernelNodeSetParams", () -> graphs.kernelSetParams(hNode, nodeParams));
    }

    @Override
    public int cuGraphExecKernelNodeSetParams(long hGraphExec, long hNode, MemorySegment nodeParams) {
        return run("cuGraphExecKernelNodeSetParams", () -> graphs.execKernelSetParams(hGraphExec, hNode, nodeParams));
    }

    @Override
    public int cuGraphAddMemsetNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                    MemorySegment memsetParams, long ctx) {
        return run("cuGraphAddMemsetNode", () -> putLong(phGraphNode,
                graphs.addMemset(hGraph, dependencies, numDependencies, memsetParams, ctx), "phGraphNode"));
    }

    @Override
    public int cuGraphAddMemcpyNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                    MemorySegment copyParams, long ctx) {
        return run("cuGraphAddMemcpyNode", () -> putLong(phGraphNode,
                graphs.addMemcpy(hGraph, dependencies, numDependencies, copyParams, ctx), "phGraphNode"));
    }

    @Override
    public int cuGraphAddEventRecordNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies,
                                         long numDependencies, long event) {
        return run("cuGraphAddEventRecordNode", () -> putLong(phGraphNode,
                graphs.addEvent(hGraph, dependencies, numDependencies, event, true), "phGraphNode"));
    }

    @Override
    public int cuGraphAddEventWaitNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies,
                                       long numDependencies, long event) {
        return run("cuGraphAddEventWaitNode", () -> putLong(phGraphNode,
                graphs.addEvent(hGraph, dependencies, numDependencies, event, false), "phGraphNode"));
    }

    @Override
    public int cuGraphAddChildGraphNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies,
                                        long numDependencies, long childGraph) {
        return run("cuGraphAddChildGraphNode", () -> putLong(phGraphNode,
                graphs.addChild(hGraph, dependencies, numDependencies, childGraph), "phGraphNode"));
    }

    @Override
    public int cuGraphAddDependencies(long hGraph, MemorySegment from, MemorySegment to, MemorySegment edgeData,
                                      long numDependencies) {
        return run("cuGraphAddDependencies", () -> {
            checkDefaultEdges(edgeData, numDependencies);
            graphs.addDependencies(hGraph, from, to, numDependencies);
        });
    }

    @Override
    public int cuGraphAddDependencies_v1(long hGraph, MemorySegment from, MemorySegment to, long numDependencies) {
        return run("cuGraphAddDependencies", () -> graphs.addDependencies(hGraph, from, to, numDependencies));
    }

    @Override
    public int cuGraphRemoveDependencies(long hGraph, MemorySegment from, MemorySegment to, MemorySegment edgeData,
                                         long numDependencies) {
        return run("cuGraphRemoveDependencies", () -> {
            checkDefaultEdges(edgeData, numDependencies);
            graphs.removeDependencies(hGraph, from, to, numDependencies);
        });
    }

    @Override
    public int cuGraphRemoveDependencies_v1(long hGraph, MemorySegment from, MemorySegment to, long numDependencies) {
        return run("cuGraphRemoveDependencies", () -> graphs.removeDependencies(hGraph, from, to, numDependencies));
    }

    @Override
    public int cuGraphGetNodes(long hGraph, MemorySegment nodes, MemorySegment numNodes) {
        return run("cuGraphGetNodes", () -> Graphs.answer(Graphs.handlesOf(graphs.graph(hGraph, "hGraph").nodes()),
                nodes, numNodes));
    }

    @Override
    public int cuGraphGetRootNodes(long hGraph, MemorySegment rootNodes, MemorySegment numRootNodes) {
        return run("cuGraphGetRootNodes", () -> Graphs.answer(Graphs.handlesOf(graphs.graph(hGraph, "hGraph").roots()),
                rootNodes, numRootNodes));
    }

    @Override
    public int cuGraphGetEdges(long hGraph, MemorySegment from, MemorySegment to, MemorySegment edgeData, MemorySegment numEdges) {
        return run("cuGraphGetEdges", () -> Graphs.answerEdges(graphs.graph(hGraph, "hGraph").edges(), from, to, edgeData,
                numEdges));
    }

    @Override
    public int cuGraphGetEdges_v1(long hGraph, MemorySegment from, MemorySegment to, MemorySegment numEdges) {
        return cuGraphGetEdges(hGraph, from, to, MemorySegment.NULL, numEdges);
    }

    @Override
    public int cuGraphNodeGetDependencies(long hNode, MemorySegment dependencies, MemorySegment edgeData,
                                          MemorySegment numDependencies) {
        return run("cuGraphNodeGetDependencies", () -> {
            EmulatedGraph.Node n = graphs.node(hNode, "hNode");
            java.util.List<Long> deps = Graphs.handlesOf(n.graph.dependencies(n));
            Graphs.answer(deps, dependencies, numDependencies);
            zeroEdges(edgeData, dependencies, numDependencies);
        });
    }

    @Override
    public int cuGraphNodeGetDependencies_v1(long hNode, MemorySegment dependencies, MemorySegment numDependencies) {
        return cuGraphNodeGetDependencies(hNode, dependencies, MemorySegment.NULL, numDependencies);
    }

    @Override
    public int cuGraphNodeGetDependentNodes(long hNode, MemorySegment dependentNodes, MemorySegment edgeData,
                                            MemorySegment numDependentNodes) {
        return run("cuGraphNodeGetDependentNodes", () -> {
            EmulatedGraph.Node n = graphs.node(hNode, "hNode");
            Graphs.answer(Graphs.handlesOf(n.graph.dependents(n)), dependentNodes, numDependentNodes);
            zeroEdges(edgeData, dependentNodes, numDependentNodes);
        });
    }

    @Override
    public int cuGraphNodeGetDependentNodes_v1(long hNode, MemorySegment dependentNodes, MemorySegment numDependentNodes) {
        return cuGraphNodeGetDependentNodes(hNode, dependentNodes, MemorySegment.NULL, numDependentNodes);
    }

    /** Edge data of the answered edges: all default (zero). */
    private static void zeroEdges(MemorySegment edgeData, MemorySegment array, MemorySegment count) {
        if (!isNull(edgeData) && !isNull(array)) {
            sized(edgeData, 8 * sized(count, 8, "count").get(ValueLayout.JAVA_LONG, 0), "edgeData").fill((byte) 0);
        }
    }

    @Override
    public int cuGraphNodeGetType(long hNode, MemorySegment type) {
        return run("cuGraphNodeGetType", () -> putInt(type, graphs.nodeType(hNode), "type"));
    }

    @Override
    public int cuGraphClone(MemorySegment phGraphClone, long originalGraph) {
        return run("cuGraphClone", () -> putLong(phGraphClone, graphs.clone(originalGraph), "phGraphClone"));
    }

    @Override
    public int cuGraphDestroyNode(long hNode) {
        return run("cuGraphDestroyNode", () -> graphs.destroyNode(hNode));
    }

    @Override
    public int cuStreamBeginCaptureToGraph(long hStream, long hGraph, MemorySegment dependencies, MemorySegment dependencyData,
                                           long numDependencies, int mode) {
        return run("cuStreamBeginCaptureToGraph", () -> {
            checkDefaultEdges(dependencyData, numDependencies);
            graphs.beginCaptureToGraph(hStream, hGraph, dependencies, numDependencies, mode);
        });
    }

    @Override
    public int cuGraphEventRecordNodeGetEvent(long hNode, MemorySegment eventOut) {
        return run("cuGraphEventRecordNodeGetEvent", () -> putLong(eventOut,
                graphs.eventNode(hNode, EmulatedGraph.EVENT_RECORD).event.handle, "event_out"));
    }

    @Override
    public int cuGraphEventRecordNodeSetEvent(long hNode, long event) {
        return run("cuGraphEventRecordNodeSetEvent", () -> graphs.setEvent(hNode, EmulatedGraph.EVENT_RECORD, event));
    }

    @Override
    public int cuGraphEventWaitNodeGetEvent(long hNode, MemorySegment eventOut) {
        return run("cuGraphEventWaitNodeGetEvent", () -> putLong(eventOut,
                graphs.eventNode(hNode, EmulatedGraph.WAIT_EVENT).event.handle, "event_out"));
    }

    @Override
    public int cuGraphEventWaitNodeSetEvent(long hNode, long event) {
        return run("cuGraphEventWaitNodeSetEvent", () -> graphs.setEvent(hNode, EmulatedGraph.WAIT_EVENT, event));
    }

    @Override
    public int cuGraphExecEventRecordNodeSetEvent(long hGraphExec, long hNode, long event) {
        return run("cuGraphExecEventRecordNodeSetEvent",
                () -> graphs.execSetEvent(hGraphExec, hNode, EmulatedGraph.EVENT_RECORD, event));
    }

    @Override
    public int cuGraphExecEventWaitNodeSetEvent(long hGraphExec, long hNode, long event) {
        return run("cuGraphExecEventWaitNodeSetEvent",
                () -> graphs.execSetEvent(hGraphExec, hNode, EmulatedGraph.WAIT_EVENT, event));
    }

    @Override
    public int cuGraphNodeFindInClone(MemorySegment phNode, long hOriginalNode, long hClonedGraph) {
        return run("cuGraphNodeFindInClone", () -> putLong(phNode, graphs.findInClone(hOriginalNode, hClonedGraph), "phNode"));
    }

    @Override
    public int cuGraphNodeSetEnabled(long hGraphExec, long hNode, int isEnabled) {
        return run("cuGraphNodeSetEnabled", () -> graphs.enabledStep(hGraphExec, hNode).enabled = isEnabled != 0);
    }

    @Override
    public int cuGraphNodeGetEnabled(long hGraphExec, long hNode, MemorySegment isEnabled) {
        return run("cuGraphNodeGetEnabled", () -> putInt(isEnabled, graphs.enabledStep(hGraphExec, hNode).enabled ? 1 : 0,
                "isEnabled"));
    }

    @Override
    public int cuGraphExecGetFlags(long hGraphExec, MemorySegment flags) {
        return run("cuGraphExecGetFlags", () -> putLong(flags, graphs.exec(hGraphExec).flags, "flags"));
    }

    @Override
    public int cuGraphAddBatchMemOpNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                        MemorySegment nodeParams) {
        return run("cuGraphAddBatchMemOpNode", () -> putLong(phGraphNode,
                graphs.addBatchMemOp(hGraph, dependencies, numDependencies, nodeParams), "phGraphNode"));
    }

    @Override
    public int cuGraphBatchMemOpNodeGetParams(long hNode, MemorySegment nodeParams_out) {
        return run("cuGraphBatchMemOpNodeGetParams", () -> graphs.batchMemOpGetParams(hNode, nodeParams_out));
    }

    @Override
    public int cuGraphBatchMemOpNodeSetParams(long hNode, MemorySegment nodeParams) {
        return run("cuGraphBatchMemOpNodeSetParams", () -> graphs.batchMemOpSetParams(hNode, nodeParams));
    }

    @Override
    public int cuGraphExecBatchMemOpNodeSetParams(long hGraphExec, long hNode, MemorySegment nodeParams) {
        return run("cuGraphExecBatchMemOpNodeSetParams", () -> graphs.execBatchMemOpSetParams(hGraphExec, hNode, nodeParams));
    }

    @Override
    public int cuGraphMemsetNodeGetParams(long hNode, MemorySegment nodeParams) {
        return run("cuGraphMemsetNodeGetParams", () -> graphs.memsetGetParams(hNode, nodeParams));
    }

    /** CUDA_GRAPH_INSTANTIATE_PARAMS {flags, hUploadStream, hErrNode_out, result_out}: flags as cuGraphInstantiateWithFlags takes them. */
    @Override
    public int cuGraphInstantiateWithParams(MemorySegment phGraphExec, long hGraph, MemorySegment instantiateParams) {
        return run("cuGraphInstantiateWithParams", () -> {
            MemorySegment p = HostSegments.sized(instantiateParams, 32, "instantiateParams");
            long flags = p.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            p.set(ValueLayout.JAVA_LONG_UNALIGNED, 16, 0);
            p.set(ValueLayout.JAVA_INT_UNALIGNED, 24, 1);   // CUDA_GRAPH_INSTANTIATE_ERROR until it succeeds
            long exec = graphs.instantiate(hGraph, flags & ~2L);
            if ((flags & 2L) != 0) {
                graphs.upload(exec, p.get(ValueLayout.JAVA_LONG_UNALIGNED, 8));
            }
            p.set(ValueLayout.JAVA_INT_UNALIGNED, 24, 0);
            putLong(phGraphExec, exec, "phGraphExec");
        });
    }

    @Override
    public int cuGraphAddMemAllocNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                      MemorySegment nodeParams) {
        return run("cuGraphAddMemAllocNode", () -> putLong(phGraphNode,
                graphs.addMemAlloc(hGraph, dependencies, numDependencies, nodeParams, deviceCount), "phGraphNode"));
    }

    @Override
    public int cuGraphMemAllocNodeGetParams(long hNode, MemorySegment params) {
        return run("cuGraphMemAllocNodeGetParams", () -> graphs.memAllocGetParams(hNode, params));
    }

    @Override
    public int cuGraphAddMemFreeNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                     long dptr) {
        return run("cuGraphAddMemFreeNode", () -> putLong(phGraphNode,
                graphs.addMemFree(hGraph, dependencies, numDependencies, dptr), "phGraphNode"));
    }

    @Override
    public int cuGraphMemFreeNodeGetParams(long hNode, MemorySegment dptr) {
        return run("cuGraphMemFreeNodeGetParams", () -> putLong(dptr, graphs.memFreeGetParams(hNode), "dptr_out"));
    }

    /** Nothing to trim: graph memory of the emulated device is host memory held from node to context. */
    @Override
    public int cuDeviceGraphMemTrim(int device) {
        return run("cuDeviceGraphMemTrim", () -> contexts.checkDevice(device));
    }

    @Override
    public int cuDeviceGetGraphMemAttribute(int device, int attr, MemorySegment value) {
        return run("cuDeviceGetGraphMemAttribute", () -> {
            contexts.checkDevice(device);
            putLong(value, graphs.graphMemAttribute(attr), "value");
        });
    }

    @Override
    public int cuDeviceSetGraphMemAttribute(int device, int attr, MemorySegment value) {
        return run("cuDeviceSetGraphMemAttribute", () -> {
            contexts.checkDevice(device);
            graphs.resetGraphMemHigh(attr, sized(value, 8, "value").get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
        });
    }

    /** The generic node calls, through this device's per-type calls (GraphNodeParams). */
    @Override
    public int cuGraphAddNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, MemorySegment dependencyData,
                              long numDependencies, MemorySegment nodeParams) {
        return io.gpusockets.protocol.structs.GraphNodeParams.add(this, (out, graph, deps, n, p) -> run("cuGraphAddNode",
                () -> putLong(out, graphs.addConditional(graph, deps, n, p), "phGraphNode")), phGraphNode, hGraph, dependencies,
                dependencyData, numDependencies, nodeParams);
    }

    @Override
    public int cuGraphConditionalHandleCreate(MemorySegment pHandle_out, long hGraph, long ctx, int defaultLaunchValue, int flags) {
        return run("cuGraphConditionalHandleCreate", () -> putLong(pHandle_out,
                graphs.conditionalHandleCreate(hGraph, ctx, defaultLaunchValue, flags), "pHandle_out"));
    }

    @Override
    public int cuGraphAddNode_v1(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                 MemorySegment nodeParams) {
        return cuGraphAddNode(phGraphNode, hGraph, dependencies, MemorySegment.NULL, numDependencies, nodeParams);
    }

    @Override
    public int cuGraphNodeSetParams(long hNode, MemorySegment nodeParams) {
        return io.gpusockets.protocol.structs.GraphNodeParams.set(this, hNode, nodeParams);
    }

    @Override
    public int cuGraphExecNodeSetParams(long hGraphExec, long hNode, MemorySegment nodeParams) {
        return io.gpusockets.protocol.structs.GraphNodeParams.execSet(this, hGraphExec, hNode, nodeParams);
    }

    @Override
    public int cuGraphChildGraphNodeGetGraph(long hNode, MemorySegment phGraph) {
        return run("cuGraphChildGraphNodeGetGraph", () -> putLong(phGraph, graphs.childGraph(hNode), "phGraph"));
    }

    @Override
    public int cuGraphExecChildGraphNodeSetParams(long hGraphExec, long hNode, long childGraph) {
        return run("cuGraphExecChildGraphNodeSetParams", () -> graphs.execChildSetParams(hGraphExec, hNode, childGraph));
    }

    @Override
    public int cuGraphMemsetNodeSetParams(long hNode, MemorySegment nodeParams) {
        return run("cuGraphMemsetNodeSetParams", () -> graphs.memsetSetParams(hNode, nodeParams));
    }

    @Override
    public int cuGraphExecMemsetNodeSetParams(long hGraphExec, long hNode, MemorySegment memsetParams, long ctx) {
        return run("cuGraphExecMemsetNodeSetParams", () -> graphs.execMemsetSetParams(hGraphExec, hNode, memsetParams, ctx));
    }

    @Override
    public int cuGraphMemcpyNodeGetParams(long hNode, MemorySegment nodeParams) {
        return run("cuGraphMemcpyNodeGetParams", () -> graphs.memcpyGetParams(hNode, nodeParams));
    }

    @Override
    public int cuGraphMemcpyNodeSetParams(long hNode, MemorySegment nodeParams) {
        return run("cuGraphMemcpyNodeSetParams", () -> graphs.memcpySetParams(hNode, nodeParams));
    }

    @Override
    public int cuGraphExecMemcpyNodeSetParams(long hGraphExec, long hNode, MemorySegment copyParams, long ctx) {
        return run("cuGraphExecMemcpyNodeSetParams", () -> graphs.execMemcpySetParams(hGraphExec, hNode, copyParams, ctx));
    }

    @Override
    public int cuGraphAddHostNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                  MemorySegment nodeParams) {
        return run("cuGraphAddHostNode", () -> putLong(phGraphNode,
                graphs.addHost(hGraph, dependencies, numDependencies, nodeParams), "phGraphNode"));
    }

    @Override
    public int cuGraphHostNodeGetParams(long hNode, MemorySegment nodeParams) {
        return run("cuGraphHostNodeGetParams", () -> graphs.hostGetParams(hNode, nodeParams));
    }

    @Override
    public int cuGraphHostNodeSetParams(long hNode, MemorySegment nodeParams) {
        return run("cuGraphHostNodeSetParams", () -> graphs.hostSetParams(hNode, nodeParams));
    }

    @Override
    public int cuGraphExecHostNodeSetParams(long hGraphExec, long hNode, MemorySegment nodeParams) {
        return run("cuGraphExecHostNodeSetParams", () -> graphs.execHostSetParams(hGraphExec, hNode, nodeParams));
    }

    @Override
    public int cuGraphExecUpdate(long hGraphExec, long hGraph, MemorySegment resultInfo) {
        return run("cuGraphExecUpdate", () -> graphs.execUpdate(hGraphExec, hGraph, resultInfo));
    }

    // ---- streams and events --------------------------------------------------------------------

    @Override
    public int cuStreamCreate(MemorySegment phStream, int flags) {
        return run("cuStreamCreate", () -> {
            MemorySegment out = sized(phStream, 8, "phStream");
            out.set(HostSegments.LONG, 0, streams.create(flags, 0));
        });
    }

    @Override
    public int cuStreamCreateWithPriority(MemorySegment phStream, int flags, int priority) {
        return run("cuStreamCreateWithPriority", () -> {
            MemorySegment out = sized(phStream, 8, "phStream");
            out.set(HostSegments.LONG, 0, streams.create(flags, priority));
        });
    }

    @Override
    public int cuStreamDestroy(long hStream) {
        return run("cuStreamDestroy", () -> streams.destroy(hStream));
    }

    @Override
    public int cuStreamSynchronize(long hStream) {
        return call("cuStreamSynchronize", () -> streams.synchronize(hStream));
    }

    @Override
    public int cuStreamQuery(long hStream) {
        return call("cuStreamQuery", () -> streams.query(hStream));
    }

    @Override
    public int cuStreamWaitEvent(long hStream, long hEvent, int flags) {
        return run("cuStreamWaitEvent", () -> streams.waitEvent(hStream, hEvent, flags));
    }

    @Override
    public int cuEventCreate(MemorySegment phEvent, int flags) {
        return run("cuEventCreate", () -> {
            MemorySegment out = sized(phEvent, 8, "phEvent");
            out.set(HostSegments.LONG, 0, streams.createEvent(flags));
        });
    }

    @Override
    public int cuEventRecord(long hEvent, long hStream) {
        return run("cuEventRecord", () -> streams.record(hEvent, hStream));
    }

    @Override
    public int cuEventSynchronize(long hEvent) {
        return call("cuEventSynchronize", () -> streams.synchronizeEvent(hEvent));
    }

    @Override
    public int cuEventQuery(long hEvent) {
        return call("cuEventQuery", () -> streams.queryEvent(hEvent));
    }

    @Override
    public int cuEventElapsedTime(MemorySegment pMilliseconds, long hStart, long hEnd) {
        return call("cuEventElapsedTime", () -> {
            MemorySegment out = sized(pMilliseconds, 4, "pMilliseconds");
            Float ms = streams.elapsed(hStart, hEnd);
            if (ms == null) {
                return CUDA_ERROR_NOT_READY;
            }
            out.set(HostSegments.FLOAT, 0, ms);
            return CUDA_SUCCESS;
        });
    }

    @Override
    public int cuEventDestroy(long hEvent) {
        return run("cuEventDestroy", () -> streams.destroyEvent(hEvent));
    }

    @Override
    public int cuStreamGetFlags(long hStream, MemorySegment flags) {
        return run("cuStreamGetFlags", () -> {
            MemorySegment out = sized(flags, 4, "flags");
            out.set(HostSegments.INT, 0, streamQueries.flags(hStream));
        });
    }

    @Override
    public int cuStreamGetPriority(long hStream, MemorySegment priority) {
        return run("cuStreamGetPriority", () -> {
            MemorySegment out = sized(priority, 4, "priority");
            out.set(HostSegments.INT, 0, streamQueries.priority(hStream));
        });
    }

    // ---- stream and kernel-node attributes (LaunchAttributeValues) ----------------------------------

    private final LaunchAttributeValues launchAttributes = new LaunchAttributeValues();

    /** A stream to set or read attributes of: a created one, or the current context's special stream. */
    private EmulatedStream attributedStream(long hStream) {
        return hStream >= 0 && hStream <= Streams.PER_THREAD ? streams.resolve(hStream, contexts.current())
                : contexts.lookup(hStream, EmulatedStream.class, "hStream");
    }

    @Override
    public int cuStreamSetAttribute(long hStream, int attr, MemorySegment value) {
        return run("cuStreamSetAttribute", () -> launchAttributes.setOnStream(attributedStream(hStream), attr, value));
    }

    @Override
    public int cuStreamGetAttribute(long hStream, int attr, MemorySegment valueOut) {
        return run("cuStreamGetAttribute", () -> launchAttributes.getOfStream(attributedStream(hStream), attr, valueOut));
    }

    @Override
    public int cuStreamCopyAttributes(long dst, long src) {
        return run("cuStreamCopyAttributes", () -> launchAttributes.copy(attributedStream(dst), attributedStream(src)));
    }

    @Override
    public int cuGraphKernelNodeSetAttribute(long hNode, int attr, MemorySegment value) {
        return run("cuGraphKernelNodeSetAttribute", () -> launchAttributes.setOnNode(graphs.node(hNode, "hNode"), attr, value));
    }

    @Override
    public int cuGraphKernelNodeGetAttribute(long hNode, int attr, MemorySegment valueOut) {
        return run("cuGraphKernelNodeGetAttribute", () -> launchAttributes.getOfNode(graphs.node(hNode, "hNode"), attr, valueOut));
    }

    @Override
    public int cuGraphKernelNodeCopyAttributes(long dst, long src) {
        return run("cuGraphKernelNodeCopyAttributes",
                () -> launchAttributes.copy(graphs.node(dst, "dst"), graphs.node(src, "src")));
    }

    @Override
    public int cuEventRecordWithFlags(long hEvent, long hStream, int flags) {
        return run("cuEventRecordWithFlags", () -> streamQueries.recordWithFlags(hEvent, hStream, flags));
    }

    @Override
    public int cuStreamAddCallback(long hStream, MemorySegment callback, MemorySegment userData, int flags) {
        return run("cuStreamAddCallback", () -> callbacks.addCallback(hStream, callback, userData, flags));
    }

    @Override
    public int cuLaunchHostFunc(long hStream, MemorySegment fn, MemorySegment userData) {
        return run("cuLaunchHostFunc", () -> callbacks.launchHostFunc(hStream, fn, userData));
    }

    // ---- unified and pitched copies, arrays, texture objects (PitchedTransfers, CudaArrays, Textures)

    @Override
    public int cuMemcpy(long dst, long src, long byteCount) {
        return run("cuMemcpy", () -> pitched.unified(dst, src, byteCount, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuMemcpyAsync(long dst, long src, long byteCount, long hStream) {
        return run("cuMemcpyAsync", () -> pitched.unified(dst, src, byteCount, hStream));
    }

    @Override
    public int cuMemcpy2D(MemorySegment pCopy) {
        return run("cuMemcpy2D", () -> pitched.copy(pCopy, false, PitchedTransfers.SYNCHRONOUS));
    }

    /** The emulated device has no pitch alignment rules: the same copy as cuMemcpy2D. */
    @Override
    public int cuMemcpy2DUnaligned(MemorySegment pCopy) {
        return run("cuMemcpy2DUnaligned", () -> pitched.copy(pCopy, false, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuMemcpy2DAsync(MemorySegment pCopy, long hStream) {
        return run("cuMemcpy2DAsync", () -> pitched.copy(pCopy, false, hStream));
    }

    @Override
    public int cuMemcpy3D(MemorySegment pCopy) {
        return run("cuMemcpy3D", () -> pitched.copy(pCopy, true, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuMemcpy3DAsync(MemorySegment pCopy, long hStream) {
        return run("cuMemcpy3DAsync", () -> pitched.copy(pCopy, true, hStream));
    }

    @Override
    public int cuMemcpy3DPeer(MemorySegment pCopy) {
        return run("cuMemcpy3DPeer", () -> pitched.peer(pCopy, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuMemcpy3DPeerAsync(MemorySegment pCopy, long hStream) {
        return run("cuMemcpy3DPeerAsync", () -> pitched.peer(pCopy, hStream));
    }

    @Override
    public int cuMemsetD2D8(long dstDevice, long dstPitch, byte uc, long width, long height) {
        return run("cuMemsetD2D8", () -> pitched.set2D(dstDevice, dstPitch, uc, 1, width, height, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuMemsetD2D16(long dstDevice, long dstPitch, short us, long width, long height) {
        return run("cuMemsetD2D16", () -> pitched.set2D(dstDevice, dstPitch, us, 2, width, height, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuMemsetD2D32(long dstDevice, long dstPitch, int ui, long width, long height) {
        return run("cuMemsetD2D32", () -> pitched.set2D(dstDevice, dstPitch, ui, 4, width, height, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuMemsetD2D8Async(long dstDevice, long dstPitch, byte uc, long width, long height, long hStream) {
        return run("cuMemsetD2D8Async", () -> pitched.set2D(dstDevice, dstPitch, uc, 1, width, height, hStream));
    }

    @Override
    public int cuMemsetD2D16Async(long dstDevice, long dstPitch, short us, long width, long height, long hStream) {
        return run("cuMemsetD2D16Async", () -> pitched.set2D(dstDevice, dstPitch, us, 2, width, height, hStream));
    }

    @Override
    public int cuMemsetD2D32Async(long dstDevice, long dstPitch, int ui, long width, long height, long hStream) {
        return run("cuMemsetD2D32Async", () -> pitched.set2D(dstDevice, dstPitch, ui, 4, width, height, hStream));
    }

    @Override
    public int cuArrayCreate(MemorySegment pHandle, MemorySegment pAllocateArray) {
        return run("cuArrayCreate", () -> {
            MemorySegment out = sized(pHandle, 8, "pHandle");
            out.set(HostSegments.LONG, 0, arrays.create(pAllocateArray));
        });
    }

    @Override
    public int cuArrayGetDescriptor(MemorySegment pArrayDescriptor, long hArray) {
        return run("cuArrayGetDescriptor", () -> arrays.descriptor(hArray)
                .write(sized(pArrayDescriptor, io.gpusockets.protocol.structs.ArrayDescriptor.SIZE, "pArrayDescriptor")));
    }

    @Override
    public int cuArrayDestroy(long hArray) {
        return run("cuArrayDestroy", () -> arrays.destroy(hArray));
    }

    @Override
    public int cuArray3DCreate(MemorySegment pHandle, MemorySegment pAllocateArray) {
        return run("cuArray3DCreate", () -> {
            MemorySegment out = sized(pHandle, 8, "pHandle");
            out.set(HostSegments.LONG, 0, arrays.create3D(pAllocateArray));
        });
    }

    @Override
    public int cuArray3DGetDescriptor(MemorySegment pArrayDescriptor, long hArray) {
        return run("cuArray3DGetDescriptor", () -> arrays.descriptor3D(hArray)
                .write(sized(pArrayDescriptor, io.gpusockets.protocol.structs.Array3DDescriptor.SIZE, "pArrayDescriptor")));
    }

    // ---- mipmapped arrays, planes, sparse and deferred-mapping queries --------------------------------

    @Override
    public int cuMipmappedArrayCreate(MemorySegment pHandle, MemorySegment pMipmappedArrayDesc, int numMipmapLevels) {
        return run("cuMipmappedArrayCreate", () -> {
            MemorySegment out = sized(pHandle, 8, "pHandle");
            out.set(HostSegments.LONG, 0, mipmaps.create(pMipmappedArrayDesc, numMipmapLevels));
        });
    }

    @Override
    public int cuMipmappedArrayGetLevel(MemorySegment pLevelArray, long hMipmappedArray, int level) {
        return run("cuMipmappedArrayGetLevel", () -> {
            MemorySegment out = sized(pLevelArray, 8, "pLevelArray");
            out.set(HostSegments.LONG, 0, mipmaps.level(hMipmappedArray, level));
        });
    }

    @Override
    public int cuMipmappedArrayDestroy(long hMipmappedArray) {
        return run("cuMipmappedArrayDestroy", () -> mipmaps.destroy(hMipmappedArray));
    }

    @Override
    public int cuArrayGetPlane(MemorySegment pPlaneArray, long hArray, int planeIdx) {
        return run("cuArrayGetPlane", () -> mipmaps.refuseArrayQuery(hArray,
                "hArray is not multi-planar (the emulated device makes no NV12 or other planar arrays)"));
    }

    @Override
    public int cuArrayGetMemoryRequirements(MemorySegment memoryRequirements, long array, int device) {
        return run("cuArrayGetMemoryRequirements", () -> mipmaps.refuseArrayQuery(array,
                "only arrays made with CUDA_ARRAY3D_DEFERRED_MAPPING have memory requirements (not emulated)"));
    }

    @Override
    public int cuMipmappedArrayGetMemoryRequirements(MemorySegment memoryRequirements, long mipmap, int device) {
        return run("cuMipmappedArrayGetMemoryRequirements", () -> mipmaps.refuseMipmapQuery(mipmap,
                "only arrays made with CUDA_ARRAY3D_DEFERRED_MAPPING have memory requirements (not emulated)"));
    }

    @Override
    public int cuArrayGetSparseProperties(MemorySegment sparseProperties, long array) {
        return run("cuArrayGetSparseProperties", () -> mipmaps.refuseArrayQuery(array,
                "only sparse arrays (CUDA_ARRAY3D_SPARSE, not emulated) have sparse properties"));
    }

    @Override
    public int cuMipmappedArrayGetSparseProperties(MemorySegment sparseProperties, long mipmap) {
        return run("cuMipmappedArrayGetSparseProperties", () -> mipmaps.refuseMipmapQuery(mipmap,
                "only sparse arrays (CUDA_ARRAY3D_SPARSE, not emulated) have sparse properties"));
    }

    /**
     * The emulated device is a device without sparse arrays (CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED reads
     * 0, sparse and deferred-mapping arrays are refused at creation, tile-pool allocations at cuMemCreate), so no
     * array it has can be mapped: CUDA_ERROR_NOT_SUPPORTED, as at their creation.
     */
    @Override
    public int cuMemMapArrayAsync(MemorySegment mapInfoList, int count, long hStream) {
        return run("cuMemMapArrayAsync", () -> {
            contexts.active();
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "the emulated device has no sparse or deferred-mapping arrays "
                    + "(CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED is 0): there is nothing to map");
        });
    }

    /**
     * The emulated device has no decompression engine, as a GPU without one (an H200): its
     * CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK reads 0, memory for it (CU_MEM_CREATE_USAGE_HW_DECOMPRESS)
     * is refused, and a batch is CUDA_ERROR_NOT_SUPPORTED, an error of no operation in particular.
     */
    @Override
    public int cuMemBatchDecompressAsync(MemorySegment paramsArray, long count, int flags, MemorySegment errorIndex, long stream) {
        return run("cuMemBatchDecompressAsync", () -> {
            contexts.active();
            putLongIfPresent(errorIndex, -1L, "errorIndex");
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "the emulated device has no decompression engine "
                    + "(CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK is 0)");
        });
    }

    // ---- array copies: byte offsets into 1D arrays, as one-row 2D copies ---------------------------

    @Override
    public int cuMemcpyHtoA(long dstArray, long dstOffset, MemorySegment srcHost, long byteCount) {
        return run("cuMemcpyHtoA", () -> pitched.arrayRow(Memcpy3D.hostSide(srcHost.address()),
                Memcpy3D.arraySide(dstArray, dstOffset), byteCount, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuMemcpyHtoAAsync(long dstArray, long dstOffset, MemorySegment srcHost, long byteCount, long hStream) {
        return run("cuMemcpyHtoAAsync", () -> pitched.arrayRow(Memcpy3D.hostSide(srcHost.address()),
                Memcpy3D.arraySide(dstArray, dstOffset), byteCount, hStream));
    }

    @Override
    public int cuMemcpyAtoH(MemorySegment dstHost, long srcArray, long srcOffset, long byteCount) {
        return run("cuMemcpyAtoH", () -> pitched.arrayRow(Memcpy3D.arraySide(srcArray, srcOffset),
                Memcpy3D.hostSide(dstHost.address()), byteCount, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuMemcpyAtoHAsync(MemorySegment dstHost, long srcArray, long srcOffset, long byteCount, long hStream) {
        return run("cuMemcpyAtoHAsync", () -> pitched.arrayRow(Memcpy3D.arraySide(srcArray, srcOffset),
                Memcpy3D.hostSide(dstHost.address()), byteCount, hStream));
    }

    @Override
    public int cuMemcpyDtoA(long dstArray, long dstOffset, long srcDevice, long byteCount) {
        return run("cuMemcpyDtoA", () -> pitched.arrayRow(Memcpy3D.deviceSide(srcDevice),
                Memcpy3D.arraySide(dstArray, dstOffset), byteCount, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuMemcpyAtoD(long dstDevice, long srcArray, long srcOffset, long byteCount) {
        return run("cuMemcpyAtoD", () -> pitched.arrayRow(Memcpy3D.arraySide(srcArray, srcOffset),
                Memcpy3D.deviceSide(dstDevice), byteCount, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuMemcpyAtoA(long dstArray, long dstOffset, long srcArray, long srcOffset, long byteCount) {
        return run("cuMemcpyAtoA", () -> pitched.arrayRow(Memcpy3D.arraySide(srcArray, srcOffset),
                Memcpy3D.arraySide(dstArray, dstOffset), byteCount, PitchedTransfers.SYNCHRONOUS));
    }

    @Override
    public int cuTexObjectCreate(MemorySegment pTexObject, MemorySegment pResDesc, MemorySegment pTexDesc,
                                 MemorySegment pResViewDesc) {
        return run("cuTexObjectCreate", () -> {
            MemorySegment out = sized(pTexObject, 8, "pTexObject");
            out.set(HostSegments.LONG, 0, textures.create(pResDesc, pTexDesc, pResViewDesc));
        });
    }

    @Override
    public int cuTexObjectDestroy(long texObject) {
        return run("cuTexObjectDestroy", () -> textures.destroy(texObject));
    }

    @Override
    public int cuTexObjectGetResourceDesc(MemorySegment pResDesc, long texObject) {
        return run("cuTexObjectGetResourceDesc", () -> textures.resourceDesc(pResDesc, texObject));
    }

    @Override
    public int cuTexObjectGetTextureDesc(MemorySegment pTexDesc, long texObject) {
        return run("cuTexObjectGetTextureDesc", () -> textures.textureDesc(pTexDesc, texObject));
    }

    @Override
    public int cuTexObjectGetResourceViewDesc(MemorySegment pResViewDesc, long texObject) {
        return run("cuTexObjectGetResourceViewDesc", () -> textures.resourceViewDesc(pResViewDesc, texObject));
    }

    @Override
    public int cuSurfObjectCreate(MemorySegment pSurfObject, MemorySegment pResDesc) {
        return run("cuSurfObjectCreate", () -> {
            MemorySegment out = sized(pSurfObject, 8, "pSurfObject");
            out.set(HostSegments.LONG, 0, textures.createSurface(pResDesc));
        });
    }

    @Override
    public int cuSurfObjectDestroy(long surfObject) {
        return run("cuSurfObjectDestroy", () -> textures.destroySurface(surfObject));
    }

    @Override
    public int cuSurfObjectGetResourceDesc(MemorySegment pResDesc, long surfObject) {
        return run("cuSurfObjectGetResourceDesc", () -> textures.surfaceResourceDesc(pResDesc, surfObject));
    }

    // ---- tensor maps: this device's own 128-byte layout (TensorMapLayout), checked as the driver documents --------

    @Override
    public int cuTensorMapEncodeTiled(MemorySegment tensorMap, int tensorDataType, int tensorRank, long globalAddress,
                                      MemorySegment globalDim, MemorySegment globalStrides, MemorySegment boxDim,
                                      MemorySegment elementStrides, int interleave, int swizzle, int l2Promotion, int oobFill) {
        return run("cuTensorMapEncodeTiled", () -> {
            contexts.requireInit();
            TensorMaps.encodeTiled(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, boxDim,
                    elementStrides, interleave, swizzle, l2Promotion, oobFill);
        });
    }

    @Override
    public int cuTensorMapEncodeIm2col(MemorySegment tensorMap, int tensorDataType, int tensorRank, long globalAddress,
                                       MemorySegment globalDim, MemorySegment globalStrides, MemorySegment pixelBoxLowerCorner,
                                       MemorySegment pixelBoxUpperCorner, int channelsPerPixel, int pixelsPerColumn,
                                       MemorySegment elementStrides, int interleave, int swizzle, int l2Promotion, int oobFill) {
        return run("cuTensorMapEncodeIm2col", () -> {
            contexts.requireInit();
            TensorMaps.encodeIm2col(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
                    pixelBoxLowerCorner, pixelBoxUpperCorner, channelsPerPixel, pixelsPerColumn, elementStrides, interleave,
                    swizzle, l2Promotion, oobFill);
        });
    }

    @Override
    public int cuTensorMapEncodeIm2colWide(MemorySegment tensorMap, int tensorDataType, int tensorRank, long globalAddress,
                                           MemorySegment globalDim, MemorySegment globalStrides, int pixelBoxLowerCornerWidth,
                                           int pixelBoxUpperCornerWidth, int channelsPerPixel, int pixelsPerColumn,
                                           MemorySegment elementStrides, int interleave, int mode, int swizzle, int l2Promotion,
                                           int oobFill) {
        return run("cuTensorMapEncodeIm2colWide", () -> {
            contexts.requireInit();
            TensorMaps.encodeIm2colWide(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
                    pixelBoxLowerCornerWidth, pixelBoxUpperCornerWidth, channelsPerPixel, pixelsPerColumn, elementStrides,
                    interleave, mode, swizzle, l2Promotion, oobFill);
        });
    }

    @Override
    public int cuTensorMapReplaceAddress(MemorySegment tensorMap, long globalAddress) {
        return run("cuTensorMapReplaceAddress", () -> {
            contexts.requireInit();
            TensorMaps.replaceAddress(tensorMap, globalAddress);
        });
    }
}
