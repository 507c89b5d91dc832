package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.DelegatingCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Restoring onto another GPU model (issue 22): a session that loaded two nvcc-built fatbins (one with sm_90 SASS and
 * compute_90 PTX, one with sm_80 SASS and compute_80 PTX) on the emulated device (compute capability 9.0) is
 * checkpointed; a backend whose device says it is an 8.6 part refuses the restore before it makes anything, naming
 * the first module, the code it carries and both models, and leaves no session; a backend whose device says it is a
 * 10.0 part (which JIT-compiles the PTX) restores it, and the program's kernels run there. The other models are the
 * emulated device answering another name and compute capability (it runs PTX whatever it says). Skipped without nvcc.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CheckpointModelTest extends CheckpointTestSupport {
    private static final String KERNEL = "extern \"C\" __global__ void inc(int *p) { p[threadIdx.x] += %d; }\n";

    /** The emulated device answering {@code name} and compute capability {@code major}.{@code minor}. */
    private static CudaDriver model(EmulatedDevice device, String name, int major, int minor) {
        return new DelegatingCudaDriver(device) {
            @Override
            public int cuDeviceGetAttribute(MemorySegment pi, int attrib, int dev) {
                int r = delegate.cuDeviceGetAttribute(pi, attrib, dev);
                if (r == 0 && (attrib == 75 || attrib == 76)) {
                    pi.set(JAVA_INT, 0, attrib == 75 ? major : minor);
                }
                return r;
            }

            @Override
            public int cuDeviceGetName(MemorySegment out, int len, int dev) {
                byte[] n = (name + "\0").getBytes(StandardCharsets.US_ASCII);
                MemorySegment.copy(n, 0, out.reinterpret(len), JAVA_BYTE, 0, Math.min(n.length, len));
                return 0;
            }
        };
    }

    private byte[] fatbin(String name, int add, String... gencode) throws Exception {
        Path nvcc = Path.of("/usr/local/cuda/bin/nvcc");
        String env = System.getenv("NVCC");
        if (env != null) {
            nvcc = Path.of(env);
        }
        assumeTrue(Files.isExecutable(nvcc), "nvcc is not installed (NVCC or /usr/local/cuda/bin/nvcc)");
        Path src = Files.writeString(dir.resolve(name + ".cu"), KERNEL.formatted(add));
        List<String> cmd = new ArrayList<>(List.of(nvcc.toString(), "-fatbin"));
        for (String g : gencode) {
            cmd.addAll(List.of("-gencode", g));
        }
        cmd.addAll(List.of("-o", dir.resolve(name + ".fatbin").toString(), src.toString()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(120, TimeUnit.SECONDS) && p.exitValue() == 0, cmd + ":\n" + log);
        return Files.readAllBytes(dir.resolve(name + ".fatbin"));
    }

    @Test
    void aRestoreOntoAModelTheModulesCarryNoCodeForIsRefusedByNameAndOneWithPtxForItRuns() throws Exception {
        byte[] hopper = fatbin("hopper", 1, "arch=compute_90,code=[sm_90,compute_90]");
        byte[] ampere = fatbin("ampere", 10, "arch=compute_80,code=[sm_80,compute_80]");
        Path sock = dir.resolve("b.sock");
        Path image = dir.resolve("session.ckpt");
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice(), c = new EmulatedDevice();
        BackendServer serverA = server(a);
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            cu.primaryContext();
            long[] fn = new long[2];
            long[] modules = new long[2];
            byte[][] images = {hopper, ampere};
            for (int i = 0; i < 2; i++) {
                MemorySegment img = cu.cell(images[i].length).copyFrom(MemorySegment.ofArray(images[i]));
                MemorySegment out = cu.cell();
                Cuda.ok(d.cuModuleLoadData(out, img), "cuModuleLoadData " + i);
                modules[i] = out.get(JAVA_LONG, 0);
                fn[i] = cu.function(modules[i], "inc");
            }
            long data = cu.alloc(4 * 32);
            Cuda.ok(d.cuMemsetD32(data, 0, 32), "clear");
            Runnable both = () -> {
                for (long f : fn) {
                    Cuda.ok(d.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, cu.params(cu.u64(data)), MemorySegment.NULL), "inc");
                }
                Cuda.ok(d.cuCtxSynchronize(), "sync");
            };
            both.run();
            serverA.checkpoint(serverA.sessions().get(0).id(), image, true, null);
            serverA.close();
            a.close();
            Files.deleteIfExists(sock);

            try (BackendServer ampereServer = server(model(b, "NVIDIA A10", 8, 6))) {
                CheckpointRefused e = assertThrows(CheckpointRefused.class, () -> ampereServer.restore(image, null));
                String m = e.getMessage();
                assertTrue(m.contains("module " + modules[0] + " (cuModuleLoadData"), m);
                assertTrue(m.contains("sm_90 SASS, compute_90 PTX"), m);
                assertTrue(m.contains("NVIDIA A10 (compute capability 8.6)"), m);
                assertTrue(m.contains("checkpointed on ") && m.contains("(compute capability 9.0)"), m);
                assertFalse(m.contains("module " + modules[1] + " "), "the sm_80 module runs on 8.6: " + m);
                assertEquals(0, ampereServer.sessionCount(), "nothing made");
            }
            try (BackendServer blackwell = server(model(c, "NVIDIA B200", 10, 0))) {
                blackwell.restore(image, null); // compute_90 and compute_80 PTX: JIT-compiled there
                blackwell.listen(TransportUri.parse("unix://" + sock));
                byte[] want = new byte[4 * 32];
                java.nio.ByteBuffer.wrap(want).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer()
                        .put(java.util.stream.IntStream.generate(() -> 11).limit(32).toArray());
                assertArrayEquals(want, cu.get(data, 4 * 32), "the data, after the program resumed");
                both.run();
                java.nio.ByteBuffer.wrap(want).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer()
                        .put(java.util.stream.IntStream.generate(() -> 22).limit(32).toArray());
                assertArrayEquals(want, cu.get(data, 4 * 32), "both modules' kernels ran after the restore");
            }
        } finally {
            b.close();
            c.close();
        }
    }
}
