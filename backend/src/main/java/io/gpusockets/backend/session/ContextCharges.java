package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ChargeRule;
import io.gpusockets.protocol.api.LimitFootprint;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The charges that depend on a session's contexts: each context beyond the session's first on a
 * device (what one more context takes there, {@link DeviceFacts#contextBytes}), the device memory each
 * context's limits reserve above what it had ({@link LimitFootprint}), and the session's libraries,
 * which the driver loads into every context they are used in and so are charged their footprint once
 * per context of the session (once while it has none).
 *
 * <p>Why the first context per device is free: every session makes one to do anything at all, so its
 * cost is the price of a session, which the tenant's {@code sessions} limit bounds; charging it would
 * take hundreds of MiB of a small quota on a GPU before the program allocates a byte. Every further
 * context is the program's choice and is charged.
 *
 * <p>The stack is charged by what the driver reserves per thread, which grows two ways: cuCtxSetLimit sets it
 * (the driver reserves anew at the size set), and a launch of a kernel whose local memory per thread exceeds
 * it grows it to what the kernel needs, where it stays until the next stack cuCtxSetLimit ({@link LaunchStack}).
 * Both are one charge per context, {@link LimitFootprint}'s rule at the reservation the rule last charged
 * ({@link Context#stack}) above the stack's value when the session first touched it. A launch whose kernel
 * needs no more than {@link #stackCovered} (what every context of the session holds at least) charges nothing
 * and takes no lock: a field read and a compare on the launch path.
 *
 * <p>Creating a context, loading a library and setting a limit change what the others charge, so each
 * holds {@link #lock} from its reserve (before the driver call) to the driver's answer; the releases
 * (a context destroyed, a library unloaded) take it briefly. Charges go through {@link SessionQuota}.
 */
final class ContextCharges {
    /** One context of the session: its device, its own charge, and per memory-reserving limit its baseline and charge. */
    private static final class Context {
        final int device;
        final long footprint;
        /** Whether the session made it (counted for the first-per-device rule and the libraries), or only set a limit in it. */
        final boolean made;
        final long[] baseline = {-1, -1, -1};
        final long[] limitCharged = new long[3];
        /**
         * The per-thread stack the driver holds reserved in this context as the rule last charged it: the size a
         * stack cuCtxSetLimit left, or what a launch grew it to; -1 until the session sets the stack or launches
         * a kernel that needs more than {@link #stackCovered}.
         */
        long stack = -1;

        Context(int device, long footprint, boolean made) {
            this.device = device;
            this.footprint = footprint;
            this.made = made;
        }

        long charged() {
            return footprint + limitCharged[0] + limitCharged[1] + limitCharged[2];
        }
    }

    private final SessionQuota quota;
    private final DeviceFacts facts;
    private final ReentrantLock lock = new ReentrantLock();
    /** By real handle; guarded by {@link #lock}. */
    private final Map<Long, Context> contexts = new HashMap<>();
    /** Footprint of each loaded library, by real handle. */
    private final Map<Long, Long> libraries = new HashMap<>();
    private int made;
    private long libraryBytes;
    /** What the libraries hold now: {@link #libraryBytes} × max(1, {@link #made}). */
    private long libraryCharged;
    /** Set by {@link #close}: a lane that was still in the driver then gives its charge back at once. */
    private boolean closed;
    /**
     * The per-thread stack every context of the session holds reserved at least ({@link Context#stack}; 0 while a
     * context's is not known): a launch needing no more grows nothing. Written under {@link #lock}, read without.
     */
    private volatile long stackCovered;

    ContextCharges(SessionQuota quota, DeviceFacts facts) {
        this.quota = quota;
        this.facts = facts;
    }

    // ---- contexts

    /** Before the driver makes a context on {@code dev}: reserves its charge; holds the lock until {@link #contextMade} or {@link #failed}. */
    SessionQuota.Pending contextBefore(int dev, String what) throws CallRejected {
        return locked(() -> {
            boolean another = contexts.values().stream().anyMatch(x -> x.made && x.device == dev);
            long footprint = another && quota.metered() ? facts.contextBytes(dev) : 0;
            long libraryShare = made > 0 ? libraryBytes : 0;
            long bytes = saturated(footprint, libraryShare);
            quota.reserve(bytes, what);
            return new SessionQuota.Pending(ChargeRule.CONTEXT, bytes, footprint, dev, 0);
        });
    }

    /** The driver made {@code real} after {@link #contextBefore}. */
    void contextMade(SessionQuota.Pending p, long real) {
        try {
            if (givenBackAfterClose(p)) {
                return;
            }
            Context old = contexts.put(real, new Context((int) p.aux(), p.key(), true));
            made++;
            libraryCharged += p.bytes() - p.key();
            if (old != null) {
                dropped(old);   // the driver handed out a handle still charged: its destroy was not seen
            }
            coverStacks();
        } finally {
            lock.unlock();
        }
    }

    /** A context left the session (destroyed, or its session ended): what it held goes back. */
    void contextGone(long real) {
        lock.lock();
        try {
            Context x = contexts.remove(real);
            if (x != null) {
                dropped(x);
                coverStacks();
            }
        } finally {
            lock.unlock();
        }
    }

    private void dropped(Context x) {
        quota.unreserve(x.charged());
        if (x.made) {
            made--;
            settleLibraries();
        }
    }

    // ---- libraries

    /** Before cuLibraryLoadData: reserves the footprint for each context; holds the lock until {@link #libraryLoaded} or {@link #failed}. */
    SessionQuota.Pending libraryBefore(long footprint, String what) throws CallRejected {
        return locked(() -> {
            long bytes = multiplied(footprint, Math.max(1, made));
            quota.reserve(bytes, what);
            return new SessionQuota.Pending(ChargeRule.LIBRARY, bytes, footprint, 0, 0);
        });
    }

    void libraryLoaded(SessionQuota.Pending p, long real) {
        try {
            if (givenBackAfterClose(p)) {
                return;
            }
            Long old = libraries.put(real, p.key());
            libraryBytes = saturated(libraryBytes, p.key());
            libraryCharged = saturated(libraryCharged, p.bytes());
            if (old != null) {
                libraryBytes -= old;
                settleLibraries();
            }
        } finally {
            lock.unlock();
        }
    }

    void libraryUnloaded(long real) {
        lock.lock();
        try {
            Long footprint = libraries.remove(real);
            if (footprint != null) {
                libraryBytes -= footprint;
                settleLibraries();
            }
        } finally {
            lock.unlock();
        }
    }

    /** Gives back what the libraries hold beyond their rule after a context or a library went. */
    private void settleLibraries() {
        long target = multiplied(libraryBytes, Math.max(1, made));
        if (libraryCharged > target) {
            quota.unreserve(libraryCharged - target);
            libraryCharged = target;
        }
    }

    // ---- limits

    /**
     * Before cuCtxSetLimit({@code limit}, {@code value}) in context {@code real} on {@code dev}, whose limit
     * is {@code current} now: reserves the increase of its charge over the limit's value when the session
     * first set it (a decrease is given back after the driver's success); holds the lock until
     * {@link #limitSet} or {@link #failed}.
     */
    SessionQuota.Pending limitBefore(long real, int dev, int limit, long value, long current, String what) throws CallRejected {
        return locked(() -> {
            Context x = contexts.computeIfAbsent(real, k -> new Context(dev, 0, false));
            if (x.baseline[limit] < 0) {
                x.baseline[limit] = current;
            }
            long delta = limitCharge(x, limit, value) - x.limitCharged[limit];
            long bytes = Math.max(delta, 0);
            quota.reserve(bytes, what);
            return new SessionQuota.Pending(ChargeRule.LIMIT, bytes, real, limit, current);
        });
    }

    /**
     * The driver set the limit, which now reads {@code actual} (the driver rounds and clamps): the charge is
     * trued up to it. False when the true charge is over the quota: the caller then restores the limit's
     * previous value ({@link SessionQuota.Pending#value}) and the reserve is given back.
     */
    boolean limitSet(SessionQuota.Pending p, long actual) {
        try {
            Context x = contexts.get(p.key());
            if (x == null) {   // the session ended (or the context went) meanwhile
                quota.unreserve(p.bytes());
                return true;
            }
            int limit = (int) p.aux();
            long have = x.limitCharged[limit] + p.bytes();
            long truth = limitCharge(x, limit, actual);
            if (truth > have) {
                try {
                    quota.reserve(truth - have, "cuCtxSetLimit");
                } catch (CallRejected over) {
                    quota.unreserve(p.bytes());
                    return false;
                }
            } else if (truth < have) {
                quota.unreserve(have - truth);
            }
            x.limitCharged[limit] = truth;
            if (limit == LimitFootprint.STACK_SIZE) {
                x.stack = actual;   // the driver reserves anew at the size set, whatever a launch had grown it to
                coverStacks();
            }
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** What every context holds at least now: a launch needing no more than this charges nothing. */
    long stackCovered() {
        return stackCovered;
    }

    /**
     * Before a launch in context {@code real} on {@code dev} of a kernel that needs {@code need} bytes of stack
     * per thread, more than {@link #stackCovered}: when that is more than the context holds reserved, the driver
     * grows the reservation to it at the launch, and the growth is charged by the stack's rule (as if the stack
     * limit were set to {@code need}); over the quota the launch is refused (CUDA_ERROR_OUT_OF_MEMORY) and nothing
     * changes. {@code stackNow} reads the context's stack limit from the driver, asked once per context, the first
     * time the rule needs to know what it holds. The charge stays whatever the launch answers (a launch that fails
     * asynchronously may already have grown it) until a stack cuCtxSetLimit or the context's end.
     */
    void launchNeeds(long real, int dev, long need, java.util.function.LongSupplier stackNow, String what) throws CallRejected {
        lock.lock();
        try {
            if (closed || real == 0) {
                return;   // the session has ended, or no context: the driver refuses the launch
            }
            Context x = contexts.get(real);
            if (x == null) {
                x = new Context(dev, 0, false);
                contexts.put(real, x);
            }
            if (x.stack < 0) {
                long now = stackNow.getAsLong();
                if (now < 0) {
                    coverStacks();
                    return;   // the driver cannot tell: nor can it launch here
                }
                x.stack = now;
                if (x.baseline[LimitFootprint.STACK_SIZE] < 0) {
                    x.baseline[LimitFootprint.STACK_SIZE] = now;
                }
            }
            if (need > x.stack) {
                int s = LimitFootprint.STACK_SIZE;
                long truth = limitCharge(x, s, need);
                if (truth > x.limitCharged[s]) {
                    quota.reserve(truth - x.limitCharged[s], what + " (a kernel needing " + need
                            + " bytes of stack per thread grows the context's " + x.stack + ")");
                    x.limitCharged[s] = truth;
                }
                x.stack = need;
            }
            coverStacks();
        } finally {
            lock.unlock();
        }
    }

    /** Recomputes {@link #stackCovered}; under {@link #lock}. */
    private void coverStacks() {
        long least = Long.MAX_VALUE;
        for (Context x : contexts.values()) {
            least = Math.min(least, Math.max(x.stack, 0));
        }
        stackCovered = least == Long.MAX_VALUE ? 0 : least;
    }

    /** The charge of {@code limit} at {@code value} in {@code x}: what it reserves beyond its baseline. */
    private long limitCharge(Context x, int limit, long value) {
        long threads = facts.residentThreads(x.device);
        long now = LimitFootprint.bytes(limit, value, threads);
        long base = LimitFootprint.bytes(limit, x.baseline[limit], threads);
        return Math.max(0, now - base);
    }

    // ---- common

    /** A reserve made under the lock, which it keeps; see {@link #locked}. */
    private interface Reserve {
        SessionQuota.Pending take() throws CallRejected;
    }

    /** Takes the lock and makes the reserve; the lock is held on until the driver answers, or let go at once on a refusal. */
    private SessionQuota.Pending locked(Reserve r) throws CallRejected {
        lock.lock();
        try {
            return r.take();
        } catch (CallRejected | RuntimeException e) {
            lock.unlock();
            throw e;
        }
    }

    /** After {@link #close} (a lane that was still in the driver): the reserve goes back at once; true if so. */
    private boolean givenBackAfterClose(SessionQuota.Pending p) {
        if (closed) {
            quota.unreserve(p.bytes());
        }
        return closed;
    }

    /** The driver call after a CONTEXT, LIBRARY or LIMIT reserve failed: the reserve goes back and the lock is let go. */
    void failed(SessionQuota.Pending p) {
        try {
            quota.unreserve(p.bytes());
        } finally {
            lock.unlock();
        }
    }

    /** The session has ended: everything still charged here goes back; returns how much that was. */
    long close() {
        lock.lock();
        try {
            closed = true;
            long missed = libraryCharged;
            for (Context x : contexts.values()) {
                missed = saturated(missed, x.charged());
            }
            contexts.clear();
            libraries.clear();
            made = 0;
            libraryBytes = 0;
            libraryCharged = 0;
            stackCovered = 0;
            quota.unreserve(missed);
            return missed;
        } finally {
            lock.unlock();
        }
    }

    private static long saturated(long a, long b) {
        long s = a + b;
        return s < 0 ? Long.MAX_VALUE : s;
    }

    private static long multiplied(long a, long n) {
        return Math.multiplyHigh(a, n) != 0 || a * n < 0 ? Long.MAX_VALUE : a * n;
    }
}
