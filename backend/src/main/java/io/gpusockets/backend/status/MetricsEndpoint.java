package io.gpusockets.backend.status;

import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.SummaryWithCallback;
import io.prometheus.metrics.exporter.httpserver.HTTPServer;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.Quantiles;
import io.prometheus.metrics.model.snapshots.Unit;
import java.io.IOException;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * The Prometheus endpoint ({@code gpusockets backend --metrics tcp://HOST:PORT}, path {@code /metrics}):
 * tenant-level metrics, labelled by tenant and never by session id (sessions come and go; a label per
 * session would grow the scraper's series without bound). All values come from one
 * {@link ServerSnapshot} per scrape (snapshots younger than {@value #FRESH_MILLIS} ms are reused,
 * so the metrics of one scrape agree). Counters include ended sessions, so they never drop.
 *
 * <p>Served by the Prometheus Java client's HTTP server (the JDK's) on two threads with a short queue;
 * scrapes beyond that are dropped rather than queued, and at most {@value #MAX_CONNECTIONS} connections
 * are held open, so a flood of requests holds no more than that. It has no authentication: keep it on
 * loopback or a monitoring network.
 */
public final class MetricsEndpoint implements AutoCloseable {
    static final long FRESH_MILLIS = 500;
    static final int MAX_CONNECTIONS = 32;
    /** The limits a tenant can be refused by (TenantLimits), each with a rejection counter from the start. */
    static final java.util.List<String> LIMITS = java.util.List.of("memory", "pinned", "sessions", "lanes", "handles", "streams");

    private final PrometheusRegistry registry = new PrometheusRegistry();
    private final Supplier<ServerSnapshot> source;
    private final HTTPServer server;
    private ServerSnapshot last;
    private long lastNanos;

    /** Registers the metrics over {@code source} and, when {@code host} is not null, serves them on host:port. */
    MetricsEndpoint(Supplier<ServerSnapshot> source, String host, int port) throws IOException {
        this.source = source;
        register();
        if (host == null) {
            server = null;
            return;
        }
        // The JDK's HTTP server reads this once, when its first server starts: a bound on open connections,
        // so that a flood of them cannot take the backend's descriptors.
        if (System.getProperty("sun.net.httpserver.maxConnections") == null) {
            System.setProperty("sun.net.httpserver.maxConnections", Integer.toString(MAX_CONNECTIONS));
        }
        ThreadPoolExecutor pool = new ThreadPoolExecutor(2, 2, 60, TimeUnit.SECONDS, new ArrayBlockingQueue<>(8),
                Thread.ofPlatform().daemon().name("gpusockets-metrics").factory(), new ThreadPoolExecutor.DiscardPolicy());
        try {
            server = HTTPServer.builder().hostname(host).port(port).registry(registry).executorService(pool).buildAndStart();
        } catch (IOException | RuntimeException e) {
            pool.shutdownNow();
            throw new IOException("cannot serve metrics on " + host + ":" + port + ": " + e.getMessage(), e);
        }
    }

    /** Serves the metrics of {@code source} on host:port (port 0: any free port, see {@link #port}). */
    public static MetricsEndpoint start(Supplier<ServerSnapshot> source, String host, int port) throws IOException {
        return new MetricsEndpoint(source, host, port);
    }

    /** The port it serves on. */
    public int port() {
        return server.getPort();
    }

    PrometheusRegistry registry() {
        return registry;
    }

    private synchronized ServerSnapshot snapshot() {
        long now = System.nanoTime();
        if (last == null || now - lastNanos > TimeUnit.MILLISECONDS.toNanos(FRESH_MILLIS)) {
            last = source.get();
            lastNanos = now;
        }
        return last;
    }

    private void register() {
        GaugeWithCallback.builder().name("gpusockets_tenant_memory_used_bytes").unit(Unit.BYTES)
                .help("Device memory the tenant's sessions hold").labelNames("tenant")
                .callback(cb -> snapshot().tenants().forEach(t -> cb.call(t.memoryUsedBytes(), t.name())))
                .register(registry);
        GaugeWithCallback.builder().name("gpusockets_tenant_memory_limit_bytes").unit(Unit.BYTES)
                .help("The tenant's device memory limit (+Inf: none)").labelNames("tenant")
                .callback(cb -> snapshot().tenants().forEach(t -> cb.call(t.memoryLimitBytes() == Long.MAX_VALUE
                        ? Double.POSITIVE_INFINITY : t.memoryLimitBytes(), t.name())))
                .register(registry);
        GaugeWithCallback.builder().name("gpusockets_sessions")
                .help("Sessions open now").labelNames("tenant")
                .callback(cb -> snapshot().tenants().forEach(t -> cb.call(t.sessions(), t.name())))
                .register(registry);
        CounterWithCallback.builder().name("gpusockets_calls_total")
                .help("Driver calls received, ended sessions included").labelNames("tenant")
                .callback(cb -> {
                    java.util.Map<String, Long> calls = new java.util.TreeMap<>();
                    ServerSnapshot s = snapshot();
                    s.tenants().forEach(t -> calls.put(t.name(), 0L));
                    s.traffic().forEach(t -> calls.merge(t.tenant(), t.calls(), Long::sum));
                    calls.forEach((tenant, n) -> cb.call(n, tenant));
                })
                .register(registry);
        CounterWithCallback.builder().name("gpusockets_transfer_bytes_total").unit(Unit.BYTES)
                .help("Frame bytes received (in) and sent (out), headers included, ended sessions included;"
                        + " bulk bytes through a shared window are not frames and not counted")
                .labelNames("direction", "transport", "tenant")
                .callback(cb -> snapshot().traffic().forEach(t -> {
                    cb.call(t.bytesIn(), "in", t.transport(), t.tenant());
                    cb.call(t.bytesOut(), "out", t.transport(), t.tenant());
                }))
                .register(registry);
        CounterWithCallback.builder().name("gpusockets_quota_rejections_total")
                .help("Requests refused because a tenant limit was reached").labelNames("tenant", "limit")
                .callback(cb -> snapshot().tenants().forEach(t -> {
                    java.util.Map<String, Long> byLimit = new java.util.TreeMap<>();
                    LIMITS.forEach(limit -> byLimit.put(limit, 0L)); // present from the start, so rate() works
                    byLimit.putAll(t.rejections());
                    byLimit.forEach((limit, n) -> cb.call(n, t.name(), limit));
                }))
                .register(registry);
        GaugeWithCallback.builder().name("gpusockets_connections")
                .help("Connections open now (sessions and handshakes in progress)")
                .callback(cb -> cb.call(snapshot().connections()))
                .register(registry);
        GaugeWithCallback.builder().name("gpusockets_shares")
                .help("Live shares between sessions of a tenant now (IPC memory and event handles, shareable VMM handles)")
                .callback(cb -> cb.call(snapshot().shares()))
                .register(registry);
        GaugeWithCallback.builder().name("gpusockets_driver_poisoned")
                .help("1 once a kernel fault has poisoned the driver in the backend's own process (new sessions are"
                        + " refused until it restarts; isolation modes context and shared), else 0")
                .callback(cb -> cb.call(snapshot().poisoned() == null ? 0 : 1))
                .register(registry);
        CounterWithCallback.builder().name("gpusockets_checkpoints_total")
                .help("Session checkpoints asked of this backend, by result (ok, refused: something could not be captured,"
                        + " failed: the image could not be written)").labelNames("result")
                .callback(cb -> {
                    ServerSnapshot.Operations o = snapshot().operations();
                    cb.call(o.checkpoints(), "ok");
                    cb.call(o.checkpointsRefused(), "refused");
                    cb.call(o.checkpointsFailed(), "failed");
                })
                .register(registry);
        CounterWithCallback.builder().name("gpusockets_restores_total")
                .help("Session restores asked of this backend, by result (ok, refused, failed: a damaged or unreadable image)")
                .labelNames("result")
                .callback(cb -> {
                    ServerSnapshot.Operations o = snapshot().operations();
                    cb.call(o.restores(), "ok");
                    cb.call(o.restoresRefused(), "refused");
                    cb.call(o.restoresFailed(), "failed");
                })
                .register(registry);
        CounterWithCallback.builder().name("gpusockets_resumes_total")
                .help("Connections that resumed a session (ok) or were refused (unknown, expired or guessed token, another"
                        + " identity)").labelNames("result")
                .callback(cb -> {
                    ServerSnapshot.Operations o = snapshot().operations();
                    cb.call(o.resumes(), "ok");
                    cb.call(o.resumesRefused(), "refused");
                })
                .register(registry);
        CounterWithCallback.builder().name("gpusockets_migrations_total")
                .help("Session migrations from this backend to another, by result (ok, refused: by this backend or the"
                        + " target, failed: an error before the target's OK; the program runs on here)").labelNames("result")
                .callback(cb -> {
                    ServerSnapshot.Operations o = snapshot().operations();
                    cb.call(o.migrations(), "ok");
                    cb.call(o.migrationsRefused(), "refused");
                    cb.call(o.migrationsFailed(), "failed");
                })
                .register(registry);
        CounterWithCallback.builder().name("gpusockets_migration_bytes_total").unit(Unit.BYTES)
                .help("Memory bytes sent by the migrations from this backend that completed (every pre-copy and final"
                        + " round's chunks)")
                .callback(cb -> cb.call(snapshot().operations().migrationBytes()))
                .register(registry);
        SummaryWithCallback.builder().name("gpusockets_migration_downtime_seconds").unit(Unit.SECONDS)
                .help("Downtime of the sessions moved from this backend that completed, migrations and hand-overs alike:"
                        + " from the stop (the drain's start) to the frontend sent to the target")
                .callback(cb -> {
                    ServerSnapshot.Operations o = snapshot().operations();
                    cb.call(o.downtimes(), o.downtimeNanos() / 1e9, Quantiles.EMPTY);
                })
                .register(registry);
        CounterWithCallback.builder().name("gpusockets_takeovers_total")
                .help("Backends this backend took over (gpusockets backend --take-over)")
                .callback(cb -> cb.call(snapshot().operations().takeOvers()))
                .register(registry);
        CounterWithCallback.builder().name("gpusockets_takeover_sessions_total")
                .help("Sessions adopted from backends this backend took over (their workers now answer to it)")
                .callback(cb -> cb.call(snapshot().operations().takeOverSessions()))
                .register(registry);
        CounterWithCallback.builder().name("gpusockets_takeover_bytes_total").unit(Unit.BYTES)
                .help("Bytes the take-over connections carried (a few hundred per session: no GPU memory is copied)")
                .callback(cb -> cb.call(snapshot().operations().takeOverBytes()))
                .register(registry);
        GaugeWithCallback.builder().name("gpusockets_device_memory_used_bytes").unit(Unit.BYTES)
                .help("Device memory in use, as the driver reports it (all processes)").labelNames("device", "name")
                .callback(cb -> snapshot().devices().stream().filter(d -> d.memoryUsedBytes() >= 0)
                        .forEach(d -> cb.call(d.memoryUsedBytes(), Integer.toString(d.index()), d.name())))
                .register(registry);
        GaugeWithCallback.builder().name("gpusockets_device_memory_total_bytes").unit(Unit.BYTES)
                .help("Device memory in total").labelNames("device", "name")
                .callback(cb -> snapshot().devices().stream().filter(d -> d.memoryTotalBytes() >= 0)
                        .forEach(d -> cb.call(d.memoryTotalBytes(), Integer.toString(d.index()), d.name())))
                .register(registry);
    }

    @Override
    public void close() {
        if (server != null) {
            server.close();
        }
    }
}
