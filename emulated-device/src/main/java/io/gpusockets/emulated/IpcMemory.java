package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_CONTEXT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.security.SecureRandom;
import java.util.HashMap;
import java.util.Map;

/**
 * cuIpcGetMemHandle, cuIpcOpenMemHandle and cuIpcCloseMemHandle across processes, as the driver shares one GPU's
 * memory between processes. The emulated device's memory is host memory of its own process, so an exported allocation
 * moves, at its first cuIpcGetMemHandle, into a memory file ({@link MemoryFiles}, {@code memfd} mapped shared): the
 * contents are copied in after the context's queued work is waited for, and the allocation's record switches to the
 * shared pages, which every later access (API calls, copies, kernels) uses ({@link EmulatedMemory#share}). The
 * exporter keeps the file's descriptor open until the allocation is freed (or its context destroyed): one descriptor
 * per exported allocation, no more.
 *
 * <p>The 64-byte handle ({@link Handle}) carries a magic, the exporter's process id, that descriptor's number, the
 * allocation's size, a random nonce that is also in the file's name, and a check word. An opener in another process of
 * the same user opens {@code /proc/PID/fd/N}, checks through its own new descriptor that the file is the one named by
 * the nonce with that size (a descriptor number reused by the exporter, or a process id reused by another process,
 * fails the check), maps it and makes it an {@link Allocation.Kind#IPC} allocation of its current context at fresh
 * device addresses: the opener's kernels and copies use it as any allocation of the context; cuMemFree refuses it;
 * cuIpcCloseMemHandle removes it. Writes by either side are seen by the other (the same pages), ordered as the
 * programs synchronise. A handle whose exporter freed the allocation or exited is {@code CUDA_ERROR_INVALID_VALUE};
 * bytes that are no handle too.
 *
 * <p>As the driver: the handle names the whole allocation (a pointer inside it gives the handle of its base; asking
 * twice gives the same bytes); only cuMemAlloc memory of the current context is exported (pool, graph, VMM and module
 * memory: {@code CUDA_ERROR_INVALID_VALUE}); opening a handle the current context has open already returns the same
 * pointer and counts one more reference, and cuIpcCloseMemHandle drops one, unmapping at zero. Opening a handle in the
 * process that exported it answers {@code CUDA_ERROR_INVALID_CONTEXT}: the driver documents no error for it; HIP
 * documents this one for the same case and the CUDA runtime is reported to answer it. That is an assumption that the
 * GPU pass checks.
 *
 * <p>Not enforced: the driver's rule that a process opens another's handles in one context per device only (each
 * context here gets its own mapping); cuda.h asks for the allocation's base pointer, the emulated device takes any
 * pointer inside it, as the brief of issue 24 and common use (offsets sent beside the handle) expect.
 *
 * <p>What it keeps: the opened mappings of this device's contexts with their reference counts, by context and handle (an entry of a destroyed
 * context, whose mappings its destruction already released, is dropped at the next open).
 */
final class IpcMemory {
    /** CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: the only flag (one device: nothing to enable). */
    static final int LAZY_ENABLE_PEER_ACCESS = 1;
    private static final SecureRandom RANDOM = new SecureRandom();

    private final Contexts contexts;
    private final EmulatedMemory memory;
    private final MemoryPools pools;
    /** Open mappings by context and handle (every field of it); guarded by this. */
    private final Map<Key, Opened> opened = new HashMap<>();

    private record Key(EmulatedContext context, Handle handle) {
    }

    private static final class Opened {
        final Allocation allocation;
        int references = 1;

        Opened(Allocation allocation) {
            this.allocation = allocation;
        }
    }

    IpcMemory(Contexts contexts, EmulatedMemory memory, MemoryPools pools) {
        this.contexts = contexts;
        this.memory = memory;
        this.pools = pools;
    }

    /**
     * The wire form of an IPC handle, 64 bytes little-endian: magic (int) at 0, version (int) 4, process id (long) 8,
     * descriptor (int) 16, size (long) 24, nonce (long) 32, then zeros up to the check word (long) at 56, a hash of the
     * 56 bytes before it. Shared by memory and event handles ({@link IpcEvents}), which differ in their magic.
     */
    record Handle(int magic, long pid, int fd, long size, long nonce) {
        static final int BYTES = 64;
        static final int MEMORY = 0x4d435047;   // "GPCM"
        static final int EVENT = 0x45435047;    // "GPCE"
        static final int VERSION = 1;

