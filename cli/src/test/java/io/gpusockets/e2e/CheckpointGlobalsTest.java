package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.server.Migration;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Module globals after a restore and a migration (issue 22, the GPU finding of issue 27): the driver of a new
 * process places a module's {@code __device__} variables elsewhere, which the emulated device models (its module
 * data offset differs per instance; here each device's is pinned apart, so the globals surely move). A Java program
 * with two globals ({@code acc}, a u64, and {@code table}, 64 u32) uses them the ways cudart's symbol calls and
 * kernels do: cuModuleGetGlobal then cuMemcpyHtoD / DtoH to the address (cudaMemcpyToSymbol / FromSymbol),
 * cuMemsetD32 on the table, a kernel that takes a global's address (and one inside the table) as a parameter, a
 * kernel that names {@code acc} itself, graphs with a kernel node given a global's address and a memset node on one
 * (made before the checkpoints, and made after them), and cuMemGetAddressRange and pointer attributes on the globals. Checkpointed
 * with stop, restored on a new device, checkpointed again and restored on a third (a chain), and migrated A to B and
 * back: each time every address the program holds is still its, and its data is what an uninterrupted run has.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class CheckpointGlobalsTest extends CheckpointTestSupport {
    static final String PTX = """
            .version 7.0
            .target sm_50
            .address_size 64
            .visible .global .align 8 .u64 acc;
            .visible .global .align 4 .u32 table[64];
            .visible .entry add_to(.param .u64 p, .param .u64 v)
            {
                .reg .u64 %rd<4>;
                ld.param.u64 %rd1, [p];
                ld.param.u64 %rd2, [v];
                ld.global.u64 %rd3, [%rd1];
                add.u64 %rd3, %rd3, %rd2;
                st.global.u64 [%rd1], %rd3;
                ret;
            }
            .visible .entry bump()
            {
                .reg .u64 %rd<2>;
                ld.global.u64 %rd1, [acc];
                add.u64 %rd1, %rd1, 1;
                st.global.u64 [acc], %rd1;
                ret;
            }
            """;
    static final int TABLE = 64;
    /** cuda.h CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, RANGE_SIZE. */
    static final int RANGE_START_ADDR = 11, RANGE_SIZE = 12;

    /** The program: its module, functions and the globals' addresses as it was told them, and a model of their contents. */
    static final class Program {
        final RemoteCudaDriver d;
        final Cuda cu;
        final long module, addTo, bump, acc, table;
        /** An executable graph made before any checkpoint: a kernel node given acc's address, a memset node on the table. */
        final long graph;
        long accValue;
        final int[] tableValues = new int[TABLE];

        Program(RemoteCudaDriver d) {
            this.d = d;
            this.cu = new Cuda(d);
            cu.primaryContext();
            byte[] ptx = (PTX + "\0").getBytes(StandardCharsets.US_ASCII);
            MemorySegment image = cu.arena.allocate(ptx.length);
            MemorySegment.copy(ptx, 0, image, JAVA_BYTE, 0, ptx.length);
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuModuleLoadData(c, image), "cuModuleLoadData");
            module = c.get(JAVA_LONG, 0);
            addTo = cu.function(module, "add_to");
            bump = cu.function(module, "bump");
            acc = global("acc", 8);
            table = global("table", 4 * TABLE);
            long g = out(o -> d.cuGraphCreate(o, 0), "cuGraphCreate");
            long k = out(o -> d.cuGraphAddKernelNode(o, g, MemorySegment.NULL, 0, kernelNode(acc, 1_000_000)), "kernel node");
            MemorySegment set = cu.cell(40).fill((byte) 0);
            set.set(JAVA_LONG, 0, table + 4 * 30);
            set.set(JAVA_INT, 16, 50);
            set.set(JAVA_INT, 20, 4);
            set.set(JAVA_LONG, 24, 4);
            set.set(JAVA_LONG, 32, 1);
            MemorySegment deps = cu.cell();
            deps.set(JAVA_LONG, 0, k);
            out(o -> d.cuGraphAddMemsetNode(o, g, deps, 1, set, 0), "memset node");
            graph = out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "cuGraphInstantiateWithFlags");
        }

        long out(java.util.function.Function<MemorySegment, Integer> call, String what) {
            MemorySegment c = cu.cell();
            Cuda.ok(call.apply(c), what);
            return c.get(JAVA_LONG, 0);
        }

        /** CUDA_KERNEL_NODE_PARAMS of add_to(p, v), one thread. */
        MemorySegment kernelNode(long p, long v) {
            MemorySegment n = cu.cell(72).fill((byte) 0);
            n.set(JAVA_LONG, 0, addTo);
            for (int i = 0; i < 6; i++) {
                n.set(JAVA_INT, 8 + 4 * i, 1);
            }
            n.set(JAVA_LONG, 40, cu.params(cu.u64(p), cu.u64(v)).address());
            return n;
        }

        long global(String name, long bytes) {
            MemorySegment c = cu.cell(), size = cu.cell();
            Cuda.ok(d.cuModuleGetGlobal(c, size, module, cu.arena.allocateFrom(name)), "cuModuleGetGlobal " + name);
            assertEquals(bytes, size.get(JAVA_LONG, 0), name + "'s size");
            return c.get(JAVA_LONG, 0);
        }

        /** One round of everything: symbol copies, memset, a kernel given the addresses, a kernel naming acc. */
        void round(int k) {
            accValue = 1000L * k;
            cu.put(acc, le(accValue)); // cudaMemcpyToSymbol
            Cuda.ok(d.cuMemsetD32(table, 7 + k, TABLE), "cuMemsetD32 of the table");
            java.util.Arrays.fill(tableValues, 7 + k);
            Cuda.ok(d.cuMemsetD32(table + 4 * 10, 100 + k, 4), "cuMemsetD32 inside the table");
            java.util.Arrays.fill(tableValues, 10, 14, 100 + k);
            launch(addTo, cu.params(cu.u64(acc), cu.u64(5 + k)));
            accValue += 5 + k;
            launch(addTo, cu.params(cu.u64(table + 4 * 20), cu.u64(3))); // a u64 at table[20..21]
            tableValues[20] += 3;
            launch(bump, cu.params());
            accValue += 1;
            Cuda.ok(d.cuGraphLaunch(graph, 0), "cuGraphLaunch"); // made before the checkpoints
            accValue += 1_000_000;
            java.util.Arrays.fill(tableValues, 30, 34, 50);
            long g = out(o -> d.cuGraphCreate(o, 0), "cuGraphCreate");
            out(o -> d.cuGraphAddKernelNode(o, g, MemorySegment.NULL, 0, kernelNode(table + 4 * 40, k)), "kernel node");
            long e = out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "cuGraphInstantiateWithFlags");
            Cuda.ok(d.cuGraphLaunch(e, 0), "cuGraphLaunch"); // made now
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
            tableValues[40] += k;
        }

        void launch(long fn, MemorySegment params) {
            Cuda.ok(d.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, 0, params, MemorySegment.NULL), "launch");
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
        }

        /** What the program sees: the globals at the addresses it was told, with the contents it put there. */
        void check() {
            assertEquals(acc, global("acc", 8), "acc's address");
            assertEquals(table, global("table", 4 * TABLE), "table's address");
            assertArrayEquals(le(accValue), cu.get(acc, 8), "acc's contents"); // cudaMemcpyFromSymbol
            ByteBuffer b = ByteBuffer.allocate(4 * TABLE).order(ByteOrder.LITTLE_ENDIAN);
            b.asIntBuffer().put(tableValues);
            assertArrayEquals(b.array(), cu.get(table, 4 * TABLE), "table's contents");
            assertArrayEquals(java.util.Arrays.copyOfRange(b.array(), 40, 48), cu.get(table + 40, 8), "inside the table");
            MemorySegment base = cu.cell(), size = cu.cell();
            Cuda.ok(d.cuMemGetAddressRange(base, size, table + 17), "cuMemGetAddressRange");
            assertEquals(table, base.get(JAVA_LONG, 0), "the table's range starts where the program knows it");
            assertEquals(4L * TABLE, size.get(JAVA_LONG, 0));
            Cuda.ok(d.cuPointerGetAttribute(base, RANGE_START_ADDR, acc + 3), "cuPointerGetAttribute");
            assertEquals(acc, base.get(JAVA_LONG, 0), "acc's range start");
            Cuda.ok(d.cuPointerGetAttribute(size, RANGE_SIZE, acc), "cuPointerGetAttribute");
            assertEquals(8, size.get(JAVA_LONG, 0), "acc's range size");
        }
    }

    static byte[] le(long v) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array();
    }

    /** An emulated device whose module data lies at {@code offset} past the module range's start. */
    static EmulatedDevice device(long offset) {
        String was = System.setProperty("gpusockets.emulated.moduleDataOffset", Long.toString(offset));
        try {
            return new EmulatedDevice();
        } finally {
            if (was == null) {
                System.clearProperty("gpusockets.emulated.moduleDataOffset");
            } else {
                System.setProperty("gpusockets.emulated.moduleDataOffset", was);
            }
        }
    }

    @Test
    void globalsKeepTheirAddressesThroughAChainOfRestoresOnDevicesThatPlaceThemElsewhere() throws Exception {
        Path sock = dir.resolve("b.sock");
        EmulatedDevice a = device(0), b = device(1 << 20), c = device(2 << 20);
        try {
            BackendServer serverA = server(a);
            String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Program p = new Program(d);
                p.round(1);
                p.check();
                long id = onlySession(serverA);
                serverA.checkpoint(id, dir.resolve("1.ckpt"), true, (stage, done, total) -> { });
                serverA.close();
                Files.deleteIfExists(sock);
                try (BackendServer serverB = server(b)) {
                    assertEquals(id, serverB.restore(dir.resolve("1.ckpt"), null));
                    serverB.listen(TransportUri.parse("unix://" + sock));
                    p.check(); // resumed on B: the globals' contents came back, at the addresses the program knows
                    p.round(2);
                    p.check();
                    serverB.checkpoint(id, dir.resolve("2.ckpt"), true, (stage, done, total) -> { });
                }
                Files.deleteIfExists(sock);
                try (BackendServer serverC = server(c)) {
                    assertEquals(id, serverC.restore(dir.resolve("2.ckpt"), null));
                    serverC.listen(TransportUri.parse("unix://" + sock));
                    p.check(); // the second image recorded the program's addresses, not B's
                    p.round(3);
                    p.check();
                    assertEquals(1, serverC.resumesAccepted());
                }
            }
        } finally {
            a.close();
            b.close();
            c.close();
        }
    }

    /**
     * A global that comes back with another size than recorded cannot be translated byte for byte: the restore is
     * refused naming it, and leaves no session (a driver that reports 8 more bytes for every global stands for a
     * module that is not the one checkpointed).
     */
    @Test
    void aGlobalOfAnotherSizeRefusesTheRestoreNamingIt() throws Exception {
        Path sock = dir.resolve("b.sock");
        EmulatedDevice a = device(0), b = device(1 << 20);
        io.gpusockets.protocol.api.CudaDriver larger = (io.gpusockets.protocol.api.CudaDriver) java.lang.reflect.Proxy
                .newProxyInstance(io.gpusockets.protocol.api.CudaDriver.class.getClassLoader(),
                        new Class<?>[] {io.gpusockets.protocol.api.CudaDriver.class}, (proxy, m, args) -> {
                            Object r;
                            try {
                                r = m.invoke(b, args);
                            } catch (java.lang.reflect.InvocationTargetException e) {
                                throw e.getCause();
                            }
                            if (m.getName().equals("cuModuleGetGlobal") && (Integer) r == 0) {
                                MemorySegment size = (MemorySegment) args[1];
                                size.reinterpret(8).set(JAVA_LONG, 0, size.reinterpret(8).get(JAVA_LONG, 0) + 8);
                            }
                            return r;
                        });
        try {
            BackendServer serverA = server(a);
            String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Program p = new Program(d);
                p.round(1);
                serverA.checkpoint(onlySession(serverA), dir.resolve("1.ckpt"), true, (stage, done, total) -> { });
                serverA.close();
            }
            try (BackendServer serverB = server(larger)) {
                Exception e = org.junit.jupiter.api.Assertions.assertThrows(Exception.class,
                        () -> serverB.restore(dir.resolve("1.ckpt"), null));
                assertTrue(e.getMessage().contains("the module global 'acc' has 16 bytes after its module was loaded"
                        + " again, not the recorded 8"), e.getMessage());
                assertEquals(0, serverB.sessionCount(), "no session left");
            }
        } finally {
            a.close();
            b.close();
        }
    }

    /** The globals surely moved: the same module on the devices the test restores to places them apart. */
    @Test
    void theDevicesPlaceTheModulesGlobalsApart() throws Exception {
        EmulatedDevice a = device(0), b = device(1 << 20);
        try (BackendServer serverA = server(a); BackendServer serverB = server(b)) {
            String uriA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String uriB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver da = RemoteCudaDriver.connect(uriA); RemoteCudaDriver db = RemoteCudaDriver.connect(uriB)) {
                assertNotEquals(new Program(da).acc, new Program(db).acc, "acc on A and on B");
            }
        } finally {
            a.close();
            b.close();
        }
    }

    @Test
    void aProgramWithGlobalsMigratesToAnotherBackendAndBackWithItsGlobalsIntact() throws Exception {
        byte[] psk = "global migration test key".getBytes(StandardCharsets.UTF_8);
        Path key = dir.resolve("psk");
        Files.write(key, psk);
        EmulatedDevice a = device(0), b = device(1 << 20);
        try (BackendServer serverA = server(a, psk); BackendServer serverB = server(b, psk)) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            serverA.acceptMigrations(true);
            serverB.acceptMigrations(true);
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(FrontendConfig.fromEnvironment(Map.of(
                    FrontendConfig.SERVER_ENV, unixA, FrontendConfig.PSK_FILE_ENV, key.toString())))) {
                Program p = new Program(d);
                long id = serverA.sessions().get(0).id();
                p.round(1);
                Migration.Result ab = serverA.migrate(id, unixB, unixB, null);
                assertTrue(ab.bytes() > 0, ab.toString());
                p.check();
                assertEquals(unixB, d.backendUri(), "the frontend follows the session to B");
                p.round(2);
                p.check();
                while (!serverA.sessions().isEmpty()) {
                    Thread.sleep(10); // the moved session's thread removes it once released (bounded by the timeout)
                }
                serverB.migrate(id, unixA, null, null); // back to A, whose module data moved on meanwhile
                p.check();
                assertEquals(unixA, d.backendUri(), "and back to A");
                p.round(3);
                p.check();
            }
        } finally {
            a.close();
            b.close();
        }
    }

    private static BackendServer server(EmulatedDevice device, byte[] psk) {
        BackendSettings s = BackendSettings.fromSystemProperties();
        s = s.withServer(psk, s.allowedUids(), s.allowedCids(), s.handshakeMillis(), s.warmContexts());
        BackendServer server = new BackendServer(DriverHost.initialise(device, "emulated"), s);
        server.resumeGrace(Duration.ofSeconds(60));
        return server;
    }
}
