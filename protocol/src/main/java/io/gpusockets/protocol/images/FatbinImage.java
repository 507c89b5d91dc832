package io.gpusockets.protocol.images;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NO_BINARY_FOR_GPU;

import io.gpusockets.protocol.calls.ModuleImageKind;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

/**
 * The entries of a fatbin and the sections of a cubin: the PTX the emulated device runs (it never runs
 * SASS), and the sizes the backend charges a load by ({@link ModuleFootprint}). A fatbin
 * is a header and a run of entries, each a header and a payload: PTX text or an ELF cubin, for one
 * architecture, possibly compressed. The image comes from an untrusted client: every offset and size
 * is checked against the image's length before it is used, and anything inconsistent is
 * CUDA_ERROR_INVALID_IMAGE ({@link ImageError}).
 *
 * <pre>
 *  fatbin header (16 bytes)                     entry header (headerSize bytes, at least 0x40:
 *                                                 0x40 SASS, 0x50 PTX, more with -G's file name)
 *   0x00 magic u32 0xBA55ED50                    0x00 kind u16: 1 PTX, 2 ELF (cubin)
 *   0x04 version u16 (1)                         0x02 u16 (0x0101 as nvcc 13 writes it; not read)
 *   0x06 headerSize u16 (16)                     0x04 headerSize u32: the payload starts here
 *   0x08 fatSize u64: bytes of entries           0x08 size u64: payload bytes (padded to 8)
 *   0x10 entries, back to back, up to            0x10 compressedSize u32 (0 if not compressed)
 *        headerSize + fatSize                    0x14 u32 (PTX: 0x40 or 0x48; not read)
 *                                                0x18 version minor u16, major u16 (PTX ISA 9.0, ELF 1.8)
 *  next entry = entry + headerSize + size        0x1C arch u32: 90 for compute_90 / sm_90
 *                                                0x20 file name offset u32, length u32 (-G: the .cu name)
 *  flags: 0x0001 64-bit, 0x0002 debug (-G),      0x28 flags u64 (left)
 *   0x0010 Linux, 0x2000 LZ4-compressed,         0x30 u64 (0)
 *   0x8000 zstd-compressed                       0x38 uncompressedSize u64 (0 if not compressed)
 * </pre>
 *
 * A PTX payload is the text nvcc -ptx prints with its comments blanked and its tabs made spaces,
 * NUL-terminated and padded with NULs.
 * A compressed payload is compressedSize bytes of one LZ4 block ({@code -compress-mode=speed}) or
 * one zstd frame (nvcc 13's default and {@code size}, {@code balance}) that expand to
 * uncompressedSize bytes; {@code -compress-mode=none} (or {@code --no-compress}) stores it as is.
 * All fields little-endian. Found by building fatbins with nvcc 13.0 ({@code -arch=sm_90}, several
 * {@code -gencode}, each {@code -compress-mode}, {@code -G}) and reading them back byte by byte; the
 * entry header's field names and the flags 0x1, 0x2, 0x10 and 0x2000 follow the cricket project's
 * fatbin reader (github.com/RWTH-ACS/cricket, cpu/cpu-elf2.c); the zstd flag 0x8000, the 0x50-byte
 * PTX header and the text's shape were seen in nvcc 13.0's output. Entries come in nvcc's order (for
 * {@code -gencode} compute_80 PTX, then sm_80 SASS, then the next architecture's), not sorted.
 *
 * <p>A cubin (ELF) holds PTX only when built with {@code -G}: the {@code .nv_debug_ptx_txt} section,
 * the PTX's lines as NUL-terminated strings (found with readelf on nvcc 13.0 output).
 */
public final class FatbinImage {
    public static final int KIND_PTX = 1;
    public static final int KIND_ELF = 2;
    public static final long FLAG_LZ4 = 0x2000;
    public static final long FLAG_ZSTD = 0x8000;

    public static final int HEADER_BYTES = 16;
    public static final int VERSION_OFFSET = 4;
    public static final int ENTRY_KIND_OFFSET = 0x00;
    public static final int ENTRY_HEADER_SIZE_OFFSET = 0x04;
    public static final int ENTRY_SIZE_OFFSET = 0x08;
    public static final int ENTRY_COMPRESSED_SIZE_OFFSET = 0x10;
    public static final int ENTRY_ARCH_OFFSET = 0x1C;
    public static final int ENTRY_FLAGS_OFFSET = 0x28;
    public static final int ENTRY_UNCOMPRESSED_SIZE_OFFSET = 0x38;
    /** The smallest entry header nvcc writes: every field above lies inside it. */
    public static final int ENTRY_MIN_HEADER = 0x40;

