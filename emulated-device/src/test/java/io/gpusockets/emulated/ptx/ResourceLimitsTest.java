package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.assertTimeout;

import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * PTX comes from clients: what it declares must not make the backend allocate without bound. Each
 * declaration is refused, or the launch fails as a GPU's would, before any state is allocated.
 */
class ResourceLimitsTest {
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    private int launchOf(String body, int threads) {
        String ptx = Rig.HEADER + ".visible .entry k()\n{\n" + body + "\n    ret;\n}\n";
        long f = rig.function(rig.module(ptx), "k");
        return rig.launch(f, new int[] {1, 1, 1}, new int[] {threads, 1, 1}, 0);
    }

    @Test
    void aHugeRegisterRangeIsRefusedWithoutAllocatingIt() {
        int r = assertTimeout(Duration.ofSeconds(10), () -> launchOf("    .reg .b32 %r<2000000000>;", 1));
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, r);
        assertTrue(rig.device.lastErrorDetail().contains("register range"), rig.device.lastErrorDetail());
        r = launchOf("    .reg .b32 %a<40000>;\n    .reg .b32 %b<40000>;", 1);
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, r);
        assertTrue(rig.device.lastErrorDetail().contains("registers in one entry"), rig.device.lastErrorDetail());
    }

    @Test
    void variablesWhoseSizeOverflowsAreRefused() {
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, launchOf("    .local .align 8 .b64 big[4611686018427387904];", 1));
        assertTrue(rig.device.lastErrorDetail().contains("variable big"), rig.device.lastErrorDetail());
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, launchOf("    .shared .align 4 .b32 a[268435455];\n"
                + "    .shared .align 4 .b32 b[268435455];", 1));
    }

    @Test
    void blocksThatNeedMoreThanTheDeviceGivesFailAsLaunchOutOfResources() {
        assertEquals(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, launchOf("    .shared .align 4 .b8 s[240000];", 1));
        assertTrue(rig.device.lastErrorDetail().contains("shared memory"), rig.device.lastErrorDetail());
        assertEquals(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, launchOf("    .local .align 4 .b8 l[600000];", 1));
        assertTrue(rig.device.lastErrorDetail().contains("local memory per thread"), rig.device.lastErrorDetail());
        // 100 KB of .local per thread is allowed, but not for 1024 threads of one block (100 MB of host memory).
        assertEquals(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, launchOf("    .local .align 4 .b8 l[100000];", 1024));
        assertTrue(rig.device.lastErrorDetail().contains("registers and local memory"), rig.device.lastErrorDetail());
        rig.ok(rig.device.cuCtxSynchronize());
        // A smaller frame for a few threads runs: 16 KB a thread, which the stack the launch grows (16 KB times the
        // device's resident threads, as the driver reserves it) still fits in the device's memory; 100 KB would not.
        rig.ok(launchOf("    .local .align 4 .b8 l[16000];", 32));
        rig.ok(rig.device.cuCtxSynchronize());
    }
}
