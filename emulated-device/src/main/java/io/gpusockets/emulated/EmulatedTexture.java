package io.gpusockets.emulated;

import java.lang.foreign.MemorySegment;

/**
 * A texture object: copies of the descriptors it was created with, and how it samples ({@link TextureSampler}),
 * which kernels use through tex instructions ({@link KernelTextures}).
 *
 * @param resource the CUDA_RESOURCE_DESC (144 bytes)
 * @param texture  the CUDA_TEXTURE_DESC (104 bytes)
 * @param view     the CUDA_RESOURCE_VIEW_DESC (112 bytes), or null when none was given
 * @param array    the array it samples, or null for linear and pitch-2D device memory
 * @param devPtr   the device memory it samples (LINEAR, PITCH2D), else 0
 * @param mip      the levels of a mipmapped array, or null
 */
record EmulatedTexture(long handle, EmulatedContext context, MemorySegment resource, MemorySegment texture, MemorySegment view,
                       TextureSampler sampler, EmulatedArray array, long devPtr, Mip mip) {

    /**
     * The levels of a texture on a mipmapped array ({@code sampler} and {@code array} are level 0's): a level
     * is picked per fetch from tex.level's level or tex.grad's gradients, plus the bias, within the clamps,
     * rounded to the nearest (mipmapFilterMode POINT; LINEAR is refused when the object is made).
     */
    record Mip(TextureSampler[] samplers, EmulatedArray[] arrays, float bias, float minClamp, float maxClamp) {
    }
}
