package io.gpusockets.backend.status;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.prometheus.metrics.config.EscapingScheme;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class MetricsEndpointTest {

    static String text(MetricsEndpoint m) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrometheusTextFormatWriter.create().write(out, m.registry().scrape(), EscapingScheme.DEFAULT);
        return out.toString(StandardCharsets.UTF_8);
    }

    @Test
    void tenantLevelMetricsInPrometheusNamingNeverBySession() throws Exception {
        MetricsEndpoint m = new MetricsEndpoint(Snapshots::sample, null, 0);
        String t = text(m);
        for (String line : List.of(
                "gpusockets_tenant_memory_used_bytes{tenant=\"alice\"} 4194304.0",
                "gpusockets_tenant_memory_limit_bytes{tenant=\"alice\"} 1.073741824E9",
                "gpusockets_tenant_memory_limit_bytes{tenant=\"default\"} +Inf",
                "gpusockets_sessions{tenant=\"alice\"} 1.0",
                "gpusockets_calls_total{tenant=\"alice\"} 1300.0",
                "gpusockets_calls_total{tenant=\"default\"} 5.0",
                "gpusockets_transfer_bytes_total{direction=\"in\",tenant=\"alice\",transport=\"tcp\"} 110000.0",
                "gpusockets_transfer_bytes_total{direction=\"out\",tenant=\"alice\",transport=\"tcp\"} 60000.0",
                "gpusockets_quota_rejections_total{limit=\"memory\",tenant=\"alice\"} 2.0",
                "gpusockets_quota_rejections_total{limit=\"sessions\",tenant=\"default\"} 0.0",
                "gpusockets_connections 3.0",
                "gpusockets_shares 5.0",
                "gpusockets_device_memory_used_bytes{device=\"0\",name=\"GPUsockets Emulated Device\"} 6291456.0",
                "gpusockets_device_memory_total_bytes{device=\"0\",name=\"GPUsockets Emulated Device\"} 8.589934592E9")) {
            assertTrue(t.contains(line + "\n"), "missing '" + line + "' in:\n" + t);
        }
        assertFalse(t.contains("session=") || t.contains("id=") || t.contains("peer="), "no per-session label:\n" + t);
        assertTrue(t.contains("# TYPE gpusockets_calls_total counter"), t);
    }

    @Test
    void oneSnapshotServesAWholeScrape() throws Exception {
        AtomicInteger taken = new AtomicInteger();
        MetricsEndpoint m = new MetricsEndpoint(() -> {
            taken.incrementAndGet();
            return Snapshots.sample();
        }, null, 0);
        text(m);
        assertEquals(1, taken.get(), "nine metrics, one snapshot (one set of driver queries)");
    }

    @Test
    void servesMetricsOverHttpOnLoopback() throws Exception {
        ServerSnapshot s = Snapshots.sample();
        try (MetricsEndpoint m = MetricsEndpoint.start(() -> s, "127.0.0.1", 0)) {
            HttpResponse<String> r = HttpClient.newHttpClient().send(
                    HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + m.port() + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode());
            assertTrue(r.body().contains("gpusockets_calls_total{tenant=\"alice\"} 1300.0"), r.body());
        }
    }

    @Test
    void migrationsAreCountedByResultWithTheBytesOfTheDoneOnes() throws Exception {
        ServerSnapshot base = Snapshots.sample();
        ServerSnapshot s = new ServerSnapshot(base.timeMillis(), base.backend(), 0, base.devices(), base.tenants(),
                base.sessions(), base.traffic(), null, new ServerSnapshot.Operations(0, 0, 0, 0, 0, 0, 0, 0, 3, 2, 1,
                5L << 20));
        String t = text(new MetricsEndpoint(() -> s, null, 0));
        for (String line : List.of("gpusockets_migrations_total{result=\"ok\"} 3.0",
                "gpusockets_migrations_total{result=\"refused\"} 2.0", "gpusockets_migrations_total{result=\"failed\"} 1.0",
                "gpusockets_migration_bytes_total 5242880.0")) {
            assertTrue(t.contains(line + "\n"), "missing '" + line + "' in:\n" + t);
        }
        String none = text(new MetricsEndpoint(Snapshots::sample, null, 0));
        assertTrue(none.contains("gpusockets_migrations_total{result=\"ok\"} 0.0\n"), "present before any migration");
    }

    @Test
    void theDowntimeOfCompletedMovesIsASummaryOfCountAndSum() throws Exception {
        ServerSnapshot base = Snapshots.sample();
        ServerSnapshot s = new ServerSnapshot(base.timeMillis(), base.backend(), 0, base.devices(), base.tenants(),
                base.sessions(), base.traffic(), null, new ServerSnapshot.Operations(0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0,
                5L << 20, 0, 0, 0, 4, 1_500_000_000L));
        String t = text(new MetricsEndpoint(() -> s, null, 0));
        for (String line : List.of("gpusockets_migration_downtime_seconds_count 4", "gpusockets_migration_downtime_seconds_sum 1.5")) {
            assertTrue(t.contains(line), "missing '" + line + "' in:\n" + t);
        }
    }

    @Test
    void aTenantWithoutTrafficYetStillHasACallCounter() throws Exception {
        ServerSnapshot base = Snapshots.sample();
        ServerSnapshot s = new ServerSnapshot(base.timeMillis(), base.backend(), 0, base.devices(),
                List.of(new ServerSnapshot.Tenant("idle", 0, 1, 0, 1, Map.of())), List.of(), List.of());
        assertTrue(text(new MetricsEndpoint(() -> s, null, 0)).contains("gpusockets_calls_total{tenant=\"idle\"} 0.0\n"));
    }
}
