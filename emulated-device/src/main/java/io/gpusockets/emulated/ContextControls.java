package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.WeakHashMap;

/**
 * cuCtxSetFlags, peer access between contexts, pointer SYNC_MEMOPS and GPUDirect RDMA write flushes on
 * the emulated device. Flags are checked as at cuCtxCreate (a scheduling mode, the other CU_CTX_* bits
 * within CU_CTX_FLAGS_MASK) and replace the context's. The emulated devices cannot reach each other's
 * memory (cuDeviceCanAccessPeer answers 0), so peer access is never enabled: enabling it, for a peer on
 * the same device too (as the driver answered on an H100), is CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, and
 * disabling it CUDA_ERROR_PEER_ACCESS_NOT_ENABLED. SYNC_MEMOPS is
 * kept per allocation and answered by cuPointerGetAttribute; every emulated synchronous copy already
 * synchronizes. An RDMA flush has nothing to wait for: no third-party device writes into emulated memory.
 */
final class ContextControls {
    static final int FLAGS_MASK = 0xFF;
    static final int SCHED_MASK = 0x07;
    static final int SYNC_MEMOPS = 6;
    /** CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX and the two scopes (to the owner, to all devices). */
    static final int TARGET_CURRENT_CTX = 0, SCOPE_OWNER = 100, SCOPE_ALL_DEVICES = 200;

    private final Contexts contexts;
    private final Allocations allocations;
    private final Map<Allocation, Integer> syncMemops = new WeakHashMap<>();

    ContextControls(Contexts contexts, Allocations allocations) {
        this.contexts = contexts;
        this.allocations = allocations;
    }

    void setFlags(int flags) {
        int sched = flags & SCHED_MASK;
        if ((flags & ~FLAGS_MASK) != 0 || sched == 3 || sched > 4) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=0x" + Integer.toHexString(flags));
        }
        contexts.current().flags = flags;
    }

    void enablePeerAccess(long peerContext, int flags) {
        EmulatedContext c = contexts.current();
        EmulatedContext peer = contexts.lookup(peerContext, EmulatedContext.class, "peerContext");
        if (flags != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Flags=" + flags + " must be 0");
        }
        // a context of the same device gets this too: the driver answered so on an H100 (580.159.04, GPU pass of
        // 2026-12-05), where the emulated device had said CUDA_ERROR_INVALID_DEVICE
        throw new CudaError(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, peer.device == c.device
                ? "the peer context is on the current context's device" : "emulated devices cannot reach each other's memory");
    }

    void disablePeerAccess(long peerContext) {
        contexts.current();
        contexts.lookup(peerContext, EmulatedContext.class, "peerContext");
        throw new CudaError(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access was never enabled");
    }

    void setPointerAttribute(MemorySegment value, int attribute, long ptr) {
        if (attribute != SYNC_MEMOPS) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attribute=" + attribute + " cannot be set");
        }
        int v = HostSegments.sized(value, 4, "value").get(HostSegments.INT, 0);
        Allocation a = allocations.pointer(ptr);
        synchronized (syncMemops) {
            syncMemops.put(a, v != 0 ? 1 : 0);
        }
    }

    /** CU_POINTER_ATTRIBUTE_SYNC_MEMOPS of the allocation holding {@code ptr}: as set, else 0. */
    int syncMemops(long ptr) {
        Allocation a = allocations.pointer(ptr);
        synchronized (syncMemops) {
            return syncMemops.getOrDefault(a, 0);
        }
    }

    void flushRdmaWrites(int target, int scope) {
        contexts.current();
        if (target != TARGET_CURRENT_CTX || scope != SCOPE_OWNER && scope != SCOPE_ALL_DEVICES) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "target=" + target + " scope=" + scope);
        }
    }
}
