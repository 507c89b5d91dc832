package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_CONTEXT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * cuIpcGetEventHandle and cuIpcOpenEventHandle across processes. An event made with {@code CU_EVENT_INTERPROCESS}
 * (which needs {@code CU_EVENT_DISABLE_TIMING}, else cuEventCreate answers {@code CUDA_ERROR_INVALID_VALUE}) gets, at
 * its first cuIpcGetEventHandle, a {@link Cell}: one page of a memory file ({@link MemoryFiles}) holding two counters,
 * recorded and completed. From then on, in the exporting process and in every process that opened the handle, a
 * cuEventRecord takes the next recorded number (a ticket) when it is called and raises completed to it when its stream
 * reaches it; cuEventQuery answers whether completed has reached recorded; cuEventSynchronize and cuStreamWaitEvent take
 * the recorded number when called and wait (the caller's thread, or the stream's thread in stream order) until completed
 * reaches it. Waiting parks, 20 us at first and doubling to 1 ms between looks, so a long wait burns no core; a stream's
 * wait ends early when its context is destroyed. A recording pending when the event is first exported is carried over.
 *
 * <p>Approximations: the driver's event is its last recording, so a wait for an earlier recording ends when a later one
 * completes (a program whose records of one event race on two streams sees its waits end at the latest completed one).
 * The cell also holds the process id of the last recording's process: a waiter that finds that process gone (it looks
 * about every 50 ms of waiting) counts the recording as reached, so one session's crashed worker cannot hold another's
 * streams forever (what a GPU does then is not documented). In stream capture an IPC event is recorded and waited for
 * as a local one (graph nodes).
 *
 * <p>The handle is {@link IpcMemory.Handle} with the event magic: the exporter's process id, the descriptor it keeps
 * open while the event lives, the page's size, the nonce in the file's name. cuIpcOpenEventHandle in another process
 * maps the page and makes an event of the current context (timing disabled) that cuEventDestroy releases; the exported
 * event's destruction closes the descriptor, so later opens fail (the driver calls using the opened event after that
 * undefined; here it keeps working on its mapping). Opening in the exporting process answers
 * {@code CUDA_ERROR_INVALID_CONTEXT} (HIP documents it; the driver documents no error: an assumption the GPU pass
 * checks); cuIpcGetEventHandle of an event made without {@code CU_EVENT_INTERPROCESS}, or bytes that are no handle,
 * {@code CUDA_ERROR_INVALID_VALUE}. An opened event's cuIpcGetEventHandle gives the handle it was opened from.
 */
final class IpcEvents {
    /** Bytes of a cell's memory file: one page. */
    static final long CELL_BYTES = 4096;
    private static final long RECORDED = 0, COMPLETED = 8, RECORDER = 16;
    /** Parks (at the longest interval) between two looks at whether the last recording's process still lives. */
    private static final int LIVENESS_EVERY = 50;
    private static final long SELF = ProcessHandle.current().pid();
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final long FIRST_PARK_NANOS = 20_000, LAST_PARK_NANOS = 1_000_000;

    private final Handles handles;
    private final Contexts contexts;

    IpcEvents(Handles handles, Contexts contexts) {
        this.handles = handles;
        this.contexts = contexts;
    }

    /**
     * The shared state of an IPC event: two counters in a mapped page, the handle naming it, and (in the exporter) the
     * descriptor kept open for openers. Released (unmapped, the descriptor closed) when its event is destroyed and no
     * queued record or wait still uses it.
     */
    static final class Cell {
        private final MemorySegment page;
        private final Arena arena;
        private final int fd;   // -1 in an opener
        final IpcMemory.Handle handle;
        private final AtomicInteger users = new AtomicInteger(1);   // the event, plus queued records and waits

        Cell(MemorySegment page, Arena arena, int fd, IpcMemory.Handle handle) {
            this.page = page;
            this.arena = arena;
            this.fd = fd;
            this.handle = handle;
        }

        /** A new recording of this process: its ticket. */
        long record() {
            LONG.setVolatile(page, RECORDER, SELF);
            return (long) LONG.getAndAdd(page, RECORDED, 1L) + 1;
        }

        long recorded() {
            return (long) LONG.getVolatile(page, RECORDED);
        }

        long completed() {
            return (long) LONG.getVolatile(page, COMPLETED);
        }

        /** The recording {@code ticket} was reached: completed rises to it (never falls). */
        void complete(long ticket) {
            long c;
            do {
                c = completed();
                if (c >= ticket) {
                    return;
                }
            } while (!LONG.compareAndSet(page, COMPLETED, c, ticket));
        }

        /**
         * Parks until the recording {@code ticket} is reached (true) or {@code stop} says to give up (false). A recording
         * whose process has exited counts as reached: no process waits forever for a dead one.
         */
        boolean await(long ticket, BooleanSupplier stop) {
            long park = FIRST_PARK_NANOS;
            int looks = 0;
            while (completed() < ticket) {
                if (stop.getAsBoolean()) {
                    return false;
                }
                if (park == LAST_PARK_NANOS && ++looks % LIVENESS_EVERY == 0 && recorderExited()) {
                    complete(ticket);
                    return true;
                }
                LockSupport.parkNanos(park);
                park = Math.min(park * 2, LAST_PARK_NANOS);
            }
            return true;
        }

