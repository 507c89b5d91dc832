package io.gpusockets.frontend;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Finds how many bytes a module image spans, the way the driver does: PTX is NUL-terminated text,
 * a cubin is an ELF file whose headers give its extent, a fatbin has its size in its header.
 * Images reach us as bare pointers from C, so the length must come from the content.
 */
final class ModuleImages {
    static final int FATBIN_MAGIC = 0xBA55ED50;
    /** The wrapper struct nvcc emits around a fatbin: magic, version, pointer to the fatbin, filename. */
    static final int FATBIN_WRAPPER_MAGIC = 0x466243B1;
    /** Upper bound on an image (and on the PTX NUL scan). */
    static final long MAX_IMAGE = 512L << 20;

    private ModuleImages() {
    }

    /**
     * The image to send: the segment itself (with its true length), or for a fatbin wrapper the
     * fatbin it points to. Returns null when the content is none of the known formats or too large.
     */
    static MemorySegment image(MemorySegment image) {
        if (image.isNative() && image.address() == 0) {
            return null;
        }
        MemorySegment s = image.isNative() && image.byteSize() < 16 ? image.reinterpret(MAX_IMAGE) : image;
        int magic = s.get(ValueLayout.JAVA_INT_UNALIGNED, 0);
        if (magic == FATBIN_WRAPPER_MAGIC) {
            MemorySegment inner = s.get(ValueLayout.ADDRESS_UNALIGNED, 8);
            return inner.address() == 0 ? null : image(inner);
        }
        long length;
        if (magic == FATBIN_MAGIC) {
            long headerSize = Short.toUnsignedInt(s.get(ValueLayout.JAVA_SHORT_UNALIGNED, 6));
            length = headerSize + s.get(ValueLayout.JAVA_LONG_UNALIGNED, 8);
        } else if (magic == 0x464C457F) { // "\x7fELF"
            length = elfLength(s);
        } else {
            length = ptxLength(s);
        }
        if (length <= 0 || length > MAX_IMAGE || length > s.byteSize()) {
            return null;
        }
        return s.asSlice(0, length);
    }

    private static long elfLength(MemorySegment s) {
        if (s.get(ValueLayout.JAVA_BYTE, 4) != 2) {
            return -1; // only 64-bit ELF images exist for current GPUs
        }
        long phoff = s.get(ValueLayout.JAVA_LONG_UNALIGNED, 0x20);
        long shoff = s.get(ValueLayout.JAVA_LONG_UNALIGNED, 0x28);
        int phentsize = Short.toUnsignedInt(s.get(ValueLayout.JAVA_SHORT_UNALIGNED, 0x36));
        int phnum = Short.toUnsignedInt(s.get(ValueLayout.JAVA_SHORT_UNALIGNED, 0x38));
        int shentsize = Short.toUnsignedInt(s.get(ValueLayout.JAVA_SHORT_UNALIGNED, 0x3A));
        int shnum = Short.toUnsignedInt(s.get(ValueLayout.JAVA_SHORT_UNALIGNED, 0x3C));
        long end = Math.max(phoff + (long) phentsize * phnum, shoff + (long) shentsize * shnum);
        // Section contents may lie after the section header table: take the furthest section end.
        for (int i = 0; i < shnum && shoff + (long) (i + 1) * shentsize <= MAX_IMAGE; i++) {
            long sh = shoff + (long) i * shentsize;
            int type = s.get(ValueLayout.JAVA_INT_UNALIGNED, sh + 4);
            long offset = s.get(ValueLayout.JAVA_LONG_UNALIGNED, sh + 0x18);
            long size = s.get(ValueLayout.JAVA_LONG_UNALIGNED, sh + 0x20);
            if (type != 8) { // SHT_NOBITS takes no file space
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
}
