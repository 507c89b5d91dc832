package io.gpusockets.protocol.calls;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The formats of a module image handed to cuModuleLoadData* / cuLibraryLoadData, told apart by
 * their first bytes, and how many bytes an image spans, found the way the driver finds it: images
 * reach the frontend as bare pointers from C, so the length must come from the content.
 *
 * <pre>
 *  fatbin (FATBIN_MAGIC)       fatbin wrapper (FATBIN_WRAPPER_MAGIC)   cubin (ELF64, "\x7fELF")
 *   0  magic u32                0  magic u32                            0x00  magic "\x7fELF"
 *   4  version u16              4  version u32 (1, or 2 for -rdc)       0x04  EI_CLASS u8 (2: 64-bit)
 *   6  headerSize u16           8  fatbin pointer (the image)           0x20  e_phoff u64
 *   8  fatSize u64             16  v1: filename pointer; v2: NULL-      0x28  e_shoff u64
 *                                  terminated array of prelinked fatbins
 *  16  ... (headerSize bytes)                                           0x36  e_phentsize u16
 *  length = headerSize + fatSize                                        0x38  e_phnum u16
 *                                                                       0x3A  e_shentsize u16
 *  PTX: text up to and including its NUL                                0x3C  e_shnum u16
 *                                                                       section header: 0x04 sh_type u32,
 *                                                                         0x18 sh_offset u64, 0x20 sh_size u64
 *  cubin length = the furthest of the program header table's end, the section header table's end
 *  and every section's end (SHT_NOBITS sections take no file space)
 * </pre>
 *
 * All fields little-endian. The fatbin and wrapper layouts are those nvcc emits; the ELF offsets
 * are the ELF-64 object file format's (elf.h).
 */
public enum ModuleImageKind {
    /** NUL-terminated PTX text (anything that is none of the others). */
    PTX,
    /** A cubin: an ELF file. */
    CUBIN_ELF,
    /** Fatbin data: a header and the images for several architectures. */
    FATBIN,
    /** The struct nvcc emits around a fatbin: magic, version, pointer to the fatbin, filename. */
    FATBIN_WRAPPER;

    /** The first four bytes of fatbin data, as a little-endian u32. */
    public static final int FATBIN_MAGIC = 0xBA55ED50;
    /** The first four bytes of the fatbin wrapper struct, as a little-endian u32. */
    public static final int FATBIN_WRAPPER_MAGIC = 0x466243B1;
    /** "\x7fELF", the first four bytes of a cubin, as a little-endian u32. */
    public static final int ELF_MAGIC = 0x464C457F;
    /** Bytes of each magic. */
    public static final int MAGIC_BYTES = 4;
    /** Upper bound on an image (and on the PTX NUL scan). */
    public static final long MAX_IMAGE = 512L << 20;

    public static final int FATBIN_HEADER_SIZE_OFFSET = 6;
    public static final int FATBIN_FAT_SIZE_OFFSET = 8;
    /** Bytes a fatbin must have for its length to be read. */
    public static final int FATBIN_MIN_BYTES = 16;
    public static final int WRAPPER_VERSION_OFFSET = 4;
    public static final int WRAPPER_FATBIN_OFFSET = 8;
    /** Version 2 (FATBINC_LINK_VERSION, -rdc builds): the pointer at 16 is a NULL-terminated array of prelinked fatbins. */
    public static final int WRAPPER_LINK_VERSION = 2;
    public static final int WRAPPER_FATBINS_OFFSET = 16;
    public static final int WRAPPER_V2_BYTES = 24;
    /** Most prelinked fatbins a version-2 wrapper may list (one per translation unit). */
    public static final int MAX_PRELINKED = 4096;
    /** Bytes a wrapper must have for its fatbin pointer to be read. */
    public static final int WRAPPER_MIN_BYTES = 16;

    /** Offsets in an ELF-64 file header and section header (elf.h). */
    private static final int EI_CLASS = 4;
    private static final byte ELFCLASS64 = 2;
    private static final int E_PHOFF = 0x20;
    private static final int E_SHOFF = 0x28;
    private static final int E_PHENTSIZE = 0x36;
    private static final int E_PHNUM = 0x38;
    private static final int E_SHENTSIZE = 0x3A;
    private static final int E_SHNUM = 0x3C;
    private static final int ELF_HEADER_BYTES = 0x40;
    private static final int SH_TYPE = 0x04;
    private static final int SH_OFFSET = 0x18;
    private static final int SH_SIZE = 0x20;
    private static final int SHT_NOBITS = 8;

