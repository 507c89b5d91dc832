package io.gpusockets.protocol.images;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NO_BINARY_FOR_GPU;

import io.gpusockets.protocol.calls.ModuleImageKind;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The device memory loading a module image makes the driver allocate, read from the image before the
 * driver sees it, so that a tenant is charged before the load (SessionQuota). Two parts:
 * <ul>
 *   <li><b>data</b>: the module's variables. In PTX, each module-scope {@code .global} and
 *       {@code .const} definition ({@link PtxVariables}), its size rounded up to its alignment. In a
 *       cubin, the sections the driver copies to (or zero-fills in) device memory: {@code .nv.global}
 *       (uninitialised globals, taking no file space), {@code .nv.global.init} and every
 *       {@code .nv.constant*} bank.</li>
 *   <li><b>code</b>: a cubin's {@code .text.*} sections; for PTX, which the driver compiles to SASS of
 *       a size not known before, the PTX text's length.</li>
 * </ul>
 * An image may hold several forms of the module, of which the driver loads one. A fatbin: the
 * driver takes SASS built for the device's architecture (same major version, minor not above the
 * device's), else JIT-compiles the newest PTX not above it; a {@code -G} cubin also carries its PTX
 * (which the emulated device runs). Which one is loaded is not certain here (the driver's choice
 * is not documented to the byte, and the emulated device runs PTX where a GPU runs SASS), so every
 * form the device could load is a candidate, and the largest is charged: SASS and PTX entries
 * compatible with the device's compute capability, or, when none is, every entry. An {@code -rdc}
 * image (a linked fatbin followed by its translation units' prelinked fatbins,
 * {@link ModuleImageKind#image}) costs the larger of its first fatbin (what the driver loads) and the
 * units together (what a device that links them, the emulated one, loads).
 *
 * <p>The rule is an upper bound of what the image declares; what the driver adds on top (allocation
 * granularity, its own per-module structures) is measured on the real driver by
 * {@code scripts/gpu-pass-quota}. A compressed entry larger than {@link PtxText#MAX_PTX} once expanded
 * cannot be read within the backend's bounds and is refused ({@link ImageError}), as is any image whose
 * structure does not check out.
 */
public final class ModuleFootprint {
    /** What a load allocates: variables and code, in bytes. */
    public record Footprint(long data, long code) {
        public static final Footprint NONE = new Footprint(0, 0);

        /** Both parts; Long.MAX_VALUE when they overflow. */
        public long total() {
            long t = data + code;
            return t < 0 ? Long.MAX_VALUE : t;
        }

        Footprint plus(Footprint o) {
            return new Footprint(saturated(data, o.data), saturated(code, o.code));
        }

        static Footprint larger(Footprint a, Footprint b) {
            return b.total() > a.total() ? b : a;
        }
    }

    private static final String TEXT_PREFIX = ".text.";
    private static final String GLOBAL_PREFIX = ".nv.global";
    private static final String CONSTANT_PREFIX = ".nv.constant";

    private ModuleFootprint() {
    }

    /**
     * The footprint of {@code image} (PTX, a cubin, a fatbin, or a fatbin followed by prelinked fatbins),
     * which spans exactly the bytes received, on a device of compute capability {@code capability}
     * (major * 10 + minor).
     *
     * @throws ImageError when the image's structure does not check out
     */
    public static Footprint of(MemorySegment image, int capability) {
        return switch (ModuleImageKind.of(image)) {
            case PTX -> ptx(ptxText(image));
            case CUBIN_ELF -> cubin(extent(image));
            case FATBIN -> fatbins(image, capability);
            case FATBIN_WRAPPER -> throw new ImageError(CUDA_ERROR_INVALID_IMAGE,
                    "a fatbin wrapper passed as bytes: its fatbin pointer cannot be followed");
        };
    }

    /** PTX text: its variables, and its length as the code it compiles to. */
    public static Footprint ptx(String text) {
        long data = 0;
        for (PtxVariables.Variable v : PtxVariables.of(text)) {
            data = saturated(data, aligned(v.size(), v.alignment()));
        }
        return new Footprint(data, text.getBytes(StandardCharsets.UTF_8).length);
    }

    /** A cubin: its data and code sections, or the PTX it carries (-G) if that costs more. */
    static Footprint cubin(MemorySegment elf) {
        long data = 0, code = 0;
        String debugPtx = null;
        for (FatbinImage.Section s : FatbinImage.elfSections(elf)) {
            if (s.name().startsWith(TEXT_PREFIX)) {
                code = saturated(code, s.size());
            } else if (s.name().startsWith(GLOBAL_PREFIX) || s.name().startsWith(CONSTANT_PREFIX)) {
                data = saturated(data, s.size());
            } else if (s.name().equals(FatbinImage.DEBUG_PTX_SECTION) && debugPtx == null) {
                debugPtx = debugPtx(elf);
            }
        }
        Footprint sass = new Footprint(data, code);
        return debugPtx == null ? sass : Footprint.larger(sass, ptx(debugPtx));
    }

    /** The PTX of a -G cubin, or null when its section holds none. */
    private static String debugPtx(MemorySegment elf) {
        try {
            return FatbinImage.elfPtx(elf);
        } catch (ImageError none) {
            if (none.code != CUDA_ERROR_NO_BINARY_FOR_GPU) {
                throw none;
            }
            return null;
        }
    }

    /** A fatbin, or an -rdc run of fatbins: the larger of the first and the others together. */
    private static Footprint fatbins(MemorySegment image, int capability) {
        MemorySegment first = extent(image);
        Footprint linked = fatbin(first, capability);
        Footprint units = Footprint.NONE;
        for (long off = first.byteSize(); off < image.byteSize(); ) {
            MemorySegment rest = image.asSlice(off);
            if (rest.byteSize() < ModuleImageKind.FATBIN_MIN_BYTES || ModuleImageKind.of(rest) != ModuleImageKind.FATBIN) {
                break;   // not a run of fatbins: the driver reads only the first
            }
            MemorySegment next = extent(rest);
            units = units.plus(fatbin(next, capability));
            off += next.byteSize();
        }
        return Footprint.larger(linked, units);
    }

    /** One fatbin: the largest entry the device could load ({@link ModuleFootprint}'s rule). */
    static Footprint fatbin(MemorySegment fatbin, int capability) {
        List<FatbinImage.Entry> entries = FatbinImage.entries(fatbin);
        List<FatbinImage.Entry> candidates = new ArrayList<>();
        for (FatbinImage.Entry e : entries) {
            boolean sass = e.kind() == FatbinImage.KIND_ELF && e.arch() / 10 == capability / 10 && e.arch() <= capability;
            boolean ptx = e.isPtx() && e.arch() <= capability;
            if (sass || ptx) {
                candidates.add(e);
            }
        }
        Footprint most = Footprint.NONE;
        for (FatbinImage.Entry e : candidates.isEmpty() ? entries : candidates) {
            most = Footprint.larger(most, entry(fatbin, e));
        }
        return most;
    }

    private static Footprint entry(MemorySegment fatbin, FatbinImage.Entry e) {
        boolean compressed = (e.flags() & (FatbinImage.FLAG_LZ4 | FatbinImage.FLAG_ZSTD)) != 0;
        if (e.kind() == FatbinImage.KIND_ELF) {
            // an uncompressed cubin is read where it lies, whatever its size
            MemorySegment elf = compressed ? MemorySegment.ofArray(FatbinImage.payload(fatbin, e))
                    : fatbin.asSlice(e.payload(), e.size());
            return cubin(extent(elf));
        }
        if (e.isPtx()) {
            return ptx(text(FatbinImage.payload(fatbin, e)));
        }
        return Footprint.NONE;   // an entry of a kind the driver does not load
    }

    /** The cubin or fatbin at {@code image}'s start, cut to the length its headers give. */
    private static MemorySegment extent(MemorySegment image) {
        long length = image.byteSize() < ModuleImageKind.FATBIN_MIN_BYTES ? -1 : ModuleImageKind.length(image);
        if (length < 0) {
            throw new ImageError(CUDA_ERROR_INVALID_IMAGE, "the image's headers give no length within its "
                    + image.byteSize() + " bytes");
        }
        return image.asSlice(0, length);
    }

    private static String ptxText(MemorySegment image) {
        return text(image.toArray(ValueLayout.JAVA_BYTE));
    }

    /** Text up to its NUL, if any. */
    private static String text(byte[] bytes) {
        int n = 0;
        while (n < bytes.length && bytes[n] != 0) {
            n++;
        }
        return new String(bytes, 0, n, StandardCharsets.UTF_8);
    }

    private static long aligned(long size, long alignment) {
        long a = Math.max(alignment, 1);
        long r = size + a - 1;
        return r < 0 ? Long.MAX_VALUE : r / a * a;
    }

    private static long saturated(long a, long b) {
        long s = a + b;
        return s < 0 ? Long.MAX_VALUE : s;
    }
}
