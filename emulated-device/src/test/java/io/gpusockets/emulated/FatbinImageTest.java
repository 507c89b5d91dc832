package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NO_BINARY_FOR_GPU;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.images.FatbinImage;
import io.gpusockets.protocol.images.ImageError;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * FatbinImage and ModuleImage on fatbins and cubins nvcc builds during the run (skipped without
 * nvcc), and on malformed images built by hand (always run).
 */
class FatbinImageTest {
    static final String SOURCE = """
            extern "C" __global__ void gpus_vector_add(const float *a, const float *b, float *c, unsigned int n) {
                unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) c[i] = a[i] + b[i];
            }
            """;

    /** 400 kernels: about 470 KB of PTX, so a zstd frame of several 128 KB blocks. */
    static final String LARGE_SOURCE = "#define K(n) extern \"C\" __global__ void k##n(float *p, const float *q, int m) {"
            + " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < m) { float x = q[i];"
            + " for (int j = 0; j < (n % 7) + 1; j++) x = x * 1.0001f * n + __sinf(x + j); p[i] = x + n; } }\n"
            + java.util.stream.IntStream.range(0, 400).mapToObj(i -> "K(" + i + ")").collect(Collectors.joining(" ")) + "\n";

    @TempDir
    static Path dir;
    static Map<String, byte[]> built;
    static String expectedPtx90;

    @BeforeAll
    static void build() throws IOException, InterruptedException {
        if (Nvcc.find() == null) {
            return; // the nvcc tests skip; the hand-built ones run
        }
        Nvcc nvcc = new Nvcc(dir);
        Path cu = nvcc.write("k.cu", SOURCE);
        Path large = nvcc.write("large.cu", LARGE_SOURCE);
        Map<String, String[]> what = new LinkedHashMap<>();
        for (String mode : List.of("default", "speed", "none")) {
            what.put("large-" + mode, new String[] {"-fatbin", "-gencode", "arch=compute_90,code=compute_90",
                    "-compress-mode=" + mode, large.toString()});
        }
        what.put("default", new String[] {"-fatbin", "-gencode", "arch=compute_90,code=compute_90"});
        what.put("none", new String[] {"-fatbin", "-gencode", "arch=compute_90,code=compute_90", "-compress-mode=none"});
        what.put("speed", new String[] {"-fatbin", "-gencode", "arch=compute_90,code=compute_90", "-compress-mode=speed"});
        what.put("multi", new String[] {"-fatbin", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
                "arch=compute_80,code=compute_80", "-gencode", "arch=compute_90,code=compute_90", "-gencode",
                "arch=compute_100,code=compute_100"});
        what.put("only100", new String[] {"-fatbin", "-gencode", "arch=compute_100,code=compute_100"});
        what.put("sass", new String[] {"-fatbin", "-gencode", "arch=compute_90,code=sm_90"});
        what.put("cubin", new String[] {"-cubin", "-arch=sm_90"});
        what.put("cubinG", new String[] {"-cubin", "-G", "-arch=sm_90"});
        what.put("ptx", new String[] {"-ptx", "-arch=compute_90"});
        Map<Path, Process> compiles = new LinkedHashMap<>();
        for (Map.Entry<String, String[]> e : what.entrySet()) {
            String[] args = e.getValue();
            if (!e.getKey().startsWith("large")) {
                args = java.util.Arrays.copyOf(args, args.length + 1);
                args[args.length - 1] = cu.toString();
            }
            compiles.put(dir.resolve(e.getKey()), nvcc.start(dir.resolve(e.getKey()), args));
        }
        Nvcc.await(compiles);
        built = new LinkedHashMap<>();
        for (String name : what.keySet()) {
            built.put(name, Files.readAllBytes(dir.resolve(name)));
        }
        expectedPtx90 = new String(built.get("ptx"), java.nio.charset.StandardCharsets.UTF_8);
    }

    static byte[] fatbin(String name) {
        Nvcc.assumeNvcc();
        return built.get(name);
    }

    /** The image as the device receives it: native memory of the image's size (the backend's copy). */
    static String ptxOf(byte[] image) {
        MemorySegment copy = Arena.ofAuto().allocate(Math.max(1, image.length), 8);
        return ModuleImage.ptxText(copy.asSlice(0, image.length).copyFrom(MemorySegment.ofArray(image)));
    }

    static CudaError refusal(byte[] image) {
        return assertThrows(CudaError.class, () -> ptxOf(image));
    }

    /**
     * PTX without its comments and with each run of white space as one space: a fatbin's PTX is the
     * text nvcc -ptx prints with its comments blanked and its tabs turned into spaces.
     */
    static List<String> code(String ptx) {
        return ptx.lines().map(l -> l.replaceAll("//.*", "").replaceAll("\\s+", " ").strip()).filter(l -> !l.isEmpty()).toList();
    }

