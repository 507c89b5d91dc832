package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.LimitFootprint;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The stack a launch makes the driver grow is the tenant's (H28): a kernel whose {@code .local} memory per thread
 * is more than the context's stack reservation grows it for every resident thread (132 × 2048 on the emulated
 * device, as on an H100), so a backend in each isolation mode, on the emulated device (which reports a kernel's
 * {@code .local} bytes as CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES), serves a tenant of 1 GiB whose figures are read
 * from its own cuMemGetInfo (the tenant's view: free = limit - charged). A 2 KiB kernel is charged 1 KiB a
 * thread once, an 8 KiB one (7 KiB a thread, past the quota) is refused, a stack cuCtxSetLimit recomputes the
 * charge from its size, a graph's kernel node is charged as it enters the graph (not again at the graph's launch),
 * and the session's end gives everything back.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class LaunchStackChargeTest {
    private static final long LIMIT = 1L << 30;
    /** 1 KiB more stack for each thread an H100 (and the emulated device) holds at once. */
    private static final long KIB_ALL_THREADS = 1024L * 132 * 2048;

    /** Kernels of 512 B, 2 KiB and 8 KiB of {@code .local} memory a thread, each writing and reading it. */
    private static String kernels() {
        StringBuilder ptx = new StringBuilder(".version 8.0\n.target sm_90\n.address_size 64\n");
        for (String[] k : new String[][] {{"small", "512"}, {"two", "2048"}, {"eight", "8192"}}) {
            ptx.append(".visible .entry ").append(k[0]).append("()\n{\n    .local .align 4 .b8 buf[").append(k[1]).append("];\n")
                    .append("    .reg .u64 %rd<2>;\n    .reg .u32 %r<3>;\n    mov.u64 %rd1, buf;\n    mov.u32 %r1, 7;\n")
                    .append("    st.local.u32 [%rd1], %r1;\n    ld.local.u32 %r2, [%rd1];\n    ret;\n}\n");
        }
        return ptx.toString();
    }

    @ParameterizedTest(name = "isolation {0}")
    @ValueSource(strings = {"context", "process"})
    void aLaunchThatGrowsTheStackIsChargedRefusedPastTheQuotaAndRecomputedByAStackLimit(String isolation) throws Exception {
        Path dir = Files.createTempDirectory("gpusockets-launch-stack");
        Path conf = dir.resolve("tenants.conf");
        Files.writeString(conf, "[tenant dana]\nmatch = uid:" + Files.getAttribute(dir, "unix:uid") + "\nmemory = 1GiB\n");
        try (BackendProcess b = BackendProcess.start("--isolation", isolation, "--tenants", conf.toString())) {
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(b.unix())) {
                Cuda cu = new Cuda(d);
                Cuda.ok(d.cuInit(0), "cuInit");
                Cuda.ok(d.cuCtxCreate(cu.cell(), MemorySegment.NULL, 0, 0), "cuCtxCreate (the session's first: not charged)");
                MemorySegment mod = cu.cell();
                Cuda.ok(d.cuModuleLoadData(mod, cu.arena.allocateFrom(kernels())), "cuModuleLoadData");
                long small = function(cu, mod, "small"), two = function(cu, mod, "two"), eight = function(cu, mod, "eight");
                MemorySegment stack = cu.cell();
                Cuda.ok(d.cuCtxGetLimit(stack, LimitFootprint.STACK_SIZE), "cuCtxGetLimit");
                assertEquals(1024, stack.get(JAVA_LONG, 0), "the context's default stack");
                long base = charged(cu);   // the module

                Cuda.ok(launch(d, small), "a kernel of 512 B");
                assertEquals(base, charged(cu), "within the default stack: nothing");
                Cuda.ok(launch(d, two), "a kernel of 2 KiB");
                assertEquals(base + KIB_ALL_THREADS, charged(cu), "the stack grown to 2 KiB for every resident thread");
                Cuda.ok(launch(d, two), "a kernel of 2 KiB again");
                Cuda.ok(launch(d, small), "a kernel of 512 B again");
                assertEquals(base + KIB_ALL_THREADS, charged(cu), "grown once: later launches charge nothing more");
                assertEquals(CuResult.name(CuResult.CUDA_ERROR_OUT_OF_MEMORY), CuResult.name(launch(d, eight)),
                        "7 KiB more for every resident thread is past the tenant's 1 GiB");
                assertEquals(base + KIB_ALL_THREADS, charged(cu), "the refused launch charged nothing");

                Cuda.ok(d.cuCtxSetLimit(LimitFootprint.STACK_SIZE, 4096), "cuCtxSetLimit(STACK, 4 KiB)");
                assertEquals(base + 3 * KIB_ALL_THREADS, charged(cu), "the set recomputes the charge from its size");
                Cuda.ok(d.cuCtxSetLimit(LimitFootprint.STACK_SIZE, 1024), "cuCtxSetLimit(STACK, 1 KiB)");
                assertEquals(base, charged(cu), "set back: the driver's reservation is made anew, the growth is gone");
                Cuda.ok(launch(d, two), "a kernel of 2 KiB after the set");
                assertEquals(base + KIB_ALL_THREADS, charged(cu), "which grows it again");

                MemorySegment g = cu.cell(), node = cu.cell(), exec = cu.cell();
                Cuda.ok(d.cuGraphCreate(g, 0), "cuGraphCreate");
                assertEquals(CuResult.name(CuResult.CUDA_ERROR_OUT_OF_MEMORY),
                        CuResult.name(d.cuGraphAddKernelNode(node, g.get(JAVA_LONG, 0), MemorySegment.NULL, 0, kernelNode(cu, eight))),
                        "a kernel node of the 8 KiB kernel: charged when it enters the graph, past the quota");
                assertEquals(base + KIB_ALL_THREADS, charged(cu));
                Cuda.ok(d.cuCtxSetLimit(LimitFootprint.STACK_SIZE, 1024), "cuCtxSetLimit(STACK, 1 KiB)");
                assertEquals(base, charged(cu));
                Cuda.ok(d.cuGraphAddKernelNode(node, g.get(JAVA_LONG, 0), MemorySegment.NULL, 0, kernelNode(cu, two)),
                        "a kernel node of the 2 KiB kernel");
                assertEquals(base + KIB_ALL_THREADS, charged(cu), "charged as the kernel enters the graph");
                Cuda.ok(d.cuGraphInstantiateWithFlags(exec, g.get(JAVA_LONG, 0), 0), "cuGraphInstantiateWithFlags");
                Cuda.ok(d.cuGraphLaunch(exec.get(JAVA_LONG, 0), 0), "cuGraphLaunch");
                Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                assertEquals(base + KIB_ALL_THREADS, charged(cu), "and not again at the graph's launch");
            }
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(b.unix())) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (charged(cu) != 0 && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                assertEquals(0, charged(cu), "the ended session's stack charge went back");
            }
        } finally {
            Files.deleteIfExists(conf);
            Files.deleteIfExists(dir);
        }
    }

    private static long function(Cuda cu, MemorySegment mod, String name) {
        MemorySegment f = cu.cell();
        Cuda.ok(cu.d.cuModuleGetFunction(f, mod.get(JAVA_LONG, 0), cu.arena.allocateFrom(name)), "cuModuleGetFunction " + name);
        return f.get(JAVA_LONG, 0);
    }

    /** A CUDA_KERNEL_NODE_PARAMS (72 bytes) of one thread of {@code f}, which takes no parameters. */
    private static MemorySegment kernelNode(Cuda cu, long f) {
        MemorySegment p = cu.cell(72).fill((byte) 0);
        p.set(JAVA_LONG, 0, f);
        for (int i = 0; i < 6; i++) {
            p.set(java.lang.foreign.ValueLayout.JAVA_INT, 8 + 4L * i, 1);
        }
        return p;
    }

    /** One thread of {@code f}, then a sync: the launch's result, or the sync's (an asynchronous launch's error comes there). */
    private static int launch(RemoteCudaDriver d, long f) {
        int r = d.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, MemorySegment.NULL, MemorySegment.NULL);
        return r != CuResult.CUDA_SUCCESS ? r : d.cuCtxSynchronize();
    }

    /** What the tenant is charged now, from its cuMemGetInfo: the quota less what it shows free. */
    private static long charged(Cuda cu) {
        MemorySegment free = cu.cell(), total = cu.cell();
        Cuda.ok(cu.d.cuMemGetInfo(free, total), "cuMemGetInfo");
        assertEquals(LIMIT, total.get(JAVA_LONG, 0), "the tenant's view");
        return LIMIT - free.get(JAVA_LONG, 0);
    }
}
