package io.gpusockets.emulated;

import java.lang.foreign.MemorySegment;

/**
 * A surface object: the array it reads and writes (made with CUDA_ARRAY3D_SURFACE_LDST), and a copy of
 * the CUDA_RESOURCE_DESC it was created with.
 */
record EmulatedSurface(long handle, EmulatedContext context, MemorySegment resource, EmulatedArray array) {
}
