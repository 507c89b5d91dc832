package io.gpusockets.emulated;

import java.lang.foreign.MemorySegment;

/**
 * A texture object: copies of the descriptors it was created with. Nothing samples it (no emulated
 * kernel reads textures); it exists so that programs that create, query and destroy texture objects
 * run, and so that its resource is checked as the driver would.
 *
 * @param resource the CUDA_RESOURCE_DESC (144 bytes)
 * @param texture  the CUDA_TEXTURE_DESC (104 bytes)
 * @param view     the CUDA_RESOURCE_VIEW_DESC (112 bytes), or null when none was given
 */
record EmulatedTexture(long handle, EmulatedContext context, MemorySegment resource, MemorySegment texture, MemorySegment view) {
}
