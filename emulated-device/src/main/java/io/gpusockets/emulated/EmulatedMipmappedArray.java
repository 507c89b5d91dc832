package io.gpusockets.emulated;

import io.gpusockets.protocol.structs.Array3DDescriptor;

/**
 * A mipmapped array: its levels, each an {@link EmulatedArray} of its own (owned by this one: cuArrayDestroy
 * refuses them, cuMipmappedArrayDestroy takes them along), and one reservation for all of their bytes.
 */
record EmulatedMipmappedArray(long handle, EmulatedContext context, Array3DDescriptor descriptor, EmulatedArray[] levels,
                              EmulatedMemory.Reservation reservation) {
}
