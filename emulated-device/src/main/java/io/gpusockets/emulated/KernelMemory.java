package io.gpusockets.emulated;

import io.gpusockets.emulated.ptx.GlobalMemory;

/**
 * Device memory for the PTX engines (interpreter and compiled): the launching context's allocations, its texture
 * and surface objects ({@link KernelTextures}), faults as Java kernels get them.
 */
final class KernelMemory implements GlobalMemory {
    private final EmulatedContext context;
    private final EmulatedMemory memory;
    private final KernelTextures textures;

    KernelMemory(EmulatedContext context, EmulatedMemory memory, Handles handles) {
        this.context = context;
        this.memory = memory;
        this.textures = new KernelTextures(context, handles, memory);
    }

    @Override
    public io.gpusockets.emulated.ptx.TextureUnit textures() {
        return textures;
    }

    @Override
    public Region region(long address, long bytes) {
        Allocation a = memory.find(address);
        if (a == null || a.owner() != context || !a.contains(address, bytes)) {
            throw KernelFault.illegalAddress(address, bytes);
        }
        return new Region(a.base(), a.end(), a.host());
    }

    @Override
    public RuntimeException illegalAddress(String space, long address, long bytes) {
        return new KernelFault(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS,
                "." + space + " address=0x" + Long.toHexString(address) + " bytes=" + bytes + " is outside the kernel's " + space + " memory");
    }

    @Override
    public RuntimeException misaligned(long address, long alignment) {
        return KernelFault.misaligned(address, alignment);
    }

    @Override
    public RuntimeException fault(String detail) {
        return new KernelFault(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS, detail);
    }

    @Override
    public RuntimeException assertion(String detail) {
        return KernelFault.assertion(detail);
    }

    @Override
    public RuntimeException unsupported(String detail) {
        return new KernelFault(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED, detail);
    }

    @Override
    public RuntimeException trap(String detail) {
        return KernelFault.trap(detail);
    }

    @Override
    public long malloc(long size) {
        try {
            return context.heap(memory).malloc(size);
        } catch (CudaError e) {
            return 0;   // no device memory left for the heap: every malloc fails
        }
    }

    @Override
    public boolean free(long address) {
        try {
            return context.heap(memory).free(address);
        } catch (CudaError e) {
            return address == 0;
        }
    }

    @Override
    public boolean setConditional(long handle, int value) {
        return Graphs.setConditional(context, handle, value);
    }

    @Override
    public boolean cancelled() {
        return context.destroyed();
    }
}
