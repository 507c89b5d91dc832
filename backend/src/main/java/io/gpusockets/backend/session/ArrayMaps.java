package io.gpusockets.backend.session;

import static io.gpusockets.protocol.structs.ArrayMapInfo.u32;
import static io.gpusockets.protocol.structs.ArrayMapInfo.u64;
import static io.gpusockets.protocol.structs.ArrayMapInfo.unsigned;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import io.gpusockets.protocol.structs.ArrayMapInfo;
import java.lang.foreign.MemorySegment;

/**
 * The validation rule of cuMemMapArrayAsync's CUarrayMapInfo list ({@link ArrayMapInfo}), entry by entry,
 * before the driver sees any of it. Each entry's array or mipmapped array, and the allocation a map binds,
 * must be the session's: their ids are replaced by the driver's values in place. Enums must be those cuda.h
 * 13.0 defines, flags and reserved fields zero, deviceBitMask one device of the backend, an unmap names no
 * allocation; on a device with neither sparse nor deferred-mapping arrays a well-formed entry is refused with
 * CUDA_ERROR_NOT_SUPPORTED (a session's array there is neither). A map binds memory of its allocation from
 * {@code offset}: how much is read from the array itself, as the driver defines it, and must lie within the
 * allocation's size.
 * <ul>
 * <li>a sparse level: whole tiles (CUDA_ARRAY_SPARSE_PROPERTIES' tile extent, from cuArrayGetSparseProperties
 *     or cuMipmappedArrayGetSparseProperties) over the extent, each tile width × height × depth elements of the
 *     level's format (cuArray3DGetDescriptor; a format whose element size is not known here is refused with
 *     CUDA_ERROR_NOT_SUPPORTED), the extent inside the level rounded up to whole tiles;</li>
 * <li>a mip tail: the size given, inside the mip tail's size;</li>
 * <li>an array made with CUDA_ARRAY3D_DEFERRED_MAPPING (the driver has no sparse properties for it): its whole
 *     size (cuArrayGetMemoryRequirements / cuMipmappedArrayGetMemoryRequirements).</li>
 * </ul>
 * A query the driver refuses (an array neither sparse nor deferred-mapping) answers the call with its error.
 * Refusals: CUDA_ERROR_INVALID_HANDLE for a handle not the session's, CUDA_ERROR_INVALID_VALUE otherwise.
 */
final class ArrayMaps {
    /** CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED, CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED. */
    private static final int SPARSE_SUPPORTED = 112, DEFERRED_MAPPING_SUPPORTED = 121;

    /** One binding a map makes: the allocation (real) and the array or mipmapped array (real). */
    record Binding(long handle, long resource) {
    }

    /**
     * An entry whose fields and handles are checked ({@link #checkFields}); {@code handle} is 0 for an unmap,
     * {@code size} the allocation's bytes.
     */
    record Checked(long index, MemorySegment entry, boolean mipmap, long resource, int subresourceType, int device,
                   long handle, long size, long offset) {
    }

    private final Call c;
    private final CudaDriver driver;
    private final SessionVmm vmm;
    private final int deviceCount;
    /** Per device: 0 not asked yet, 1 it has sparse or deferred-mapping arrays, -1 it has neither. */
    private final int[] supported;
    /** The queries' outputs, one of each for the whole list. */
    private final MemorySegment props, requirements, levelArray, descriptor;

    ArrayMaps(Call c, CudaDriver driver, SessionVmm vmm, int deviceCount) {
        this.c = c;
        this.driver = driver;
        this.vmm = vmm;
        this.deviceCount = deviceCount;
        this.supported = new int[Math.max(deviceCount, 0)];
        this.props = c.scratch(ArrayMapInfo.SPARSE_PROPERTIES_SIZE);
        this.requirements = c.scratch(ArrayMapInfo.MEMORY_REQUIREMENTS_SIZE);
        this.levelArray = c.scratch(8);
        this.descriptor = c.scratch(Array3DDescriptor.SIZE);
    }

