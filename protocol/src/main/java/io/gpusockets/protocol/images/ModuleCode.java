package io.gpusockets.protocol.images;

import io.gpusockets.protocol.calls.ModuleImageKind;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The code a module image carries, by architecture: SASS (cubins, for one {@code sm_XY} each) and PTX (for a
 * {@code compute_XY} target each), and whether a device of a given compute capability can run any of it, as the
 * driver decides when it loads the image: SASS built for the device's major version and a minor not above the
 * device's, else PTX of a target not above the device's capability, which the driver JIT-compiles. Used by a restore
 * (issue 22) to refuse, before it makes anything, an image checkpointed on one GPU model that another cannot load.
 *
 * <ul>
 *   <li>PTX text: its {@code .target sm_XY} directive (an arch-specific {@code sm_90a} counts as 90).</li>
 *   <li>A cubin (ELF): the SM in its {@code e_flags}: bits 8 to 15 from ELF ABI version 8 on (nvcc 13 writes
 *       {@code 0x06005a04} for sm_90), the low byte before it. The PTX a {@code -G} cubin keeps for debuggers is
 *       not loaded by the driver and does not count.</li>
 *   <li>A fatbin: its entries ({@link FatbinImage#entries}); of an {@code -rdc} run of fatbins, the first, which is
 *       what the driver loads.</li>
 *   <li>A fatbin wrapper (a pointer the bytes cannot follow) or a cubin of another ELF class: {@link #unknown()},
 *       which never refuses.</li>
 * </ul>
 * Arch-specific ({@code sm_90a}) and family ({@code sm_100f}) SASS are taken as their plain architecture: they
 * load on fewer devices than this says, never on more of the same major version. The image is the peer's: a
 * structure that does not check out throws {@link ImageError}.
 *
 * @param sass the SASS architectures (major * 10 + minor), in the image's order
 * @param ptx  the PTX targets, in the image's order
 * @param unknown whether the image's code could not be told (then it is never refused)
 */
public record ModuleCode(List<Integer> sass, List<Integer> ptx, boolean unknown) {
    private static final Pattern TARGET = Pattern.compile("(?m)^\\s*\\.target\\s+sm_(\\d{1,4})");
    private static final int EI_CLASS = 4;
    private static final int EI_ABIVERSION = 8;
    private static final int E_FLAGS = 0x30;
    private static final int ELF_HEADER_BYTES = 0x40;
    /** From this ELF ABI version on the SM lies in e_flags' second byte. */
    private static final int ABI_SM_IN_SECOND_BYTE = 8;
    /** Most of a PTX image read for its .target (the directive comes first). */
    private static final int PTX_HEAD = 64 << 10;

    public ModuleCode {
        sass = List.copyOf(sass);
        ptx = List.copyOf(ptx);
    }

    /** The code of {@code image} (PTX text, cubin, fatbin or a run of fatbins), which spans the bytes received. */
    public static ModuleCode of(MemorySegment image) {
        return switch (ModuleImageKind.of(image)) {
            case PTX -> ptxText(image);
            case CUBIN_ELF -> {
                Integer sm = cubinArch(image);
                yield sm == null ? new ModuleCode(List.of(), List.of(), true) : new ModuleCode(List.of(sm), List.of(), false);
            }
            case FATBIN -> fatbin(image);
            case FATBIN_WRAPPER -> new ModuleCode(List.of(), List.of(), true);
        };
    }

    /** Whether a device of compute capability {@code capability} (major * 10 + minor) can load some of this code. */
    public boolean runsOn(int capability) {
        if (unknown || capability < 0) {
            return true;
        }
        for (int a : sass) {
            if (a / 10 == capability / 10 && a <= capability) {
                return true;
            }
        }
        for (int a : ptx) {
            if (a <= capability) {
                return true;
            }
        }
        return false;
    }

    /** E.g. "sm_80 SASS, sm_90 SASS, compute_90 PTX" ("no code" when empty). */
    public String describe() {
        if (unknown) {
            return "code of an unknown kind";
        }
        List<String> parts = new ArrayList<>();
        sass.forEach(a -> parts.add("sm_" + a + " SASS"));
        ptx.forEach(a -> parts.add("compute_" + a + " PTX"));
        return parts.isEmpty() ? "no code" : String.join(", ", parts);
    }

    /** "9.0" for 90. */
    public static String capability(int capability) {
        return capability / 10 + "." + capability % 10;
    }

    private static ModuleCode ptxText(MemorySegment image) {
        long n = Math.min(image.byteSize(), PTX_HEAD);
        byte[] head = image.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE);
        int len = 0;
        while (len < head.length && head[len] != 0) {
            len++;
        }
        Matcher m = TARGET.matcher(PtxText.stripComments(new String(head, 0, len, StandardCharsets.UTF_8)));
        if (!m.find()) {
            return new ModuleCode(List.of(), List.of(), true); // the driver says what it makes of it
        }
        return new ModuleCode(List.of(), List.of(Integer.parseInt(m.group(1))), false);
    }

    /** The SM of a cubin's e_flags, or null for an ELF that is not 64-bit. */
    static Integer cubinArch(MemorySegment elf) {
        if (elf.byteSize() < ELF_HEADER_BYTES) {
            throw new ImageError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE,
                    "a cubin shorter than its ELF header");
        }
        if (elf.get(ValueLayout.JAVA_BYTE, EI_CLASS) != 2) {
            return null;
        }
        int abi = Byte.toUnsignedInt(elf.get(ValueLayout.JAVA_BYTE, EI_ABIVERSION));
        int flags = elf.get(ValueLayout.JAVA_INT_UNALIGNED, E_FLAGS);
        return abi >= ABI_SM_IN_SECOND_BYTE ? (flags >>> 8) & 0xff : flags & 0xff;
    }

    private static ModuleCode fatbin(MemorySegment image) {
        long length = ModuleImageKind.length(image);
        if (length < 0 || length > image.byteSize()) {
            throw new ImageError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE,
                    "the fatbin's header gives no length within its " + image.byteSize() + " bytes");
        }
        List<Integer> sass = new ArrayList<>(), ptx = new ArrayList<>();
        for (FatbinImage.Entry e : FatbinImage.entries(image.asSlice(0, length))) {
            if (e.kind() == FatbinImage.KIND_ELF) {
                sass.add(e.arch());
            } else if (e.isPtx()) {
                ptx.add(e.arch());
            }
        }
        return new ModuleCode(sass, ptx, false);
    }
}