    static List<FatbinImage.Entry> entries(byte[] fatbin) {
        return FatbinImage.entries(MemorySegment.ofArray(fatbin));
    }

    @Test
    void anUncompressedPtxEntryIsNvccsPtx() {
        byte[] f = fatbin("none");
        List<FatbinImage.Entry> entries = entries(f);
        assertEquals(1, entries.size(), entries::toString);
        FatbinImage.Entry e = entries.getFirst();
        assertEquals(FatbinImage.KIND_PTX, e.kind());
        assertEquals(90, e.arch());
        assertEquals(0, e.flags() & (FatbinImage.FLAG_LZ4 | FatbinImage.FLAG_ZSTD), "flags " + Long.toHexString(e.flags()));
        assertEquals(code(expectedPtx90), code(ptxOf(f)));
    }

    @Test
    void nvccCompressesPtxWithZstdByDefaultAndItExpandsToTheSameText() {
        byte[] f = fatbin("default");
        FatbinImage.Entry e = entries(f).getFirst();
        assertTrue((e.flags() & FatbinImage.FLAG_ZSTD) != 0, "flags " + Long.toHexString(e.flags()));
        assertTrue(e.compressedSize() > 0 && e.compressedSize() < e.uncompressedSize(), e::toString);
        assertEquals(ptxOf(fatbin("none")), ptxOf(f));
    }

    @Test
    void speedModeCompressesWithLz4AndItExpandsToTheSameText() {
        byte[] f = fatbin("speed");
        FatbinImage.Entry e = entries(f).getFirst();
        assertTrue((e.flags() & FatbinImage.FLAG_LZ4) != 0, "flags " + Long.toHexString(e.flags()));
        assertEquals(ptxOf(fatbin("none")), ptxOf(f));
    }

    /** Several zstd blocks: tables and offsets repeated from block to block, four Huffman streams. */
    @Test
    void largePtxExpandsTheSameInEveryCompressionMode() {
        String plain = ptxOf(fatbin("large-none"));
        assertTrue(plain.length() > 300_000, "PTX of " + plain.length() + " chars");
        for (String mode : List.of("default", "speed")) {
            byte[] f = fatbin("large-" + mode);
            assertTrue(f.length < plain.length() / 4, mode + " compresses");
            assertEquals(plain, ptxOf(f), mode);
        }
    }

    @Test
    void picksTheHighestPtxNotAboveComputeCapabilityNine() {
        byte[] f = fatbin("multi");
        assertEquals("[compute_80 PTX (zstd), sm_80 SASS, compute_90 PTX (zstd), compute_100 PTX (zstd)]",
                entries(f).toString(), "the entries as nvcc orders them");
        String ptx = ptxOf(f);
        assertTrue(ptx.contains(".target sm_90"), ptx);
    }

    @Test
    void ptxOnlyForANewerTargetHasNoBinaryForTheDevice() {
        CudaError e = refusal(fatbin("only100"));
        assertEquals(CUDA_ERROR_NO_BINARY_FOR_GPU, e.code);
        assertTrue(e.getMessage().contains("compute_100 PTX") && e.getMessage().contains("9.0"), e.getMessage());
    }

    @Test
    void sassOnlyHasNoBinaryAndTheMessageSaysToBuildWithPtx() {
        CudaError e = refusal(fatbin("sass"));
        assertEquals(CUDA_ERROR_NO_BINARY_FOR_GPU, e.code);
        assertTrue(e.getMessage().contains("sm_90 SASS"), e.getMessage());
        assertTrue(e.getMessage().contains("-gencode arch=compute_90,code=compute_90"), e.getMessage());
    }

    @Test
    void aCubinHasPtxOnlyWhenBuiltWithDebugInformation() {
        CudaError e = refusal(fatbin("cubin"));
        assertEquals(CUDA_ERROR_NO_BINARY_FOR_GPU, e.code);
        assertTrue(e.getMessage().contains("-gencode arch=compute_90,code=compute_90"), e.getMessage());
        String ptx = ptxOf(fatbin("cubinG"));
        assertTrue(ptx.startsWith(".version 9.0\n.target sm_90, debug\n"), ptx);
        assertTrue(PtxModule.parse(ptx).entries.containsKey("gpus_vector_add"), ptx);
    }

