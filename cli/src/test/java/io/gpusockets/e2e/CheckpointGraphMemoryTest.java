package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Graph memory nodes with address-stable memory (issue 22, item 2): {@code cuGraphAddMemAllocNode} places its
 * memory in the session's address window, the nodes answer as the driver's (type, parameters, graph memory
 * attributes, the restrictions on graphs with memory nodes), a graph alloc → memset → kernel → copy out → free runs
 * at every launch, a checkpoint with stop in backend A restored in backend B brings the nodes back under their ids
 * and the memory at its addresses with its contents (an allocation the graph does not free, written by the program),
 * relaunches give the same output, and the memory goes back (cuMemGetInfo, the attributes) when the graphs and their
 * exec graphs are destroyed.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class CheckpointGraphMemoryTest extends CheckpointTestSupport {
    private static final int N = 128;
    private static final long BIG = 1L << 20;
    private static final int TYPE_MEM_ALLOC = 10, TYPE_MEM_FREE = 11;
    private static final int USED_MEM_CURRENT = 0, RESERVED_MEM_CURRENT = 2;

    private static boolean inWindows(long p) {
        return io.gpusockets.protocol.api.ManagedRange.inGuest(p); // the windows lie in the guest's managed range
    }

    /** CUDA_MEM_ALLOC_NODE_PARAMS for {@code bytes} on device 0, read-write for device 0. */
    private static MemorySegment allocParams(Cuda cu, long bytes) {
        MemorySegment p = cu.cell(120).fill((byte) 0);
        p.set(JAVA_INT, 0, 1);          // pinned
        p.set(JAVA_INT, 8, 1);          // on a device: 0
        MemorySegment desc = cu.cell(12).fill((byte) 0);
        desc.set(JAVA_INT, 0, 1);
        desc.set(JAVA_INT, 8, 3);       // read-write
        p.set(JAVA_LONG, 88, desc.address());
        p.set(JAVA_LONG, 96, 1);
        p.set(JAVA_LONG, 104, bytes);
        return p;
    }

    private static MemorySegment copyDtoD(Cuda cu, long src, long dst, long bytes) {
        MemorySegment c = cu.cell(200).fill((byte) 0);
        c.set(JAVA_INT, 32, 2);
        c.set(JAVA_LONG, 48, src);
        c.set(JAVA_INT, 88 + 32, 2);
        c.set(JAVA_LONG, 88 + 48, dst);
        c.set(JAVA_LONG, 176, bytes);
        c.set(JAVA_LONG, 184, 1);
        c.set(JAVA_LONG, 192, 1);
        return c;
    }

    /** The program: x (ones), out, and two graphs with memory nodes. */
    private static final class Program {
        final RemoteCudaDriver d;
        final Cuda cu;
        long saxpy, stream, x, out;
        /** g1: alloc a → memset a = 1 → a += 2x → out = a → free a. g2: alloc b (1 MiB) → memset b = 1 → b += 2x, not freed. */
        long g1, g2, e1, e2, alloc1, free1, alloc2, a, b;
        /** cuMemGetInfo's free bytes before the graphs were made. */
        long beforeGraphs;
        byte[] pattern = new byte[4096];

        Program(RemoteCudaDriver d) {
            this.d = d;
            this.cu = new Cuda(d);
        }

        long out(java.util.function.Function<MemorySegment, Integer> call, String what) {
            MemorySegment c = cu.cell();
            Cuda.ok(call.apply(c), what);
            return c.get(JAVA_LONG, 0);
        }

        MemorySegment deps(long... nodes) {
            MemorySegment m = cu.cell(8L * nodes.length);
            for (int i = 0; i < nodes.length; i++) {
                m.setAtIndex(JAVA_LONG, i, nodes[i]);
            }
            return m;
        }

        MemorySegment kernelParams(long y) {
            MemorySegment p = cu.cell(72).fill((byte) 0);
            p.set(JAVA_LONG, 0, saxpy);
            p.set(JAVA_INT, 8, 1);
            p.set(JAVA_INT, 12, 1);
            p.set(JAVA_INT, 16, 1);
            p.set(JAVA_INT, 20, N);
            p.set(JAVA_INT, 24, 1);
            p.set(JAVA_INT, 28, 1);
            p.set(JAVA_LONG, 40, cu.params(cu.f32(2f), cu.u64(x), cu.u64(y), cu.u32(N)).address());
            return p;
        }

        long memsetOnes(long graph, long dep, long dst) {
            MemorySegment set = cu.cell(40).fill((byte) 0);
            set.set(JAVA_LONG, 0, dst);
            set.set(JAVA_INT, 16, Float.floatToIntBits(1f));
            set.set(JAVA_INT, 20, 4);
            set.set(JAVA_LONG, 24, N);
            set.set(JAVA_LONG, 32, 1);
            return out(o -> d.cuGraphAddMemsetNode(o, graph, deps(dep), 1, set, 0), "memset node");
        }

        void build() throws Exception {
            Cuda.ok(d.cuInit(0), "cuInit");
            cu.primaryContext();
            saxpy = cu.function(cu.loadKernels(), "gpus_saxpy");
            stream = cu.stream();
            x = cu.alloc(4 * N);
            out = cu.alloc(4 * N);
            Cuda.ok(d.cuMemsetD32(x, Float.floatToIntBits(1f), N), "fill x");
            beforeGraphs = freeBytes(cu);
            g1 = out(o -> d.cuGraphCreate(o, 0), "cuGraphCreate g1");
            MemorySegment p1 = allocParams(cu, 4 * N);
            alloc1 = out(o -> d.cuGraphAddMemAllocNode(o, g1, MemorySegment.NULL, 0, p1), "allocation node");
            a = p1.get(JAVA_LONG, 112);
            long set = memsetOnes(g1, alloc1, a);
            long k = out(o -> d.cuGraphAddKernelNode(o, g1, deps(set), 1, kernelParams(a)), "kernel node");
            long copy = out(o -> d.cuGraphAddMemcpyNode(o, g1, deps(k), 1, copyDtoD(cu, a, out, 4 * N), 0), "copy out");
            free1 = out(o -> d.cuGraphAddMemFreeNode(o, g1, deps(copy), 1, a), "free node");
            e1 = out(o -> d.cuGraphInstantiateWithFlags(o, g1, 0), "instantiate g1");
            g2 = out(o -> d.cuGraphCreate(o, 0), "cuGraphCreate g2");
            MemorySegment p2 = allocParams(cu, BIG);
            alloc2 = out(o -> d.cuGraphAddMemAllocNode(o, g2, MemorySegment.NULL, 0, p2), "allocation node, not freed");
            b = p2.get(JAVA_LONG, 112);
            long set2 = memsetOnes(g2, alloc2, b);
            out(o -> d.cuGraphAddKernelNode(o, g2, deps(set2), 1, kernelParams(b)), "kernel node on b");
            e2 = out(o -> d.cuGraphInstantiateWithFlags(o, g2, 0), "instantiate g2");
            new Random(11).nextBytes(pattern);
        }

        float[] outs() {
            MemorySegment s = cu.arena.allocate(4L * N);
            Cuda.ok(d.cuMemcpyDtoH(s, out, 4L * N), "read out");
            return s.toArray(JAVA_FLOAT);
        }

        void launchG1() {
            Cuda.ok(d.cuMemsetD32(out, Float.floatToIntBits(-7f), N), "scribble out");
            Cuda.ok(d.cuGraphLaunch(e1, stream), "launch g1");
            Cuda.ok(d.cuStreamSynchronize(stream), "sync");
            assertArrayEquals(filled(3f), outs(), "1 + 2 * 1, copied out of graph memory");
        }

        long graphMem(int attr) {
            MemorySegment v = cu.cell();
            Cuda.ok(d.cuDeviceGetGraphMemAttribute(0, attr, v), "cuDeviceGetGraphMemAttribute");
            return v.get(JAVA_LONG, 0);
        }

        /** What the nodes answer: as the driver's memory nodes. */
        void checkNodes() {
            MemorySegment type = cu.cell();
            Cuda.ok(d.cuGraphNodeGetType(alloc1, type), "type");
            assertEquals(TYPE_MEM_ALLOC, type.get(JAVA_INT, 0), "CU_GRAPH_NODE_TYPE_MEM_ALLOC");
            Cuda.ok(d.cuGraphNodeGetType(free1, type), "type");
            assertEquals(TYPE_MEM_FREE, type.get(JAVA_INT, 0), "CU_GRAPH_NODE_TYPE_MEM_FREE");
            MemorySegment back = cu.cell(120).fill((byte) 0);
            Cuda.ok(d.cuGraphMemAllocNodeGetParams(alloc2, back), "cuGraphMemAllocNodeGetParams");
            assertEquals(BIG, back.get(JAVA_LONG, 104), "bytesize");
            assertEquals(b, back.get(JAVA_LONG, 112), "dptr");
            assertEquals(1, back.get(JAVA_LONG, 96), "one access descriptor");
            assertEquals(1, back.get(JAVA_INT, 8), "on a device");
            MemorySegment desc = MemorySegment.ofAddress(back.get(JAVA_LONG, 88)).reinterpret(12);
            assertEquals(3, desc.get(JAVA_INT, 8), "read-write");
            MemorySegment freed = cu.cell();
            Cuda.ok(d.cuGraphMemFreeNodeGetParams(free1, freed), "cuGraphMemFreeNodeGetParams");
            assertEquals(a, freed.get(JAVA_LONG, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphMemFreeNodeGetParams(alloc1, freed), "not a free node");
            assertEquals(4 * N + BIG, graphMem(USED_MEM_CURRENT), "graph memory in use");
            assertEquals(4 * N + BIG, graphMem(RESERVED_MEM_CURRENT), "graph memory reserved");
            MemorySegment c = cu.cell();
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuGraphClone(c, g1), "a graph with memory nodes is not cloned");
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuGraphInstantiateWithFlags(c, g1, 0),
                    "only one exec graph of a graph with memory nodes at a time");
            long parent = out(o -> d.cuGraphCreate(o, 0), "a parent graph");
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuGraphAddChildGraphNode(c, parent, MemorySegment.NULL, 0, g2),
                    "a graph with memory nodes is no child graph");
            Cuda.ok(d.cuGraphDestroy(parent), "destroy the parent");
        }
    }

    private static float[] filled(float v) {
        float[] f = new float[N];
        Arrays.fill(f, v);
        return f;
    }

    private static long freeBytes(Cuda cu) {
        MemorySegment free = cu.cell(), total = cu.cell();
        Cuda.ok(cu.d.cuMemGetInfo(free, total), "cuMemGetInfo");
        return free.get(JAVA_LONG, 0);
    }

    @Test
    void graphMemoryNodesLieInTheWindowAndComeBackFromACheckpoint() throws Exception {
        Path sock = dir.resolve("g.sock");
        Path image = dir.resolve("gmem.ckpt");
        EmulatedDevice devA = new EmulatedDevice(), devB = new EmulatedDevice();
        BackendServer serverA = server(devA);
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Program p = new Program(d);
            p.build();
            long before = p.beforeGraphs;
            assertTrue(inWindows(p.a) && inWindows(p.b), String.format("graph memory at 0x%x and 0x%x", p.a, p.b));
            assertNotEquals(p.a, p.b);
            assertTrue(freeBytes(p.cu) <= before - BIG, "graph memory is taken when the node is added");
            p.checkNodes();
            for (int i = 0; i < 3; i++) {
                p.launchG1();
            }
            Cuda.ok(d.cuGraphLaunch(p.e2, p.stream), "launch g2");
            Cuda.ok(d.cuStreamSynchronize(p.stream), "sync");
            MemorySegment firstB = p.cu.arena.allocate(4L * N);
            Cuda.ok(d.cuMemcpyDtoH(firstB, p.b, 4L * N), "read b after its graph ran");
            assertArrayEquals(filled(3f), firstB.toArray(JAVA_FLOAT), "g2's allocation, not freed, is the program's after the launch");
            p.cu.put(p.b + BIG - p.pattern.length, p.pattern);
            long charged = freeBytes(p.cu);

            long id = serverA.sessions().get(0).id();
            serverA.checkpoint(id, image, true, null);
            serverA.close();
            devA.close();
            Files.deleteIfExists(sock);
            try (BackendServer serverB = server(devB)) {
                assertEquals(id, serverB.restore(image, null));
                serverB.listen(TransportUri.parse("unix://" + sock));
                assertArrayEquals(p.pattern, p.cu.get(p.b + BIG - p.pattern.length, p.pattern.length),
                        "graph memory's contents at their address after the restore");
                MemorySegment again = p.cu.arena.allocate(4L * N);
                Cuda.ok(d.cuMemcpyDtoH(again, p.b, 4L * N), "read b on B");
                assertArrayEquals(filled(3f), again.toArray(JAVA_FLOAT));
                assertEquals(charged, freeBytes(p.cu), "the same memory taken");
                p.checkNodes(); // the same ids answer the same
                for (int i = 0; i < 2; i++) {
                    p.launchG1();
                }
                Cuda.ok(d.cuGraphExecDestroy(p.e1), "destroy g1's exec graph");
                assertEquals(4 * N + BIG, p.graphMem(USED_MEM_CURRENT), "g1 still holds its memory");
                Cuda.ok(d.cuGraphDestroy(p.g1), "destroy g1");
                assertEquals(BIG, p.graphMem(USED_MEM_CURRENT), "g1's memory went back with it");
                Cuda.ok(d.cuGraphDestroy(p.g2), "destroy g2: its exec graph still holds its memory");
                assertEquals(BIG, p.graphMem(USED_MEM_CURRENT));
                Cuda.ok(d.cuGraphExecDestroy(p.e2), "destroy g2's exec graph");
                assertEquals(0, p.graphMem(USED_MEM_CURRENT), "every graph memory allocation went back");
                assertEquals(before, freeBytes(p.cu), "cuMemGetInfo as before the graphs");
                assertEquals(1, serverB.resumesAccepted());
            }
        } finally {
            devB.close();
        }
    }

    @Test
    void graphMemoryOfADestroyedGraphWhoseExecLivesIsRefusedByName() throws Exception {
        EmulatedDevice dev = new EmulatedDevice();
        try (BackendServer server = server(dev)) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("r.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Program p = new Program(d);
                p.build();
                Cuda.ok(d.cuGraphDestroy(p.g2), "destroy g2, keeping its exec graph");
                Cuda.ok(d.cuGraphLaunch(p.e2, p.stream), "the exec graph runs on");
                Cuda.ok(d.cuStreamSynchronize(p.stream), "sync");
                long id = server.sessions().get(0).id();
                var e = org.junit.jupiter.api.Assertions.assertThrows(io.gpusockets.backend.session.CheckpointRefused.class,
                        () -> server.checkpoint(id, dir.resolve("no.ckpt"), false, null));
                assertTrue(e.getMessage().contains("graph memory allocation(s) of a destroyed graph whose exec graph lives"),
                        e.getMessage());
                p.launchG1(); // the session runs on
            }
        } finally {
            dev.close();
        }
    }
}
