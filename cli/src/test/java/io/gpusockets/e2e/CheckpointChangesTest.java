package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointRefused;
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
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Checkpoint and restore keep changes made after an object was made (issue 22): graph kernel node parameters set
 * before and after instantiations (each exec graph keeps the parameters its graph had when it was instantiated), an
 * exec graph's own node parameters, an exec graph updated from its graph (a failed update changes nothing and is not
 * replayed), a node disabled in an exec graph, and context flags: checkpointed with stop in backend A (emulated device,
 * address-stable memory, isolation mode context), restored in backend B on a new device, each exec graph computes what
 * it computed before. A change no record keeps (a pointer attribute) is still refused by name.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CheckpointChangesTest extends CheckpointTestSupport {
    private static final int N = 64;
    /** CU_CTX_SYNC_MEMOPS. */
    private static final int CTX_SYNC_MEMOPS = 0x80;

    /** saxpy over x = 1 and y: a graph's kernel node computes y = a * 1 + y; {@link #run} clears y first. */
    private static final class Rig {
        final RemoteCudaDriver d;
        final Cuda cu;
        final long saxpy, x, y, stream;

        Rig(RemoteCudaDriver d) throws Exception {
            this.d = d;
            this.cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            cu.primaryContext();
            saxpy = cu.function(cu.loadKernels(), "gpus_saxpy");
            x = cu.alloc(4 * N);
            y = cu.alloc(4 * N);
            stream = cu.stream();
            Cuda.ok(d.cuMemsetD32(x, Float.floatToIntBits(1f), N), "fill x");
        }

        MemorySegment kernelParams(float a) {
            MemorySegment p = cu.cell(72);
            p.fill((byte) 0);
            p.set(JAVA_LONG, 0, saxpy);
            p.set(JAVA_INT, 8, 1);
            p.set(JAVA_INT, 12, 1);
            p.set(JAVA_INT, 16, 1);
            p.set(JAVA_INT, 20, N);
            p.set(JAVA_INT, 24, 1);
            p.set(JAVA_INT, 28, 1);
            p.set(JAVA_LONG, 40, cu.params(cu.f32(a), cu.u64(x), cu.u64(y), cu.u32(N)).address());
            return p;
        }

        long out(java.util.function.Function<MemorySegment, Integer> call, String what) {
            MemorySegment c = cu.cell();
            Cuda.ok(call.apply(c), what);
            return c.get(JAVA_LONG, 0);
        }

        /** y cleared, {@code exec} launched, y read back (every element the same: the first is returned). */
        float run(long exec) {
            Cuda.ok(d.cuMemsetD32(y, 0, N), "clear y");
            Cuda.ok(d.cuGraphLaunch(exec, stream), "cuGraphLaunch");
            Cuda.ok(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
            MemorySegment s = cu.arena.allocate(4L * N);
            Cuda.ok(d.cuMemcpyDtoH(s, y, 4L * N), "read y");
            float[] ys = s.toArray(JAVA_FLOAT);
            float[] same = new float[N];
            Arrays.fill(same, ys[0]);
            assertArrayEquals(same, ys, "every element alike");
            return ys[0];
        }
    }

    @Test
    void graphParameterChangesExecUpdatesAndContextFlagsComeBackAfterARestore() throws Exception {
        Path sock = dir.resolve("b.sock");
        Path image = dir.resolve("session.ckpt");
        EmulatedDevice a = new EmulatedDevice();
        BackendServer serverA = server(a);
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        EmulatedDevice b = new EmulatedDevice();
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Rig r = new Rig(d);
            long g = r.out(o -> d.cuGraphCreate(o, 0), "cuGraphCreate");
            long k = r.out(o -> d.cuGraphAddKernelNode(o, g, MemorySegment.NULL, 0, r.kernelParams(2f)), "kernel node");
            long exec1 = r.out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "instantiate 1"); // a = 2
            Cuda.ok(d.cuGraphKernelNodeSetParams(k, r.kernelParams(5f)), "node params 5");
            long exec2 = r.out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "instantiate 2"); // a = 5
            // supersedes the 5, which exec2 read: a restore must still instantiate exec2 from a graph saying 5
            Cuda.ok(d.cuGraphKernelNodeSetParams(k, r.kernelParams(7f)), "node params 7");
            Cuda.ok(d.cuGraphExecKernelNodeSetParams(exec1, k, r.kernelParams(9f)), "exec 1 params 9");
            Cuda.ok(d.cuGraphExecKernelNodeSetParams(exec1, k, r.kernelParams(11f)), "exec 1 params 11");
            long exec3 = r.out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "instantiate 3"); // a = 7
            Cuda.ok(d.cuGraphKernelNodeSetParams(k, r.kernelParams(20f)), "node params 20");
            MemorySegment info = r.cu.cell(24);
            Cuda.ok(d.cuGraphExecUpdate(exec3, g, info), "update exec 3 from the graph"); // a = 20
            long empty = r.out(o -> d.cuGraphCreate(o, 0), "an empty graph");
            assertEquals(CuResult.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, d.cuGraphExecUpdate(exec1, empty, info),
                    "an update from another shape fails, changing nothing");
            Cuda.ok(d.cuGraphKernelNodeSetParams(k, r.kernelParams(30f)), "node params 30");
            long exec4 = r.out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "instantiate 4"); // a = 30
            Cuda.ok(d.cuGraphNodeSetEnabled(exec4, k, 0), "node disabled in exec 4");
            Cuda.ok(d.cuCtxSetFlags(CTX_SYNC_MEMOPS), "cuCtxSetFlags");
            float[] before = {r.run(exec1), r.run(exec2), r.run(exec3), r.run(exec4)};
            assertArrayEquals(new float[] {11f, 5f, 20f, 0f}, before, "exec graphs 1 to 4 before the checkpoint");

            long id = serverA.sessions().get(0).id();
            serverA.checkpoint(id, image, true, null);
            serverA.close();
            a.close();
            Files.deleteIfExists(sock);
            try (BackendServer serverB = server(b)) {
                assertEquals(id, serverB.restore(image, null));
                serverB.listen(TransportUri.parse("unix://" + sock));
                float[] after = {r.run(exec1), r.run(exec2), r.run(exec3), r.run(exec4)};
                assertArrayEquals(before, after, "exec graphs 1 to 4 after the restore");
                long exec5 = r.out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "instantiate after the restore");
                assertEquals(30f, r.run(exec5), "the graph's node has its last parameters");
                MemorySegment flags = r.cu.cell();
                Cuda.ok(d.cuCtxGetFlags(flags), "cuCtxGetFlags");
                assertEquals(CTX_SYNC_MEMOPS, flags.get(JAVA_INT, 0) & CTX_SYNC_MEMOPS, "the context's flags");
                assertEquals(1, serverB.resumesAccepted());
            }
        } finally {
            b.close();
        }
    }

    /**
     * A change no record keeps is refused by name (a pointer attribute: its target is an allocation), the session
     * running on, nothing written; graph parameter changes alone are checkpointed.
     */
    @Test
    void aPointerAttributeIsStillRefusedByName() throws Exception {
        EmulatedDevice a = new EmulatedDevice();
        try (BackendServer server = server(a)) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Rig r = new Rig(d);
                long g = r.out(o -> d.cuGraphCreate(o, 0), "cuGraphCreate");
                long k = r.out(o -> d.cuGraphAddKernelNode(o, g, MemorySegment.NULL, 0, r.kernelParams(2f)), "kernel node");
                Cuda.ok(d.cuGraphKernelNodeSetParams(k, r.kernelParams(3f)), "node params");
                long id = server.sessions().get(0).id();
                assertTrue(server.checkpoint(id, dir.resolve("ok.ckpt"), false, null).records() > 0);
                Cuda.ok(d.cuPointerSetAttribute(r.cu.u32(1), 6, r.y), "cuPointerSetAttribute(SYNC_MEMOPS)");
                Path image = dir.resolve("refused.ckpt");
                CheckpointRefused e = assertThrows(CheckpointRefused.class, () -> server.checkpoint(id, image, true, null));
                assertTrue(e.getMessage().contains("changes made with cuPointerSetAttribute"), e.getMessage());
                assertFalse(Files.exists(image), "a refused checkpoint writes nothing");
                long exec = r.out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "instantiate");
                assertEquals(3f, r.run(exec), "the session runs on");
            }
        } finally {
            a.close();
        }
    }
}