    private static CallRejected invalid(long index, String why) {
        return new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "mapInfoList[" + index + "]: " + why);
    }

    /**
     * Checks the fields of entry {@code index} of {@code list} that need no query of the driver, and translates
     * its handles in place. Every entry of a list goes through this before any goes through {@link #checkBytes},
     * so that an entry the backend refuses is refused whatever the device.
     */
    Checked checkFields(MemorySegment list, long index) throws CallRejected {
        MemorySegment e = list.asSlice(index * ArrayMapInfo.SIZE, ArrayMapInfo.SIZE);
        int resourceType = u32(e, ArrayMapInfo.RESOURCE_TYPE);
        boolean mipmap = resourceType == ArrayMapInfo.RESOURCE_MIPMAPPED_ARRAY;
        if (resourceType != ArrayMapInfo.RESOURCE_ARRAY && !mipmap) {
            throw invalid(index, "resourceType=" + resourceType + " (an array or a mipmapped array)");
        }
        long resource = c.handle(mipmap ? ParamType.MIPMAP : ParamType.ARRAY, u64(e, ArrayMapInfo.RESOURCE), false);
        ArrayMapInfo.setU64(e, ArrayMapInfo.RESOURCE, resource);
        int subresourceType = u32(e, ArrayMapInfo.SUBRESOURCE_TYPE);
        if (subresourceType != ArrayMapInfo.SUBRESOURCE_SPARSE_LEVEL && subresourceType != ArrayMapInfo.SUBRESOURCE_MIPTAIL) {
            throw invalid(index, "subresourceType=" + subresourceType);
        }
        int operation = u32(e, ArrayMapInfo.OPERATION);
        if (operation != ArrayMapInfo.OPERATION_MAP && operation != ArrayMapInfo.OPERATION_UNMAP) {
            throw invalid(index, "memOperationType=" + operation);
        }
        int handleType = u32(e, ArrayMapInfo.HANDLE_TYPE);
        if (handleType != ArrayMapInfo.HANDLE_GENERIC) {
            throw invalid(index, "memHandleType=" + handleType + " (only CU_MEM_HANDLE_TYPE_GENERIC exists)");
        }
        if (u32(e, ArrayMapInfo.FLAGS) != 0 || u32(e, ArrayMapInfo.RESERVED) != 0 || u32(e, ArrayMapInfo.RESERVED + 4) != 0) {
            throw invalid(index, "flags and reserved must be zero");
        }
        int mask = u32(e, ArrayMapInfo.DEVICE_BIT_MASK);
        int device = Integer.numberOfTrailingZeros(mask);
        if (Integer.bitCount(mask) != 1 || device >= deviceCount) {
            throw invalid(index, "deviceBitMask=0x" + Integer.toHexString(mask) + " (exactly one device of " + deviceCount + ")");
        }
        if (operation == ArrayMapInfo.OPERATION_UNMAP) {
            if (u64(e, ArrayMapInfo.HANDLE) != 0) {
                throw invalid(index, "an unmap names no allocation (memHandle must be 0)");
            }
            return new Checked(index, e, mipmap, resource, subresourceType, device, 0, 0, 0);
        }
        long handle = c.handle(ParamType.MEMH, u64(e, ArrayMapInfo.HANDLE), false);
        long size = vmm.sizeOf(handle);
        if (!vmm.holds(handle) || size < 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_HANDLE, "mapInfoList[" + index + "]: the session holds no reference to its allocation");
        }
        ArrayMapInfo.setU64(e, ArrayMapInfo.HANDLE, handle);
        long offset = u64(e, ArrayMapInfo.OFFSET);
        if (offset < 0 || offset >= size) {
            throw invalid(index, "offset=" + Long.toUnsignedString(offset) + " outside the allocation's " + size + " bytes");
        }
        return new Checked(index, e, mipmap, resource, subresourceType, device, handle, size, offset);
    }

    /**
     * The device must have sparse or deferred-mapping arrays, and a map must bind bytes inside its allocation
     * (read from the array through the driver); returns the binding a map makes, or null for an unmap.
     */
    Binding checkBytes(Checked k) throws CallRejected {
        requireSupport(k.index(), k.device());
        if (k.handle() == 0) {
            return null;
        }
        long bytes = mapBytes(k.entry(), k.index(), k.mipmap(), k.resource(), k.subresourceType(), k.device());
        if (bytes <= 0 || bytes > k.size() - k.offset()) {
            throw invalid(k.index(), "binds " + (bytes == Long.MAX_VALUE ? "more than 2^63" : Long.toString(bytes)) + " bytes at offset "
                    + k.offset() + " of an allocation of " + k.size());
        }
        return new Binding(k.handle(), k.resource());
    }

    /**
     * A device with neither sparse nor deferred-mapping arrays (CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED and
     * _DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED 0, the emulated device among them) has no array to map:
     * CUDA_ERROR_NOT_SUPPORTED, as its refusal to make one, whatever the entry names.
     */
    private void requireSupport(long index, int device) throws CallRejected {
        if (supported[device] == 0) {
            supported[device] = attribute(SPARSE_SUPPORTED, device) == 1 || attribute(DEFERRED_MAPPING_SUPPORTED, device) == 1 ? 1 : -1;
        }
        if (supported[device] < 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "mapInfoList[" + index + "]: device " + device
                    + " has no sparse or deferred-mapping arrays");
        }
    }

    private int attribute(int attribute, int device) {
        MemorySegment v = c.scratch(4);
        return driver.cuDeviceGetAttribute(v, attribute, device) == CuResult.CUDA_SUCCESS ? v.get(java.lang.foreign.ValueLayout.JAVA_INT, 0) : -1;
    }

    /** A sparse level's fields that need no query: level 0 for an array, extents of at least one element, no overflow. */
    private static void checkLevelFields(MemorySegment e, long index, boolean mipmap) throws CallRejected {
        if (!mipmap && u32(e, ArrayMapInfo.LEVEL) != 0) {
            throw invalid(index, "level must be 0 for an array");
        }
        if (unsigned(e, ArrayMapInfo.EXTENT_WIDTH) == 0 || unsigned(e, ArrayMapInfo.EXTENT_HEIGHT) == 0
                || unsigned(e, ArrayMapInfo.EXTENT_DEPTH) == 0) {
            throw invalid(index, "an extent of 0");
        }
    }

    /** The bytes of the allocation a map binds (see the class comment); refusals throw, a refused query answers its error. */
    private long mapBytes(MemorySegment e, long index, boolean mipmap, long resource, int subresourceType, int device)
            throws CallRejected {
        int r = mipmap ? driver.cuMipmappedArrayGetSparseProperties(props, resource) : driver.cuArrayGetSparseProperties(props, resource);
        if (r != CuResult.CUDA_SUCCESS) {
            int d = mipmap ? driver.cuMipmappedArrayGetMemoryRequirements(requirements, resource, device)
                    : driver.cuArrayGetMemoryRequirements(requirements, resource, device);
            if (d != CuResult.CUDA_SUCCESS) {
                throw new CallRejected(r, "mapInfoList[" + index + "]: neither sparse nor deferred-mapping (the driver's "
                        + CuResult.name(r) + ")");
            }
            return u64(requirements, 0);   // deferred mapping: the whole array, whatever the subresource says
        }
        if (subresourceType == ArrayMapInfo.SUBRESOURCE_MIPTAIL) {
            long offset = u64(e, ArrayMapInfo.MIPTAIL_OFFSET), size = u64(e, ArrayMapInfo.MIPTAIL_SIZE);
            long tail = u64(props, ArrayMapInfo.MIPTAIL_BYTES);
            if (!insideMiptail(offset, size, tail)) {
                throw invalid(index, "mip tail bytes " + Long.toUnsignedString(offset) + "+" + Long.toUnsignedString(size)
                        + " outside its " + tail + " bytes");
            }
            return size;
        }
        checkLevelFields(e, index, mipmap);
        long tw = unsigned(props, ArrayMapInfo.TILE_WIDTH), th = unsigned(props, ArrayMapInfo.TILE_HEIGHT),
                td = unsigned(props, ArrayMapInfo.TILE_DEPTH);
        if (tw == 0 || th == 0 || td == 0) {
            throw invalid(index, "the array has no tiles");
        }
        Array3DDescriptor d = levelDescriptor(index, mipmap, resource, u32(e, ArrayMapInfo.LEVEL));
        int element = ArrayDescriptor.elementBytes(d.format(), d.numChannels());
        if (element <= 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "mapInfoList[" + index + "]: format 0x"
                    + Integer.toHexString(d.format()) + " has an element size the backend does not know, so the bytes a map "
                    + "binds cannot be checked");
        }
        long[] offsets = {unsigned(e, ArrayMapInfo.OFFSET_X), unsigned(e, ArrayMapInfo.OFFSET_Y), unsigned(e, ArrayMapInfo.OFFSET_Z)};
        long[] extents = {unsigned(e, ArrayMapInfo.EXTENT_WIDTH), unsigned(e, ArrayMapInfo.EXTENT_HEIGHT),
                unsigned(e, ArrayMapInfo.EXTENT_DEPTH)};
        boolean threeD = d.shape() == Array3DDescriptor.Shape.THREE_D;
        long[] dims = {d.width(), d.rows(), threeD ? d.slices() : 1};
        long bytes = sparseLevelBytes(dims, offsets, extents, new long[] {tw, th, td}, element);
        if (bytes < 0) {
            throw invalid(index, "offsets " + java.util.Arrays.toString(offsets) + " + extents " + java.util.Arrays.toString(extents)
                    + " beyond the level's " + java.util.Arrays.toString(dims) + " elements rounded up to whole tiles");
        }
        return bytes;
    }

    /**
     * The bytes a sparse-level map binds: whole tiles of {@code tiles} elements (of {@code element} bytes) over
     * {@code extents} from {@code offsets}, in x, y, z; -1 when the region leaves the level's {@code dims}
     * rounded up to whole tiles; {@link Long#MAX_VALUE} when the product overflows.
     */
    static long sparseLevelBytes(long[] dims, long[] offsets, long[] extents, long[] tiles, int element) {
        try {
            long bytes = Math.multiplyExact(Math.multiplyExact(tiles[0], tiles[1]), Math.multiplyExact(tiles[2], (long) element));
            for (int k = 0; k < 3; k++) {
                long limit = Math.multiplyExact(Math.ceilDiv(dims[k], tiles[k]), tiles[k]);
                if (dims[k] < 0 || offsets[k] < 0 || extents[k] <= 0 || offsets[k] > limit || extents[k] > limit - offsets[k]) {
                    return -1;
                }
                bytes = Math.multiplyExact(bytes, Math.ceilDiv(extents[k], tiles[k]));
            }
            return bytes;
        } catch (ArithmeticException x) {
            return Long.MAX_VALUE;
        }
    }

    /** Whether [offset, offset+size) of a mip tail of {@code tail} bytes is inside it (size at least 1). */
    static boolean insideMiptail(long offset, long size, long tail) {
        return offset >= 0 && size > 0 && tail >= 0 && offset <= tail && size <= tail - offset;
    }

    /** The descriptor of the array, or of level {@code level} of the mipmapped array (its level array, asked of the driver). */
    private Array3DDescriptor levelDescriptor(long index, boolean mipmap, long resource, int level) throws CallRejected {
        long array = resource;
        if (mipmap) {
            int r = driver.cuMipmappedArrayGetLevel(levelArray, resource, level);
            if (r != CuResult.CUDA_SUCCESS) {
                throw new CallRejected(r, "mapInfoList[" + index + "]: level " + Integer.toUnsignedString(level));
            }
            array = u64(levelArray, 0);
        }
        int r = driver.cuArray3DGetDescriptor(descriptor, array);
        if (r != CuResult.CUDA_SUCCESS) {
            throw new CallRejected(r, "mapInfoList[" + index + "]: its descriptor");
        }
        return Array3DDescriptor.read(descriptor);
    }
}
