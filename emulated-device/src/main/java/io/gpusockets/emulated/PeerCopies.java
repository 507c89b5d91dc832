package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import java.lang.foreign.MemorySegment;

/**
 * cuMemcpyPeer and cuMemcpyPeerAsync: a copy between allocations of two contexts (each side resolved in
 * its own context, as each context sees only its own memory). The synchronous form waits for both
 * contexts' legacy-stream work first; the asynchronous one runs in order on a stream of the current context.
 */
final class PeerCopies {
    private final Contexts contexts;
    private final Streams streams;
    private final EmulatedMemory memory;

    PeerCopies(Contexts contexts, Streams streams, EmulatedMemory memory) {
        this.contexts = contexts;
        this.streams = streams;
        this.memory = memory;
    }

    private MemorySegment side(EmulatedContext c, long address, long bytes, String what) {
        MemorySegment m = memory.resolve(c, address, bytes);
        if (m == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + "=0x" + Long.toHexString(address) + " bytes=" + bytes
                    + " is not inside one allocation of its context");
        }
        return m;
    }

    void copy(long dst, long dstContext, long src, long srcContext, long bytes) {
        EmulatedContext d = contexts.find(dstContext);
        EmulatedContext s = contexts.find(srcContext);
        if (bytes < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "ByteCount=" + bytes);
        }
        if (bytes == 0) {
            return;
        }
        side(s, src, bytes, "srcDevice");
        side(d, dst, bytes, "dstDevice");
        s.barrier(s.legacyStream()).join();
        d.runInline(d.legacyStream(), () -> MemorySegment.copy(side(s, src, bytes, "srcDevice"), 0,
                side(d, dst, bytes, "dstDevice"), 0, bytes));
        d.throwIfFaulted();
    }

    void copyAsync(long dst, long dstContext, long src, long srcContext, long bytes, long hStream) {
        EmulatedContext c = contexts.active();
        EmulatedStream stream = streams.resolve(hStream, c);
        EmulatedContext d = contexts.find(dstContext);
        EmulatedContext s = contexts.find(srcContext);
        if (bytes < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "ByteCount=" + bytes);
        }
        if (bytes == 0) {
            return;
        }
        side(s, src, bytes, "srcDevice");
        side(d, dst, bytes, "dstDevice");
        c.enqueue(stream, null, () -> {
            MemorySegment from = memory.resolve(s, src, bytes);
            MemorySegment to = memory.resolve(d, dst, bytes);
            if (from == null || to == null) {
                throw KernelFault.illegalAddress(from == null ? src : dst, bytes);
            }
            MemorySegment.copy(from, 0, to, 0, bytes);
        }, "cuMemcpyPeerAsync");
    }
}
