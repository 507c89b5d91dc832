package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 20: one tenant's faulting kernel never denies service to the others. A real backend process on the
 * emulated device, which poisons itself after a kernel fault as the real driver poisons its process (its
 * default fault scope, emulated-device README); two tenants told apart by their PSK identities. Tenant bob's
 * session copies and launches round after round while tenant alice's session runs an out-of-bounds kernel
 * (CUDA_ERROR_ILLEGAL_ADDRESS).
 *
 * <p>In the default configuration (no --isolation: a worker process per session) bob's session keeps working
 * and completes correctly, and new sessions of alice and bob are served afterwards. The same scenario with
 * --isolation context shows what the default prevents, so this test can fail: bob's running session gets
 * alice's error, and the backend refuses every new session saying why (status and metrics show it too).
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class KernelFaultIsolationTest {
    private static final int WORDS = 1 << 14;

    @TempDir
    Path dir;

    /** What the scenario saw. */
    record Outcome(long bobRoundsAfterFault, String bobFailure, String newAliceFailure, String newBobFailure) {
    }

    @Test
    void aFaultingKernelOfOneTenantLeavesEveryOtherSessionServedInTheDefaultConfiguration() throws Exception {
        try (BackendProcess b = BackendProcess.start("--tenants", tenantsFile().toString())) {
            Outcome o = faultWhileAnotherTenantWorks(b);
            assertNull(o.bobFailure(), "bob's running session is untouched by alice's fault");
            assertTrue(o.bobRoundsAfterFault() >= 20, "bob's session completed its rounds after the fault: " + o);
            assertNull(o.newAliceFailure(), "a new session of the faulting tenant is served");
            assertNull(o.newBobFailure(), "a new session of the other tenant is served");
            assertTrue(b.alive());
            b.awaitLog("isolation process", 1_000);
        }
    }

    @Test
    void inModeContextTheFaultPoisonsTheBackendWhichRefusesNewSessionsAndSaysSo() throws Exception {
        try (BackendProcess b = BackendProcess.startWithStatus("--isolation", "context", "--tenants", tenantsFile().toString())) {
            Outcome o = faultWhileAnotherTenantWorks(b);
            assertNotNull(o.bobFailure(), "in mode context alice's fault reaches bob's running session: " + o);
            assertTrue(o.bobFailure().contains("CUDA_ERROR_ILLEGAL_ADDRESS"), o.bobFailure());
            String refusal = "the driver in this backend process is poisoned by a kernel fault of session";
            assertTrue(o.newAliceFailure() != null && o.newAliceFailure().contains(refusal), o.newAliceFailure());
            assertTrue(o.newBobFailure() != null && o.newBobFailure().contains(refusal), o.newBobFailure());
            assertTrue(o.newBobFailure().contains("(CUDA_ERROR_ILLEGAL_ADDRESS); restart the backend, or run it with"
                    + " --isolation process"), o.newBobFailure());

            Map<String, Object> s = StatusTest.statusJson(b);
            @SuppressWarnings("unchecked")
            Map<String, Object> poisoned = (Map<String, Object>) s.get("poisoned");
            assertNotNull(poisoned, "status --json shows the poisoned driver: " + s);
            assertEquals("CUDA_ERROR_ILLEGAL_ADDRESS", poisoned.get("error"));
            assertTrue(StatusTest.status("--socket", b.adminSocket().toString()).out().contains("DRIVER POISONED: " + refusal));
            assertEquals(1.0, StatusTest.sample(StatusTest.metrics(b), "gpusockets_driver_poisoned"));
            b.awaitLog("THE DRIVER IN THIS BACKEND PROCESS IS POISONED", 1_000);
            assertEquals(1, b.output().stream().filter(l -> l.contains("THE DRIVER IN THIS BACKEND PROCESS IS POISONED")).count(),
                    "logged once");
        }
    }

    /**
     * bob works round after round (fill, copy back, check); meanwhile alice's kernel stores past its
     * allocation; bob goes on for 20 more rounds; then alice and bob each try a new session.
     */
    private Outcome faultWhileAnotherTenantWorks(BackendProcess b) throws Exception {
        CountDownLatch bobRunning = new CountDownLatch(1);
        CountDownLatch faulted = new CountDownLatch(1);
        AtomicBoolean stop = new AtomicBoolean();
        long[] afterFault = {0};
        CompletableFuture<String> bob = CompletableFuture.supplyAsync(() -> {
            try (RemoteCudaDriver d = connect(b, "bob")) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
                long p = cu.alloc(4L * WORDS);
                for (int round = 1; !stop.get(); round++) {
                    fillAndCheck(cu, fill, p, round);
                    bobRunning.countDown();
                    if (faulted.getCount() == 0 && ++afterFault[0] >= 20) {
                        break;
                    }
                }
                Cuda.ok(d.cuMemFree(p), "cuMemFree");
                return null;
            } catch (Throwable t) {
                return String.valueOf(t);
            } finally {
                bobRunning.countDown();
            }
        });
        try {
            assertTrue(bobRunning.await(120, TimeUnit.SECONDS), "bob's session started");
            try (RemoteCudaDriver d = connect(b, "alice")) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
                long p = cu.alloc(16);
                // 1024 words into a 4-word allocation: the launch is accepted, the kernel faults
                Cuda.ok(d.cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, 0, cu.params(cu.u64(p), cu.u32(7), cu.u32(1024)),
                        MemorySegment.NULL), "the faulting launch");
                assertEquals(CuResult.CUDA_ERROR_ILLEGAL_ADDRESS, d.cuCtxSynchronize(), "alice's kernel faults");
            } finally {
                faulted.countDown();
            }
            String bobFailure = bob.get(180, TimeUnit.SECONDS);
            return new Outcome(afterFault[0], bobFailure, newSession(b, "alice"), newSession(b, "bob"));
        } finally {
            stop.set(true);
        }
    }

    /** Null when a new session of {@code tenant} is served correctly, else what went wrong. */
    private String newSession(BackendProcess b, String tenant) {
        try (RemoteCudaDriver d = connect(b, tenant)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            fillAndCheck(cu, cu.function(cu.loadKernels(), "gpus_fill_u32"), cu.alloc(4L * WORDS), 42);
            return null;
        } catch (Throwable t) {
            return String.valueOf(t);
        }
    }

    /** Fills WORDS words with {@code value} by a kernel and checks every one copied back. */
    private static void fillAndCheck(Cuda cu, long fill, long p, int value) {
        Cuda.ok(cu.d.cuLaunchKernel(fill, WORDS / 256, 1, 1, 256, 1, 1, 0, 0, cu.params(cu.u64(p), cu.u32(value), cu.u32(WORDS)),
                MemorySegment.NULL), "cuLaunchKernel");
        byte[] expected = new byte[4 * WORDS];
        java.nio.ByteBuffer.wrap(expected).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer().put(filled(value));
        assertArrayEquals(expected, cu.get(p, 4 * WORDS), "round " + value);
    }

    private static int[] filled(int value) {
        int[] v = new int[WORDS];
        java.util.Arrays.fill(v, value);
        return v;
    }

    private static RemoteCudaDriver connect(BackendProcess b, String tenant) throws IOException {
        byte[] key = (tenant + "-key").getBytes(StandardCharsets.UTF_8);
        return RemoteCudaDriver.connect(new FrontendConfig(List.of(b.unix()), Duration.ofSeconds(60), true, key, tenant));
    }

    private Path tenantsFile() throws IOException {
        Files.writeString(dir.resolve("alice.key"), "alice-key\n");
        Files.writeString(dir.resolve("bob.key"), "bob-key\n");
        Path f = dir.resolve("tenants.conf");
        Files.writeString(f, """
                [tenant alice]
                match = psk:alice
                psk-file = alice.key
                [tenant bob]
                match = psk:bob
                psk-file = bob.key
                """);
        return f;
    }
}
