package io.gpusockets.protocol.structs;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * One CUarrayMapInfo (cuda.h 13.0, _v1), as cuMemMapArrayAsync takes a list of them, and the
 * CUDA_ARRAY_SPARSE_PROPERTIES and CUDA_ARRAY_MEMORY_REQUIREMENTS a map's extent is read from.
 *
 * <pre>
 * CUarrayMapInfo (96)                          subresource (24..56), a union:
 *  0 resourceType      u32 (CUresourcetype)     sparseLevel: 24 level, 28 layer, 32 offsetX, 36 offsetY,
 *  8 resource          CUarray / CUmipmappedArray           40 offsetZ, 44 extentWidth, 48 extentHeight,
 * 16 subresourceType   u32                                  52 extentDepth (all u32, in elements)
 * 24 subresource       union (right)            miptail:     24 layer u32, 32 offset u64, 40 size u64
 * 56 memOperationType  u32 (1 map, 2 unmap)
 * 60 memHandleType     u32 (0 generic)         CUDA_ARRAY_SPARSE_PROPERTIES (48)
 * 64 memHandle         CUmemGenericAllocationHandle   0 tileExtent width, 4 height, 8 depth (u32)
 * 72 offset            u64 (into the allocation)     12 miptailFirstLevel u32, 16 miptailSize u64
 * 80 deviceBitMask     u32                            24 flags u32 (1: SINGLE_MIPTAIL), 28 reserved[4]
 * 84 flags             u32 (0)
 * 88 reserved[2]       u32 (0)                 CUDA_ARRAY_MEMORY_REQUIREMENTS (32): 0 size, 8 alignment, 16 reserved[4]
 * </pre>
 */
public final class ArrayMapInfo {
    public static final int SIZE = 96;
    /** Entries one cuMemMapArrayAsync may carry here (the driver documents no limit; a bound keeps the backend's memory bounded). */
    public static final int MAX_COUNT = 4096;

    public static final int RESOURCE_ARRAY = 0, RESOURCE_MIPMAPPED_ARRAY = 1;
    public static final int SUBRESOURCE_SPARSE_LEVEL = 0, SUBRESOURCE_MIPTAIL = 1;
    public static final int OPERATION_MAP = 1, OPERATION_UNMAP = 2;
    public static final int HANDLE_GENERIC = 0;

    public static final long RESOURCE_TYPE = 0, RESOURCE = 8, SUBRESOURCE_TYPE = 16;
    public static final long LEVEL = 24, LAYER = 28, OFFSET_X = 32, OFFSET_Y = 36, OFFSET_Z = 40,
            EXTENT_WIDTH = 44, EXTENT_HEIGHT = 48, EXTENT_DEPTH = 52;
    public static final long MIPTAIL_LAYER = 24, MIPTAIL_OFFSET = 32, MIPTAIL_SIZE = 40;
    public static final long OPERATION = 56, HANDLE_TYPE = 60, HANDLE = 64, OFFSET = 72, DEVICE_BIT_MASK = 80, FLAGS = 84,
            RESERVED = 88;

    public static final int SPARSE_PROPERTIES_SIZE = 48;
    public static final long TILE_WIDTH = 0, TILE_HEIGHT = 4, TILE_DEPTH = 8, MIPTAIL_FIRST_LEVEL = 12, MIPTAIL_BYTES = 16,
            SPARSE_FLAGS = 24;
    public static final int SINGLE_MIPTAIL = 1;
    public static final int MEMORY_REQUIREMENTS_SIZE = 32;

    private ArrayMapInfo() {
    }

    public static int u32(MemorySegment s, long at) {
        return s.get(ValueLayout.JAVA_INT_UNALIGNED, at);
    }

    /** An unsigned 32-bit field as a long. */
    public static long unsigned(MemorySegment s, long at) {
        return Integer.toUnsignedLong(s.get(ValueLayout.JAVA_INT_UNALIGNED, at));
    }

    public static long u64(MemorySegment s, long at) {
        return s.get(ValueLayout.JAVA_LONG_UNALIGNED, at);
    }

    public static void setU64(MemorySegment s, long at, long value) {
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, at, value);
    }

    public static void setU32(MemorySegment s, long at, int value) {
        s.set(ValueLayout.JAVA_INT_UNALIGNED, at, value);
    }
}