    /** ELF-64 file and section header offsets (elf.h). */
    private static final int E_SHOFF = 0x28;
    private static final int E_SHENTSIZE = 0x3A;
    private static final int E_SHNUM = 0x3C;
    private static final int E_SHSTRNDX = 0x3E;
    private static final int ELF_HEADER_BYTES = 0x40;
    private static final int SH_NAME = 0x00;
    private static final int SH_TYPE = 0x04;
    private static final int SH_OFFSET = 0x18;
    private static final int SH_SIZE = 0x20;
    private static final int SH_MIN_BYTES = 0x28;
    /** ELF section type of sections that take no file space (.bss, a cubin's .nv.global). */
    public static final int SHT_NOBITS = 8;
    public static final String DEBUG_PTX_SECTION = ".nv_debug_ptx_txt";

    public static final String BUILD_WITH_PTX = "the emulated device runs PTX only: build with PTX "
            + "(-gencode arch=compute_90,code=compute_90, or nvcc's default, which embeds PTX)";

    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED;

    /** One entry: its kind, architecture, flags, and where its payload lies in the fatbin. */
    public record Entry(int kind, int arch, long flags, long payload, long size, long compressedSize, long uncompressedSize) {
        public boolean isPtx() {
            return kind == KIND_PTX;
        }

        @Override
        public String toString() {
            String name = kind == KIND_PTX ? "compute_" + arch + " PTX" : kind == KIND_ELF ? "sm_" + arch + " SASS" : "kind " + kind;
            return (flags & FLAG_ZSTD) != 0 ? name + " (zstd)" : (flags & FLAG_LZ4) != 0 ? name + " (LZ4)" : name;
        }
    }

    private FatbinImage() {
    }

    /**
     * The entries of {@code fatbin}, whose segment spans exactly the fatbin (header and entries).
     *
     * @throws ImageError CUDA_ERROR_INVALID_IMAGE if the header or an entry does not fit the image
     */
    public static List<Entry> entries(MemorySegment fatbin) {
        long length = fatbin.byteSize();
        if (length < HEADER_BYTES || fatbin.get(INT, 0) != ModuleImageKind.FATBIN_MAGIC) {
            throw invalid("not a fatbin, or shorter than its " + HEADER_BYTES + "-byte header");
        }
        long headerSize = Short.toUnsignedLong(fatbin.get(SHORT, ModuleImageKind.FATBIN_HEADER_SIZE_OFFSET));
        long fatSize = fatbin.get(LONG, ModuleImageKind.FATBIN_FAT_SIZE_OFFSET);
        if (headerSize < HEADER_BYTES || fatSize < 0 || fatSize > length - headerSize) {
            throw invalid("fatbin header (size " + headerSize + ", entries " + fatSize + " bytes) exceeds the image's "
                    + length + " bytes");
        }
        long end = headerSize + fatSize;
        List<Entry> entries = new ArrayList<>();
        for (long at = headerSize; at < end; ) {
            if (end - at < ENTRY_MIN_HEADER) {
                throw invalid("fatbin entry at " + at + " is cut short (" + (end - at) + " bytes left)");
            }
            int kind = Short.toUnsignedInt(fatbin.get(SHORT, at + ENTRY_KIND_OFFSET));
            long entryHeader = Integer.toUnsignedLong(fatbin.get(INT, at + ENTRY_HEADER_SIZE_OFFSET));
            long size = fatbin.get(LONG, at + ENTRY_SIZE_OFFSET);
            if (entryHeader < ENTRY_MIN_HEADER || entryHeader > end - at || size < 0 || size > end - at - entryHeader) {
                throw invalid("fatbin entry at " + at + " (header " + entryHeader + ", payload " + size
                        + " bytes) runs past the fatbin's end at " + end);
            }
            long compressed = Integer.toUnsignedLong(fatbin.get(INT, at + ENTRY_COMPRESSED_SIZE_OFFSET));
            long uncompressed = fatbin.get(LONG, at + ENTRY_UNCOMPRESSED_SIZE_OFFSET);
            int arch = fatbin.get(INT, at + ENTRY_ARCH_OFFSET);
            long flags = fatbin.get(LONG, at + ENTRY_FLAGS_OFFSET);
            entries.add(new Entry(kind, arch, flags, at + entryHeader, size, compressed, uncompressed));
            at += entryHeader + size;
        }
        return entries;
    }

