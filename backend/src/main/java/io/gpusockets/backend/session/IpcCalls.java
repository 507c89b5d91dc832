package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code ipc}: IPC memory and event handles between sessions of one tenant (issue 24 item 1), through the
 * backend's {@link ShareRegistry}: the program gets and gives a 64-byte token, never the driver's handle.
 *
 * <p>Isolation {@code process} (each session a worker process): the exporter's worker asks its driver for the IPC
 * handle (cuIpcGetMemHandle of the base of a cuMemAlloc allocation of the session; cuIpcGetEventHandle of an event
 * of the session) and registers its 64 bytes with the front; the importer's worker is given them, for a session of
 * the same tenant only, and opens them with its driver. An opened range is a range of the importer's memory that
 * cuMemFree refuses and cuIpcCloseMemHandle removes, closed at the session's end, and NOT charged to the tenant (the
 * exporter's allocation is: the memory is charged once); a second open of one handle gives the same pointer and is
 * counted, each close taking one. An opened event is an event of the importer's table (cuEventDestroy, or the session's
 * end, destroys it). A session with address-stable memory ({@link StableAddresses}) cannot export its cuMemAlloc
 * memory this way (it is VMM memory in its window, which the driver's IPC handles do not cover): refused with
 * CUDA_ERROR_NOT_SUPPORTED saying so.
 *
 * <p>Isolation {@code context} and {@code shared} (every session in the front process): refused with
 * CUDA_ERROR_NOT_SUPPORTED and the cause: the driver cannot open an IPC handle in the process that exported it, and a
 * context's pointers and events are not valid in another context's work. Shareable VMM handles
 * ({@link VmmCalls#cuMemExportToShareableHandle}) are served in every mode. Not built (a deliberate refusal): serving
 * context-mode IPC memory by mapping the exporter's window granules into the importer's context, and context-mode
 * events as one driver event shared by reference count. The latter is unsound in mode context: an event belongs to its
 * context, which the exporting session's end destroys with everything in it, whatever another session holds; and a
 * cuEventRecord of it on another context's stream is what a GPU pass would have to check first.
 *
 * <p>A session that opened another's share, or whose export another opened, is refused a checkpoint, a migration and a
 * hand-over ({@link SessionShares#refusal}, {@link ShareRegistry#movingRefusal}).
 */
final class IpcCalls implements BackendHandlers.Ipc {
    /** CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: the one flag cuIpcOpenMemHandle takes. */
    static final int LAZY_ENABLE_PEER_ACCESS = 1;

    private final Session session;
    private final CudaDriver driver;

    IpcCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
    }

    private void requireWorker(String what) throws CallRejected {
        if (session.shares().sameProcess()) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, what + " between sessions needs each session in a"
                    + " process of its own: run the backend with --isolation process (the default); in isolation context"
                    + " or shared every session is in one process, where the driver cannot open an IPC handle it exported"
                    + " (shareable VMM handles, cuMemExportToShareableHandle, work in every isolation mode)");
        }
    }

    private static CallRejected rejected(ShareRegistry.Refused e) {
        return new CallRejected(e.result(), e.getMessage());
    }

    @Override
    public int cuIpcGetMemHandle(Call c, long dptr) throws CallRejected, IOException {
        requireWorker("IPC memory");
        SessionMemory.Range r = session.memory().allocationAt(dptr);
        if (r == null || r.owner() <= 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, String.format("0x%x is not the base of a cuMemAlloc"
                    + " allocation of this session (module globals, VMM mappings and opened IPC memory cannot be exported)", dptr));
        }
        if (session.inWindow(dptr)) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "session " + session.id() + " has address-stable"
                    + " memory: its cuMemAlloc allocations are VMM mappings in its address window, which the driver's IPC"
                    + " memory handles do not cover (share them as shareable VMM handles, or set stable-addresses = off"
                    + " for tenant " + session.tenant().name() + ")");
        }
        MemorySegment out = c.scratch(ShareRegistry.DRIVER_BYTES);
        int res = driver.cuIpcGetMemHandle(out, dptr);
        if (res != CuResult.CUDA_SUCCESS) {
            return res;
        }
        byte[] token;
        try {
            token = session.shares().share(ShareRegistry.KIND_MEMORY,
                    out.asSlice(0, ShareRegistry.DRIVER_BYTES).toArray(ValueLayout.JAVA_BYTE), r.size(), -1);
        } catch (ShareRegistry.Refused e) {
            throw rejected(e);
        }
        c.sendData(MemorySegment.ofArray(token));
        return res;
    }

    private byte[] token(Call c, long length) throws ProtocolException, CallRejected, InterruptedException {
        if (length != ShareRegistry.TOKEN_BYTES) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "handle of " + length + " bytes");
        }
        return c.receiveBulk(length).asSlice(0, length).toArray(ValueLayout.JAVA_BYTE);
    }

    @Override
    public int cuIpcOpenMemHandle(Call c, long handle, int flags) throws ProtocolException, CallRejected, InterruptedException {
        byte[] token = token(c, handle);
        if (flags != 0 && flags != LAZY_ENABLE_PEER_ACCESS) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "Flags=" + Integer.toUnsignedString(flags)
                    + " (0 or CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)");
        }
        requireWorker("IPC memory");
        ShareRegistry.Found f;
        try {
            f = session.shares().lookup(ShareRegistry.KIND_MEMORY, token);
        } catch (ShareRegistry.Refused e) {
            throw rejected(e);
        }
        long context = session.currentContextId(c.lane);
        if (context == 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_CONTEXT, "no current context");
        }
        MemorySegment out = c.scratch(8);
        MemorySegment bytes = c.scratch(ShareRegistry.DRIVER_BYTES).copyFrom(MemorySegment.ofArray(f.driverBytes()));
        int res = driver.cuIpcOpenMemHandle(out, bytes, flags);
        if (res == CuResult.CUDA_SUCCESS) {
            long base = out.get(ValueLayout.JAVA_LONG, 0);
            // not freeable (cuMemFree refuses it), owned by its context (the driver unmaps it with the context), not charged
            if (session.sharing().memoryOpened(base, f.size(), context)) {
                session.memory().add(new SessionMemory.Range(base, f.size(), context, false));
            }
            c.outs.putLong(base);
        }
        return res;
    }

    @Override
    public int cuIpcCloseMemHandle(Call c, long dptr) throws CallRejected, InterruptedException {
        SessionShares.Opened o = session.sharing().memoryAt(dptr);
        if (o == null) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, String.format("0x%x is no IPC memory this session"
                    + " opened", dptr));
        }
        if (o.opens() > 1) { // the driver keeps the mapping for the session's other opens
            int r = driver.cuIpcCloseMemHandle(dptr);
            if (r == CuResult.CUDA_SUCCESS) {
                session.sharing().memoryClosed(dptr);
            }
            return r;
        }
        // no call of another lane is inside the driver with this range while it goes
        try (SessionUses.Retirement retiring = c.retire(new long[0], new long[]{dptr})) {
            int r = driver.cuIpcCloseMemHandle(dptr);
            if (r == CuResult.CUDA_SUCCESS) {
                retiring.commit();
                session.sharing().memoryClosed(dptr);
                session.memory().remove(dptr);
            }
            return r;
        }
    }

    @Override
    public int cuIpcGetEventHandle(Call c, long event) throws CallRejected, IOException {
        requireWorker("IPC events");
        MemorySegment out = c.scratch(ShareRegistry.DRIVER_BYTES);
        int res = driver.cuIpcGetEventHandle(out, event);
        if (res != CuResult.CUDA_SUCCESS) {
            return res;
        }
        byte[] token;
        try {
            token = session.shares().share(ShareRegistry.KIND_EVENT,
                    out.asSlice(0, ShareRegistry.DRIVER_BYTES).toArray(ValueLayout.JAVA_BYTE), 0, -1);
        } catch (ShareRegistry.Refused e) {
            throw rejected(e);
        }
        c.sendData(MemorySegment.ofArray(token));
        return res;
    }

    @Override
    public int cuIpcOpenEventHandle(Call c, long handle) throws ProtocolException, CallRejected, InterruptedException {
        byte[] token = token(c, handle);
        requireWorker("IPC events");
        ShareRegistry.Found f;
        try {
            f = session.shares().lookup(ShareRegistry.KIND_EVENT, token);
        } catch (ShareRegistry.Refused e) {
            throw rejected(e);
        }
        long context = session.currentContextId(c.lane);
        if (context == 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_CONTEXT, "no current context");
        }
        MemorySegment out = c.scratch(8);
        MemorySegment bytes = c.scratch(ShareRegistry.DRIVER_BYTES).copyFrom(MemorySegment.ofArray(f.driverBytes()));
        int res = driver.cuIpcOpenEventHandle(out, bytes);
        if (res == CuResult.CUDA_SUCCESS) {
            long real = out.get(ValueLayout.JAVA_LONG, 0);
            session.sharing().eventOpened(real);
            c.outs.putLong(session.handles().intern(ParamType.EVENT, real, 0, context));
        }
        return res;
    }
}