    @Test
    void followsTheWrapperStructInNativeMemory() {
        byte[] f = fatbin("default");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment data = arena.allocate(f.length, 8).copyFrom(MemorySegment.ofArray(f));
            MemorySegment wrapper = arena.allocate(24, 8);
            wrapper.set(ValueLayout.JAVA_INT, 0, 0x466243B1);
            wrapper.set(ValueLayout.JAVA_INT, 4, 1);
            wrapper.set(ValueLayout.ADDRESS, 8, data);
            assertEquals(ptxOf(f), ModuleImage.ptxText(MemorySegment.ofAddress(wrapper.address())), "bare pointer");
            assertEquals(ptxOf(f), ModuleImage.ptxText(MemorySegment.ofAddress(data.address())), "bare fatbin pointer");
            CudaError sized = assertThrows(CudaError.class, () -> ModuleImage.ptxText(wrapper));
            assertEquals(CUDA_ERROR_INVALID_IMAGE, sized.code, "a wrapper that came as bytes is never followed");
            wrapper.set(ValueLayout.ADDRESS, 8, MemorySegment.NULL);
            CudaError nul = assertThrows(CudaError.class, () -> ModuleImage.ptxText(MemorySegment.ofAddress(wrapper.address())));
            assertEquals(CUDA_ERROR_INVALID_IMAGE, nul.code);
            wrapper.set(ValueLayout.ADDRESS, 8, arena.allocateFrom("not a fatbin"));
            CudaError ptx = assertThrows(CudaError.class, () -> ModuleImage.ptxText(MemorySegment.ofAddress(wrapper.address())));
            assertEquals(CUDA_ERROR_INVALID_IMAGE, ptx.code);
        }
    }

    // ---- malformed images, built by hand ---------------------------------------------------------

    /** A fatbin of one entry: {@code payload} stored as {@code kind} with the given flags and sizes. */
    static byte[] handBuilt(int kind, long flags, byte[] payload, long compressedSize, long uncompressedSize) {
        int entryHeader = 0x40;
        MemorySegment s = MemorySegment.ofArray(new byte[16 + entryHeader + payload.length]);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 0, 0xBA55ED50);
        s.set(ValueLayout.JAVA_SHORT_UNALIGNED, 4, (short) 1);
        s.set(ValueLayout.JAVA_SHORT_UNALIGNED, 6, (short) 16);
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, 8, entryHeader + payload.length);
        s.set(ValueLayout.JAVA_SHORT_UNALIGNED, 16, (short) kind);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 16 + 4, entryHeader);
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, 16 + 8, payload.length);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 16 + 0x10, (int) compressedSize);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 16 + 0x1C, 90);
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, 16 + 0x28, flags);
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, 16 + 0x38, uncompressedSize);
        MemorySegment.copy(MemorySegment.ofArray(payload), 0, s, 16 + entryHeader, payload.length);
        return s.toArray(ValueLayout.JAVA_BYTE);
    }

    static final byte[] TINY_PTX = ".version 9.0\n.target sm_90\n.address_size 64\n\0\0\0".getBytes();

    static void assertInvalid(byte[] image, String why) {
        CudaError e = assertThrows(CudaError.class, () -> ptxOf(image), why);
        assertEquals(CUDA_ERROR_INVALID_IMAGE, e.code, why + ": " + e.getMessage());
    }

    static byte[] with(byte[] image, int offset, long value) {
        byte[] copy = image.clone();
        MemorySegment.ofArray(copy).set(ValueLayout.JAVA_LONG_UNALIGNED, offset, value);
        return copy;
    }

    static byte[] withInt(byte[] image, int offset, int value) {
        byte[] copy = image.clone();
        MemorySegment.ofArray(copy).set(ValueLayout.JAVA_INT_UNALIGNED, offset, value);
        return copy;
    }

    @Test
    void aHandBuiltFatbinIsReadAsNvccWritesIt() {
        assertEquals(new String(TINY_PTX).replace("\0", ""), ptxOf(handBuilt(1, 0x11, TINY_PTX, 0, 0)));
        byte[] arch80 = withInt(handBuilt(1, 0x11, TINY_PTX, 0, 0), 16 + 0x1C, 80);
        assertEquals(new String(TINY_PTX).replace("\0", ""), ptxOf(arch80), "older PTX runs (the driver JIT-compiles it)");
        CudaError newer = refusal(withInt(arch80, 16 + 0x1C, 91));
        assertEquals(CUDA_ERROR_NO_BINARY_FOR_GPU, newer.code, newer.getMessage());
        CudaError sass = refusal(handBuilt(2, 0x11, TINY_PTX, 0, 0));
        assertEquals(CUDA_ERROR_NO_BINARY_FOR_GPU, sass.code, sass.getMessage());
    }

    @Test
    void malformedFatbinsAreInvalidImages() {
        byte[] good = handBuilt(1, 0x11, TINY_PTX, 0, 0);
        assertInvalid(java.util.Arrays.copyOf(good, 12), "header cut short");
        assertInvalid(java.util.Arrays.copyOf(good, 40), "entry header cut short");
        assertInvalid(java.util.Arrays.copyOf(good, good.length - 1), "fatSize past the end");
        assertInvalid(with(good, 8, Long.MAX_VALUE), "fatSize overflowing");
        assertInvalid(with(good, 8, -16), "fatSize negative");
        assertInvalid(with(good, 16 + 8, TINY_PTX.length + 1), "entry size past the fatbin");
        assertInvalid(with(good, 16 + 8, Long.MIN_VALUE + 8), "entry size overflowing");
        assertInvalid(withInt(good, 16 + 4, 0x10), "entry header smaller than its fields");
        assertInvalid(withInt(good, 16 + 4, -1), "entry header past the end");
        byte[] twoEntries = with(good, 8, 0x40 + TINY_PTX.length + 8); // a second entry of 8 bytes
        twoEntries = java.util.Arrays.copyOf(twoEntries, twoEntries.length + 8);
        assertInvalid(twoEntries, "an entry count beyond what fits");
        assertInvalid(handBuilt(1, 0x11, new byte[] {0, 0, 0, 0}, 0, 0), "empty PTX");
        for (long fatSize : new long[] {good.length - 16 + 1, Long.MAX_VALUE, -16}) {
            ImageError e = assertThrows(ImageError.class, () -> FatbinImage.entries(MemorySegment.ofArray(with(good, 8, fatSize))),
                    "FatbinImage itself bounds fatSize " + fatSize);
            assertEquals(CUDA_ERROR_INVALID_IMAGE, e.code);
        }
        ImageError wrongMagic = assertThrows(ImageError.class, () -> FatbinImage.entries(MemorySegment.ofArray(withInt(good, 0, 0x12345678))));
        assertEquals(CUDA_ERROR_INVALID_IMAGE, wrongMagic.code);
    }

    @Test
    void malformedCompressedEntriesAreInvalidImages() {
        byte[] lz4 = {(byte) 0x50, 'a', 'b', 'c', 'd', 'e', 0, 0};           // 5 literals, no match
        assertEquals("abcde", ptxOf(handBuilt(1, 0x2011, lz4, 6, 5)));
        assertInvalid(handBuilt(1, 0x2011, lz4, 6, 6), "LZ4 expands to less than it says");
        assertInvalid(handBuilt(1, 0x2011, lz4, 9, 5), "compressed size past the payload");
        assertInvalid(handBuilt(1, 0x2011, lz4, 6, 1L << 40), "uncompressed size out of range");
        byte[] badOffset = {(byte) 0x10, 'a', 5, 0, (byte) 0x10, 'b', 0, 0}; // match 5 back after 1 byte
        assertInvalid(handBuilt(1, 0x2011, badOffset, 6, 12), "LZ4 match before the output's start");
        assertInvalid(handBuilt(1, 0xA011, lz4, 6, 5), "both compressions");
        assertInvalid(handBuilt(1, 0x8011, lz4, 6, 5), "not a zstd frame");
    }

    /**
     * Corrupting bytes of a large compressed fatbin (several zstd blocks, repeated tables) gives PTX
     * or a CudaError, never another exception ({@code -Dfatbin.fuzz=N} flips more).
     */
    @Test
    void corruptedLargeFatbinsNeverThrowAnythingElse() {
        int flips = Integer.getInteger("fatbin.fuzz", 40);
        for (String name : List.of("large-default", "large-speed")) {
            byte[] f = fatbin(name);
            java.util.Random random = new java.util.Random(7);
            for (int i = 0; i < flips; i++) {
                byte[] c = f.clone();
                for (int k = 0; k < 1 + i % 3; k++) {
                    c[16 + 0x50 + random.nextInt(f.length - 16 - 0x50)] ^= (byte) (1 + random.nextInt(255));
                }
                try {
                    ptxOf(c);
                } catch (CudaError expected) {
                    assertEquals(CUDA_ERROR_INVALID_IMAGE, expected.code, expected.getMessage());
                }
            }
        }
    }

    /** Corrupting any byte of a real compressed fatbin gives PTX or a CudaError, never another exception. */
    @Test
    void corruptedCompressedFatbinsNeverThrowAnythingElse() {
        for (String name : List.of("default", "speed")) {
            byte[] f = fatbin(name);
            java.util.Random random = new java.util.Random(42);
            for (int i = 0; i < 3000; i++) {
                byte[] c = f.clone();
                int at = i < f.length ? i : random.nextInt(f.length);
                c[at] ^= (byte) (1 + random.nextInt(255));
                try {
                    ptxOf(c);
                } catch (CudaError expected) {
                    assertTrue(expected.code == CUDA_ERROR_INVALID_IMAGE || expected.code == CUDA_ERROR_NO_BINARY_FOR_GPU,
                            expected.code + ": " + expected.getMessage());
                }
            }
            for (int cut = 0; cut < f.length; cut += 7) {
                byte[] c = java.util.Arrays.copyOf(f, cut);
                try {
                    ptxOf(c);
                } catch (CudaError expected) {
                    // PTX kind for a cut magic, else INVALID_IMAGE
                }
            }
        }
    }

}
