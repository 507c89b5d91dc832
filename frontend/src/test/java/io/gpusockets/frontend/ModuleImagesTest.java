package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.gpusockets.protocol.calls.ModuleImageKind;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/**
 * Images reach the frontend as bare pointers from C: the length must come from the content. The
 * cubin and fatbin fixtures were built by nvcc 13.0 for sm_90 from the shipped kernels.
 */
class ModuleImagesTest {

    private static byte[] resource(String name) throws IOException {
        try (InputStream in = ModuleImagesTest.class.getResourceAsStream(name)) {
            return in.readAllBytes();
        }
    }

    /** The image at the start of a larger buffer, seen through a zero-length pointer as C hands it over. */
    private static MemorySegment asBarePointer(Arena arena, byte[] image) {
        MemorySegment buffer = arena.allocate(image.length + 4096L);
        buffer.fill((byte) 0x5A);
        MemorySegment.copy(image, 0, buffer, ValueLayout.JAVA_BYTE, 0, image.length);
        return MemorySegment.ofAddress(buffer.address());
    }

    @Test
    void findsTheLengthOfACubinFromItsElfHeaders() throws IOException {
        byte[] cubin = resource("/images/kernels.cubin");
        try (Arena arena = Arena.ofConfined()) {
            assertEquals(cubin.length, ModuleImageKind.image(asBarePointer(arena, cubin)).byteSize());
        }
    }

    @Test
    void findsTheLengthOfAFatbinFromItsHeader() throws IOException {
        byte[] fatbin = resource("/images/kernels.fatbin");
        try (Arena arena = Arena.ofConfined()) {
            assertEquals(fatbin.length, ModuleImageKind.image(asBarePointer(arena, fatbin)).byteSize());
        }
    }

    @Test
    void followsTheFatbinWrapperThatNvccEmits() throws IOException {
        byte[] fatbin = resource("/images/kernels.fatbin");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment inner = asBarePointer(arena, fatbin);
            MemorySegment wrapper = arena.allocate(24, 8);
            wrapper.set(ValueLayout.JAVA_INT, 0, ModuleImageKind.FATBIN_WRAPPER_MAGIC);
            wrapper.set(ValueLayout.JAVA_INT, 4, 1);
            wrapper.set(ValueLayout.ADDRESS, 8, inner);
            MemorySegment image = ModuleImageKind.image(MemorySegment.ofAddress(wrapper.address()));
            assertEquals(inner.address(), image.address());
            assertEquals(fatbin.length, image.byteSize());
        }
    }

    /** -rdc: version 2, the device-linked fatbin, then a NULL-terminated array of the translation units' fatbins. */
    @Test
    void sendsAVersionTwoWrappersLinkedFatbinFollowedByItsPrelinkedOnes() throws IOException {
        byte[] fatbin = resource("/images/kernels.fatbin");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment linked = asBarePointer(arena, fatbin);
            MemorySegment unit1 = asBarePointer(arena, fatbin);
            MemorySegment unit2 = asBarePointer(arena, fatbin);
            MemorySegment array = arena.allocate(ValueLayout.ADDRESS, 3);
            array.setAtIndex(ValueLayout.ADDRESS, 0, unit1);
            array.setAtIndex(ValueLayout.ADDRESS, 1, unit2);
            array.setAtIndex(ValueLayout.ADDRESS, 2, MemorySegment.NULL);
            MemorySegment wrapper = arena.allocate(24, 8);
            wrapper.set(ValueLayout.JAVA_INT, 0, ModuleImageKind.FATBIN_WRAPPER_MAGIC);
            wrapper.set(ValueLayout.JAVA_INT, 4, 2);
            wrapper.set(ValueLayout.ADDRESS, 8, linked);
            wrapper.set(ValueLayout.ADDRESS, 16, array);
            MemorySegment image = ModuleImageKind.image(MemorySegment.ofAddress(wrapper.address()));
            assertEquals(3L * fatbin.length, image.byteSize());
            for (int i = 0; i < 3; i++) {
                assertEquals(java.util.Arrays.toString(fatbin), java.util.Arrays.toString(
                        image.asSlice((long) i * fatbin.length, fatbin.length).toArray(ValueLayout.JAVA_BYTE)), "fatbin " + i);
            }
            assertEquals(fatbin.length, ModuleImageKind.length(image), "the driver reads the first, as far as its header says");

            array.setAtIndex(ValueLayout.ADDRESS, 1, asBarePointer(arena, "not a fatbin".getBytes()));
            assertNull(ModuleImageKind.image(MemorySegment.ofAddress(wrapper.address())), "a prelinked entry that is no fatbin");
            wrapper.set(ValueLayout.JAVA_INT, 4, 1);
            assertEquals(fatbin.length, ModuleImageKind.image(MemorySegment.ofAddress(wrapper.address())).byteSize(),
                    "version 1: the pointer at 16 is a file name, never followed");
        }
    }

    @Test
    void theModuleLoadingModeFollowsCudaModuleLoadingAsTheDriverReadsIt() {
        assertEquals(ModuleCalls.EAGER_LOADING, ModuleCalls.loadingMode("EAGER"));
        assertEquals(ModuleCalls.LAZY_LOADING, ModuleCalls.loadingMode("LAZY"));
        assertEquals(ModuleCalls.LAZY_LOADING, ModuleCalls.loadingMode(null), "unset: lazy, the default since CUDA 12.2");
        assertEquals(1, ModuleCalls.EAGER_LOADING, "CU_MODULE_EAGER_LOADING");
        assertEquals(2, ModuleCalls.LAZY_LOADING, "CU_MODULE_LAZY_LOADING");
    }

    @Test
    void takesPtxUpToAndIncludingItsNul() throws IOException {
        byte[] ptx = resource("/io/gpusockets/kernels/gpusockets_kernels.ptx");
        byte[] withNul = new byte[ptx.length + 1];
        System.arraycopy(ptx, 0, withNul, 0, ptx.length);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment bare = asBarePointer(arena, withNul);
            assertEquals(withNul.length, ModuleImageKind.image(bare).byteSize());
        }
    }

    @Test
    void refusesNullAndUnterminatedJavaImages() {
        assertNull(ModuleImageKind.image(MemorySegment.NULL));
        assertNull(ModuleImageKind.image(MemorySegment.ofArray(".version 9.0 no terminator".getBytes())));
    }
}
