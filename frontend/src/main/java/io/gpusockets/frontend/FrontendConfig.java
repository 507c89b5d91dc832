package io.gpusockets.frontend;

import io.gpusockets.protocol.transport.TlsOptions;
import io.gpusockets.protocol.transport.TransportOptions;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * How the frontend reaches its backend. Each setting comes from the environment, else a system
 * property of the same name in lower case with dots (e.g. {@code gpusockets.server}), else a
 * {@code NAME=value} line of {@value #CONFIG_FILE}:
 * <ul>
 *   <li>GPUSOCKETS_SERVER: backend URI(s), comma-separated; {@link FrontendDrivers} merges several
 *       into one device list; {@code dns://NAME:PORT[?transport=tls]} stands for every address of NAME
 *       ({@link DnsDiscovery}), resolved at each connect;</li>
 *   <li>GPUSOCKETS_CONNECT_TIMEOUT_MS: connect and handshake bound, default 5000;</li>
 *   <li>GPUSOCKETS_ASYNC: 0 turns off pipelining of asynchronous calls (each then waits for its reply);</li>
 *   <li>GPUSOCKETS_LOCAL_ANSWERS: 0 sends every call to the backend, the API table's known entries
 *       (device queries) and cuCtxGetCurrent included, which are otherwise answered in the frontend;</li>
 *   <li>GPUSOCKETS_PSK_FILE: a file holding the pre-shared key when the backend asks for one;</li>
 *   <li>GPUSOCKETS_TLS_CA (and GPUSOCKETS_TLS_CA_PASSWORD_FILE for a PKCS12 store): the CA certificates
 *       (PEM or PKCS12) that a tls:// backend's certificate must chain to, default the JDK's CAs; the
 *       backend's certificate must also name the host of the URI (hostname verification);</li>
 *   <li>GPUSOCKETS_TLS_KEY_STORE and GPUSOCKETS_TLS_KEY_STORE_PASSWORD_FILE: a PKCS12 key store with this
 *       client's certificate, for a backend that asks for one (its subject names the tenant).</li>
 * </ul>
 * With any GPUSOCKETS_TLS_* setting, a tcp:// (plaintext) backend URI is refused: use tls://.
 * Three more settings are the process's, not a connection's, and are system properties only; their
 * names, defaults and parsing are here too:
 * <ul>
 *   <li>{@value #CONFIG_FILE_PROP}: the config file read above, default {@value #CONFIG_FILE};</li>
 *   <li>{@value #COPY_THREADS_PROP}: threads that copy large pieces through the shared window
 *       ({@link SplitCopier}): 1 or 2, default 2 with more than two cores, else 1 (other values: the default);</li>
 *   <li>{@value #STARTUP_TRACE_PROP}: set by libcuda.so.1 to its own start times (two CLOCK_MONOTONIC
 *       nanosecond values, comma-separated) when GPUSOCKETS_TRACE_STARTUP=1 ({@link StartupTrace}).</li>
 * </ul>
 *
 * @param servers        backend URIs
 * @param connectTimeout bound on connect plus handshake
 * @param async          pipeline calls the API table marks async
 * @param preSharedKey   key for the backend's challenge, or null
 * @param identity       how this client names itself to the backend (logs)
 * @param localAnswers   answer known entries and cuCtxGetCurrent in the frontend when it can
 * @param transportOptions certificates for tls:// ({@link TlsOptions}), else {@link TransportOptions#NONE}
 */
public record FrontendConfig(List<String> servers, Duration connectTimeout, boolean async, byte[] preSharedKey,
                             String identity, boolean localAnswers, TransportOptions transportOptions) {
    public static final String SERVER_ENV = "GPUSOCKETS_SERVER";
    public static final String CONNECT_TIMEOUT_ENV = "GPUSOCKETS_CONNECT_TIMEOUT_MS";
    public static final String ASYNC_ENV = "GPUSOCKETS_ASYNC";
    public static final String PSK_FILE_ENV = "GPUSOCKETS_PSK_FILE";
    /** The PSK identity a backend's tenants file may name ({@code psk:NAME}); default "pid N COMMAND". */
    public static final String IDENTITY_ENV = "GPUSOCKETS_IDENTITY";
    public static final String LOCAL_ANSWERS_ENV = "GPUSOCKETS_LOCAL_ANSWERS";
    public static final String TLS_CA_ENV = "GPUSOCKETS_TLS_CA";
    public static final String TLS_CA_PASSWORD_FILE_ENV = "GPUSOCKETS_TLS_CA_PASSWORD_FILE";
    public static final String TLS_KEY_STORE_ENV = "GPUSOCKETS_TLS_KEY_STORE";
    public static final String TLS_KEY_STORE_PASSWORD_FILE_ENV = "GPUSOCKETS_TLS_KEY_STORE_PASSWORD_FILE";
    public static final long CONNECT_TIMEOUT_DEFAULT_MS = 5000;
    /** System-wide settings for guests (one NAME=value per line, # comments). */
    public static final String CONFIG_FILE = "/etc/gpusockets/frontend.conf";
    public static final String CONFIG_FILE_PROP = "gpusockets.config";
    public static final String COPY_THREADS_PROP = "gpusockets.frontend.copyThreads";
    public static final String STARTUP_TRACE_PROP = "gpusockets.startup.trace";

    /** Settings without the switch for answers in the frontend (on). */
    public FrontendConfig(List<String> servers, Duration connectTimeout, boolean async, byte[] preSharedKey, String identity) {
        this(servers, connectTimeout, async, preSharedKey, identity, true);
    }

    /** Settings without transport options (no tls:// certificates). */
    public FrontendConfig(List<String> servers, Duration connectTimeout, boolean async, byte[] preSharedKey, String identity,
                          boolean localAnswers) {
        this(servers, connectTimeout, async, preSharedKey, identity, localAnswers, TransportOptions.NONE);
    }

    public FrontendConfig {
        servers = List.copyOf(servers);
        java.util.Objects.requireNonNull(transportOptions, "transportOptions");
        if (transportOptions.hasAny("tls.")) {
            for (String s : servers) {
                if (s.regionMatches(true, 0, "tcp://", 0, 6)) {
                    throw new IllegalArgumentException("TLS settings (" + TLS_CA_ENV + ", " + TLS_KEY_STORE_ENV
                            + ") are given but " + SERVER_ENV + " names " + s + ", which is plaintext: use tls://"
                            + s.substring(6));
                }
                if (DnsDiscovery.isDns(s) && DnsDiscovery.parse(s).transport().equals("tcp")) {
                    throw new IllegalArgumentException("TLS settings (" + TLS_CA_ENV + ", " + TLS_KEY_STORE_ENV
                            + ") are given but " + SERVER_ENV + " names " + s + ", whose backends are plaintext tcp://:"
                            + " add ?transport=tls");
                }
            }
        }
        for (String s : servers) {
            if (DnsDiscovery.isDns(s)) {
                DnsDiscovery.parse(s); // a malformed dns:// URI fails here, before anything connects
            }
        }
        if (servers.isEmpty()) {
            throw new IllegalArgumentException("no backend given: set " + SERVER_ENV + "=tcp://host:port (or unix:///path)");
        }
        if (connectTimeout.isNegative() || connectTimeout.isZero()) {
            throw new IllegalArgumentException("connect timeout must be positive: connectTimeout=" + connectTimeout);
        }
    }

    /** Settings for one backend URI, the rest from the environment. */
    public static FrontendConfig forServer(String uri) {
        return fromEnvironment(Map.of(SERVER_ENV, uri));
    }

    /** Settings from the environment; {@code overrides} win over it. */
    public static FrontendConfig fromEnvironment(Map<String, String> overrides) {
        String servers = setting(SERVER_ENV, overrides);
        if (servers == null || servers.isBlank()) {
            throw new IllegalArgumentException("no backend given: set " + SERVER_ENV + "=tcp://host:port (or unix:///path)");
        }
        String timeout = setting(CONNECT_TIMEOUT_ENV, overrides);
        String async = setting(ASYNC_ENV, overrides);
        String pskFile = setting(PSK_FILE_ENV, overrides);
        String localAnswers = setting(LOCAL_ANSWERS_ENV, overrides);
        String identity = setting(IDENTITY_ENV, overrides);
        byte[] psk = null;
        if (pskFile != null && !pskFile.isBlank()) {
            try {
                psk = Files.readString(Path.of(pskFile)).strip().getBytes(java.nio.charset.StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new IllegalArgumentException("cannot read " + PSK_FILE_ENV + "=" + pskFile + ": " + e.getMessage());
            }
        }
        return new FrontendConfig(
                Arrays.stream(servers.split(",")).map(String::strip).filter(s -> !s.isEmpty()).toList(),
                Duration.ofMillis(timeout == null ? CONNECT_TIMEOUT_DEFAULT_MS : Long.parseLong(timeout.strip())),
                async == null || !async.strip().equals("0"),
                psk,
                identity != null && !identity.isBlank() ? identity.strip()
                        : "pid " + ProcessHandle.current().pid() + " " + ProcessHandle.current().info().command().orElse("java"),
                localAnswers == null || !localAnswers.strip().equals("0"),
                tlsOptions(overrides));
    }

    /** The GPUSOCKETS_TLS_* settings as {@link TlsOptions}; blank values count as unset. */
    private static TransportOptions tlsOptions(Map<String, String> overrides) {
        return TransportOptions.NONE
                .with(TlsOptions.TRUST, path(setting(TLS_CA_ENV, overrides)))
                .with(TlsOptions.TRUST_PASSWORD_FILE, path(setting(TLS_CA_PASSWORD_FILE_ENV, overrides)))
                .with(TlsOptions.KEY_STORE, path(setting(TLS_KEY_STORE_ENV, overrides)))
                .with(TlsOptions.KEY_STORE_PASSWORD_FILE, path(setting(TLS_KEY_STORE_PASSWORD_FILE_ENV, overrides)));
    }

    private static Path path(String value) {
        return value == null || value.isBlank() ? null : Path.of(value.strip());
    }

    /** One setting by its variable name (environment, system property, config file), or null. */
    static String setting(String name) {
        return setting(name, Map.of());
    }

    private static String setting(String name, Map<String, String> overrides) {
        if (overrides.containsKey(name)) {
            return overrides.get(name);
        }
        String env = System.getenv(name);
        if (env != null) {
            return env;
        }
        String prop = System.getProperty(name.toLowerCase(java.util.Locale.ROOT).replace('_', '.'));
        return prop != null ? prop : fileSetting(name);
    }

    private static String fileSetting(String name) {
        Path file = Path.of(System.getProperty(CONFIG_FILE_PROP, CONFIG_FILE));
        if (!Files.isReadable(file)) {
            return null;
        }
        try {
            for (String line : Files.readAllLines(file)) {
                String l = line.strip();
                if (!l.startsWith("#") && l.startsWith(name + "=")) {
                    return l.substring(name.length() + 1).strip();
                }
            }
        } catch (IOException e) {
            return null;
        }
        return null;
    }

    /** {@value #COPY_THREADS_PROP} of this JVM ({@link #copyThreads(String, int)}). */
    static int copyThreads() {
        return copyThreads(System.getProperty(COPY_THREADS_PROP), Runtime.getRuntime().availableProcessors());
    }

    /**
     * Threads for large window copies, given the property's {@code value} (null when unset) on
     * {@code cores} cores: "1" or "2" as asked, else 2 where there are more than two cores, since on two
     * cores a second copier takes the core the program or the backend needs.
     */
    static int copyThreads(String value, int cores) {
        return switch (value == null ? "" : value) {
            case "1" -> 1;
            case "2" -> 2;
            default -> cores > 2 ? 2 : 1;
        };
    }

    /**
     * The start times libcuda.so.1 handed over in {@value #STARTUP_TRACE_PROP} (its first call, the Java
     * runtime loaded), or null when the property is absent (tracing off); now, twice, when they do not
     * parse. Read as the frontend starts: a property look-up, nothing more, when tracing is off.
     */
    static long[] startupTraceTimes() {
        return startupTraceTimes(System.getProperty(STARTUP_TRACE_PROP));
    }

    static long[] startupTraceTimes(String s) {
        if (s == null) {
            return null;
        }
        try {
            int comma = s.indexOf(',');
            return new long[] {Long.parseLong(s.substring(0, comma)), Long.parseLong(s.substring(comma + 1))};
        } catch (RuntimeException e) {
            return new long[] {System.nanoTime(), System.nanoTime()};
        }
    }

    public FrontendConfig withAsync(boolean on) {
        return new FrontendConfig(servers, connectTimeout, on, preSharedKey, identity, localAnswers, transportOptions);
    }

    public FrontendConfig withLocalAnswers(boolean on) {
        return new FrontendConfig(servers, connectTimeout, async, preSharedKey, identity, on, transportOptions);
    }

    public FrontendConfig withServers(List<String> uris) {
        return new FrontendConfig(uris, connectTimeout, async, preSharedKey, identity, localAnswers, transportOptions);
    }

    public FrontendConfig withTransportOptions(TransportOptions options) {
        return new FrontendConfig(servers, connectTimeout, async, preSharedKey, identity, localAnswers, options);
    }
}
