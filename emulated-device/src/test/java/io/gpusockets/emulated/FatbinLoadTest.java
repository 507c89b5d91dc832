package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NO_BINARY_FOR_GPU;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Fatbins nvcc builds from the shipped kernels' source, loaded through the CudaDriver methods
 * (cuModuleLoadData, -DataEx, -FatBinary with the wrapper, cuLibraryLoadData, cuModuleLoad) and run.
 * Skipped without nvcc.
 */
class FatbinLoadTest {
    @TempDir
    static Path dir;
    static Path fatbin;
    static Path sass;

    Emulated e;

    @BeforeAll
    static void build() throws IOException, InterruptedException {
        if (Nvcc.find() == null) {
            return;
        }
        Nvcc nvcc = new Nvcc(dir);
        Path cu = nvcc.resource("/io/gpusockets/kernels/gpusockets_kernels.cu", "gpusockets_kernels.cu");
        fatbin = dir.resolve("kernels.fatbin");
        sass = dir.resolve("sass.fatbin");
        Map<Path, Process> compiles = new LinkedHashMap<>();
        compiles.put(fatbin, nvcc.start(fatbin, "-fatbin", "-arch=sm_90", cu.toString())); // SASS + compressed PTX
        compiles.put(sass, nvcc.start(sass, "-fatbin", "-gencode", "arch=compute_90,code=sm_90", cu.toString()));
        Nvcc.await(compiles);
    }

    @BeforeEach
    void device() {
        Nvcc.assumeNvcc();
        e = new Emulated();
    }

    @AfterEach
    void close() {
        if (e != null) {
            e.close();
        }
    }

    MemorySegment image(Path file) throws IOException {
        byte[] bytes = Files.readAllBytes(file);
        return e.arena.allocate(bytes.length, 8).copyFrom(MemorySegment.ofArray(bytes));
    }

    void addsVectors(long module) {
        int n = 1000;
        float[] a = new float[n];
        float[] b = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = i * 0.5f;
            b[i] = 7 - i;
        }
        long da = e.alloc(4L * n);
        long db = e.alloc(4L * n);
        long dc = e.alloc(4L * n);
        e.upload(da, a);
        e.upload(db, b);
        e.ok(e.launch(e.function(module, "gpus_vector_add"), 4, 256, 0, 0, da, db, dc, n));
        float[] c = e.downloadFloats(dc, n);
        for (int i = 0; i < n; i++) {
            assertEquals(a[i] + b[i], c[i], "c[" + i + "]");
        }
    }

    long loaded(MemorySegment out) {
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    @Test
    void runsTheVectorAddOfAnNvccFatbinLoadedAsData() throws IOException {
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuModuleLoadData(out, image(fatbin)));
        addsVectors(loaded(out));
        e.ok(e.device.cuModuleLoadData(out, Emulated.asNative(image(fatbin))));
        addsVectors(loaded(out));
        e.ok(e.device.cuModuleLoadDataEx(out, image(fatbin), 0, MemorySegment.NULL, MemorySegment.NULL));
        addsVectors(loaded(out));
    }

    @Test
    void runsAFatbinThroughItsWrapperAsAHostProgramHandsItOver() throws IOException {
        MemorySegment wrapper = e.arena.allocate(24, 8);
        wrapper.set(ValueLayout.JAVA_INT, 0, 0x466243B1);
        wrapper.set(ValueLayout.JAVA_INT, 4, 1);
        wrapper.set(ValueLayout.ADDRESS, 8, image(fatbin));
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuModuleLoadFatBinary(out, Emulated.asNative(wrapper)));
        addsVectors(loaded(out));
    }

    @Test
    void runsAFatbinLoadedAsALibraryOrFromAFile() throws IOException {
        MemorySegment lib = e.arena.allocate(8);
        e.ok(e.device.cuLibraryLoadData(lib, image(fatbin), MemorySegment.NULL, MemorySegment.NULL, 0,
                MemorySegment.NULL, MemorySegment.NULL, 0));
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuLibraryGetModule(out, lib.get(ValueLayout.JAVA_LONG, 0)));
        addsVectors(loaded(out));
        e.ok(e.device.cuModuleLoad(out, e.nativeString(fatbin.toString())));
        addsVectors(loaded(out));
    }

    @Test
    void aSassOnlyFatbinHasNoBinaryForTheDeviceAndSaysToBuildWithPtx() throws IOException {
        MemorySegment out = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_NO_BINARY_FOR_GPU, e.device.cuModuleLoadData(out, image(sass)));
        String detail = e.device.lastErrorDetail();
        assertTrue(detail.contains("sm_90 SASS") && detail.contains("arch=compute_90,code=compute_90"), detail);
        assertEquals(CUDA_ERROR_NO_BINARY_FOR_GPU, e.device.cuModuleLoad(out, e.nativeString(sass.toString())));
    }
}
