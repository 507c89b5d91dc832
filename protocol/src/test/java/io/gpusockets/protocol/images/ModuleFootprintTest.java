package io.gpusockets.protocol.images;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gpusockets.protocol.api.CuResult;
import java.io.ByteArrayOutputStream;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What loading an image makes the driver allocate, read from PTX, cubins and fatbins built here byte by byte. */
class ModuleFootprintTest {
    private static final long MIB = 1L << 20;
    private static final String PTX = """
            .version 8.0
            .target sm_90
            .address_size 64
            // a comment that declares .global .b8 nothing[999999];
            .visible .global .align 8 .b8 big[1048576];
            .global .align 4 .u32 a;
            .global .align 4 .u32 b[3];
            .const .align 16 .v4 .f32 c[2] = {{1.0, 2.0, 3.0, 4.0}, {5.0, 6.0, 7.0, 8.0}};
            .global .align 4 .u32 d[] = {1, 2, 3, 4, 5};
            .extern .global .align 4 .u32 elsewhere[1000000];
            .visible .entry k(.param .u64 p) {
                .local .align 4 .b8 scratch[4096];
                ret;
            }
            """;

    private static MemorySegment bytes(byte[] b) {
        return MemorySegment.ofArray(b);
    }

    @Test
    void ptxCostsItsModuleScopeVariablesAndItsTextAsCode() {
        ModuleFootprint.Footprint f = ModuleFootprint.ptx(PTX);
        // big 1 MiB; a 4 + b 12 (each rounded to its alignment); c 32; d five u32 from its initializer; nothing extern or local
        assertEquals(MIB + 4 + 12 + 32 + 20, f.data());
        assertEquals(PTX.getBytes(StandardCharsets.UTF_8).length, f.code());
        assertEquals(f, ModuleFootprint.of(bytes(nul(PTX)), 90), "the image as the backend receives it");
    }

    @Test
    void aCubinCostsItsGlobalAndConstantSectionsAndItsCode() {
        ModuleFootprint.Footprint f = ModuleFootprint.of(bytes(cubin(null)), 90);
        assertEquals(2 * MIB + 64 + 128, f.data(), ".nv.global (no file space), .nv.constant0.k, .nv.global.init");
        assertEquals(256, f.code(), ".text.k; .nv.info is no device memory");
    }

    @Test
    void aDebugCubinCostsTheLargerOfItsSassAndTheSameModulesPtx() {
        String ptx = ".version 8.0\n.target sm_90\n.global .b8 g[8388608];\n";
        ModuleFootprint.Footprint f = ModuleFootprint.of(bytes(cubin(ptx)), 90);
        assertEquals(8 * MIB, f.data(), "its PTX (what the emulated device runs) declares more");
    }

    @Test
    void aFatbinCostsTheLargestEntryTheDeviceCouldLoad() {
        byte[] small = nul(".version 8.0\n.target sm_80\n.global .b8 g[1024];\n");
        byte[] large = nul(".version 8.0\n.target sm_90\n.global .b8 g[4194304];\n");
        byte[] newer = nul(".version 8.0\n.target sm_100\n.global .b8 g[67108864];\n");
        byte[] image = fatbin(entry(1, 80, small), entry(1, 90, large), entry(2, 90, cubin(null)), entry(1, 100, newer),
                entry(2, 80, cubin(null)));
        assertEquals(4 * MIB, ModuleFootprint.of(bytes(image), 90).data(), "compute_90 PTX over sm_90 SASS; compute_100 is no candidate");
        assertEquals(2 * MIB + 192, ModuleFootprint.of(bytes(image), 86).data(), "sm_80 SASS runs on 8.6, and is larger than compute_80");
        assertEquals(64 * MIB, ModuleFootprint.of(bytes(fatbin(entry(1, 100, newer))), 90).data(),
                "nothing the device can load: every entry counts (the driver refuses it anyway)");
    }

    @Test
    void anRdcImageCostsTheLargerOfItsLinkedFatbinAndItsUnitsTogether() {
        byte[] unit = fatbin(entry(1, 90, nul(".version 8.0\n.target sm_90\n.global .b8 g[1048576];\n")));
        byte[] linked = fatbin(entry(2, 90, cubin(null)));
        ByteArrayOutputStream rdc = new ByteArrayOutputStream();
        rdc.writeBytes(linked);
        rdc.writeBytes(unit);
        rdc.writeBytes(unit);
        assertEquals(2 * MIB + 192, ModuleFootprint.of(bytes(rdc.toByteArray()), 90).data(), "the linked cubin's");
        ByteArrayOutputStream more = new ByteArrayOutputStream();
        more.writeBytes(linked);
        for (int i = 0; i < 3; i++) {
            more.writeBytes(unit);
        }
        assertEquals(3 * MIB, ModuleFootprint.of(bytes(more.toByteArray()), 90).data(), "three units' globals together");
    }

