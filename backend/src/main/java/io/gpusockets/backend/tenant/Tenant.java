package io.gpusockets.backend.tenant;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * One tenant in the backend's process: its limits (replaced on a config reload, never dropping
 * sessions) and what its sessions hold now. Thread-safe; reserves never overshoot a limit.
 */
public final class Tenant implements TenantAccount {
    private final String name;
    private volatile TenantLimits limits;
    private final AtomicLong memoryUsed = new AtomicLong();
    private final AtomicLong pinnedUsed = new AtomicLong();
    private final AtomicInteger sessions = new AtomicInteger();
    /** Refusals by the limit that refused ("memory", "pinned", "sessions", "handles", ...). */
    private final Map<String, LongAdder> rejections = new ConcurrentHashMap<>();

    public Tenant(String name, TenantLimits limits) {
        if (name == null || name.isEmpty() || limits == null) {
            throw new IllegalArgumentException("tenant needs a name and limits");
        }
        this.name = name;
        this.limits = limits;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public TenantLimits limits() {
        return limits;
    }

    /** New limits from a reloaded config; what is held already stays held (new reserves see the new limits). */
    public void setLimits(TenantLimits l) {
        if (l == null) {
            throw new IllegalArgumentException("limits=null");
        }
        this.limits = l;
    }

    @Override
    public boolean reserveMemory(long bytes) {
        return reserve(memoryUsed, bytes, limits.memoryBytes(), "memory");
    }

    @Override
    public void releaseMemory(long bytes) {
        release(memoryUsed, bytes);
    }

    @Override
    public long memoryUsed() {
        return memoryUsed.get();
    }

    @Override
    public boolean reservePinned(long bytes) {
        return reserve(pinnedUsed, bytes, limits.pinnedBytes(), "pinned");
    }

    @Override
    public void releasePinned(long bytes) {
        release(pinnedUsed, bytes);
    }

    public long pinnedUsed() {
        return pinnedUsed.get();
    }

    @Override
    public void rejected(String what) {
        rejections.computeIfAbsent(what, k -> new LongAdder()).increment();
    }

    /** A session starts: false (with a rejection counted) when the tenant is at its session limit. */
    public boolean openSession() {
        int max = limits.sessions();
        while (true) {
            int n = sessions.get();
            if (n >= max) {
                rejected("sessions");
                return false;
            }
            if (sessions.compareAndSet(n, n + 1)) {
                return true;
            }
        }
    }

    /**
     * A session that another backend let in and this one takes over (gpusockets backend --take-over) with what it
     * holds: counted and charged as it is, past the limits if need be (it holds the memory already; new reserves see
     * the limits as usual).
     */
    public void adoptSession(long memoryBytes, long pinnedBytes) {
        sessions.incrementAndGet();
        memoryUsed.addAndGet(Math.max(0, memoryBytes));
        pinnedUsed.addAndGet(Math.max(0, pinnedBytes));
    }

    /** A session that {@link #openSession} let in has ended. */
    public void closeSession() {
        sessions.decrementAndGet();
    }

    public int sessions() {
        return sessions.get();
    }

    /** Refusals so far by limit, a snapshot. */
    public Map<String, Long> rejections() {
        Map<String, Long> out = new java.util.TreeMap<>();
        rejections.forEach((k, v) -> out.put(k, v.sum()));
        return out;
    }

    private boolean reserve(AtomicLong used, long bytes, long limit, String what) {
        if (bytes < 0) {
            throw new IllegalArgumentException(what + ": negative reserve " + bytes);
        }
        while (true) {
            long u = used.get();
            if (bytes > limit - u) {
                rejected(what);
                return false;
            }
            if (used.compareAndSet(u, u + bytes)) {
                return true;
            }
        }
    }

    private static void release(AtomicLong used, long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("negative release " + bytes);
        }
        used.addAndGet(-bytes);
    }

    @Override
    public String toString() {
        return "tenant " + name;
    }
}