    /**
     * The PTX text of the best entry of {@code fatbin} for a device of compute capability
     * {@code capability} (major * 10 + minor): the PTX of the highest architecture not above it.
     *
     * @throws ImageError CUDA_ERROR_INVALID_IMAGE for a malformed fatbin or payload;
     *                   CUDA_ERROR_NO_BINARY_FOR_GPU if it has no PTX, or PTX only for newer targets
     */
    public static String ptx(MemorySegment fatbin, int capability) {
        List<Entry> entries = entries(fatbin);
        Entry best = null;
        for (Entry e : entries) {
            if (e.isPtx() && e.arch() <= capability && (best == null || e.arch() > best.arch())) {
                best = e;
            }
        }
        if (best == null) {
            String inside = entries.isEmpty() ? "no entries"
                    : entries.stream().map(Entry::toString).collect(Collectors.joining(", "));
            boolean anyPtx = entries.stream().anyMatch(Entry::isPtx);
            throw new ImageError(CUDA_ERROR_NO_BINARY_FOR_GPU, anyPtx
                    ? "the fatbin holds " + inside + ": PTX only for targets newer than the emulated device's compute "
                            + "capability " + capability / 10 + "." + capability % 10 + "; build with -gencode arch=compute_"
                            + capability + ",code=compute_" + capability + " or lower"
                    : "the fatbin holds " + inside + ", no PTX; " + BUILD_WITH_PTX);
        }
        return text(payload(fatbin, best));
    }

    /** The entry's payload, decompressed. */
    public static byte[] payload(MemorySegment fatbin, Entry e) {
        MemorySegment stored = fatbin.asSlice(e.payload(), e.size());
        boolean lz4 = (e.flags() & FLAG_LZ4) != 0;
        boolean zstd = (e.flags() & FLAG_ZSTD) != 0;
        if (!lz4 && !zstd) {
            return bounded(stored, e).toArray(ValueLayout.JAVA_BYTE);
        }
        if (lz4 && zstd) {
            throw invalid(e + " is flagged both LZ4- and zstd-compressed");
        }
        if (e.compressedSize() > e.size()) {
            throw invalid(e + ": compressed size " + e.compressedSize() + " exceeds its payload's " + e.size() + " bytes");
        }
        if (e.uncompressedSize() < 0 || e.uncompressedSize() > PtxText.MAX_PTX) {
            throw invalid(e + ": uncompressed size " + e.uncompressedSize() + " is not in 0.." + PtxText.MAX_PTX);
        }
        byte[] in = stored.asSlice(0, e.compressedSize()).toArray(ValueLayout.JAVA_BYTE);
        try {
            return lz4 ? Lz4Block.decompress(in, (int) e.uncompressedSize()) : Zstd.decompress(in, (int) e.uncompressedSize());
        } catch (Lz4Block.Malformed | Zstd.Malformed m) {
            throw invalid(e + " does not decompress: " + m.getMessage());
        }
    }

    private static MemorySegment bounded(MemorySegment stored, Entry e) {
        if (stored.byteSize() > PtxText.MAX_PTX) {
            throw invalid(e + " has " + stored.byteSize() + " bytes, over " + PtxText.MAX_PTX);
        }
        return stored;
    }

    /** PTX text up to its NUL (a payload is padded with NULs). */
    private static String text(byte[] payload) {
        int n = 0;
        while (n < payload.length && payload[n] != 0) {
            n++;
        }
        if (n == 0) {
            throw invalid("the PTX entry is empty");
        }
        return new String(payload, 0, n, StandardCharsets.UTF_8);
    }

    /** One section of a cubin: its name, ELF type, size, and bytes (none for SHT_NOBITS, which take no file space). */
    public record Section(String name, int type, long size, MemorySegment bytes) {
    }

