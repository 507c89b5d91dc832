package io.gpusockets.backend.tenant;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;

/**
 * Admission of kernel launches to the device by tenants' device-time shares, when tenants compete.
 * Owns the scheduling only (the sessions tell it when a launch completes, from events they record).
 *
 * <p>Start-time fair queuing on estimated device time: each tenant with a share is one flow of weight
 * {@code deviceShare}; tenants without one form a single best-effort flow of weight {@code 1 - sum of
 * shares} (at least {@value #BEST_EFFORT_MIN}). A launch is tagged at submission with start
 * {@code S = max(V, F_prev)} and finish {@code F = S + estimate / weight}, where the estimate is its
 * tenant's moving average of measured device time per launch; launches enter the device in order of
 * finish tag, at most {@code window} of them in flight (admitted, not yet completed) at once. So over
 * any period in which flows stay backlogged, each is admitted device time in proportion to its weight,
 * within one launch's estimate per flow; a flow alone gets the whole window. It cannot make the GPU
 * preempt a running kernel: a long kernel holds the device until it ends; the share bounds how much
 * of the queue a tenant holds, not how the hardware time-slices contexts.
 *
 * <p>Inactive (no tenant has a share) {@link #active()} is false and sessions do not call it.
 * Thread-safe; {@link #await} blocks a lane until its launch is admitted.
 */
public final class DeviceShare {
    /** Launches in flight on the device at once, over all tenants, by default. */
    public static final int WINDOW_DEFAULT = 8;
    /** The estimate of a tenant's first launches, before any was measured. */
    public static final long INITIAL_ESTIMATE_NANOS = 100_000;
    /** The weight of the best-effort flow when the shares add up to (nearly) 1. */
    public static final double BEST_EFFORT_MIN = 0.01;
    private static final String BEST_EFFORT = "";

    /** One launch: submitted, then admitted, then completed or abandoned. */
    public static final class Ticket {
        private final Flow flow;
        private final double start;
        private volatile boolean admitted;
        private boolean done;
        private long admittedAt;

        private Ticket(Flow flow, double start) {
            this.flow = flow;
            this.start = start;
        }

        /** The tenant whose launch it is ({@code ""} for best effort). */
        public String flow() {
            return flow.name;
        }

        public boolean admitted() {
            return admitted;
        }
    }

    private static final class Flow {
        final String name;
        double weight;
        double finish;
        long estimate = INITIAL_ESTIMATE_NANOS;
        int inFlight;
        long admittedCount;
        final ArrayDeque<Ticket> waiting = new ArrayDeque<>();
        final ArrayDeque<Double> finishes = new ArrayDeque<>();

        Flow(String name, double weight) {
            this.name = name;
            this.weight = weight;
        }
    }

    private final int window;
    private final Map<String, Flow> flows = new HashMap<>();
    private final Map<String, Double> shares = new HashMap<>();
    private volatile boolean active;
    private double virtualTime;
    private int inFlight;
    private long lastCompletion;

    public DeviceShare(int window) {
        if (window < 1) {
            throw new IllegalArgumentException("window=" + window);
        }
        this.window = window;
    }

    /** The shares now in force, by tenant name (only tenants with a share); replaces the previous ones. */
    public synchronized void configure(Map<String, Double> byTenant) {
        shares.clear();
        double sum = 0;
        for (var e : byTenant.entrySet()) {
            if (e.getValue() > 0) {
                shares.put(e.getKey(), e.getValue());
                sum += e.getValue();
            }
        }
        for (Flow f : flows.values()) {
            f.weight = weightOf(f.name, sum);
        }
        active = !shares.isEmpty();
        if (!active) {
            // nothing waits once no tenant has a share
            for (Flow f : flows.values()) {
                while (!f.waiting.isEmpty()) {
                    admit(f, f.waiting.poll(), System.nanoTime());
                }
            }
            notifyAll();
        }
    }