    @Test
    void anImageThatDoesNotCheckOutIsRefusedAsTheDriverRefusesIt() {
        byte[] cut = java.util.Arrays.copyOf(fatbin(entry(1, 90, nul(PTX))), 40);
        assertEquals(CuResult.CUDA_ERROR_INVALID_IMAGE, assertThrows(ImageError.class, () -> ModuleFootprint.of(bytes(cut), 90)).code);
        assertEquals(CuResult.CUDA_ERROR_INVALID_PTX,
                assertThrows(ImageError.class, () -> ModuleFootprint.ptx(".version 8.0\n.global .b8 g[99999999999999999999];")).code);
        assertEquals(CuResult.CUDA_ERROR_INVALID_PTX,
                assertThrows(ImageError.class, () -> ModuleFootprint.ptx(".global .b64 g[4611686018427387904];")).code,
                "a variable of 2^65 bytes");
        assertEquals(Long.MAX_VALUE, ModuleFootprint.ptx(".global .b8 g[9223372036854775807];").total(), "sums saturate rather than wrap");
    }

    // ---- images built by hand

    private static byte[] nul(String text) {
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        return java.util.Arrays.copyOf(b, b.length + 1);
    }

    /** A fatbin entry: kind (1 PTX, 2 ELF), architecture, payload (stored uncompressed, padded to 8). */
    private static byte[] entry(int kind, int arch, byte[] payload) {
        int size = (payload.length + 7) & ~7;
        ByteBuffer b = ByteBuffer.allocate(0x40 + size).order(ByteOrder.LITTLE_ENDIAN);
        b.putShort(0, (short) kind).putShort(2, (short) 0x0101).putInt(4, 0x40).putLong(8, size);
        b.putInt(0x1C, arch).putLong(0x28, 0x11);
        b.put(0x40, payload);
        return b.array();
    }

    private static byte[] fatbin(byte[]... entries) {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        for (byte[] e : entries) {
            body.writeBytes(e);
        }
        ByteBuffer h = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN);
        h.putInt(0, 0xBA55ED50).putShort(4, (short) 1).putShort(6, (short) 16).putLong(8, body.size());
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.writeBytes(h.array());
        out.writeBytes(body.toByteArray());
        return out.toByteArray();
    }

    private record Section(String name, int type, int size) {
    }

    /**
     * A 64-bit ELF cubin with code (.text.k, 256 bytes), 2 MiB of uninitialised globals (.nv.global, no file
     * space), 128 bytes of initialised ones, a 64-byte constant bank and metadata; with {@code debugPtx}, a
     * {@code .nv_debug_ptx_txt} section holding it.
     */
    private static byte[] cubin(String debugPtx) {
        List<Section> sections = new java.util.ArrayList<>(List.of(new Section("", 0, 0), new Section(".shstrtab", 3, 0),
                new Section(".text.k", 1, 256), new Section(".nv.global", 8, (int) (2 * MIB)),
                new Section(".nv.global.init", 1, 128), new Section(".nv.constant0.k", 1, 64), new Section(".nv.info", 1, 16)));
        byte[] ptx = debugPtx == null ? null : nul(debugPtx);
        if (ptx != null) {
            sections.add(new Section(FatbinImage.DEBUG_PTX_SECTION, 1, ptx.length));
        }
        ByteArrayOutputStream names = new ByteArrayOutputStream();
        int[] nameAt = new int[sections.size()];
        for (int i = 0; i < sections.size(); i++) {
            nameAt[i] = names.size();
            names.writeBytes(sections.get(i).name().getBytes(StandardCharsets.US_ASCII));
            names.write(0);
        }
        int[] offset = new int[sections.size()];
        int at = 64;
        offset[1] = at;
        at += names.size();
        for (int i = 2; i < sections.size(); i++) {
            offset[i] = at;
            at += sections.get(i).type() == FatbinImage.SHT_NOBITS ? 0 : sections.get(i).size();
        }
        int shoff = (at + 7) & ~7;
        ByteBuffer b = ByteBuffer.allocate(shoff + 64 * sections.size()).order(ByteOrder.LITTLE_ENDIAN);
        b.put(0, new byte[] {0x7f, 'E', 'L', 'F', 2, 1, 1});
        b.putLong(0x28, shoff).putShort(0x34, (short) 64).putShort(0x3A, (short) 64).putShort(0x3C, (short) sections.size())
                .putShort(0x3E, (short) 1);
        b.put(offset[1], names.toByteArray());
        if (ptx != null) {
            b.put(offset[sections.size() - 1], ptx);
        }
        for (int i = 1; i < sections.size(); i++) {
            Section s = sections.get(i);
            int sh = shoff + 64 * i;
            b.putInt(sh, nameAt[i]).putInt(sh + 4, s.type()).putLong(sh + 0x18, offset[i])
                    .putLong(sh + 0x20, i == 1 ? names.size() : s.size());
        }
        return b.array();
    }
}
