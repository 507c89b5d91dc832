package io.gpusockets.backend.status;

import java.util.List;
import java.util.Map;

/** A fixed snapshot for the tests of what is made from one. */
final class Snapshots {
    private Snapshots() {
    }

    /**
     * Two tenants (one limited, with rejections), two sessions (the second being migrated), one device; a peer name
     * that needs escaping; five live shares.
     */
    static ServerSnapshot sample() {
        return new ServerSnapshot(1_700_000_000_000L, "emulated device", 3,
                List.of(new ServerSnapshot.Device(0, "GPUsockets Emulated Device", 6L << 20, 8L << 30)),
                List.of(new ServerSnapshot.Tenant("alice", 4L << 20, 1L << 30, 1, 4, Map.of("memory", 2L, "streams", 1L)),
                        new ServerSnapshot.Tenant("default", 2L << 20, Long.MAX_VALUE, 1, Integer.MAX_VALUE, Map.of())),
                List.of(new SessionSnapshot(7, "alice", "tcp", "tcp://127.0.0.1:5000 (\"x\"\n\u0001)", 4L << 20, 2, 1234,
                                12.345, 100_000, 50_000, 1000.5, 500.25, 0, 61.5, true),
                        new SessionSnapshot(9, "default", "unix", "unix:///run/g.sock (uid 1000)", 2L << 20, 0, 5, 0, 300,
                                200, 0, 0, 4096, 3, false).asMigrating()),
                List.of(new ServerSnapshot.Traffic("alice", "tcp", 1300, 110_000, 60_000),
                        new ServerSnapshot.Traffic("default", "unix", 5, 300, 200)),
                null, ServerSnapshot.Operations.NONE, 5);
    }
}
