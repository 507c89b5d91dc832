package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Contexts made ahead (--warm-contexts): sessions' primary contexts come from the pool, each serves
 * exactly one session and is destroyed with it, and the pool's spares go when the backend closes.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ContextPoolTest {

    @Test
    void everyContextServesOneSessionAndIsDestroyedOnce() throws Exception {
        EmulatedDevice device = new EmulatedDevice();
        Set<Long> live = ConcurrentHashMap.newKeySet();
        java.util.List<String> violations = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
        java.util.concurrent.atomic.AtomicInteger created = new java.util.concurrent.atomic.AtomicInteger();
        CudaDriver counting = (CudaDriver) Proxy.newProxyInstance(CudaDriver.class.getClassLoader(), new Class<?>[] {CudaDriver.class},
                (proxy, m, args) -> {
                    Object r;
                    try {
                        r = m.invoke(device, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (m.getName().equals("cuCtxCreate") && (Integer) r == 0) {
                        created.incrementAndGet();
                        if (!Thread.currentThread().getName().equals("gpusockets-context-pool")) {
                            violations.add("a context made on " + Thread.currentThread().getName() + ", not ahead by the pool");
                        }
                        live.add(((java.lang.foreign.MemorySegment) args[0]).reinterpret(8).get(java.lang.foreign.ValueLayout.JAVA_LONG, 0));
                    } else if (m.getName().equals("cuCtxDestroy") && !live.remove((Long) args[0])) {
                        violations.add("cuCtxDestroy of a context not live: " + args[0]);
                    }
                    return r;
                });
        Path dir = Files.createTempDirectory("gpusockets-pool");
        int sessions = 5;
        BackendSettings options = BackendSettings.fromSystemProperties()
                .withServer(null, Set.of(), Set.of(), BackendSettings.HANDSHAKE_MILLIS_DEFAULT, 1);
        try (BackendServer server = new BackendServer(DriverHost.initialise(counting, "emulated"), options)) {
            String address = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            for (int i = 0; i < 200 && created.get() < 1; i++) {
                Thread.sleep(10);
            }
            assertEquals(1, created.get(), "one context made ahead");
            for (int i = 0; i < sessions; i++) {
                try (RemoteCudaDriver d = RemoteCudaDriver.connect(address)) {
                    Cuda cu = new Cuda(d);
                    cu.primaryContext();
                    long p = cu.alloc(4096);
                    cu.put(p, new byte[] {1, 2, 3});
                    assertEquals(3, cu.get(p, 3)[2]);
                }
                CopyOutStagingTest.awaitNoSessions(server);
                // the session's context is gone with it; a spare is (or soon will be) ready for the next
                for (int k = 0; k < 200 && live.size() != 1; k++) {
                    Thread.sleep(10);
                }
                assertEquals(1, live.size(), "only the spare left after session " + i);
            }
        } finally {
            Files.deleteIfExists(dir.resolve("b.sock"));
            Files.deleteIfExists(dir);
        }
        assertEquals(Set.of(), live, "the spare is destroyed when the backend closes");
        assertEquals(sessions + 1, created.get(), "every session got a context of its own, made ahead");
        assertEquals(java.util.List.of(), violations);
        device.close();
    }
}