    /** A native segment shorter than this is taken as a bare pointer and widened to {@link #MAX_IMAGE}. */
    private static final int BARE_POINTER_BELOW = 16;

    private static final byte[] ELF = bytes(ELF_MAGIC);
    private static final byte[] FATBIN_BYTES = bytes(FATBIN_MAGIC);
    private static final byte[] WRAPPER_BYTES = bytes(FATBIN_WRAPPER_MAGIC);

    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED;

    /**
     * The format of the image at {@code image}'s start. The magics are read one byte at a time and
     * only while they match (no magic holds a zero byte), so a PTX string shorter than four bytes is
     * never read past its NUL: a zero-length native segment (a bare pointer from C) is therefore
     * safe to pass. A sized segment is read within its bounds (a shorter one is PTX).
     *
     * @throws IllegalArgumentException if {@code image} is the NULL pointer
     */
    public static ModuleImageKind of(MemorySegment image) {
        if (image.isNative() && image.address() == 0) {
            throw new IllegalArgumentException("image=NULL");
        }
        MemorySegment s = image.isNative() && image.byteSize() == 0 ? image.reinterpret(MAGIC_BYTES) : image;
        if (startsWith(s, ELF)) {
            return CUBIN_ELF;
        }
        if (startsWith(s, FATBIN_BYTES)) {
            return FATBIN;
        }
        if (startsWith(s, WRAPPER_BYTES)) {
            return FATBIN_WRAPPER;
        }
        return PTX;
    }

    /**
     * The image to send: {@code image} itself, cut to its true length, or for a fatbin wrapper the
     * fatbin it points to (one level: a wrapper around a wrapper is refused), for a version-2
     * wrapper followed by its prelinked fatbins ({@link #linked}). Returns null for NULL,
     * a NULL inner pointer, an image whose length cannot be found in its bounds (PTX without a NUL,
     * a truncated header, a length of 0), or one above {@link #MAX_IMAGE}. A native segment shorter
     * than 16 bytes is a bare pointer from C and is read up to {@link #MAX_IMAGE} as its content says.
     */
    public static MemorySegment image(MemorySegment image) {
        if (image.isNative() && image.address() == 0) {
            return null;
        }
        MemorySegment s = widened(image);
        if (of(s) == FATBIN_WRAPPER) {
            if (s.byteSize() < WRAPPER_MIN_BYTES) {
                return null;
            }
            MemorySegment inner = s.get(ValueLayout.ADDRESS_UNALIGNED, WRAPPER_FATBIN_OFFSET);
            if (inner.address() == 0) {
                return null;
            }
            int version = s.get(INT, WRAPPER_VERSION_OFFSET);
            MemorySegment fatbins = s.byteSize() >= WRAPPER_V2_BYTES && version == WRAPPER_LINK_VERSION
                    ? s.get(ValueLayout.ADDRESS_UNALIGNED, WRAPPER_FATBINS_OFFSET) : MemorySegment.NULL;
            s = widened(inner);
            if (of(s) == FATBIN_WRAPPER) {
                return null;
            }
            if (fatbins.address() != 0) {
                return linked(s, fatbins);
            }
        }
        long length = length(s);
        return length < 0 ? null : s.asSlice(0, length);
    }

    /**
     * A version-2 (-rdc) wrapper's image: its device-linked fatbin, then the prelinked fatbins of
     * its NULL-terminated array, back to back in one new segment. The driver reads the first (its
     * header gives its length) and so loads what it would load from the wrapper when that fatbin
     * has code for the device; a reader that needs the translation units' PTX (the emulated device:
     * nvlink's output is SASS only) finds it in the fatbins that follow. Null when any is invalid,
     * there are more than {@link #MAX_PRELINKED}, or they exceed {@link #MAX_IMAGE} together.
     */
    private static MemorySegment linked(MemorySegment first, MemorySegment fatbinArray) {
        MemorySegment array = fatbinArray.reinterpret(8L * (MAX_PRELINKED + 1));
        java.util.List<MemorySegment> parts = new java.util.ArrayList<>();
        parts.add(first);
        for (int i = 0; ; i++) {
            if (i > MAX_PRELINKED) {
                return null;
            }
            MemorySegment p = array.getAtIndex(ValueLayout.ADDRESS, i);
            if (p.address() == 0) {
                break;
            }
            parts.add(widened(p));
        }
        long total = 0;
        for (int i = 0; i < parts.size(); i++) {
            MemorySegment part = parts.get(i);
            long n = of(part) == FATBIN ? length(part) : -1;
            if (n < 0 || n > MAX_IMAGE - total) {
                return null;
            }
            parts.set(i, part.asSlice(0, n));
            total += n;
        }
        if (parts.size() == 1) {
            return parts.getFirst();
        }
        MemorySegment all = java.lang.foreign.Arena.ofAuto().allocate(total, 8);
        long off = 0;
        for (MemorySegment part : parts) {
            MemorySegment.copy(part, 0, all, off, part.byteSize());
            off += part.byteSize();
        }
        return all;
    }

