package io.gpusockets.backend.tenant;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The scheduler under contention, driven by hand: every tenant keeps launches waiting, and the test
 * completes the admitted ones at chosen (virtual) times, so the counts are exact, not timings.
 */
class DeviceShareTest {
    private static final long US = 1_000;

    /**
     * Completes {@code admissions} launches with every tenant backlogged (each tenant keeps 4 launches
     * submitted; a tenant whose launch completes submits another); a launch of tenant t takes cost[t] ns
     * of device time. Tenants named "be-*" have no share. Returns the device time per flow.
     */
    private static Map<String, Long> contend(DeviceShare s, Map<String, Long> cost, int admissions) {
        long now = 0;
        List<DeviceShare.Ticket> live = new ArrayList<>();
        Map<DeviceShare.Ticket, String> tenantOf = new HashMap<>();
        for (String t : cost.keySet()) {
            for (int i = 0; i < 4; i++) {
                DeviceShare.Ticket k = s.submit(t, now);
                live.add(k);
                tenantOf.put(k, t);
            }
        }
        Map<String, Long> deviceTime = new HashMap<>();
        for (int done = 0; done < admissions; done++) {
            DeviceShare.Ticket running = live.stream().filter(DeviceShare.Ticket::admitted).findFirst().orElseThrow();
            live.remove(running);
            String tenant = tenantOf.remove(running);
            now += cost.get(tenant);
            s.complete(running, now);
            deviceTime.merge(running.flow(), cost.get(tenant), Long::sum);
            DeviceShare.Ticket next = s.submit(tenant, now);
            live.add(next);
            tenantOf.put(next, tenant);
        }
        return deviceTime;
    }

    @Test
    void backloggedTenantsAreAdmittedInProportionToTheirShares() {
        DeviceShare s = new DeviceShare(1);
        s.configure(Map.of("a", 0.75, "b", 0.25));
        assertTrue(s.active());
        contend(s, Map.of("a", 100 * US, "b", 100 * US), 400);
        long a = s.admitted("a"), b = s.admitted("b");
        assertEquals(401, a + b); // 400 completed, one running
        assertTrue(Math.abs(a - 3 * b) <= 8, "a=" + a + " b=" + b);
    }

    @Test
    void sharesAreOfDeviceTimeNotOfLaunches() {
        DeviceShare s = new DeviceShare(1);
        s.configure(Map.of("long", 0.5, "short", 0.5));
        Map<String, Long> time = contend(s, Map.of("long", 400 * US, "short", 100 * US), 1000);
        double ratio = (double) time.get("long") / time.get("short");
        assertTrue(ratio > 0.9 && ratio < 1.1, "device time long/short = " + ratio + " " + time);
        assertTrue(s.admitted("short") > 3 * s.admitted("long"), "short kernels are admitted more often");
    }

    @Test
    void tenantsWithoutAShareShareWhatIsLeft() {
        DeviceShare s = new DeviceShare(1);
        s.configure(Map.of("a", 0.5));
        Map<String, Long> time = contend(s, Map.of("a", 100 * US, "be-x", 100 * US), 400);
        long a = s.admitted("a"), be = s.admitted("");
        assertTrue(Math.abs(a - be) <= 4, "a=" + a + " best effort=" + be + " " + time);
    }

    @Test
    void aLoneTenantGetsTheWholeWindowAndAFailedLaunchFreesItsSlot() {
        DeviceShare s = new DeviceShare(3);
        s.configure(Map.of("a", 0.5));
        DeviceShare.Ticket t1 = s.submit("a", 0), t2 = s.submit("a", 0), t3 = s.submit("a", 0), t4 = s.submit("a", 0);
        assertTrue(t1.admitted() && t2.admitted() && t3.admitted());
        assertFalse(t4.admitted(), "the window is full");
        s.abandon(t2, 1); // its launch failed
        assertTrue(t4.admitted());
        assertEquals(3, s.inFlight());
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void aWaitingLaneIsWokenWhenASlotFreesOrSharesAreRemoved() throws Exception {
        DeviceShare s = new DeviceShare(1);
        s.configure(Map.of("a", 0.5));
        DeviceShare.Ticket first = s.submit("a", 0);
        DeviceShare.Ticket second = s.submit("b", 0);
        DeviceShare.Ticket third = s.submit("b", 0);
        Thread waiter = Thread.ofPlatform().start(() -> {
            try {
                s.await(second);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        s.complete(first, System.nanoTime());
        waiter.join();
        assertTrue(second.admitted());
        s.configure(Map.of()); // a reload took every share away: nothing waits any more
        assertFalse(s.active());
        s.await(third);
        assertTrue(third.admitted());
    }
}