        private boolean recorderExited() {
            long pid = (long) LONG.getVolatile(page, RECORDER);
            return pid != SELF && pid > 0 && !ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
        }

        /** One more user (a queued record or wait); false once released. */
        boolean acquire() {
            int u;
            do {
                u = users.get();
                if (u == 0) {
                    return false;
                }
            } while (!users.compareAndSet(u, u + 1));
            return true;
        }

        void release() {
            if (users.decrementAndGet() == 0) {
                arena.close();
                if (fd >= 0) {
                    MemoryFiles.close(fd);
                }
            }
        }
    }

    /** cuIpcGetEventHandle. */
    void getHandle(MemorySegment pHandle, long hEvent) {
        HostSegments.sized(pHandle, IpcMemory.Handle.BYTES, "pHandle");
        EmulatedEvent e = contexts.lookup(hEvent, EmulatedEvent.class, "event");
        if ((e.flags & EmulatedEvent.INTERPROCESS) == 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "the event was made without CU_EVENT_INTERPROCESS");
        }
        Cell cell;
        synchronized (e) {
            cell = e.cell;
            if (cell == null) {
                cell = export(e);
                e.cell = cell;
            }
        }
        cell.handle.write(pHandle);
    }

    private static Cell export(EmulatedEvent e) {
        long nonce = IpcMemory.nonce();
        int fd;
        try {
            fd = MemoryFiles.create(CELL_BYTES, IpcMemory.Handle.fileName(IpcMemory.Handle.EVENT, nonce));
        } catch (MemoryFiles.SystemCallFailed x) {
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "no memory file for the IPC event: " + x.getMessage());
        }
        Arena arena = Arena.ofShared();
        MemorySegment page;
        try {
            page = MemoryFiles.map(fd, CELL_BYTES, arena);
        } catch (MemoryFiles.SystemCallFailed x) {
            arena.close();
            MemoryFiles.close(fd);
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "mapping the IPC event's memory file failed: " + x.getMessage());
        }
        Cell cell = new Cell(page, arena, fd,
                new IpcMemory.Handle(IpcMemory.Handle.EVENT, ProcessHandle.current().pid(), fd, CELL_BYTES, nonce));
        EmulatedEvent.Recording r = e.recording();
        if (r != null && !r.reached.isDone() && cell.acquire()) {   // a pending recording carries over
            long ticket = cell.record();
            r.reached.whenComplete((v, t) -> {
                cell.complete(ticket);
                cell.release();
            });
        }
        return cell;
    }

    /** cuIpcOpenEventHandle: an event of the current context sharing the exported one's cell. */
    long open(MemorySegment handle) {
        EmulatedContext c = contexts.current();
        IpcMemory.Handle h = IpcMemory.Handle.read(handle, IpcMemory.Handle.EVENT, "handle");
        if (h.pid() == ProcessHandle.current().pid()) {
            throw new CudaError(CUDA_ERROR_INVALID_CONTEXT, "the handle was exported by this process: an IPC event"
                    + " handle opens only in another process");
        }
        if (h.size() != CELL_BYTES) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "handle is no IPC event handle of the emulated device (size " + h.size() + ")");
        }
        Arena arena = Arena.ofShared();
        MemorySegment page;
        try {
            page = h.map(arena);
        } catch (RuntimeException x) {
            arena.close();
            throw x;
        }
        long id = handles.issue();
        EmulatedEvent e = new EmulatedEvent(id, c, EmulatedEvent.INTERPROCESS | EmulatedEvent.DISABLE_TIMING);
        e.cell = new Cell(page, arena, -1, h);
        try {
            handles.own(c, id, e);
        } catch (CudaError x) {
            e.released();
            throw x;
        }
        return id;
    }

    /** cuEventRecord of an IPC event outside capture: the next ticket, reached in stream order. */
    static void record(EmulatedContext c, EmulatedStream s, EmulatedEvent e, Cell cell) {
        if (!cell.acquire()) {
            throw new CudaError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE, "the event was destroyed");
        }
        long ticket = cell.record();
        EmulatedEvent.Recording r = new EmulatedEvent.Recording();
        try {
            r.reached = c.enqueue(s, null, () -> {
                try {
                    r.nanos = System.nanoTime();
                    cell.complete(ticket);
                } finally {
                    cell.release();
                }
            }, "cuEventRecord", true);
        } catch (RuntimeException x) {
            cell.complete(ticket);   // never queued: nothing will reach it, and nobody may wait for it
            cell.release();
            throw x;
        }
        e.recording(r);
    }

    /** cuStreamWaitEvent of an IPC event outside capture: the stream waits, in order, for the recording now last. */
    static void waitEvent(EmulatedContext c, EmulatedStream s, Cell cell) {
        long ticket = cell.recorded();
        if (cell.completed() >= ticket || !cell.acquire()) {
            return;
        }
        try {
            c.enqueue(s, null, () -> {
                try {
                    cell.await(ticket, c::destroyed);
                } finally {
                    cell.release();
                }
            }, "cuStreamWaitEvent", true);
        } catch (RuntimeException x) {
            cell.release();
            throw x;
        }
    }
}