    /**
     * The sections of a cubin, in the order of its section header table. {@code elf} spans exactly the
     * cubin (as {@link ModuleImageKind#length} finds it).
     *
     * @throws ImageError CUDA_ERROR_INVALID_IMAGE if the section table or a section does not fit the image
     */
    public static List<Section> elfSections(MemorySegment elf) {
        long length = elf.byteSize();
        if (length < ELF_HEADER_BYTES) {
            throw invalid("cubin shorter than its ELF header");
        }
        long shoff = elf.get(LONG, E_SHOFF);
        int shentsize = Short.toUnsignedInt(elf.get(SHORT, E_SHENTSIZE));
        int shnum = Short.toUnsignedInt(elf.get(SHORT, E_SHNUM));
        int shstrndx = Short.toUnsignedInt(elf.get(SHORT, E_SHSTRNDX));
        if (shoff < 0 || shoff > length || (shnum > 0 && shentsize < SH_MIN_BYTES)
                || (long) shentsize * shnum > length - shoff || (shnum > 0 && shstrndx >= shnum)) {
            throw invalid("cubin section header table exceeds the image");
        }
        List<Section> sections = new ArrayList<>(shnum);
        if (shnum > 0) {
            MemorySegment names = section(elf, shoff + (long) shstrndx * shentsize);
            for (int i = 0; i < shnum; i++) {
                long sh = shoff + (long) i * shentsize;
                long name = Integer.toUnsignedLong(elf.get(INT, sh + SH_NAME));
                long size = elf.get(LONG, sh + SH_SIZE);
                if (size < 0) {
                    throw invalid("cubin section " + i + " has a size of " + Long.toUnsignedString(size) + " bytes");
                }
                String n = cString(names, name);
                sections.add(new Section(n == null ? "" : n, elf.get(INT, sh + SH_TYPE), size, section(elf, sh)));
            }
        }
        return sections;
    }

    /**
     * The PTX a cubin carries ({@code .nv_debug_ptx_txt}, present with -G): its strings joined by
     * newlines. {@code elf} spans exactly the cubin (as {@link ModuleImageKind#length} finds it).
     *
     * @throws ImageError CUDA_ERROR_NO_BINARY_FOR_GPU if there is no such section,
     *                   CUDA_ERROR_INVALID_IMAGE if the section table does not fit the image
     */
    public static String elfPtx(MemorySegment elf) {
        for (Section s : elfSections(elf)) {
            if (DEBUG_PTX_SECTION.equals(s.name())) {
                String ptx = joinedStrings(s.bytes());
                if (!ptx.isBlank()) {
                    return ptx;
                }
            }
        }
        throw new ImageError(CUDA_ERROR_NO_BINARY_FOR_GPU, "the image is a cubin (SASS) without PTX; " + BUILD_WITH_PTX);
    }

    private static MemorySegment section(MemorySegment elf, long sh) {
        if (elf.get(INT, sh + SH_TYPE) == SHT_NOBITS) {
            return MemorySegment.ofArray(new byte[0]);
        }
        long offset = elf.get(LONG, sh + SH_OFFSET);
        long size = elf.get(LONG, sh + SH_SIZE);
        if (offset < 0 || size < 0 || offset > elf.byteSize() || size > elf.byteSize() - offset) {
            throw invalid("cubin section at " + offset + " (" + size + " bytes) exceeds the image");
        }
        return elf.asSlice(offset, size);
    }

    private static String cString(MemorySegment table, long at) {
        if (at >= table.byteSize()) {
            return null;
        }
        long n = strlen(table.asSlice(at), table.byteSize() - at);
        return n < 0 ? null : new String(table.asSlice(at, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
    }

    private static String joinedStrings(MemorySegment s) {
        if (s.byteSize() > PtxText.MAX_PTX) {
            throw invalid(DEBUG_PTX_SECTION + " has " + s.byteSize() + " bytes, over " + PtxText.MAX_PTX);
        }
        StringBuilder b = new StringBuilder();
        for (String line : new String(s.toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8).split("\0")) {
            if (!line.isEmpty()) {
                b.append(line).append('\n');
            }
        }
        return b.toString();
    }

    /** Index of the first NUL below {@code limit}, or -1. */
    private static long strlen(MemorySegment segment, long limit) {
        for (long i = 0; i < limit; i++) {
            if (segment.get(ValueLayout.JAVA_BYTE, i) == 0) {
                return i;
            }
        }
        return -1;
    }

    private static ImageError invalid(String detail) {
        return new ImageError(CUDA_ERROR_INVALID_IMAGE, detail);
    }
}
