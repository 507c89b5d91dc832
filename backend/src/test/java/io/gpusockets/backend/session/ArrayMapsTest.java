package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.structs.Array3DDescriptor;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The arithmetic of cuMemMapArrayAsync's bound (the bytes of an allocation a map binds) and the bookkeeping
 * that keeps an allocation bound to an array charged until the array goes. The list's checks against a
 * session's handles and memory run end to end in the cli module (SparseMapsAndDecompressionApiTest).
 */
class ArrayMapsTest {
    private static final long[] TILE_2D_FLOAT = {128, 128, 1};   // 64 KiB of 4-byte elements

    @Test
    void aSparseLevelMapBindsWholeTilesOverItsExtent() {
        long[] dims = {1000, 600, 1};
        assertEquals(65536, ArrayMaps.sparseLevelBytes(dims, new long[] {0, 0, 0}, new long[] {128, 128, 1}, TILE_2D_FLOAT, 4));
        assertEquals(65536L * 2 * 3, ArrayMaps.sparseLevelBytes(dims, new long[] {128, 0, 0}, new long[] {256, 384, 1}, TILE_2D_FLOAT, 4));
        // a partial tile at the level's edge is still a whole tile: 1000 rounds up to 1024
        assertEquals(65536, ArrayMaps.sparseLevelBytes(dims, new long[] {896, 512, 0}, new long[] {128, 128, 1}, TILE_2D_FLOAT, 4));
        assertEquals(65536L * 8 * 5, ArrayMaps.sparseLevelBytes(dims, new long[] {0, 0, 0}, new long[] {1000, 600, 1}, TILE_2D_FLOAT, 4));
    }

    @Test
    void aRegionOutsideTheLevelOrOverflowingIsRefused() {
        long[] dims = {1000, 600, 1};
        assertEquals(-1, ArrayMaps.sparseLevelBytes(dims, new long[] {1024, 0, 0}, new long[] {128, 128, 1}, TILE_2D_FLOAT, 4));
        assertEquals(-1, ArrayMaps.sparseLevelBytes(dims, new long[] {0, 0, 1}, new long[] {128, 128, 1}, TILE_2D_FLOAT, 4), "z of a 2D level");
        assertEquals(-1, ArrayMaps.sparseLevelBytes(dims, new long[] {0, 0, 0}, new long[] {128, 0, 1}, TILE_2D_FLOAT, 4), "an empty extent");
        assertEquals(-1, ArrayMaps.sparseLevelBytes(dims, new long[] {0xffff_ffffL, 0, 0}, new long[] {0xffff_ffffL, 128, 1},
                TILE_2D_FLOAT, 4), "u32 offsets and extents that would wrap in 32 bits");
        long huge = 1L << 40;
        assertEquals(Long.MAX_VALUE, ArrayMaps.sparseLevelBytes(new long[] {huge, huge, huge}, new long[] {0, 0, 0},
                new long[] {huge, huge, huge}, new long[] {1, 1, 1}, 16));
    }

    @Test
    void aMipTailMapStaysInsideTheMipTail() {
        assertTrue(ArrayMaps.insideMiptail(0, 65536, 196608));
        assertTrue(ArrayMaps.insideMiptail(131072, 65536, 196608));
        assertFalse(ArrayMaps.insideMiptail(131072, 131072, 196608));
        assertFalse(ArrayMaps.insideMiptail(0, 0, 196608));
        assertFalse(ArrayMaps.insideMiptail(-65536, 65536, 196608), "an offset of 2^64 - 64 KiB");
        assertFalse(ArrayMaps.insideMiptail(65536, Long.MAX_VALUE, 196608));
    }

    /** cuMipmappedArrayCreate's charge rule asks the same of its descriptor as cuArray3DCreate's (SessionQuotaTest). */
    @Test
    void sparseAndDeferredMappingDescriptorsAreUnbacked() {
        assertTrue(new Array3DDescriptor(8, 8, 0, 0x20, 1, Array3DDescriptor.SPARSE).unbacked());
        assertTrue(new Array3DDescriptor(8, 8, 4, 0x20, 1, Array3DDescriptor.DEFERRED_MAPPING | Array3DDescriptor.LAYERED).unbacked());
        assertFalse(new Array3DDescriptor(8, 8, 0, 0x20, 1, Array3DDescriptor.SURFACE_LDST).unbacked());
    }

    @Test
    void anAllocationBoundToAnArrayIsHeldUntilTheArrayGoes() {
        SessionVmm vmm = new SessionVmm();
        long handle = 0xA110C, array = 0xA77A4, other = 0xB77A4;
        vmm.created(handle, 2L << 20);
        assertEquals(2L << 20, vmm.sizeOf(handle));
        vmm.bound(handle, array);
        vmm.bound(handle, other);
        assertEquals(0, vmm.unreferenced(handle));
        assertFalse(vmm.gone(handle), "released, but its memory is still an array's");
        assertEquals(List.of(), vmm.resourceGone(array));
        assertEquals(List.of(handle), vmm.resourceGone(other), "its last array went: the driver freed it");
        assertEquals(-1, vmm.sizeOf(handle));
        assertEquals(List.of(), vmm.resourceGone(other));
    }

    @Test
    void anAllocationStillReferencedIsNotFreedWithItsArray() {
        SessionVmm vmm = new SessionVmm();
        vmm.created(7, 4096);
        vmm.bound(7, 9);
        assertEquals(List.of(), vmm.resourceGone(9));
        assertEquals(0, vmm.unreferenced(7));
        assertTrue(vmm.gone(7));
    }
}