        void write(MemorySegment out) {
            MemorySegment o = HostSegments.sized(out, BYTES, "pHandle");
            MemorySegment h = MemorySegment.ofArray(new byte[BYTES]);
            h.set(HostSegments.INT, 0, magic);
            h.set(HostSegments.INT, 4, VERSION);
            h.set(HostSegments.LONG, 8, pid);
            h.set(HostSegments.INT, 16, fd);
            h.set(HostSegments.LONG, 24, size);
            h.set(HostSegments.LONG, 32, nonce);
            h.set(HostSegments.LONG, 56, check(h));
            o.copyFrom(h);
        }

        /** The handle in {@code in}, or CUDA_ERROR_INVALID_VALUE when its bytes are no handle of this kind. */
        static Handle read(MemorySegment in, int magic, String what) {
            MemorySegment h = MemorySegment.ofArray(new byte[BYTES]);
            h.copyFrom(HostSegments.sized(in, BYTES, what));
            Handle parsed = new Handle(h.get(HostSegments.INT, 0), h.get(HostSegments.LONG, 8), h.get(HostSegments.INT, 16),
                    h.get(HostSegments.LONG, 24), h.get(HostSegments.LONG, 32));
            boolean zeros = h.get(HostSegments.LONG, 40) == 0 && h.get(HostSegments.LONG, 48) == 0
                    && h.get(HostSegments.INT, 20) == 0;
            if (parsed.magic != magic || h.get(HostSegments.INT, 4) != VERSION || !zeros
                    || h.get(HostSegments.LONG, 56) != check(h) || parsed.pid <= 0 || parsed.fd < 0 || parsed.size <= 0) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + " is no IPC " + (magic == MEMORY ? "memory" : "event")
                        + " handle of the emulated device");
            }
            return parsed;
        }

        /** The name of the memory file behind a handle of this kind: what its opener checks. */
        static String fileName(int magic, long nonce) {
            return (magic == MEMORY ? "gpusockets-ipc-mem-" : "gpusockets-ipc-event-") + Long.toHexString(nonce);
        }

        private static long check(MemorySegment h) {
            long x = 0x9E3779B97F4A7C15L;
            for (int i = 0; i < 56; i += 8) {
                x = (x ^ h.get(HostSegments.LONG, i)) * 0xBF58476D1CE4E5B9L;
                x ^= x >>> 29;
            }
            return x;
        }

        /**
         * Opens the exporter's file and maps its {@code size} bytes into {@code arena}: CUDA_ERROR_INVALID_VALUE when the
         * exporter is gone, no longer holds the file, or the descriptor now names another file.
         */
        MemorySegment map(Arena arena) {
            String path = "/proc/" + pid + "/fd/" + fd;
            int own;
            try {
                own = MemoryFiles.open(path);
            } catch (MemoryFiles.SystemCallFailed e) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "the handle's exporter (process " + pid
                        + ") no longer holds it (freed, destroyed or exited): " + e.getMessage());
            }
            try {
                String expected = "/memfd:" + fileName(magic, nonce) + " (deleted)";
                String target = MemoryFiles.target(own);
                long fileSize = MemoryFiles.size(own);
                if (!expected.equals(target) || fileSize != size) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, "the handle's exporter (process " + pid
                            + ") no longer holds it: descriptor " + fd + " is " + target + " of " + fileSize + " bytes");
                }
                return MemoryFiles.map(own, size, arena);
            } catch (MemoryFiles.SystemCallFailed e) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "mapping the handle's memory failed: " + e.getMessage());
            } finally {
                MemoryFiles.close(own);
            }
        }
    }

    static long nonce() {
        long n;
        do {
            n = RANDOM.nextLong();
        } while (n == 0);
        return n;
    }

    /** cuIpcGetMemHandle: the handle of the allocation {@code dptr} lies in, exporting it at the first call. */
    synchronized void getHandle(MemorySegment pHandle, long dptr) {
        HostSegments.sized(pHandle, Handle.BYTES, "pHandle");
        EmulatedContext c = contexts.current();
        Allocation a = memory.find(dptr);
        if (a == null || a.owner() != c || a.kind() != Allocation.Kind.ALLOCATED || pools.isPoolMemory(a)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dptr=0x" + Long.toHexString(dptr)
                    + " is in no cuMemAlloc allocation of the current context (pool, VMM, module and opened IPC memory"
                    + " have no IPC memory handle)");
        }
        EmulatedMemory.SharedFile file = memory.sharedFile(a);
        if (file == null) {
            file = export(c, a);
        }
        new Handle(Handle.MEMORY, ProcessHandle.current().pid(), file.fd(), a.size(), file.nonce()).write(pHandle);
    }

    private EmulatedMemory.SharedFile export(EmulatedContext c, Allocation a) {
        c.allWork().join();   // queued work may hold the allocation's present memory
        long nonce = nonce();
        int fd;
        try {
            fd = MemoryFiles.create(a.size(), Handle.fileName(Handle.MEMORY, nonce));
        } catch (MemoryFiles.SystemCallFailed e) {
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "no memory file for the exported allocation: " + e.getMessage());
        }
        Arena arena = Arena.ofShared();
        EmulatedMemory.SharedFile file = new EmulatedMemory.SharedFile(fd, nonce);
        try {
            MemorySegment host = MemoryFiles.map(fd, a.size(), arena);
            if (memory.share(a, file, arena, host) == null) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dptr=0x" + Long.toHexString(a.base()) + " was freed concurrently");
            }
            return file;
        } catch (MemoryFiles.SystemCallFailed | RuntimeException e) {
            arena.close();
            MemoryFiles.close(fd);
            if (e instanceof CudaError ce) {
                throw ce;
            }
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "mapping the exported allocation's memory file failed: " + e.getMessage());
        }
    }

    /** cuIpcOpenMemHandle: a device pointer of the current context to the exported allocation. */
    synchronized long open(MemorySegment handle, int flags) {
        EmulatedContext c = contexts.current();
        Handle h = Handle.read(handle, Handle.MEMORY, "handle");
        if ((flags & ~LAZY_ENABLE_PEER_ACCESS) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Flags=0x" + Integer.toHexString(flags));
        }
        if (h.pid() == ProcessHandle.current().pid()) {
            throw new CudaError(CUDA_ERROR_INVALID_CONTEXT, "the handle was exported by this process: an IPC memory"
                    + " handle opens only in another process");
        }
        opened.entrySet().removeIf(e -> e.getKey().context().destroyed());
        Key key = new Key(c, h);
        Opened o = opened.get(key);
        if (o != null && memory.find(o.allocation.base()) == o.allocation) {
            o.references++;
            return o.allocation.base();
        }
        Arena arena = Arena.ofShared();
        Allocation a;
        try {
            a = memory.addOpened(c, h.size(), arena, h.map(arena));
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
        opened.put(key, new Opened(a));
        return a.base();
    }

    /**
     * cuIpcCloseMemHandle: drops one reference of the current context's mapping at {@code dptr}; the last one waits for
     * the context's queued work (which may use it), then unmaps it.
     */
    void close(long dptr) {
        EmulatedContext c = contexts.current();
        Allocation unmapping = null;
        synchronized (this) {
            for (var it = opened.entrySet().iterator(); it.hasNext();) {
                var e = it.next();
                Opened o = e.getValue();
                if (e.getKey().context() == c && o.allocation.base() == dptr && memory.find(dptr) == o.allocation) {
                    if (--o.references == 0) {
                        it.remove();
                        unmapping = o.allocation;
                    }
                    break;
                }
            }
            if (unmapping == null && !opened.values().stream().anyMatch(o -> o.allocation.base() == dptr && o.allocation.owner() == c)) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dptr=0x" + Long.toHexString(dptr)
                        + " is no pointer cuIpcOpenMemHandle returned in the current context (or it is closed)");
            }
        }
        if (unmapping != null) {
            c.allWork().join();
            if (memory.unmap(unmapping)) {
                memory.release(unmapping);
            }
        }
    }
}
