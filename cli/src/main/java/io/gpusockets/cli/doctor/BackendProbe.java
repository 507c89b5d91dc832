package io.gpusockets.cli.doctor;

import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.io.IOException;
import java.net.ConnectException;
import java.net.NoRouteToHostException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * The frontend's handshake with one backend, step by step so that each step is its own finding:
 * reachable (the transport connects within the timeout), protocol (the versions the backend speaks
 * hold this frontend's), authenticated (the backend welcomes this client's proof: no key, a wrong key,
 * a refused uid or tenant each say so). The same protocol classes as {@code BackendConnection.open};
 * the session it opens is closed at once.
 */
public final class BackendProbe {
    private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().daemon().name("gpusockets-doctor-timeout").factory());

    private BackendProbe() {
    }

    public static List<Check> probe(String uriText, FrontendConfig config) {
        List<Check> out = new ArrayList<>();
        String reach = "backend " + uriText + " reachable";
        String proto = "backend " + uriText + " protocol";
        String auth = "backend " + uriText + " authentication";
        long timeoutMs = config.connectTimeout().toMillis();
        TransportUri uri;
        try {
            uri = TransportUri.parse(uriText);
            Transports.forUri(uri);
        } catch (RuntimeException e) {
            out.add(Check.fail(reach, "not a usable backend address: " + e.getMessage(),
                    "set GPUSOCKETS_SERVER to tcp://HOST:PORT, tls://HOST:PORT, unix:///PATH, vsock://CID:PORT, ring:///PATH or vchan://DOMID/PATH"));
            return out;
        }
        Connection c;
        try {
            c = Transports.connect(uri, config.connectTimeout(), config.transportOptions());
        } catch (IOException | RuntimeException e) {
            out.add(Check.fail(reach, "cannot connect: " + describe(e), connectAdvice(uri, e, timeoutMs)));
            return out;
        }
        out.add(Check.ok(reach, "connected (" + uri.scheme() + ")"));
        FrameChannel channel = new FrameChannel(c);
        ScheduledFuture<?> watchdog = WATCHDOG.schedule(c::close, timeoutMs, TimeUnit.MILLISECONDS);
        try {
            FrameHeader h = channel.readHeader();
            if (h.opcode() != Opcodes.SERVER_HELLO || h.length() > 4096) {
                out.add(Check.fail(proto, "the peer is not a GPUsockets backend (its first frame: " + h + ")",
                        "GPUSOCKETS_SERVER names another service's port: point it at the backend's --listen address"));
                return out;
            }
            Handshake.ServerHello hello = Handshake.ServerHello.decode(channel.readBody(h.length()));
            if (Handshake.PROTOCOL_VERSION < hello.minVersion() || Handshake.PROTOCOL_VERSION > hello.maxVersion()) {
                out.add(Check.fail(proto, "the backend speaks protocol version " + versions(hello) + ", this frontend speaks "
                                + Handshake.PROTOCOL_VERSION,
                        "install the same GPUsockets release on both sides (gpusockets --version on each)"));
                return out;
            }
            out.add(Check.ok(proto, "version " + Handshake.PROTOCOL_VERSION + " (the backend speaks " + versions(hello) + ")"));
            byte[] proof = new byte[0];
            if (hello.authMethod() == Handshake.AUTH_PSK) {
                if (config.preSharedKey() == null) {
                    out.add(Check.fail(auth, "the backend asks for a pre-shared key and none is configured",
                            "set " + FrontendConfig.PSK_FILE_ENV + "=FILE, FILE holding the key of the backend's --psk-file"
                                    + " (or of your tenant's psk-file, with " + FrontendConfig.IDENTITY_ENV + "=NAME)"));
                    return out;
                }
                proof = Handshake.proof(config.preSharedKey(), hello.nonce(), config.identity());
            } else if (hello.authMethod() != Handshake.AUTH_NONE) {
                out.add(Check.fail(auth, "the backend asks for auth method " + hello.authMethod() + ", unknown here",
                        "install the same GPUsockets release on both sides"));
                return out;
            }
            channel.send(Opcodes.HELLO, 0, 0, 0, new Handshake.Hello(Handshake.PROTOCOL_VERSION, 0, config.identity(), proof).encode());
            h = channel.readHeader();
            if (h.opcode() == Opcodes.REFUSE) {
                String why = Handshake.readString(channel.readBody(h.length()));
                out.add(Check.fail(auth, "the backend refused this client: " + why, refusalAdvice(why)));
                return out;
            }
            if (h.opcode() != Opcodes.WELCOME || h.length() > 8192) {
                out.add(Check.fail(auth, "expected WELCOME, got " + h, "install the same GPUsockets release on both sides"));
                return out;
            }
            Handshake.Welcome w = Handshake.Welcome.decode(channel.readBody(h.length()));
            int colon = w.description().indexOf(": "); // the driver's name; the rest is in the backend's log
            String what = (hello.authMethod() == Handshake.AUTH_PSK ? "pre-shared key accepted" : "no authentication asked")
                    + "; session " + w.sessionId() + ", " + w.deviceCount() + " device(s), driver " + w.driverVersion() + ": "
                    + (colon > 0 ? w.description().substring(0, colon) : w.description());
            if (w.description().toLowerCase(java.util.Locale.ROOT).contains("emulated")) {
                out.add(Check.warn(auth, what, "the backend serves the emulated device (no GPU there): start it with"
                        + " --device native on the GPU host if you expect a GPU"));
            } else if (w.deviceCount() < 1) {
                out.add(Check.fail(auth, what, "the backend sees no GPU: run gpusockets doctor backend on its host"));
            } else {
                out.add(Check.ok(auth, what));
            }
        } catch (IOException | RuntimeException e) {
            boolean timedOut = watchdog.isDone() && !watchdog.isCancelled();
            String step = out.size() < 2 ? proto : auth;
            out.add(Check.fail(step, timedOut ? "no answer within " + timeoutMs + " ms" : "the handshake broke off: " + describe(e),
                    timedOut && uri.scheme().equals("tcp") ? "is the backend's port a tls:// listener? then use tls:// in GPUSOCKETS_SERVER"
                            : "read the backend's log; a backend with --allow-uid or --tenants deny may close connections it refuses"));
        } finally {
            watchdog.cancel(false);
            c.close();
        }
        return out;
    }

    private static String versions(Handshake.ServerHello hello) {
        return hello.minVersion() == hello.maxVersion() ? String.valueOf(hello.minVersion())
                : hello.minVersion() + ".." + hello.maxVersion();
    }

    private static String describe(Throwable e) {
        String m = e.getMessage();
        return e.getClass().getSimpleName() + (m == null ? "" : ": " + m);
    }

    private static String connectAdvice(TransportUri uri, Throwable e, long timeoutMs) {
        String scheme = uri.scheme();
        if (e instanceof UnknownHostException) {
            return "the host name does not resolve: fix GPUSOCKETS_SERVER or DNS (getent hosts " + uri.host() + ")";
        }
        if (scheme.equals("tcp") || scheme.equals("tls")) {
            String hp = uri.rest();
            if (e instanceof ConnectException || String.valueOf(e.getMessage()).contains("refused")) {
                return "nothing listens at " + hp + ": start the backend there (gpusockets backend --listen " + scheme + "://0.0.0.0:"
                        + portOf(uri) + "), or correct GPUSOCKETS_SERVER; check with nc -z " + uri.host() + " " + portOf(uri);
            }
            if (e instanceof SocketTimeoutException || e instanceof NoRouteToHostException
                    || String.valueOf(e.getMessage()).contains("timed out")) {
                return "no answer within " + timeoutMs + " ms: a firewall drops the packets or the host is down; open "
                        + scheme.toUpperCase(java.util.Locale.ROOT).replace("TLS", "TCP") + " port " + portOf(uri) + " to this guest";
            }
            if (scheme.equals("tls")) {
                return "check GPUSOCKETS_TLS_CA (the CA the backend's certificate chains to, and its name must match "
                        + uri.host() + ") and GPUSOCKETS_TLS_KEY_STORE";
            }
            return "check the address and the network (ping " + uri.host() + ")";
        }
        if (scheme.equals("unix") || scheme.equals("ring")) {
            return "is the backend running with --listen " + uri + "? this user needs write permission on the socket file"
                    + " (ls -l " + uri.path() + ")";
        }
        if (scheme.equals("vsock")) {
            return "is the backend running with --listen vsock://any:PORT on the host, and has this VM a vsock device"
                    + " (ls /dev/vsock)?";
        }
        if (scheme.equals("vchan")) {
            return "is the backend listening on vchan://THIS-DOMID/PATH in the GPU domain, and is the xenstore path set up"
                    + " (xen-config/README.md)?";
        }
        return "check the address and that the backend listens there";
    }

    private static String portOf(TransportUri uri) {
        try {
            return String.valueOf(uri.port());
        } catch (RuntimeException e) {
            return "PORT";
        }
    }

    private static String refusalAdvice(String why) {
        if (why.contains("authentication failed")) {
            return "GPUSOCKETS_PSK_FILE holds another key than the backend's --psk-file (or than your tenant's psk-file,"
                    + " with GPUSOCKETS_IDENTITY=NAME): copy the backend's key file here";
        }
        if (why.contains("protocol version")) {
            return "install the same GPUsockets release on both sides (gpusockets --version on each)";
        }
        if (why.contains("uid") || why.contains("cid")) {
            return "the backend's --allow-uid / --allow-cid does not list this client: add it there";
        }
        if (why.contains("too many sessions")) {
            return "the backend is at --max-sessions: wait, or raise it";
        }
        return "the backend's tenants file or limits refuse this client: ask its operator (gpusockets status on the backend host)";
    }
}
