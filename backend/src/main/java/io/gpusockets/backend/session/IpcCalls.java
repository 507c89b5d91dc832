package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

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
 * end, destroys it). The cuMemAlloc memory of a session with address-stable memory ({@link StableAddresses}) is VMM
 * memory in its window, which the driver's IPC handles do not cover: it goes by the window route described next for
 * isolation context, the exporter's worker sending every piece's descriptor to the front with its SHARE and the
 * importer's worker getting a new descriptor of each with the answer to its LOOKUP ({@code WorkerShares},
 * {@code ControlMessages}); the importer maps them as the context route does, and its cuIpcCloseMemHandle, or its
 * session's end, unmaps them. What it cannot serve (a block of a shared granule, more pieces than a control message
 * carries) is refused with CUDA_ERROR_NOT_SUPPORTED naming the cause.
 *
 * <p>Isolation {@code context} and {@code shared} (every session in the front process, where the driver cannot open an
 * IPC handle it exported, and a context's cuMemAlloc pointer is not valid in another context's kernels): IPC memory is
 * served by the VMM route (the window route, which isolation process takes for address-stable sessions too) where it
 * is sound: a cuMemAlloc allocation of a session with address-stable memory
 * ({@link StableAddresses}) that has granules of its own (at least a quarter granule; not a pool's) is exported as the
 * physical allocations that back it, each a POSIX descriptor the registry keeps ({@link ShareRegistry.Window}), and the
 * opener imports them into its driver, maps them in a reservation of its own at the same offsets and sets read-write
 * access for its context's device; cuIpcCloseMemHandle (or the opener's end) unmaps, releases and frees that. Anything
 * else is refused with CUDA_ERROR_NOT_SUPPORTED naming the cause and the fix (--isolation process, or stable-addresses
 * for the tenant). IPC events are served there as an {@link IpcEventShare}, not by sharing one driver event (an event
 * belongs to its context, which the exporting session's end destroys whatever another session holds): cuIpcGetEventHandle
 * of an event made with CU_EVENT_INTERPROCESS (else CUDA_ERROR_INVALID_VALUE, as the driver) registers the share with
 * the exporter's event as its first member; cuIpcOpenEventHandle makes a new event of the opener in its current context
 * (CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS) that joins it, so every event call works on it and the exporter's
 * end destroys only the exporter's event; a recording of any member (cuEventRecord, cuEventRecordWithFlags) is
 * followed by every other member's event. Shareable VMM handles
 * ({@link VmmCalls#cuMemExportToShareableHandle}) are served in every mode.
 *
 * <p>A session that opened another's share, or whose export another opened, is refused a checkpoint, a migration and a
 * hand-over of itself alone ({@link SessionShares#refusal}, {@link ShareRegistry#movingRefusal}). The sessions linked
 * by IPC memory and events are checkpointed together ({@link GroupCheckpoint}; every isolation mode: an opened event
 * keeps the token it was opened with, {@link SessionShares#eventOpened(long, byte[])}): a
 * restore maps each opened range again at its address
 * ({@link #mapWindow(Session, ShareRegistry.Window, long, byte[], int, long)}) and joins each opened event again
 * ({@link #joinEvent}), or in isolation process opens it again through the driver.
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
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, what + " between sessions need each session in a"
                    + " process of its own: run the backend with --isolation process (the default); in isolation context"
                    + " or shared every session is in one process, where the driver cannot open an IPC handle it exported"
                    + " and an event belongs to its session's context, which that session's end destroys");
        }
    }

    private static CallRejected rejected(ShareRegistry.Refused e) {
        return new CallRejected(e.result(), e.getMessage());
    }

    @Override
    public int cuIpcGetMemHandle(Call c, long dptr) throws CallRejected, IOException {
        SessionMemory.Range r = session.memory().allocationAt(dptr);
        if (r == null || r.owner() <= 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, String.format("0x%x is not the base of a cuMemAlloc"
                    + " allocation of this session (module globals, VMM mappings and opened IPC memory cannot be exported)", dptr));
        }
        if (session.shares().sameProcess() || session.inWindow(dptr)) { // the window route (the driver's IPC does not cover it)
            byte[] token = shareWindow(dptr, r.size());
            c.sendData(MemorySegment.ofArray(token));
            return CuResult.CUDA_SUCCESS;
        }
        MemorySegment out = c.scratch(ShareRegistry.DRIVER_BYTES);
        int res = driver.cuIpcGetMemHandle(out, dptr);
        if (res != CuResult.CUDA_SUCCESS) {
            return res;
        }
        byte[] token;
        try {
            token = session.shares().share(ShareRegistry.KIND_MEMORY,
                    out.asSlice(0, ShareRegistry.DRIVER_BYTES).toArray(ValueLayout.JAVA_BYTE), r.size(), -1, dptr);
            session.sharing().exported(ShareRegistry.KIND_MEMORY, dptr);
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
        long context = session.currentContextId(c.lane);
        if (context == 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_CONTEXT, "no current context");
        }
        ShareRegistry.Found f;
        try {
            f = session.shares().lookup(ShareRegistry.KIND_MEMORY, token);
        } catch (ShareRegistry.Refused e) {
            throw rejected(e);
        }
        if (f.window() != null) {
            long base = mapWindow(c, f, token);
            c.outs.putLong(base);
            return CuResult.CUDA_SUCCESS;
        }
        requireWorker("IPC memory");
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
        if (o.mapped() != null) { // isolation context: the session's own mapping of another session's window memory
            try (SessionUses.Retirement retiring = c.retire(new long[0], new long[]{dptr})) {
                retiring.commit();
                session.sharing().memoryClosed(dptr);
                session.memory().remove(dptr);
                unmapWindow(session.host().driver(), o.mapped());
                return CuResult.CUDA_SUCCESS;
            }
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
        if (session.shares().sameProcess()) {
            c.sendData(MemorySegment.ofArray(shareEvent(c, event)));
            return CuResult.CUDA_SUCCESS;
        }
        MemorySegment out = c.scratch(ShareRegistry.DRIVER_BYTES);
        int res = driver.cuIpcGetEventHandle(out, event);
        if (res != CuResult.CUDA_SUCCESS) {
            return res;
        }
        byte[] token;
        try {
            token = session.shares().share(ShareRegistry.KIND_EVENT,
                    out.asSlice(0, ShareRegistry.DRIVER_BYTES).toArray(ValueLayout.JAVA_BYTE), 0, -1, event);
            session.sharing().exported(ShareRegistry.KIND_EVENT, event);
        } catch (ShareRegistry.Refused e) {
            throw rejected(e);
        }
        c.sendData(MemorySegment.ofArray(token));
        return res;
    }

    @Override
    public int cuIpcOpenEventHandle(Call c, long handle) throws ProtocolException, CallRejected, InterruptedException {
        byte[] token = token(c, handle);
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
        if (f.events() != null) {
            c.outs.putLong(session.handles().intern(ParamType.EVENT, joinEvent(session, f.events(), token), 0, context));
            return CuResult.CUDA_SUCCESS;
        }
        requireWorker("IPC events");
        MemorySegment out = c.scratch(8);
        MemorySegment bytes = c.scratch(ShareRegistry.DRIVER_BYTES).copyFrom(MemorySegment.ofArray(f.driverBytes()));
        int res = driver.cuIpcOpenEventHandle(out, bytes);
        if (res == CuResult.CUDA_SUCCESS) {
            long real = out.get(ValueLayout.JAVA_LONG, 0);
            session.sharing().eventOpened(real, token); // its token: a group checkpoint carries it (GroupCheckpoint)
            c.outs.putLong(session.handles().intern(ParamType.EVENT, real, 0, context));
        }
        return res;
    }

    /** CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS: the flags of an opener's own event (isolation context). */
    static final int OPENED_EVENT_FLAGS = 2 | CallDispatcher.EVENT_INTERPROCESS;

    /**
     * Isolation context: the session's event {@code event} (driver value) as an {@link IpcEventShare} registered with
     * the backend; its token. The event must have been made with CU_EVENT_INTERPROCESS (and so DISABLE_TIMING), as the
     * driver requires (else CUDA_ERROR_INVALID_VALUE); one already in a share (exported before, or opened from another
     * session) is registered again with that share. Its backend stream is made in the event's context.
     */
    private byte[] shareEvent(Call c, long event) throws CallRejected {
        SessionShares sharing = session.sharing();
        if (!sharing.interprocess(event)) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "the event was made without CU_EVENT_INTERPROCESS"
                    + " (an IPC event needs CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING)");
        }
        IpcEventShare.Member m = sharing.memberOf(event);
        boolean joined = m == null;
        SessionHandles.Entry e = joined ? session.handles().entryOf(ParamType.EVENT, event) : null;
        if (joined && e != null && e.context() == session.currentContextId(c.lane)) {
            m = session.shares().newEventShare().join(session.id(), session.host().driver(), event); // its context is current
        } else if (joined) {
            SessionHandles.Entry ctx = e == null ? null : session.handles().get(e.context(), ParamType.CTX);
            if (ctx == null) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_HANDLE, "the event's context is gone");
            }
            CudaDriver real = session.host().driver();
            int r = real.cuCtxPushCurrent(ctx.real()); // its stream is made in the event's context
            if (r != CuResult.CUDA_SUCCESS) {
                throw new CallRejected(r, "the event's context could not be made current");
            }
            try {
                m = session.shares().newEventShare().join(session.id(), real, event);
            } finally {
                real.cuCtxPopCurrent(c.scratch(8));
            }
        }
        try {
            byte[] token = session.shares().shareEvent(m.share(), event);
            if (joined) {
                sharing.member(m);
            }
            sharing.exported(ShareRegistry.KIND_EVENT, event);
            return token;
        } catch (ShareRegistry.Refused refused) {
            if (joined) {
                m.share().leave(m);
            }
            throw rejected(refused);
        }
    }

    /**
     * Isolation context: a new event of {@code session} in the current context (CU_EVENT_DISABLE_TIMING |
     * CU_EVENT_INTERPROCESS), joined to {@code share}, opened with {@code token}; its driver value. It completes when
     * the share's latest recording does, from here on ({@link IpcEventShare}). A group restore calls it too
     * ({@link GroupCheckpoint#reOpen}).
     */
    static long joinEvent(Session session, IpcEventShare share, byte[] token) throws CallRejected {
        CudaDriver driver = session.driver();
        int r;
        long real;
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            r = driver.cuEventCreate(out, OPENED_EVENT_FLAGS);
            real = out.get(ValueLayout.JAVA_LONG, 0);
        }
        if (r != CuResult.CUDA_SUCCESS) {
            throw new CallRejected(r, "the opener's event could not be made");
        }
        IpcEventShare.Member m;
        try {
            m = share.join(session.id(), session.host().driver(), real);
        } catch (CallRejected e) {
            driver.cuEventDestroy(real);
            throw e;
        }
        SessionShares sharing = session.sharing();
        sharing.interprocessEvent(real);
        sharing.eventOpened(real, token);
        sharing.member(m);
        return real;
    }

    private static final String CONTEXT_MODE_FIX = "IPC memory in isolation context or shared is served for cuMemAlloc"
            + " allocations of a session with address-stable memory whose granules are their own; otherwise run the"
            + " backend with --isolation process (the default)";

    /** The fix a refusal of window memory names, for {@code session}'s isolation mode. */
    private static String fixFor(Session session) {
        return session.shares().sameProcess() ? CONTEXT_MODE_FIX : "IPC memory of a session with address-stable memory"
                + " is served for cuMemAlloc allocations whose granules are their own (a quarter granule and up); otherwise"
                + " set stable-addresses = off for tenant " + session.tenant().name() + ", whose IPC memory then goes"
                + " through the driver's IPC handles";
    }

    /**
     * The window route (isolation context and shared; isolation process for an address-stable session): the allocation
     * at {@code dptr} ({@code size} bytes) as the physical allocations of the session's address window that back it,
     * each exported as a POSIX descriptor, registered as a share; its token. Refused
     * (CUDA_ERROR_NOT_SUPPORTED, naming the cause and the fix) when the session has no address-stable memory, the
     * allocation lies outside its window, or shares a granule with another allocation (those smaller than a quarter
     * granule do).
     */
    private byte[] shareWindow(long dptr, long size) throws CallRejected {
        ShareRegistry.Window window = windowOf(session, dptr, size);
        try {
            byte[] token = session.shares().shareWindow(size, window, dptr);
            session.sharing().exported(ShareRegistry.KIND_MEMORY, dptr);
            return token;
        } catch (ShareRegistry.Refused e) {
            throw rejected(e);
        }
    }

    /**
     * The allocation at {@code dptr} ({@code size} bytes) of {@code session}'s address window as the physical
     * allocations that back it, each exported as a POSIX descriptor (the caller's, {@link ShareRegistry#closeAll});
     * refused as {@link #shareWindow} says.
     */
    static ShareRegistry.Window windowOf(Session session, long dptr, long size) throws CallRejected {
        StableAddresses stable = session.stable();
        if (stable == null || !session.inWindow(dptr)) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "session " + session.id() + (stable == null
                    ? " has no address-stable memory (stable-addresses = on for tenant " + session.tenant().name() + ")"
                    : String.format(": 0x%x lies outside its address window", dptr)) + ": " + fixFor(session));
        }
        if (!stable.ownGranules(dptr)) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, String.format("0x%x (%d bytes) shares a granule with"
                    + " other allocations (allocations smaller than a quarter granule, and pools' memory, share granules"
                    + " with others and cannot be shared); %s", dptr, size, fixFor(session)));
        }
        List<PhysicalMemory> pieces = new ArrayList<>();
        for (PhysicalMemory m : stable.physical()) {
            if (m.address() < dptr + size && dptr < m.address() + m.size()) {
                pieces.add(m);
            }
        }
        pieces.sort(java.util.Comparator.comparingLong(PhysicalMemory::address));
        String why = pieces.isEmpty() ? "no physical allocation backs it" : null;
        long at = pieces.isEmpty() ? 0 : pieces.get(0).address();
        for (PhysicalMemory m : pieces) {
            if (why != null) {
                break;
            }
            if (m.address() != at || m.handle() == 0) {
                why = "its physical allocations are not one run of granules";
            }
            at = m.address() + m.size();
            for (SessionMemory.Range other : session.memory().ranges()) {
                if (other.base() != dptr && other.base() < at && m.address() < other.base() + other.size()) {
                    why = String.format("it shares a granule with the allocation at 0x%x (allocations smaller than a quarter"
                            + " granule share granules with others and cannot be shared)", other.base());
                    break;
                }
            }
        }
        if (why == null && at < dptr + size) {
            why = "its physical allocations do not cover it";
        }
        if (why != null) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, String.format("0x%x (%d bytes): %s; %s", dptr, size,
                    why, fixFor(session)));
        }
        long start = pieces.get(0).address();
        List<ShareRegistry.Piece> exported = new ArrayList<>();
        ShareRegistry.Window window = new ShareRegistry.Window(dptr - start, exported);
        try {
            for (PhysicalMemory m : pieces) {
                exported.add(new ShareRegistry.Piece(m.address() - start, m.size(), session.exportPosixFd(m)));
            }
        } catch (IOException e) {
            ShareRegistry.closeAll(window);
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, e.getMessage() + "; " + fixFor(session));
        }
        return window;
    }

    /**
     * The window route: maps the exporter's window memory {@code f} into a reservation of this session (the driver's
     * own, outside any window), read-write for the current context's device; returns the allocation's address there.
     * Nothing is charged: the exporter's allocation is. The lookup's descriptors are closed here.
     */
    private long mapWindow(Call c, ShareRegistry.Found f, byte[] token) throws CallRejected {
        MemorySegment out = c.scratch(8);
        int r = session.host().driver().cuCtxGetDevice(out);
        if (r != CuResult.CUDA_SUCCESS) {
            ShareRegistry.closeAll(f.window());
            throw new CallRejected(r, "the current context's device");
        }
        return mapWindow(session, f.window(), f.size(), token, out.get(ValueLayout.JAVA_INT, 0), 0);
    }

    /**
     * Maps window memory {@code w} of {@code size} bytes (opened with {@code token}) into a reservation of
     * {@code session} at {@code at} (0: where the driver chooses; else exactly there, as a restore of a group checkpoint
     * asks: refused when the driver gives another address), read-write for {@code device}; records it as the session's
     * opened memory and returns its base. The descriptors of {@code w} are closed here.
     */
    static long mapWindow(Session session, ShareRegistry.Window w, long size, byte[] token, int device, long at)
            throws CallRejected {
        CudaDriver real = session.host().driver();
        int n = w.pieces().size();
        long[] addresses = new long[n];
        long[] sizes = new long[n];
        long[] handles = new long[n];
        long reservation = 0;
        int mapped = 0;
        int r;
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            r = real.cuMemAddressReserve(out, w.span(), 0, at, 0);
            reservation = r == CuResult.CUDA_SUCCESS ? out.get(ValueLayout.JAVA_LONG, 0) : 0;
            if (r == CuResult.CUDA_SUCCESS && at != 0 && reservation != at) {
                r = CuResult.CUDA_ERROR_INVALID_VALUE; // somewhere else: the program's pointers would not reach it
            }
            for (int i = 0; i < n && r == CuResult.CUDA_SUCCESS; i++) {
                ShareRegistry.Piece p = w.pieces().get(i);
                r = real.cuMemImportFromShareableHandle(out, MemorySegment.ofAddress(p.fd()),
                        io.gpusockets.protocol.structs.MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
                if (r != CuResult.CUDA_SUCCESS) {
                    break;
                }
                handles[i] = out.get(ValueLayout.JAVA_LONG, 0);
                addresses[i] = reservation + p.offset();
                sizes[i] = p.size();
                r = real.cuMemMap(addresses[i], p.size(), 0, handles[i], 0);
                if (r == CuResult.CUDA_SUCCESS) {
                    mapped = i + 1;
                } else {
                    real.cuMemRelease(handles[i]);
                    handles[i] = 0;
                }
            }
            if (r == CuResult.CUDA_SUCCESS) {
                MemorySegment desc = arena.allocate(io.gpusockets.protocol.structs.MemoryProps.ACCESS_DESC_SIZE);
                desc.set(ValueLayout.JAVA_INT, 0, io.gpusockets.protocol.structs.MemoryProps.LOCATION_TYPE_DEVICE);
                desc.set(ValueLayout.JAVA_INT, 4, device);
                desc.set(ValueLayout.JAVA_INT, 8, io.gpusockets.protocol.structs.MemoryProps.ACCESS_READWRITE);
                r = real.cuMemSetAccess(reservation, w.span(), desc, 1);
            }
        } finally {
            ShareRegistry.closeAll(w);
        }
        SessionShares.Mapped m = new SessionShares.Mapped(reservation, w.span(), java.util.Arrays.copyOf(addresses, mapped),
                java.util.Arrays.copyOf(sizes, mapped), java.util.Arrays.copyOf(handles, mapped), token.clone(), device);
        if (r != CuResult.CUDA_SUCCESS) {
            if (reservation != 0) {
                unmapWindow(real, m);
            }
            throw new CallRejected(r, at != 0 ? String.format("mapping the exporter's memory at 0x%x (%d bytes) failed",
                    at, w.span()) : "mapping the exporter's memory into this session failed");
        }
        long base = reservation + w.start();
        session.sharing().memoryMapped(base, size, m);
        session.memory().add(new SessionMemory.Range(base, size, SessionMemory.IPC_MAPPING, false));
        return base;
    }

    /** Unmaps, releases and frees what {@link #mapWindow} made (a close, or the session's end). */
    static void unmapWindow(CudaDriver real, SessionShares.Mapped m) {
        for (int i = 0; i < m.handles().length; i++) {
            real.cuMemUnmap(m.addresses()[i], m.sizes()[i]);
            real.cuMemRelease(m.handles()[i]);
        }
        real.cuMemAddressFree(m.reservation(), m.span());
    }
}