    /**
     * Bytes the PTX, cubin or fatbin image at {@code image}'s start spans (a PTX image's NUL
     * included), or -1: for NULL, a fatbin wrapper (see {@link #image}), content whose length cannot
     * be found in the segment's bounds, a length of 0, or one above {@link #MAX_IMAGE}. A native
     * segment shorter than 16 bytes is widened as in {@link #image}.
     */
    public static long length(MemorySegment image) {
        if (image.isNative() && image.address() == 0) {
            return -1;
        }
        MemorySegment s = widened(image);
        long length = switch (of(s)) {
            case FATBIN_WRAPPER -> -1;
            case FATBIN -> fatbinLength(s);
            case CUBIN_ELF -> elfLength(s);
            case PTX -> ptxLength(s);
        };
        return length <= 0 || length > MAX_IMAGE || length > s.byteSize() ? -1 : length;
    }

    private static MemorySegment widened(MemorySegment image) {
        return image.isNative() && image.byteSize() < BARE_POINTER_BELOW ? image.reinterpret(MAX_IMAGE) : image;
    }

    private static long fatbinLength(MemorySegment s) {
        if (s.byteSize() < FATBIN_MIN_BYTES) {
            return -1;
        }
        long headerSize = Short.toUnsignedInt(s.get(SHORT, FATBIN_HEADER_SIZE_OFFSET));
        long fatSize = s.get(LONG, FATBIN_FAT_SIZE_OFFSET);
        return fatSize < 0 || fatSize > MAX_IMAGE ? -1 : headerSize + fatSize;
    }

    private static long elfLength(MemorySegment s) {
        if (s.byteSize() < ELF_HEADER_BYTES || s.get(ValueLayout.JAVA_BYTE, EI_CLASS) != ELFCLASS64) {
            return -1; // only 64-bit ELF images exist for current GPUs
        }
        long phoff = s.get(LONG, E_PHOFF);
        long shoff = s.get(LONG, E_SHOFF);
        if (phoff < 0 || phoff > MAX_IMAGE || shoff < 0 || shoff > MAX_IMAGE) {
            return -1;
        }
        int phentsize = Short.toUnsignedInt(s.get(SHORT, E_PHENTSIZE));
        int phnum = Short.toUnsignedInt(s.get(SHORT, E_PHNUM));
        int shentsize = Short.toUnsignedInt(s.get(SHORT, E_SHENTSIZE));
        int shnum = Short.toUnsignedInt(s.get(SHORT, E_SHNUM));
        long end = Math.max(phoff + (long) phentsize * phnum, shoff + (long) shentsize * shnum);
        if (end > MAX_IMAGE || end > s.byteSize()) {
            return -1;
        }
        // Section contents may lie after the section header table: take the furthest section end.
        for (int i = 0; i < shnum; i++) {
            long sh = shoff + (long) i * shentsize;
            if (sh + SH_SIZE + 8 > s.byteSize()) {
                return -1;
            }
            int type = s.get(INT, sh + SH_TYPE);
            long offset = s.get(LONG, sh + SH_OFFSET);
            long size = s.get(LONG, sh + SH_SIZE);
            if (type != SHT_NOBITS) {
                if (offset < 0 || offset > MAX_IMAGE || size < 0 || size > MAX_IMAGE) {
                    return -1;
                }
                end = Math.max(end, offset + size);
            }
        }
        return end;
    }

    private static long ptxLength(MemorySegment s) {
        long limit = Math.min(s.byteSize(), MAX_IMAGE);
        for (long i = 0; i < limit; i++) {
            if (s.get(ValueLayout.JAVA_BYTE, i) == 0) {
                return i + 1;
            }
        }
        return -1;
    }

    private static boolean startsWith(MemorySegment s, byte[] magic) {
        for (int i = 0; i < magic.length; i++) {
            if (i >= s.byteSize() || s.get(ValueLayout.JAVA_BYTE, i) != magic[i]) {
                return false;
            }
        }
        return true;
    }

    /** A magic's bytes as they lie in memory (little-endian). */
    private static byte[] bytes(int magic) {
        return new byte[] {(byte) magic, (byte) (magic >>> 8), (byte) (magic >>> 16), (byte) (magic >>> 24)};
    }
}
