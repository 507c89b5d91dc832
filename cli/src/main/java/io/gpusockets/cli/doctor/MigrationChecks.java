package io.gpusockets.cli.doctor;

import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.TransportOptions;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * The checks of {@code gpusockets doctor migration --to URI} (issue 23 item 4): what a migration from this backend (the
 * source) to the backend listening at URI (the target) needs, each its own finding.
 * <ul>
 *   <li>reachable: the transport connects within the timeout;</li>
 *   <li>accepts migrations: the target's handshake, with a HELLO that asks for {@link Handshake#FEATURE_MIGRATION} and
 *       proves the source's pre-shared key (as the source itself will), is WELCOMEd with the feature granted (the
 *       connection is then closed before anything is sent: the target restores nothing);</li>
 *   <li>tenants: the tenants of the sessions to move (the source's admin socket's status) are known at the target (the
 *       target's admin socket's status, when doctor runs on the target's host: {@code --target-socket}; the handshake
 *       does not name them, so without it the check says what it could not compare);</li>
 *   <li>memory: the device memory those sessions hold fits in the target's free device memory (the target's admin
 *       socket's devices, else a short client session there asks each device's free memory with cuMemGetInfo);</li>
 *   <li>migratable: each of those sessions has address-stable memory (a migration refuses one without).</li>
 * </ul>
 * Memory is compared in total over the target's devices (status does not say which device a session's memory is on).
 */
public final class MigrationChecks {
    /** Reads a backend's status from its admin socket, parsed ({@code StatusJson.parse}). */
    @FunctionalInterface
    public interface StatusSource {
        Object status(Path adminSocket) throws IOException;
    }

