package io.gpusockets.emulated.ptx;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Dynamic parallelism (kernels launched from device code, {@code nvcc -rdc=true} with cudadevrt): the extern functions
 * nvcc calls for {@code kernel<<<...>>>} in device code, {@code cudaGetParameterBufferV2(func, grid, block, shared)}
 * and {@code cudaLaunchDeviceV2(buffer, stream)}, for one grid. {@code func} is the address a kernel took of another
 * entry of its module with {@code mov} ({@link PtxKernel#functionAddress}); the parameter buffer is a block of the
 * context's device heap (freed when the child starts), which the parent fills with ordinary stores.
 *
 * <p>The children run once the parent grid's blocks have all finished, in the order their launches were made (a
 * block's launches into its NULL stream are in order, as CUDA requires; launches of different blocks have no order
 * between them), then the tail launches ({@code cudaStreamTailLaunch}), each child with its own children after it, so
 * the launch from the host completes once all its descendants have: what CUDA's model gives a grid, whose children may
 * run any time after their launch and before the parent grid completes (CUDA 12's device runtime has no
 * device-side synchronisation that could wait for a child). Limits as on a GPU: a nesting depth of 24
 * (cudaErrorLaunchMaxDepthExceeded), 2048 pending launches per grid (cudaErrorLaunchPendingCountExceeded), launch
 * configurations checked at the launch (cudaErrorInvalidConfiguration). Device-created streams are not supported
 * (cudaErrorNotSupported from a launch into one).
 */
public final class DeviceLaunches {
    /** The entries of the launching kernel's module, by the address a kernel takes of one. */
    public interface Runtime {
        /** The entry at {@code function}, or null; throws the launch's error when that entry cannot run here. */
        Child child(long function);
    }

    /** A kernel a grid may launch: its parsed program, parameter bytes and most threads per block. */
    public record Child(String name, PtxKernel kernel, long paramBytes, int maxThreadsPerBlock) {
    }

    static final int MAX_DEPTH = 24;
    static final int MAX_PENDING = 2048;
    static final long STREAM_TAIL = 3;
    static final long STREAM_FIRE_AND_FORGET = 4;
    static final int SUCCESS = 0;
    static final int INVALID_VALUE = 1;
    static final int INVALID_CONFIGURATION = 9;
    static final int INVALID_DEVICE_FUNCTION = 98;
    static final int MAX_DEPTH_EXCEEDED = 65;
    static final int PENDING_COUNT_EXCEEDED = 69;
    static final int OUT_OF_RESOURCES = 701;
    static final int NOT_SUPPORTED = 801;
    /** The shared memory a device-side launch may ask for (no opt-in from device code): 48 KiB. */
    static final long MAX_SHARED = 48 << 10;

    private record Pending(Child child, long buffer, long gx, long gy, long gz, int bx, int by, int bz, long shared) {
    }

    private final Runtime runtime;
    private final GlobalMemory memory;
    private final int depth;
    private final Map<Long, Pending> prepared = new ConcurrentHashMap<>();
    private final List<Pending> launched = new ArrayList<>();
    private final List<Pending> tail = new ArrayList<>();

    DeviceLaunches(Runtime runtime, GlobalMemory memory, int depth) {
        this.runtime = runtime;
        this.memory = memory;
        this.depth = depth;
    }

    /**
     * cudaGetParameterBufferV2: a parameter buffer for a launch of {@code function}, or minus the cudaError_t why none
     * can be had (the call then returns NULL and the error becomes the thread's last one).
     */
    long parameterBuffer(long function, long[] grid, int[] block, long shared) {
        Child child = runtime == null ? null : runtime.child(function);
        if (child == null) {
            return -INVALID_DEVICE_FUNCTION;
        }
        if (prepared.size() >= MAX_PENDING) {
            return -PENDING_COUNT_EXCEEDED;
        }
        long buffer = memory.malloc(Math.max(16, child.paramBytes()));
        if (buffer == 0) {
            return -OUT_OF_RESOURCES;
        }
        prepared.put(buffer, new Pending(child, buffer, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared));
        return buffer;
    }

    /** cudaLaunchDeviceV2: queues the launch the buffer was made for; a cudaError_t. */
    int launch(long buffer, long stream) {
        Pending p = prepared.get(buffer);
        if (p == null) {
            return INVALID_VALUE;
        }
        if (stream != 0 && stream != STREAM_TAIL && stream != STREAM_FIRE_AND_FORGET) {
            return NOT_SUPPORTED;
        }
        int error = check(p);
        if (error != SUCCESS) {
            return error;
        }
        synchronized (this) {
            if (launched.size() + tail.size() >= MAX_PENDING) {
                return PENDING_COUNT_EXCEEDED;
            }
            prepared.remove(buffer);
            (stream == STREAM_TAIL ? tail : launched).add(p);
        }
        return SUCCESS;
    }

    private int check(Pending p) {
        long threads = (long) p.bx() * p.by() * p.bz();
        if (p.gx() < 1 || p.gy() < 1 || p.gz() < 1 || p.gx() > Integer.MAX_VALUE || p.gy() > 65535 || p.gz() > 65535
                || p.bx() < 1 || p.by() < 1 || p.bz() < 1 || p.bx() > 1024 || p.by() > 1024 || p.bz() > 64
                || threads > p.child().maxThreadsPerBlock() || p.shared() < 0 || p.shared() > MAX_SHARED) {
            return INVALID_CONFIGURATION;
        }
        if (depth + 1 >= MAX_DEPTH) {
            return MAX_DEPTH_EXCEEDED;
        }
        if (p.child().kernel().resourceProblem((int) threads, p.shared(), MAX_SHARED) != null) {
            return OUT_OF_RESOURCES;
        }
        return SUCCESS;
    }

    /** Runs the launched children, then the tail launches, each with its own descendants; returns their thread-instructions. */
    long runChildren() {
        long executed = 0;
        List<Pending> all = new ArrayList<>(launched);
        all.addAll(tail);
        launched.clear();
        tail.clear();
        for (Pending p : all) {
            MemorySegment params = MemorySegment.ofArray(new byte[(int) p.child().paramBytes()]);
            if (p.child().paramBytes() > 0) {
                GlobalMemory.Region r = memory.region(p.buffer(), p.child().paramBytes());
                MemorySegment.copy(r.host(), p.buffer() - r.base(), params, 0, p.child().paramBytes());
            }
            memory.free(p.buffer());
            PtxKernel.Launch launch = new PtxKernel.Launch(p.gx(), p.gy(), p.gz(), p.bx(), p.by(), p.bz(), p.shared(), params, memory,
                    runtime);
            executed += p.child().kernel().run(launch, depth + 1);
        }
        for (Pending p : prepared.values()) {   // buffers never launched go back to the heap
            memory.free(p.buffer());
        }
        prepared.clear();
        return executed;
    }
}