    private double weightOf(String name, double sum) {
        Double s = shares.get(name);
        return s != null ? s : Math.max(1 - sum, BEST_EFFORT_MIN);
    }

    /** Whether any tenant has a share (else launches are not scheduled at all). */
    public boolean active() {
        return active;
    }

    /**
     * A launch of {@code tenant} wants the device at {@code now} (System.nanoTime); it may be admitted at
     * once ({@link Ticket#admitted()}).
     */
    public synchronized Ticket submit(String tenant, long now) {
        String key = shares.containsKey(tenant) ? tenant : BEST_EFFORT;
        Flow f = flows.computeIfAbsent(key, k -> new Flow(k, weightOf(k,
                shares.values().stream().mapToDouble(Double::doubleValue).sum())));
        double s = Math.max(virtualTime, f.finish);
        f.finish = s + f.estimate / f.weight;
        Ticket t = new Ticket(f, s);
        f.waiting.add(t);
        f.finishes.add(f.finish);
        dispatch(now);
        return t;
    }

    /** Blocks until {@code t} is admitted (true) or abandoned (false). */
    public boolean await(Ticket t) throws InterruptedException {
        synchronized (this) {
            while (!t.admitted && !t.done) {
                wait();
            }
            return t.admitted;
        }
    }

    /** {@code t}'s launch has completed on the device at {@code now} (System.nanoTime): its slot goes to the next. */
    public synchronized void complete(Ticket t, long now) {
        if (!t.admitted || t.done) {
            abandon(t, now);
            return;
        }
        t.done = true;
        Flow f = t.flow;
        long measured = Math.max(0, now - Math.max(t.admittedAt, lastCompletion));
        lastCompletion = Math.max(lastCompletion, now);
        f.estimate = Math.max(1_000, (f.estimate * 7 + measured) / 8); // moving average, never below 1 µs
        f.inFlight--;
        inFlight--;
        dispatch(now);
    }

    /** {@code t} will not complete on the device (its launch failed, or its session or context went): forgotten. */
    public synchronized void abandon(Ticket t, long now) {
        if (t.done) {
            return;
        }
        t.done = true;
        Flow f = t.flow;
        if (t.admitted) {
            f.inFlight--;
            inFlight--;
        } else {
            int i = 0;
            for (var it = f.waiting.iterator(); it.hasNext(); i++) {
                if (it.next() == t) {
                    it.remove();
                    removeAt(f.finishes, i);
                    break;
                }
            }
            notifyAll(); // its waiter, if any, gives up
        }
        dispatch(now);
    }

    private static void removeAt(ArrayDeque<Double> q, int index) {
        int i = 0;
        for (var it = q.iterator(); it.hasNext(); i++) {
            it.next();
            if (i == index) {
                it.remove();
                return;
            }
        }
    }

    /** Admits waiting launches in finish-tag order while the window has room. */
    private void dispatch(long now) {
        boolean any = false;
        while (inFlight < window) {
            Flow best = null;
            for (Flow f : flows.values()) {
                if (!f.waiting.isEmpty() && (best == null || f.finishes.peek() < best.finishes.peek())) {
                    best = f;
                }
            }
            if (best == null) {
                break;
            }
            Ticket t = best.waiting.poll();
            best.finishes.poll();
            virtualTime = Math.max(virtualTime, t.start);
            admit(best, t, now);
            any = true;
        }
        if (any) {
            notifyAll();
        }
    }

    private void admit(Flow f, Ticket t, long now) {
        t.admittedAt = now;
        t.admitted = true;
        f.inFlight++;
        f.admittedCount++;
        inFlight++;
    }

    /** Launches admitted so far for {@code tenant}'s flow ({@code ""}: best effort). */
    public synchronized long admitted(String tenant) {
        Flow f = flows.get(tenant);
        return f == null ? 0 : f.admittedCount;
    }

    /** Launches in flight now, over all flows. */
    public synchronized int inFlight() {
        return inFlight;
    }
}