    private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().daemon().name("gpusockets-doctor-migration-timeout").factory());
    private static final String IDENTITY = "gpusockets-doctor";

    private final String target;
    private final Path pskFile;
    private final Path sourceSocket;
    private final Long session;
    private final Path targetSocket;
    private final Duration timeout;
    private final StatusSource statuses;

    /**
     * {@code target}: the target's listening URI as the source reaches it; {@code pskFile}: the source backend's
     * {@code --psk-file} or null; {@code sourceSocket}: the source's admin socket or null (no session to compare);
     * {@code session}: only this session, or null for all of the source's; {@code targetSocket}: the target's admin
     * socket when on this host, or null.
     */
    public MigrationChecks(String target, Path pskFile, Path sourceSocket, Long session, Path targetSocket,
                           Duration timeout, StatusSource statuses) {
        this.target = target;
        this.pskFile = pskFile;
        this.sourceSocket = sourceSocket;
        this.session = session;
        this.targetSocket = targetSocket;
        this.timeout = timeout;
        this.statuses = statuses;
    }

    public List<Check> run() {
        List<Check> out = new ArrayList<>();
        byte[] psk = null;
        if (pskFile != null) {
            try {
                psk = java.nio.file.Files.readString(pskFile).strip().getBytes(java.nio.charset.StandardCharsets.UTF_8);
            } catch (IOException | RuntimeException e) {
                out.add(Check.fail("migration key (--psk-file)", "cannot read " + pskFile + ": " + e.getMessage(),
                        "pass the source backend's own --psk-file (the target must hold the same key)"));
                return out;
            }
        }
        boolean accepts = handshake(out, psk);
        Map<String, Object> source = status(out, "source", sourceSocket);
        Map<String, Object> there = targetSocket == null ? null : status(out, "target", targetSocket);
        List<Map<String, Object>> moving = source == null ? null : sessions(out, source);
        tenants(out, moving, there);
        memory(out, moving, there, accepts);
        return out;
    }

    // ---- reachable, accepts migrations

    private boolean handshake(List<Check> out, byte[] psk) {
        String reach = "migration target " + target + " reachable";
        String accepts = "migration target " + target + " accepts migrations";
        TransportUri uri;
        try {
            uri = TransportUri.parse(target);
            Transports.forUri(uri);
        } catch (RuntimeException e) {
            out.add(Check.fail(reach, "not a usable address: " + e.getMessage(), "pass --to the target backend's --listen"
                    + " URI as this host reaches it (tcp://HOST:PORT, tls://HOST:PORT, unix:///PATH, ring://NAME, ...)"));
            return false;
        }
        Connection c;
        try {
            c = Transports.connect(uri, timeout, TransportOptions.NONE);
        } catch (IOException | RuntimeException e) {
            out.add(Check.fail(reach, "cannot connect: " + e.getMessage(), "start the target backend with --listen " + target
                    + " --accept-migrations, or correct --to; check the network between the two hosts"));
            return false;
        }
        out.add(Check.ok(reach, "connected (" + uri.scheme() + ")"));
        FrameChannel ch = new FrameChannel(c);
        ScheduledFuture<?> watchdog = WATCHDOG.schedule(c::close, timeout.toMillis(), TimeUnit.MILLISECONDS);
        try {
            FrameHeader h = ch.readHeader();
            if (h.opcode() != Opcodes.SERVER_HELLO || h.length() > 4096) {
                out.add(Check.fail(accepts, "the peer is not a GPUsockets backend (its first frame: " + h + ")",
                        "pass --to the target backend's --listen URI"));
                return false;
            }
            Handshake.ServerHello hello = Handshake.ServerHello.decode(ch.readBody(h.length()));
            if (Handshake.PROTOCOL_VERSION < hello.minVersion() || Handshake.PROTOCOL_VERSION > hello.maxVersion()) {
                out.add(Check.fail(accepts, "the target speaks protocol versions " + hello.minVersion() + ".."
                        + hello.maxVersion() + ", this backend " + Handshake.PROTOCOL_VERSION,
                        "install the same GPUsockets release on both backends (gpusockets --version on each)"));
                return false;
            }
            byte[] proof = hello.authMethod() == Handshake.AUTH_PSK && psk != null
                    ? Handshake.proof(psk, hello.nonce(), IDENTITY) : new byte[0];
            ch.send(Opcodes.HELLO, 0, 0, 0, new Handshake.Hello(Handshake.PROTOCOL_VERSION, Handshake.FEATURE_MIGRATION,
                    IDENTITY, proof).encode());
            h = ch.readHeader();
            if (h.opcode() == Opcodes.REFUSE && h.length() <= 8192) {
                String why = Handshake.readString(ch.readBody(h.length()));
                out.add(Check.fail(accepts, "refused: " + why, refusalAdvice(why)));
                return false;
            }
            if (h.opcode() != Opcodes.WELCOME || h.length() > 8192) {
                out.add(Check.fail(accepts, "expected WELCOME, got " + h, "install the same GPUsockets release on both backends"));
                return false;
            }
            Handshake.Welcome w = Handshake.Welcome.decode(ch.readBody(h.length()));
            if ((w.features() & Handshake.FEATURE_MIGRATION) == 0) {
                out.add(Check.fail(accepts, "welcomed without the migration feature",
                        "install the same GPUsockets release on both backends"));
                return false;
            }
            String how = hello.authMethod() == Handshake.AUTH_PSK && psk != null ? "proven by the pre-shared key"
                    : uri.scheme().equals("unix") ? "proven by this user's uid" : "proven by the connection";
            out.add(Check.ok(accepts, "yes (" + how + "); " + w.deviceCount() + " device(s), driver " + w.driverVersion()));
            return true;
        } catch (IOException | RuntimeException e) {
            boolean timedOut = watchdog.isDone() && !watchdog.isCancelled();
            out.add(Check.fail(accepts, timedOut ? "no answer within " + timeout.toMillis() + " ms"
                            : "the handshake broke off: " + e.getMessage(),
                    "read the target backend's log; is --to a tls:// listener named tcp://?"));
            return false;
        } finally {
            watchdog.cancel(false);
            c.close(); // before BEGIN: the target restores nothing
        }
    }

    private static String refusalAdvice(String why) {
        if (why.contains("--accept-migrations")) {
            return "start the target backend with --accept-migrations";
        }
        if (why.contains("shutting down")) {
            return "the target is stopping (or draining its own sessions): pick another target, or restart it";
        }
        if (why.contains("pre-shared key") || why.contains("authentication")) {
            return "give both backends the same --psk-file and pass it here with --psk-file (over unix, running both"
                    + " backends as one user proves it too)";
        }
        return "read the target backend's log";
    }

    // ---- the sessions to move

    @SuppressWarnings("unchecked")
    private Map<String, Object> status(List<Check> out, String which, Path socket) {
        String name = "migration " + which + " status";
        if (socket == null) {
            return null;
        }
        try {
            Object s = statuses.status(socket);
            if (s instanceof Map<?, ?> m) {
                return (Map<String, Object>) m;
            }
            out.add(Check.fail(name, "unreadable answer from " + socket, "install the same GPUsockets release on both sides"));
        } catch (IOException | RuntimeException e) {
            out.add(Check.fail(name, "cannot read " + socket + ": " + e.getMessage(), "pass the " + which
                    + " backend's --admin-socket (" + (which.equals("source") ? "--socket" : "--target-socket")
                    + " PATH); doctor must run as a user its admin socket allows"));
        }
        return null;
    }

    @SuppressWarnings("unchecked")
    private List<Map<String, Object>> sessions(List<Check> out, Map<String, Object> source) {
        List<Map<String, Object>> all = new ArrayList<>();
        if (source.get("sessions") instanceof List<?> l) {
            for (Object o : l) {
                if (o instanceof Map<?, ?> m && (session == null || session.equals(number(m.get("id"))))) {
                    all.add((Map<String, Object>) m);
                }
            }
        }
        if (session != null && all.isEmpty()) {
            out.add(Check.fail("migration session " + session, "the source backend has no session " + session,
                    "gpusockets status --socket " + sourceSocket + " lists its sessions"));
            return null;
        }
        List<Long> unstable = new ArrayList<>();
        for (Map<String, Object> s : all) {
            if (!Boolean.TRUE.equals(s.get("stableAddresses"))) {
                unstable.add(number(s.get("id")));
            }
        }
        String name = "migratable sessions";
        if (all.isEmpty()) {
            out.add(Check.ok(name, "the source backend has no session now"));
        } else if (unstable.isEmpty()) {
            out.add(Check.ok(name, all.size() + " session(s), each with address-stable memory"));
        } else {
            out.add(Check.warn(name, "session(s) " + unstable + " have no address-stable memory: a migration refuses them",
                    "start the source backend with --stable-addresses (or the tenant's stable-addresses) and the"
                            + " programs with GPUSOCKETS_RESUME=1; sessions started before keep what they have"));
        }
        return all;
    }

    private static long number(Object o) {
        return o instanceof Number n ? n.longValue() : -1;
    }

    // ---- tenants and memory

    private void tenants(List<Check> out, List<Map<String, Object>> moving, Map<String, Object> there) {
        String name = "migration tenants";
        if (moving == null) {
            if (sourceSocket == null) {
                out.add(Check.warn(name, "not compared: the source's sessions are not known without its admin socket",
                        "pass --socket PATH (the source backend's --admin-socket)"));
            }
            return;
        }
        TreeSet<String> needed = new TreeSet<>();
        for (Map<String, Object> s : moving) {
            needed.add(String.valueOf(s.get("tenant")));
        }
        if (needed.isEmpty()) {
            out.add(Check.ok(name, "no session to move, no tenant needed"));
            return;
        }
        if (there == null) {
            out.add(Check.warn(name, "the sessions' tenants " + needed + " must exist at the target; not compared (the"
                            + " handshake does not name the target's tenants)",
                    "run doctor on the target's host with --target-socket PATH (its --admin-socket), or compare"
                            + " gpusockets status there: the target's --tenants file must hold " + needed));
            return;
        }
        TreeSet<String> known = new TreeSet<>(java.util.Set.of("default")); // every backend has [default]
        if (there.get("tenants") instanceof List<?> l) {
            for (Object o : l) {
                if (o instanceof Map<?, ?> m) {
                    known.add(String.valueOf(m.get("name")));
                }
            }
        }
        TreeSet<String> missing = new TreeSet<>(needed);
        missing.removeAll(known);
        if (missing.isEmpty()) {
            out.add(Check.ok(name, "the target knows " + needed));
        } else {
            out.add(Check.fail(name, "the target does not know tenant(s) " + missing + " (it knows " + known + "): it"
                            + " would refuse to restore their sessions",
                    "add " + missing + " to the target's --tenants file (then gpusockets tenants reload there), with"
                            + " the same identities as at the source"));
        }
    }

    private void memory(List<Check> out, List<Map<String, Object>> moving, Map<String, Object> there, boolean reachable) {
        String name = "migration memory";
        if (moving == null) {
            if (sourceSocket == null) {
                out.add(Check.warn(name, "not compared: the source's sessions' memory is not known without its admin"
                        + " socket", "pass --socket PATH (the source backend's --admin-socket)"));
            }
            return;
        }
        long needed = 0;
        for (Map<String, Object> s : moving) {
            needed += Math.max(0, number(s.get("memoryBytes")));
        }
        Map<Integer, Long> free = new LinkedHashMap<>();
        String from;
        if (there != null) {
            from = "the target's status";
            if (there.get("devices") instanceof List<?> l) {
                for (Object o : l) {
                    if (o instanceof Map<?, ?> m) {
                        free.put((int) number(m.get("index")), number(m.get("memoryTotalBytes"))
                                - number(m.get("memoryUsedBytes")));
                    }
                }
            }
        } else if (reachable) {
            from = "cuMemGetInfo in a client session at the target";
            try {
                free = freeByClient();
            } catch (IOException | RuntimeException e) {
                out.add(Check.warn(name, "the target's free memory is unknown: a client session there failed: "
                                + e.getMessage(),
                        "pass --target-socket PATH on the target's host, or let this client in (the same --psk-file)"));
                return;
            }
        } else {
            return; // unreachable: said above
        }
        long total = 0;
        StringBuilder each = new StringBuilder();
        for (Map.Entry<Integer, Long> e : free.entrySet()) {
            total += e.getValue();
            each.append(each.isEmpty() ? "" : ", ").append("device ").append(e.getKey()).append(' ').append(mib(e.getValue()));
        }
        String what = "the sessions hold " + mib(needed) + "; the target has " + mib(total) + " free (" + each + "; "
                + from + ")";
        if (free.isEmpty()) {
            out.add(Check.fail(name, "the target shows no device", "run gpusockets doctor backend on the target's host"));
        } else if (needed > total) {
            out.add(Check.fail(name, what, "free device memory at the target (end sessions there), or move fewer sessions"
                    + " (gpusockets migrate SESSION one at a time, checking with --session ID)"));
        } else {
            out.add(Check.ok(name, what));
        }
    }

    /** Free memory by device, asked in a client session at the target (the primary context of each, briefly). */
    private Map<Integer, Long> freeByClient() throws IOException {
        Map<String, String> env = new java.util.HashMap<>();
        env.put(FrontendConfig.SERVER_ENV, target);
        env.put(FrontendConfig.CONNECT_TIMEOUT_ENV, String.valueOf(timeout.toMillis()));
        if (pskFile != null) {
            env.put(FrontendConfig.PSK_FILE_ENV, pskFile.toString());
        }
        Map<Integer, Long> out = new LinkedHashMap<>();
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(FrontendConfig.fromEnvironment(env));
             Arena arena = Arena.ofConfined()) {
            MemorySegment n = arena.allocate(8), ctx = arena.allocate(8), free = arena.allocate(8), total = arena.allocate(8);
            ok(d.cuInit(0), "cuInit");
            ok(d.cuDeviceGetCount(n), "cuDeviceGetCount");
            int count = n.get(ValueLayout.JAVA_INT, 0);
            for (int i = 0; i < count; i++) {
                ok(d.cuDeviceGet(n, i), "cuDeviceGet");
                int dev = n.get(ValueLayout.JAVA_INT, 0);
                ok(d.cuDevicePrimaryCtxRetain(ctx, dev), "cuDevicePrimaryCtxRetain");
                try {
                    ok(d.cuCtxPushCurrent(ctx.get(ValueLayout.JAVA_LONG, 0)), "cuCtxPushCurrent");
                    ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
                    d.cuCtxPopCurrent(ctx);
                    out.put(i, free.get(ValueLayout.JAVA_LONG, 0));
                } finally {
                    d.cuDevicePrimaryCtxRelease(dev);
                }
            }
        }
        return out;
    }

    private static void ok(int r, String what) throws IOException {
        if (r != CuResult.CUDA_SUCCESS) {
            throw new IOException(what + ": " + CuResult.name(r));
        }
    }

    private static String mib(long bytes) {
        return String.format(java.util.Locale.ROOT, "%.1f MiB", bytes / 1048576.0);
    }
}
