package io.gpusockets.protocol.calls;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * Image kinds and extents on synthetic images built from the layouts; the frontend's ModuleImagesTest
 * runs the same codec on its nvcc-built fixtures.
 */
class ModuleImageKindTest {
    /** The image at the start of a larger buffer full of garbage, seen through a zero-length pointer as C hands it over. */
    private static MemorySegment asBarePointer(Arena arena, byte[] image) {
        MemorySegment buffer = arena.allocate(image.length + 4096L);
        buffer.fill((byte) 0x5A);
        MemorySegment.copy(image, 0, buffer, ValueLayout.JAVA_BYTE, 0, image.length);
        return MemorySegment.ofAddress(buffer.address());
    }

    private static ByteBuffer le(int n) {
        return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * A 64-bit ELF of 412 bytes: header, one program header (64..120), three section headers
     * (120..312), a PROGBITS section at 312..412 and a NOBITS section that takes no file space.
     */
    private static byte[] elf() {
        ByteBuffer e = le(412);
        e.put(0, (byte) 0x7f).put(1, (byte) 'E').put(2, (byte) 'L').put(3, (byte) 'F').put(4, (byte) 2);
        e.putLong(0x20, 64).putLong(0x28, 120);
        e.putShort(0x36, (short) 56).putShort(0x38, (short) 1).putShort(0x3A, (short) 64).putShort(0x3C, (short) 3);
        int sh1 = 120 + 64, sh2 = 120 + 128;
        e.putInt(sh1 + 4, 1).putLong(sh1 + 0x18, 312).putLong(sh1 + 0x20, 100);
        e.putInt(sh2 + 4, 8).putLong(sh2 + 0x18, 412).putLong(sh2 + 0x20, 100_000);
        return e.array();
    }

    /** Fatbin data: 16-byte header saying 16 + 200 bytes. */
    private static byte[] fatbin() {
        ByteBuffer f = le(216);
        f.putInt(0, ModuleImageKind.FATBIN_MAGIC).putShort(4, (short) 1).putShort(6, (short) 16).putLong(8, 200);
        return f.array();
    }

    private static MemorySegment wrapper(Arena arena, int magic, MemorySegment inner) {
        MemorySegment w = arena.allocate(24, 8);
        w.set(ValueLayout.JAVA_INT, 0, magic);
        w.set(ValueLayout.JAVA_INT, 4, 1);
        w.set(ValueLayout.ADDRESS, 8, inner);
        return MemorySegment.ofAddress(w.address());
    }

    private static byte[] cString(String s) {
        byte[] t = s.getBytes(StandardCharsets.UTF_8);
        byte[] z = new byte[t.length + 1];
        System.arraycopy(t, 0, z, 0, t.length);
        return z;
    }

    @Test
    void magicsAreTheFormatsOwn() {
        assertEquals(0xBA55ED50, ModuleImageKind.FATBIN_MAGIC);
        assertEquals(0x466243B1, ModuleImageKind.FATBIN_WRAPPER_MAGIC);
        assertEquals(ByteBuffer.wrap("\u007fELF".getBytes(StandardCharsets.ISO_8859_1)).order(ByteOrder.LITTLE_ENDIAN).getInt(),
                ModuleImageKind.ELF_MAGIC);
        assertEquals(512L << 20, ModuleImageKind.MAX_IMAGE);
    }

    @Test
    void kindsAreToldApartByTheirFirstBytes() {
        try (Arena a = Arena.ofConfined()) {
            assertEquals(ModuleImageKind.CUBIN_ELF, ModuleImageKind.of(asBarePointer(a, elf())));
            assertEquals(ModuleImageKind.FATBIN, ModuleImageKind.of(asBarePointer(a, fatbin())));
            assertEquals(ModuleImageKind.FATBIN_WRAPPER, ModuleImageKind.of(wrapper(a, ModuleImageKind.FATBIN_WRAPPER_MAGIC, MemorySegment.NULL)));
            assertEquals(ModuleImageKind.PTX, ModuleImageKind.of(asBarePointer(a, cString(".version 9.0"))));
            assertEquals(ModuleImageKind.CUBIN_ELF, ModuleImageKind.of(MemorySegment.ofArray(elf())));
            assertThrows(IllegalArgumentException.class, () -> ModuleImageKind.of(MemorySegment.NULL));
        }
    }

    @Test
    void shortPtxIsNeverReadPastItsEnd() {
        // Sized segments that start like a magic and end before it is complete: reading a byte more would throw.
        for (byte[] s : new byte[][] {{0x7f}, {0x7f, 'E', 0}, {0x7f, 'E', 'L'}, {0x50, (byte) 0xED, 0x55}, {(byte) 0xB1, 0}, {}}) {
            assertEquals(ModuleImageKind.PTX, ModuleImageKind.of(MemorySegment.ofArray(s)));
        }
        assertEquals(3, ModuleImageKind.length(MemorySegment.ofArray(new byte[] {0x7f, 'E', 0})));
        assertNull(ModuleImageKind.image(MemorySegment.ofArray(new byte[] {0x7f, 'E', 'L'})));
        try (Arena a = Arena.ofConfined()) {
            // A bare pointer to a two-byte string: only its bytes are needed to see it is PTX.
            MemorySegment two = a.allocate(2);
            two.set(ValueLayout.JAVA_BYTE, 0, (byte) 0x7f);
            assertEquals(ModuleImageKind.PTX, ModuleImageKind.of(MemorySegment.ofAddress(two.address())));
        }
    }

    @Test
    void findsTheLengthOfACubinFromItsElfHeaders() {
        byte[] cubin = elf();
        try (Arena a = Arena.ofConfined()) {
            assertEquals(cubin.length, ModuleImageKind.image(asBarePointer(a, cubin)).byteSize());
            assertEquals(cubin.length, ModuleImageKind.length(asBarePointer(a, cubin)));
        }
        assertEquals(cubin.length, ModuleImageKind.image(MemorySegment.ofArray(cubin)).byteSize());
    }

    @Test
    void refusesElfImagesItCannotMeasure() {
        byte[] cubin = elf();
        assertNull(ModuleImageKind.image(MemorySegment.ofArray(cubin).asSlice(0, cubin.length - 1))); // a section beyond the end
        assertNull(ModuleImageKind.image(MemorySegment.ofArray(cubin).asSlice(0, 40)));               // header cut short
        byte[] elf32 = cubin.clone();
        elf32[4] = 1;
        assertNull(ModuleImageKind.image(MemorySegment.ofArray(elf32)));
        byte[] far = cubin.clone();
        ByteBuffer.wrap(far).order(ByteOrder.LITTLE_ENDIAN).putLong(120 + 64 + 0x18, -1L); // section offset 2^64-1
        assertNull(ModuleImageKind.image(MemorySegment.ofArray(far)));
    }

    @Test
    void findsTheLengthOfAFatbinFromItsHeader() {
        byte[] fatbin = fatbin();
        try (Arena a = Arena.ofConfined()) {
            assertEquals(216, ModuleImageKind.image(asBarePointer(a, fatbin)).byteSize());
        }
        assertNull(ModuleImageKind.image(MemorySegment.ofArray(fatbin).asSlice(0, 215)));
        assertNull(ModuleImageKind.image(MemorySegment.ofArray(fatbin).asSlice(0, 10)));
        byte[] huge = fatbin.clone();
        ByteBuffer.wrap(huge).order(ByteOrder.LITTLE_ENDIAN).putLong(8, ModuleImageKind.MAX_IMAGE);
        try (Arena a = Arena.ofConfined()) {
            assertNull(ModuleImageKind.image(asBarePointer(a, huge)));
        }
    }

    @Test
    void followsTheFatbinWrapperThatNvccEmits() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment inner = asBarePointer(a, fatbin());
            MemorySegment image = ModuleImageKind.image(wrapper(a, ModuleImageKind.FATBIN_WRAPPER_MAGIC, inner));
            assertEquals(inner.address(), image.address());
            assertEquals(216, image.byteSize());
            assertEquals(-1, ModuleImageKind.length(wrapper(a, ModuleImageKind.FATBIN_WRAPPER_MAGIC, inner)));
        }
    }

    @Test
    void refusesWrappersAroundNothingOrAroundWrappers() {
        try (Arena a = Arena.ofConfined()) {
            assertNull(ModuleImageKind.image(wrapper(a, ModuleImageKind.FATBIN_WRAPPER_MAGIC, MemorySegment.NULL)));
            MemorySegment self = a.allocate(24, 8);
            self.set(ValueLayout.JAVA_INT, 0, ModuleImageKind.FATBIN_WRAPPER_MAGIC);
            self.set(ValueLayout.ADDRESS, 8, self);
            assertNull(ModuleImageKind.image(MemorySegment.ofAddress(self.address())));
        }
    }

    @Test
    void takesPtxUpToAndIncludingItsNul() {
        byte[] ptx = cString(".version 9.0\n.target sm_90\n");
        try (Arena a = Arena.ofConfined()) {
            assertEquals(ptx.length, ModuleImageKind.image(asBarePointer(a, ptx)).byteSize());
        }
        assertEquals(1, ModuleImageKind.length(MemorySegment.ofArray(new byte[] {0, 'x'})));
    }

    @Test
    void refusesNullAndUnterminatedJavaImages() {
        assertNull(ModuleImageKind.image(MemorySegment.NULL));
        assertEquals(-1, ModuleImageKind.length(MemorySegment.NULL));
        assertNull(ModuleImageKind.image(MemorySegment.ofArray(".version 9.0 no terminator".getBytes(StandardCharsets.UTF_8))));
    }
}
