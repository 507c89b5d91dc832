package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Device malloc/free: blocks in the context's device memory, the 8 MiB default heap running out, a bad free. */
class MallocTest {
    static final String SOURCE = """
            extern "C" __global__ void each(long long *out, int bytes) {
                int t = blockIdx.x * blockDim.x + threadIdx.x;
                int n = bytes / 4;
                int *p = (int *)malloc(bytes);
                out[t] = (long long)p;
                if (p) {
                    for (int i = 0; i < n; i++) p[i] = t * 1000 + i;
                    long long s = 0;
                    for (int i = 0; i < n; i++) s += p[i];
                    out[256 + t] = s;
                    free(p);
                }
            }
            extern "C" __global__ void exhaust(long long *out) {
                void *p[12];
                for (int i = 0; i < 12; i++) { p[i] = malloc(1 << 20); out[i] = (long long)p[i]; }
                for (int i = 0; i < 12; i++) free(p[i]);
                void *again = malloc(4 << 20);
                out[12] = (long long)again;
                free(again);
            }
            extern "C" __global__ void badfree(int *out) {
                int *p = (int *)malloc(64);
                out[0] = 1;
                free(p + 1);
            }
            """;

    static String ptx;
    Rig rig;
    long module;

    @BeforeAll
    static void compile(@TempDir Path dir) throws IOException, InterruptedException {
        ptx = CallsTest.nvcc(dir, SOURCE);
    }

    @BeforeEach
    void open() {
        rig = new Rig();
        module = rig.module(ptx);
    }

    @AfterEach
    void close() {
        rig.close();
    }

    @Test
    void eachThreadWritesAndReadsBackItsOwnBlock() {
        long out = rig.alloc(8L * 512);
        int bytes = 400;
        rig.run(rig.function(module, "each"), 2, 128, out, bytes);
        long[] got = rig.longs(out, 512);
        Set<Long> blocks = new HashSet<>();
        for (int t = 0; t < 256; t++) {
            if (t % 32 == 0) {
                blocks.clear();   // a warp's lanes hold their blocks together; later warps may get freed ones again
            }
            assertNotEquals(0L, got[t], "thread " + t + " got a block");
            assertTrue(blocks.add(got[t]), "blocks of one warp's lanes are distinct, thread " + t);
            assertEquals(0, got[t] % 16, "16-byte aligned");
            long s = 0;
            for (int i = 0; i < bytes / 4; i++) {
                s += t * 1000L + i;
            }
            assertEquals(s, got[256 + t], "thread " + t + " read back what it wrote");
        }
    }

    @Test
    void theDefaultHeapRunsOutAtEightMebibytesThenFreedBlocksMerge() {
        long out = rig.alloc(8L * 13);
        rig.run(rig.function(module, "exhaust"), 1, 1, out);
        long[] got = rig.longs(out, 13);
        for (int i = 0; i < 12; i++) {
            if (i < 8) {
                assertNotEquals(0L, got[i], "1 MiB block " + i + " of the 8 MiB heap");
            } else {
                assertEquals(0L, got[i], "heap exhausted: NULL for block " + i);
            }
        }
        assertNotEquals(0L, got[12], "after freeing, 4 MiB in one block");
    }

    @Test
    void freeOfAPointerMallocDidNotReturnIsAStickyFault() {
        long out = rig.alloc(4);
        rig.ok(rig.launch(rig.function(module, "badfree"), new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0, out));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, rig.device.cuCtxSynchronize());
        assertTrue(rig.device.lastErrorDetail().contains("free("), rig.device.lastErrorDetail());
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, rig.device.cuCtxSynchronize(), "sticky");
    }
}
