package io.gpusockets.protocol.images;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The code an image carries and the devices that can load it, on images nvcc builds here (skipped without nvcc):
 * cubins for several SMs, fatbins with SASS only, with SASS and PTX, compressed, PTX text; and a fatbin wrapper,
 * which cannot be told.
 */
class ModuleCodeTest {
    private static final String KERNEL = "extern \"C\" __global__ void k(int *p) { p[threadIdx.x] += 1; }\n";

    @TempDir
    Path dir;

    private static Path nvcc() {
        String named = System.getenv("NVCC");
        if (named != null && Files.isExecutable(Path.of(named))) {
            return Path.of(named);
        }
        for (String d : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
            Path p = Path.of(d.isEmpty() ? "." : d, "nvcc");
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        Path p = Path.of("/usr/local/cuda/bin/nvcc");
        return Files.isExecutable(p) ? p : null;
    }

    /** nvcc {@code args} on k.cu into {@code out}; its bytes. */
    private MemorySegment build(String out, String... args) throws Exception {
        Path nvcc = nvcc();
        assumeTrue(nvcc != null, "nvcc is not installed (NVCC, PATH, /usr/local/cuda/bin)");
        Path src = Files.writeString(dir.resolve("k.cu"), KERNEL);
        List<String> cmd = new ArrayList<>(List.of(nvcc.toString()));
        cmd.addAll(List.of(args));
        cmd.addAll(List.of("-o", dir.resolve(out).toString(), src.toString()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(120, TimeUnit.SECONDS) && p.exitValue() == 0, String.join(" ", cmd) + ":\n" + log);
        byte[] b = Files.readAllBytes(dir.resolve(out));
        if (out.endsWith(".ptx")) {
            b = java.util.Arrays.copyOf(b, b.length + 1); // NUL-terminated, as a program passes it
        }
        return MemorySegment.ofArray(b);
    }

    @Test
    void aCubinCarriesSassForItsSmWhichDevicesOfThatMajorVersionAndNoLowerMinorLoad() throws Exception {
        for (int sm : new int[] {75, 80, 86, 90, 100, 120}) {
            ModuleCode c = ModuleCode.of(build("k" + sm + ".cubin", "-cubin", "-arch=sm_" + sm));
            assertEquals(List.of(sm), c.sass(), "sm_" + sm);
            assertEquals(List.of(), c.ptx());
            assertTrue(c.runsOn(sm), "its own SM");
            assertFalse(c.runsOn(sm - 10 < 0 ? 0 : sm / 10 * 10 - 10), "a device of a lower major version");
            assertFalse(c.runsOn(sm / 10 * 10 + 10), "a device of a higher major version: SASS does not carry over");
        }
        ModuleCode sm80 = ModuleCode.of(build("k80.cubin", "-cubin", "-arch=sm_80"));
        assertTrue(sm80.runsOn(86), "sm_80 SASS on an 8.6 device");
        assertFalse(ModuleCode.of(build("k86.cubin", "-cubin", "-arch=sm_86")).runsOn(80), "sm_86 SASS on an 8.0 device");
        assertEquals("sm_80 SASS", sm80.describe());
    }

    @Test
    void aFatbinCarriesItsEntriesAndPtxLoadsOnEveryDeviceNotBelowItsTarget() throws Exception {
        ModuleCode sassOnly = ModuleCode.of(build("sass.fatbin", "-fatbin", "-gencode", "arch=compute_80,code=sm_80",
                "-gencode", "arch=compute_90,code=sm_90"));
        assertEquals(List.of(80, 90), sassOnly.sass().stream().sorted().toList());
        assertEquals(List.of(), sassOnly.ptx());
        assertTrue(sassOnly.runsOn(90) && sassOnly.runsOn(89) && sassOnly.runsOn(80));
        assertFalse(sassOnly.runsOn(100), "a Blackwell device: no SASS of its major version, no PTX");
        assertFalse(sassOnly.runsOn(75));

        ModuleCode withPtx = ModuleCode.of(build("both.fatbin", "-fatbin", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"));
        assertEquals(List.of(90), withPtx.sass());
        assertEquals(List.of(90), withPtx.ptx());
        assertTrue(withPtx.runsOn(100) && withPtx.runsOn(120), "PTX is JIT-compiled for newer devices");
        assertFalse(withPtx.runsOn(89), "PTX for a newer target does not load");
        assertTrue(withPtx.describe().contains("sm_90 SASS") && withPtx.describe().contains("compute_90 PTX"),
                withPtx.describe());

        ModuleCode compressed = ModuleCode.of(build("zstd.fatbin", "-fatbin", "-gencode", "arch=compute_80,code=[sm_80,compute_80]",
                "-compress-mode=size"));
        assertEquals(List.of(80), compressed.sass());
        assertEquals(List.of(80), compressed.ptx(), "entry headers are read without decompressing");
        assertTrue(compressed.runsOn(90));
    }

    @Test
    void ptxTextCarriesItsTarget() throws Exception {
        ModuleCode ptx = ModuleCode.of(build("k.ptx", "-ptx", "-arch=compute_90"));
        assertEquals(List.of(90), ptx.ptx());
        assertTrue(ptx.runsOn(90) && ptx.runsOn(120));
        assertFalse(ptx.runsOn(86));
        ModuleCode written = ModuleCode.of(MemorySegment.ofArray(
                "// sm_100 in a comment\n.version 7.0\n.target sm_52, texmode_independent\n.address_size 64\n\0"
                        .getBytes(StandardCharsets.US_ASCII)));
        assertEquals(List.of(52), written.ptx());
        assertTrue(written.runsOn(60));
        ModuleCode none = ModuleCode.of(MemorySegment.ofArray(".version 7.0\n\0".getBytes(StandardCharsets.US_ASCII)));
        assertTrue(none.unknown() && none.runsOn(10), "no .target: the driver decides");
    }

    @Test
    void anImageThatCannotBeToldIsNeverRefusedAndOneThatDoesNotCheckOutThrows() {
        byte[] wrapper = new byte[24];
        java.nio.ByteBuffer.wrap(wrapper).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(0x466243B1).putInt(1);
        ModuleCode c = ModuleCode.of(MemorySegment.ofArray(wrapper));
        assertTrue(c.unknown() && c.runsOn(0));
        byte[] fatbin = new byte[32];
        java.nio.ByteBuffer.wrap(fatbin).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(0xBA55ED50).putShort((short) 1)
                .putShort((short) 16).putLong(1 << 20);
        assertThrows(ImageError.class, () -> ModuleCode.of(MemorySegment.ofArray(fatbin)), "entries past the image's end");
    }
}
