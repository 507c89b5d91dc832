package io.gpusockets.backend.status;

import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.Session;
import io.gpusockets.backend.tenant.Tenant;
import io.gpusockets.backend.tenant.TenantAccount;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.IntSupplier;
import java.util.function.Supplier;

/**
 * The server's status, assembled on request: owns what outlives a session (the traffic totals of
 * ended sessions, the tenants seen) and the device monitor, and reads the live sessions the server
 * holds. The server calls {@link #started} and {@link #ended} around each session and {@link #sample}
 * once a second; everything else is read-only and safe from any thread. A snapshot takes no session's
 * lock beyond the brief ones of its memory and handle tables.
 */
public final class StatusBoard implements AutoCloseable {
    private final DriverHost host;
    private final Set<Session> sessions;
    private final IntSupplier connections;
    private final TrafficTotals traffic = new TrafficTotals();
    private final DeviceMonitor devices;
    /** Every tenant a session has had, by name (the last account seen): a tenant's totals outlive its sessions. */
    private final Map<String, TenantAccount> tenants = new ConcurrentHashMap<>();

    /** Sessions served by other processes (isolation mode process: the workers' latest figures), or none. */
    private volatile Supplier<List<SessionSnapshot>> remote = List::of;
    /** The server's operation counters ({@link #operations}). */
    private volatile Supplier<ServerSnapshot.Operations> operations = () -> ServerSnapshot.Operations.NONE;
    /** Whether a session is being migrated from this backend ({@link #migrating}). */
    private volatile java.util.function.LongPredicate migrating = id -> false;

    /** The tenants configured now (a reload may add some): shown even before they have a session. */
    private final java.util.function.Supplier<? extends java.util.Collection<? extends TenantAccount>> configured;

    /**
     * {@code sessions}: the server's live set (read, never changed here, but by {@link #ended}'s callback);
     * {@code configured}: the tenants configured now.
     */
    public StatusBoard(DriverHost host, Set<Session> sessions, IntSupplier connections,
                       java.util.function.Supplier<? extends java.util.Collection<? extends TenantAccount>> configured) {
        this.host = host;
        this.sessions = sessions;
        this.connections = connections;
        this.devices = new DeviceMonitor(host);
        this.configured = configured;
    }

    /** A session starts, having come in over {@code transport} (a URI scheme). */
    public void started(Session s, String transport) {
        s.stats().transport(transport);
        tenants.put(s.tenant().name(), s.tenant());
    }

    /** A session has ended: its counters join its tenant's totals as {@code forget} takes it off the live set. */
    public void ended(Session s, Runnable forget) {
        traffic.ended(s, forget);
    }

    /** From now on the sessions {@code live} describes (served by worker processes) are shown too. */
    public void remoteSessions(Supplier<List<SessionSnapshot>> live) {
        this.remote = live;
    }

    /**
     * A session served by another process has ended: its last figures join its tenant's totals as
     * {@code forget} takes it off what {@link #remoteSessions}'s supplier lists.
     */
    public void ended(SessionSnapshot last, Runnable forget) {
        traffic.ended(last, forget);
    }

    /** Takes the rate samples of every live session (the server's timer, once a second). */
    public void sample() {
        long now = System.nanoTime();
        for (Session s : sessions) {
            s.stats().sample(now);
        }
    }

    /** The live sessions, by id. */
    public List<SessionSnapshot> sessions() {
        return merge(describe(List.copyOf(sessions)), remote.get());
    }

    private List<SessionSnapshot> merge(List<SessionSnapshot> here, List<SessionSnapshot> others) {
        if (others.isEmpty()) {
            return here;
        }
        java.util.function.LongPredicate moving = migrating; // a worker's session migrates through its worker
        List<SessionSnapshot> all = new ArrayList<>(here);
        for (SessionSnapshot x : others) {
            all.add(moving.test(x.id()) ? x.asMigrating() : x);
        }
        all.sort(Comparator.comparingLong(SessionSnapshot::id));
        return all;
    }

    /** Where {@link #snapshot} finds the server's checkpoint, restore and resume counters. */
    public void operations(Supplier<ServerSnapshot.Operations> counters) {
        this.operations = counters;
    }

    /** Said after the backend's description in {@link #snapshot} ("" for nothing): a taken-over backend draining. */
    private volatile String note = "";

    /** Sets what {@link #snapshot} says after the backend's description (a state such as draining). */
    public void note(String text) {
        this.note = text == null ? "" : text;
    }

    /** Where {@link #snapshot} learns how many shares between sessions are live (the backend's share registry). */
    public void shares(IntSupplier count) {
        this.shares = count;
    }

    private volatile IntSupplier shares = () -> 0;

    /** Where {@link #snapshot} learns which sessions are being migrated (shown as such). */
    public void migrating(java.util.function.LongPredicate which) {
        this.migrating = which;
    }

    /** Everything: devices (from the driver), tenants, sessions and traffic totals. */
    public ServerSnapshot snapshot() {
        TrafficTotals.Live live = traffic.with(() -> List.copyOf(sessions), remote);
        List<SessionSnapshot> list = merge(describe(live.sessions()), live.remote());
        Map<String, Integer> perTenant = new HashMap<>();
        for (SessionSnapshot s : list) {
            perTenant.merge(s.tenant(), 1, Integer::sum);
        }
        for (TenantAccount t : configured.get()) {
            tenants.putIfAbsent(t.name(), t);
        }
        List<ServerSnapshot.Tenant> ts = new ArrayList<>();
        for (TenantAccount t : new TreeMap<>(tenants).values()) {
            Map<String, Long> rejections = t instanceof Tenant full ? full.rejections() : Map.of();
            ts.add(new ServerSnapshot.Tenant(t.name(), t.memoryUsed(), t.limits().memoryBytes(),
                    perTenant.getOrDefault(t.name(), 0), t.limits().sessions(), rejections));
        }
        ServerSnapshot.Poisoned poisoned = host.health().poison().map(p -> new ServerSnapshot.Poisoned(p.codeName(),
                p.sessionId(), p.call(), p.epochMillis(), host.health().refusal())).orElse(null);
        return new ServerSnapshot(System.currentTimeMillis(), host.description() + note, connections.getAsInt(),
                devices.devices(), ts, list, live.traffic(), poisoned, operations.get(), shares.getAsInt());
    }

    private List<SessionSnapshot> describe(List<Session> live) {
        long now = System.nanoTime();
        java.util.function.LongPredicate moving = migrating;
        List<SessionSnapshot> out = new ArrayList<>(live.size());
        for (Session s : live) {
            SessionSnapshot x = SessionFigures.of(s, now).snapshot(s.id(), s.tenant().name(), s.stats().transport(),
                    s.peer(), s.stats().ageSeconds(now), s.stableAddresses());
            out.add(moving.test(s.id()) ? x.asMigrating() : s.detached() != null ? x.asDetached() : x);
        }
        out.sort(Comparator.comparingLong(SessionSnapshot::id));
        return out;
    }

    /** Destroys the device monitor's contexts. */
    @Override
    public void close() {
        devices.close();
    }
}
