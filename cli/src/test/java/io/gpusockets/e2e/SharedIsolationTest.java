package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Isolation mode shared (--isolation shared): the sessions of one tenant share one real context, yet
 * each session's end frees only what it made; destroying or resetting the shared context is refused; the
 * context goes with the tenant's last session.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SharedIsolationTest {

    @Test
    void sessionsShareOneContextAndEachEndFreesOnlyItsOwn() throws Exception {
        EmulatedDevice device = new EmulatedDevice();
        List<Long> created = new CopyOnWriteArrayList<>();
        List<Long> destroyed = new CopyOnWriteArrayList<>();
        Set<Long> freed = ConcurrentHashMap.newKeySet();
        CudaDriver watched = (CudaDriver) Proxy.newProxyInstance(CudaDriver.class.getClassLoader(), new Class<?>[] {CudaDriver.class},
                (proxy, m, args) -> {
                    Object r;
                    try {
                        r = m.invoke(device, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (r instanceof Integer code && code == 0) {
                        switch (m.getName()) {
                            case "cuCtxCreate" -> created.add(((java.lang.foreign.MemorySegment) args[0]).reinterpret(8)
                                    .get(java.lang.foreign.ValueLayout.JAVA_LONG, 0));
                            case "cuCtxDestroy" -> destroyed.add((Long) args[0]);
                            case "cuMemFree" -> freed.add((Long) args[0]);
                            default -> { }
                        }
                    }
                    return r;
                });
        Path dir = Files.createTempDirectory("gpusockets-shared");
        try (BackendServer server = new BackendServer(DriverHost.initialise(watched, "emulated"), BackendSettings.fromSystemProperties())) {
            server.shareContextsPerTenant();
            String address = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver a = RemoteCudaDriver.connect(address)) {
                Cuda ca = new Cuda(a);
                ca.primaryContext();
                long pa = ca.alloc(4096);
                ca.put(pa, new byte[] {1, 2, 3});
                long pb;
                try (RemoteCudaDriver b = RemoteCudaDriver.connect(address)) {
                    Cuda cb = new Cuda(b);
                    long ctxB = cb.primaryContext();
                    pb = cb.alloc(4096);
                    cb.put(pb, new byte[] {4, 5, 6});
                    assertEquals(1, created.size(), "the second session got the tenant's context, not a new one");
                    assertEquals(CuResult.CUDA_ERROR_NOT_PERMITTED, b.cuDevicePrimaryCtxReset(0), "reset of the shared context");
                    assertEquals(CuResult.CUDA_ERROR_NOT_PERMITTED, b.cuCtxDestroy(ctxB), "destroy of the shared context");
                    assertArrayEquals(new byte[] {4, 5, 6}, cb.get(pb, 3), "the refused calls left it working");
                }
                for (int i = 0; i < 500 && server.sessionCount() > 1; i++) {
                    Thread.sleep(10);
                }
                assertEquals(1, server.sessionCount());
                assertTrue(freed.contains(pb), "the ended session's allocation was freed");
                assertFalse(freed.contains(pa), "the other session's allocation was not");
                assertEquals(List.of(), destroyed, "the shared context outlives a session while another uses it");
                assertArrayEquals(new byte[] {1, 2, 3}, ca.get(pa, 3), "the other session carries on");
                long more = ca.alloc(1 << 16);
                ca.put(more, new byte[] {9});
                assertArrayEquals(new byte[] {9}, ca.get(more, 1));
            }
            CopyOutStagingTest.awaitNoSessions(server);
            assertEquals(created, destroyed, "the context went with the tenant's last session");
        } finally {
            Files.deleteIfExists(dir.resolve("b.sock"));
            Files.deleteIfExists(dir);
            device.close();
        }
    }

    /**
     * A session's end in a shared context destroys its texture and surface objects, arrays and mipmapped arrays one
     * by one, and never hands the levels of a mipmapped array to cuArrayDestroy (they go with it).
     */
    @Test
    void aSessionsEndDestroysItsArraysMipmapsAndObjectsButNotLevels() throws Exception {
        EmulatedDevice device = new EmulatedDevice();
        java.util.Map<String, List<Long>> calls = new ConcurrentHashMap<>();
        CudaDriver watched = (CudaDriver) Proxy.newProxyInstance(CudaDriver.class.getClassLoader(), new Class<?>[] {CudaDriver.class},
                (proxy, m, args) -> {
                    Object r;
                    try {
                        r = m.invoke(device, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (r instanceof Integer code && code == 0 && m.getName().endsWith("Destroy") && args[0] instanceof Long h) {
                        calls.computeIfAbsent(m.getName(), k -> new CopyOnWriteArrayList<>()).add(h);
                    }
                    return r;
                });
        Path dir = Files.createTempDirectory("gpusockets-shared");
        try (BackendServer server = new BackendServer(DriverHost.initialise(watched, "emulated"), BackendSettings.fromSystemProperties())) {
            server.shareContextsPerTenant();
            String address = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver a = RemoteCudaDriver.connect(address)) {
                new Cuda(a).primaryContext();   // keeps the shared context alive past b
                long surf, tex, mipLevel;
                try (RemoteCudaDriver b = RemoteCudaDriver.connect(address)) {
                    Cuda cb = new Cuda(b);
                    cb.primaryContext();
                    java.lang.foreign.MemorySegment desc = cb.cell(io.gpusockets.protocol.structs.Array3DDescriptor.SIZE);
                    new io.gpusockets.protocol.structs.Array3DDescriptor(16, 16, 0, 0x20, 1, 2).write(desc);
                    java.lang.foreign.MemorySegment out = cb.cell();
                    Cuda.ok(b.cuArray3DCreate(out, desc), "cuArray3DCreate");
                    long array = out.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0);
                    new io.gpusockets.protocol.structs.Array3DDescriptor(16, 16, 0, 0x20, 1, 0).write(desc);
                    Cuda.ok(b.cuMipmappedArrayCreate(out, desc, 3), "cuMipmappedArrayCreate");
                    long mip = out.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0);
                    Cuda.ok(b.cuMipmappedArrayGetLevel(out, mip, 1), "cuMipmappedArrayGetLevel");
                    mipLevel = out.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0);
                    java.lang.foreign.MemorySegment res = cb.cell(io.gpusockets.protocol.structs.ResourceDesc.SIZE).fill((byte) 0);
                    res.set(java.lang.foreign.ValueLayout.JAVA_LONG, 8, array);
                    Cuda.ok(b.cuSurfObjectCreate(out, res), "cuSurfObjectCreate");
                    surf = out.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0);
                    Cuda.ok(b.cuTexObjectCreate(out, res, cb.cell(io.gpusockets.protocol.structs.ResourceDesc.TEXTURE_DESC_SIZE)
                            .fill((byte) 0), java.lang.foreign.MemorySegment.NULL), "cuTexObjectCreate");
                    tex = out.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0);
                }
                for (int i = 0; i < 500 && server.sessionCount() > 1; i++) {
                    Thread.sleep(10);
                }
                assertEquals(1, server.sessionCount());
                // texture and surface ids are the driver's values: the same numbers reached the driver's destroys
                assertEquals(List.of(surf), calls.get("cuSurfObjectDestroy"));
                assertEquals(List.of(tex), calls.get("cuTexObjectDestroy"));
                assertEquals(1, calls.get("cuArrayDestroy").size(), "the array, not the mipmapped array's levels");
                assertEquals(1, calls.get("cuMipmappedArrayDestroy").size());
                assertFalse(calls.get("cuArrayDestroy").contains(mipLevel), "a level's id is no driver value");
            }
            CopyOutStagingTest.awaitNoSessions(server);
        } finally {
            Files.deleteIfExists(dir.resolve("b.sock"));
            Files.deleteIfExists(dir);
            device.close();
        }
    }
}
