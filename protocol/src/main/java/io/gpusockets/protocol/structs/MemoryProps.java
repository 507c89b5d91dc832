package io.gpusockets.protocol.structs;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The property structs of memory pools and the VMM API (cuda.h 13.0), as they travel (bytes) and how
 * both the backend and the emulated device read them. What is forwarded: pinned memory on a device,
 * no IPC handle types on a pool from the wire; a cuMemCreate may ask for POSIX descriptors or fabric handles (the backend
 * serves both as tokens between sessions of one tenant, and asks for POSIX descriptors itself, for a hand-over on one
 * host); anything else is refused by {@link #poolRefusal} / {@link #allocationRefusal}.
 *
 * <pre>
 * CUmemLocation (8)          CUmemPoolProps (88)                  CUmemAllocationProp (32)
 *  0 type   i32               0 allocType        i32               0 type                  i32
 *  4 id     i32               4 handleTypes      i32               4 requestedHandleTypes  i32
 *                             8 location         CUmemLocation     8 location              CUmemLocation
 * CUmemAccessDesc (12)       16 win32SecurityAttributes ptr       16 win32HandleMetaData   ptr
 *  0 location CUmemLocation  24 maxSize          size_t           24 allocFlags.compressionType u8
 *  8 flags    i32            32 usage            u16              25 allocFlags.gpuDirectRDMACapable u8
 *                            34 reserved[54]                      26 allocFlags.usage      u16
 *                                                                 28 allocFlags.reserved[4]
 * </pre>
 */
public final class MemoryProps {
    public static final int LOCATION_SIZE = 8;
    public static final int ACCESS_DESC_SIZE = 12;
    public static final int POOL_PROPS_SIZE = 88;
    public static final int ALLOCATION_PROP_SIZE = 32;

    public static final int LOCATION_TYPE_DEVICE = 1;
    public static final int ALLOCATION_TYPE_PINNED = 1;
    public static final int HANDLE_TYPE_NONE = 0;
    /** CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: the allocation can be exported as a file descriptor (same host only). */
    public static final int HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1;
    public static final int ACCESS_NONE = 0;
    public static final int ACCESS_READ = 1;
    public static final int ACCESS_READWRITE = 3;

    /** CUmemAllocationProp / CUmemPoolProps field offsets (shared up to the win32 pointer). */
    public static final long TYPE = 0, HANDLE_TYPES = 4, LOCATION = 8, WIN32 = 16;
    public static final long POOL_MAX_SIZE = 24, POOL_USAGE = 32;
    public static final long ALLOC_COMPRESSION = 24, ALLOC_USAGE = 26;
    public static final long ACCESS_FLAGS = 8;

    /** One CUmemLocation. */
    public record Location(int type, int id) {
        public static Location read(MemorySegment s, long offset) {
            return new Location(s.get(ValueLayout.JAVA_INT_UNALIGNED, offset), s.get(ValueLayout.JAVA_INT_UNALIGNED, offset + 4));
        }

        /** A CUmemLocation passed by value as one u64 (type in the low half, as x86-64 and AArch64 pass it). */
        public static Location unpack(long packed) {
            return new Location((int) packed, (int) (packed >>> 32));
        }

        public boolean isDevice(int deviceCount) {
            return type == LOCATION_TYPE_DEVICE && id >= 0 && id < deviceCount;
        }
    }

    private MemoryProps() {
    }

    private static int i32(MemorySegment s, long offset) {
        return s.get(ValueLayout.JAVA_INT_UNALIGNED, offset);
    }

    /** Why a CUmemPoolProps is not served (null: it is): a message naming the field. */
    public static String poolRefusal(MemorySegment props, int deviceCount) {
        String common = common(props, deviceCount, "allocType", "handleTypes", HANDLE_TYPE_NONE);
        if (common != null) {
            return common;
        }
        int usage = props.get(ValueLayout.JAVA_SHORT_UNALIGNED, POOL_USAGE) & 0xffff;
        return usage == 0 ? null : "usage=" + usage + " (only 0 is served)";
    }

    /** allocFlags.usage bits (cuda.h 13.0): CU_MEM_CREATE_USAGE_TILE_POOL, CU_MEM_CREATE_USAGE_HW_DECOMPRESS. */
    public static final int USAGE_TILE_POOL = 0x1, USAGE_HW_DECOMPRESS = 0x2;

    /** Why a CUmemAllocationProp is not served (null: it is), with no allocFlags.usage bit served. */
    public static String allocationRefusal(MemorySegment prop, int deviceCount) {
        return allocationRefusal(prop, deviceCount, 0);
    }

    /**
     * Why a CUmemAllocationProp is not served (null: it is): the usage bits in {@code servedUsage} are (a
     * backend serves a tile pool for sparse arrays and memory for hardware decompression, which the driver
     * may refuse on a device without them; the emulated device serves neither).
     */
    public static String allocationRefusal(MemorySegment prop, int deviceCount, int servedUsage) {
        return allocationRefusal(prop, deviceCount, servedUsage, HANDLE_TYPE_NONE);
    }

    /**
     * Why a CUmemAllocationProp is not served (null: it is), with the usage bits in {@code servedUsage} and the
     * requestedHandleTypes bits in {@code servedHandleTypes} served: a device emulating exportable allocations serves
     * {@link #HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}; the backend serves it and CU_MEM_HANDLE_TYPE_FABRIC from the wire
     * (shared between sessions of one tenant behind a token: a descriptor of its host means nothing to the program)
     * and asks for POSIX descriptors itself (a hand-over to another backend process on the host).
     */
    public static String allocationRefusal(MemorySegment prop, int deviceCount, int servedUsage, int servedHandleTypes) {
        String common = common(prop, deviceCount, "type", "requestedHandleTypes", servedHandleTypes);
        if (common != null) {
            return common;
        }
        int compression = prop.get(ValueLayout.JAVA_BYTE, ALLOC_COMPRESSION) & 0xff;
        int usage = prop.get(ValueLayout.JAVA_SHORT_UNALIGNED, ALLOC_USAGE) & 0xffff;
        if (compression != 0 || (usage & ~servedUsage) != 0) {
            return "allocFlags compressionType=" + compression + " usage=" + usage + " (served: compressionType 0, usage bits 0x"
                    + Integer.toHexString(servedUsage) + ")";
        }
        return null;
    }

    private static String common(MemorySegment s, int deviceCount, String typeName, String handleName, int servedHandles) {
        int type = i32(s, TYPE);
        if (type != ALLOCATION_TYPE_PINNED) {
            return typeName + "=" + type + " (only CU_MEM_ALLOCATION_TYPE_PINNED is served)";
        }
        int handles = i32(s, HANDLE_TYPES);
        if ((handles & ~servedHandles) != 0) {
            return handleName + "=" + handles + (servedHandles == HANDLE_TYPE_NONE
                    ? " (IPC handles cannot cross machines: only CU_MEM_HANDLE_TYPE_NONE is served)"
                    : " (served bits: 0x" + Integer.toHexString(servedHandles) + ")");
        }
        Location l = Location.read(s, LOCATION);
        if (l.type() != LOCATION_TYPE_DEVICE) {
            return "location.type=" + l.type() + " (only CU_MEM_LOCATION_TYPE_DEVICE is served)";
        }
        if (s.get(ValueLayout.JAVA_LONG_UNALIGNED, WIN32) != 0) {
            return "win32 attributes must be NULL";
        }
        return null;
    }

    /** Whether the location's device ordinal is one of {@code deviceCount}. */
    public static boolean validDevice(MemorySegment s, int deviceCount) {
        return Location.read(s, LOCATION).isDevice(deviceCount);
    }
}
