package io.gpusockets.backend.session;

import io.gpusockets.backend.tenant.DeviceShare;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

/**
 * One session's side of the device-time scheduler ({@link DeviceShare}): a launch waits for admission
 * before its driver call, and after it an event (no timing, made by the session, pooled per context)
 * is recorded behind it on its stream; a poller thread of the session queries those events and tells
 * the scheduler when each launch has completed. Does nothing, and costs one volatile read per launch,
 * while no tenant has a share.
 *
 * <p>Safety: events are queried only under this object's lock, and a context's events are forgotten
 * (under the lock) before the context is destroyed ({@link #contextDestroyed}) and all of them when the
 * session ends ({@link #end}); the driver frees them with their context. A launch that holds its slot
 * longer than {@link #HOLD_LIMIT_NANOS} (a kernel that runs long, or never ends) gives the slot back
 * and is charged what it held, so it cannot hold back other tenants for ever.
 */
final class LaunchShares {
    /** How long an admitted launch may hold its slot in the scheduler's window. */
    static final long HOLD_LIMIT_NANOS = 1_000_000_000L;
    private static final long POLL_NANOS = 50_000;
    private static final int CU_EVENT_DISABLE_TIMING = 2;
    /** Launches followed at once per session (and so events it holds); past it a launch counts as done when it starts. */
    static final int MAX_FOLLOWED = 256;

    private record InFlight(DeviceShare.Ticket ticket, long event, long context, long since) {
    }

    private final long sessionId;
    private final DeviceShare scheduler;
    private final CudaDriver driver;
    private final String tenant;
    private final ArrayDeque<InFlight> inFlight = new ArrayDeque<>();
    private final Map<Long, ArrayDeque<Long>> freeEvents = new HashMap<>();
    private final List<DeviceShare.Ticket> waiting = new ArrayList<>();
    private Thread poller;
    private boolean ended;

    LaunchShares(long sessionId, DeviceShare scheduler, CudaDriver driver, String tenant) {
        this.sessionId = sessionId;
        this.scheduler = scheduler;
        this.driver = driver;
        this.tenant = tenant;
    }

    /** Before a launch's driver call: waits for admission; null (nothing to do after) while no tenant has a share. */
    DeviceShare.Ticket before() throws CallRejected, InterruptedException {
        if (!scheduler.active()) {
            return null;
        }
        DeviceShare.Ticket t;
        synchronized (this) {
            if (ended) {
                throw new CallRejected(CuResult.CUDA_ERROR_UNKNOWN, "the session has ended");
            }
            t = scheduler.submit(tenant, System.nanoTime());
            waiting.add(t);
        }
        try {
            if (!scheduler.await(t)) {
                throw new CallRejected(CuResult.CUDA_ERROR_UNKNOWN, "the session ended while the launch waited for the device");
            }
        } catch (InterruptedException e) {
            scheduler.abandon(t, System.nanoTime());
            throw e;
        } finally {
            synchronized (this) {
                waiting.remove(t);
            }
        }
        return t;
    }

    /** After the launch's driver call ({@code r}) on {@code stream} in {@code context} (reals). */
    void after(DeviceShare.Ticket t, long context, long stream, int r) {
        if (t == null) {
            return;
        }
        long now = System.nanoTime();
        synchronized (this) {
            if (r != CuResult.CUDA_SUCCESS || ended || context == 0) {
                scheduler.abandon(t, now);
                return;
            }
            if (inFlight.size() >= MAX_FOLLOWED) {
                scheduler.complete(t, now); // kernels that do not end (past the hold limit) must not pile up events
                return;
            }
            long event = takeEvent(context);
            if (event == 0 || driver.cuEventRecord(event, stream) != CuResult.CUDA_SUCCESS) {
                if (event != 0) {
                    freeEvents.get(context).push(event);
                }
                scheduler.complete(t, now); // cannot be followed: counted as done now
                return;
            }
            inFlight.add(new InFlight(t, event, context, now));
            if (poller == null) {
                poller = Thread.ofPlatform().daemon().name("gpusockets-launch-shares-" + sessionId).start(this::poll);
            }
            notifyAll();
        }
    }

    /** An event of {@code context}, pooled or new (the lane's current context is {@code context}); 0 when none can be made. */
    private long takeEvent(long context) {
        ArrayDeque<Long> free = freeEvents.computeIfAbsent(context, k -> new ArrayDeque<>());
        if (!free.isEmpty()) {
            return free.pop();
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(8);
            return driver.cuEventCreate(out, CU_EVENT_DISABLE_TIMING) == CuResult.CUDA_SUCCESS ? out.get(ValueLayout.JAVA_LONG, 0) : 0;
        }
    }

    private void poll() {
        while (true) {
            synchronized (this) {
                while (inFlight.isEmpty() && !ended) {
                    try {
                        wait();
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                if (ended) {
                    return;
                }
                long now = System.nanoTime();
                for (Iterator<InFlight> it = inFlight.iterator(); it.hasNext(); ) {
                    InFlight f = it.next();
                    int r = driver.cuEventQuery(f.event());
                    if (r == CuResult.CUDA_ERROR_NOT_READY) {
                        if (now - f.since() > HOLD_LIMIT_NANOS) {
                            scheduler.complete(f.ticket(), now); // its slot goes back; the event stays watched
                        }
                        continue;
                    }
                    it.remove();
                    scheduler.complete(f.ticket(), now);
                    if (r == CuResult.CUDA_SUCCESS) {
                        freeEvents.computeIfAbsent(f.context(), k -> new ArrayDeque<>()).push(f.event());
                    }
                }
            }
            LockSupport.parkNanos(POLL_NANOS);
        }
    }

    /** Before {@code context} is destroyed: its launches stop being followed and its events are forgotten (the driver frees them with it). */
    synchronized void contextDestroyed(long context) {
        long now = System.nanoTime();
        for (Iterator<InFlight> it = inFlight.iterator(); it.hasNext(); ) {
            InFlight f = it.next();
            if (f.context() == context) {
                it.remove();
                scheduler.abandon(f.ticket(), now);
            }
        }
        freeEvents.remove(context);
    }

    /** The session ends: nothing is followed or waits any more (before its contexts are destroyed). Idempotent. */
    void end() {
        synchronized (this) {
            if (ended) {
                return;
            }
            ended = true;
            long now = System.nanoTime();
            for (InFlight f : inFlight) {
                scheduler.abandon(f.ticket(), now);
            }
            inFlight.clear();
            freeEvents.clear();
            for (DeviceShare.Ticket t : List.copyOf(waiting)) {
                scheduler.abandon(t, now); // its lane wakes and refuses the launch
            }
            notifyAll();
        }
    }
}
