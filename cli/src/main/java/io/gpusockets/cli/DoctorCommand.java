package io.gpusockets.cli;

import io.gpusockets.cli.doctor.BackendChecks;
import io.gpusockets.cli.doctor.BackendSetup;
import io.gpusockets.cli.doctor.DoctorReport;
import io.gpusockets.cli.doctor.FrontendLibrary;
import io.gpusockets.cli.doctor.GuestChecks;
import io.gpusockets.cli.doctor.LoaderSearch;
import io.gpusockets.cli.doctor.MigrationChecks;
import io.gpusockets.frontend.FrontendConfig;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Unmatched;

/**
 * {@code gpusockets doctor [backend|guest|migration]}: checks a deployment and says what to fix, one line per check.
 * Plain {@code doctor} picks the role: guest when GPUSOCKETS_SERVER is set (the environment,
 * -Dgpusockets.server or /etc/gpusockets/frontend.conf: the frontend would use it), else backend when
 * this host has an NVIDIA driver (/dev/nvidiactl, /proc/driver/nvidia, or a libcuda.so.1 that is not
 * ours), else guest. Exit status 0 when no check failed (warnings allowed), 1 otherwise, 2 on bad usage.
 */
@Command(name = "doctor", mixinStandardHelpOptions = true,
        description = {"Check this host's GPUsockets set-up and say what to fix: one line per check, [ ok ], [warn] or [FAIL],"
                + " each failure with a fix. Exit status 0 when nothing failed, 1 otherwise.",
                "Without a role: guest when GPUSOCKETS_SERVER is set, else backend when an NVIDIA driver is present, else guest."},
        subcommands = {DoctorCommand.Backend.class, DoctorCommand.Guest.class, DoctorCommand.Migration.class})
final class DoctorCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Option(names = "--json", description = "Print the findings as JSON (machine-readable).")
    boolean json;

    private final Map<String, String> env;

    DoctorCommand() {
        this(System.getenv());
    }

    DoctorCommand(Map<String, String> env) {
        this.env = env;
    }

    @Override
    public Integer call() {
        String serverFrom = serverSetting(env);
        if (serverFrom != null) {
            return print(spec, json, guest(env, Map.of(), "GPUSOCKETS_SERVER is set in " + serverFrom));
        }
        String driver = nvidiaDriver(env);
        if (driver != null) {
            return print(spec, json, backend(env, new String[0], "no GPUSOCKETS_SERVER, and " + driver + "; the backend's defaults"));
        }
        return print(spec, json, guest(env, Map.of(), "no GPUSOCKETS_SERVER and no NVIDIA driver here; gpusockets doctor backend"
                + " checks a backend host"));
    }

    /** Where GPUSOCKETS_SERVER is set for the frontend, or null. */
    static String serverSetting(Map<String, String> env) {
        String v = env.get(FrontendConfig.SERVER_ENV);
        if (v != null && !v.isBlank()) {
            return "the environment";
        }
        if (env != System.getenv()) {
            return null;
        }
        if (System.getProperty("gpusockets.server") != null) {
            return "-Dgpusockets.server";
        }
        try {
            FrontendConfig.fromEnvironment(Map.of());
            return FrontendConfig.CONFIG_FILE;
        } catch (IllegalArgumentException e) {
            return String.valueOf(e.getMessage()).startsWith("no backend given") ? null : FrontendConfig.CONFIG_FILE;
        }
    }

    /** How this host shows an NVIDIA driver, or null when it shows none. */
    static String nvidiaDriver(Map<String, String> env) {
        for (String p : List.of("/dev/nvidiactl", "/proc/driver/nvidia")) {
            if (Files.exists(Path.of(p))) {
                return p + " exists";
            }
        }
        LoaderSearch.Found f = LoaderSearch.find("libcuda.so.1", env);
        if (f.any() && FrontendLibrary.kindOf(f.path()) == FrontendLibrary.Kind.NVIDIA) {
            return "the loader finds NVIDIA's libcuda.so.1 at " + f.path();
        }
        return null;
    }

    static DoctorReport guest(Map<String, String> env, Map<String, String> overrides, String why) {
        return new DoctorReport("guest", why, new GuestChecks(env, overrides).run());
    }

    static DoctorReport backend(Map<String, String> env, String[] backendArgs, String why) {
        return backend(env, backendArgs, null, why);
    }

    static DoctorReport backend(Map<String, String> env, String[] backendArgs, String user, String why) {
        BackendCommand b = new BackendCommand();
        new CommandLine(b).setCaseInsensitiveEnumValuesAllowed(true).parseArgs(backendArgs);
        BackendSetup setup = new BackendSetup(b.listen, b.device.name(), b.libcuda, b.pskFile, b.tenantsFile, b.tlsKeyStore,
                b.tlsKeyStorePasswordFile, b.tlsClientCa, b.tlsClientCaPasswordFile, b.adminSocket, b.metrics,
                b.isolation.toString(), user != null ? user : System.getProperty("user.name"));
        return new DoctorReport("backend", why, new BackendChecks(setup, env).run());
    }

    static int print(CommandSpec spec, boolean json, DoctorReport report) {
        PrintWriter out = spec.commandLine().getOut();
        out.print(json ? report.json() + "\n" : report.text());
        out.flush();
        return report.exitCode();
    }

    /** {@code doctor backend [BACKEND OPTIONS]}: checks a backend host as the backend command would run. */
    @Command(name = "backend", mixinStandardHelpOptions = true,
            description = {"Check a backend host: the NVIDIA driver loads and shows its GPUs, each --listen address can bind,"
                    + " the PSK and TLS files are private and parse, the tenants file parses, the admin socket's directory is"
                    + " writable, and for vchan:// the Xen devices and xenstore paths exist.",
                    "Takes the backend command's own options (gpusockets backend --help), e.g. doctor backend --listen"
                            + " tcp://0.0.0.0:7070 --psk-file /etc/gpusockets/psk, or an options file: doctor backend @FILE."})
    static final class Backend implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Option(names = "--json", description = "Print the findings as JSON (machine-readable).")
        boolean json;

        @Option(names = "--user", paramLabel = "NAME", description = "The user the backend runs as: secret files must be"
                + " theirs. Default: the user running doctor.")
        String user;

        @Unmatched
        List<String> backendArgs = new java.util.ArrayList<>();

        private final Map<String, String> env;

        Backend() {
            this(System.getenv());
        }

        Backend(Map<String, String> env) {
            this.env = env;
        }

        @Override
        public Integer call() {
            DoctorReport report;
            try {
                report = backend(env, backendArgs.toArray(String[]::new), user, "as asked: gpusockets doctor backend");
            } catch (CommandLine.ParameterException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), "backend option: " + e.getMessage());
            }
            return print(spec, json, report);
        }
    }

    /** {@code doctor guest}: checks a GPU-less guest as a CUDA program started here would find it. */
    @Command(name = "guest", mixinStandardHelpOptions = true,
            description = "Check a guest: which libcuda.so.1 a program would load (GPUsockets' or another), that the frontend's"
                    + " Java runtime starts, and that each backend of GPUSOCKETS_SERVER is reachable, speaks this protocol"
                    + " version and lets this client in.")
    static final class Guest implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Option(names = "--json", description = "Print the findings as JSON (machine-readable).")
        boolean json;

        @Option(names = "--server", paramLabel = "URI[,URI...]", description = "Backends to check instead of GPUSOCKETS_SERVER.")
        String server;

        @Option(names = "--psk-file", paramLabel = "FILE", description = "Key file to use instead of GPUSOCKETS_PSK_FILE.")
        String pskFile;

        @Option(names = "--timeout-ms", paramLabel = "MS", description = "Connect and handshake bound instead of"
                + " GPUSOCKETS_CONNECT_TIMEOUT_MS (default 5000).")
        Long timeoutMs;

        private final Map<String, String> env;

        Guest() {
            this(System.getenv());
        }

        Guest(Map<String, String> env) {
            this.env = env;
        }

        @Override
        public Integer call() {
            Map<String, String> o = new HashMap<>();
            if (server != null) {
                o.put(FrontendConfig.SERVER_ENV, server);
            }
            if (pskFile != null) {
                o.put(FrontendConfig.PSK_FILE_ENV, pskFile);
            }
            if (timeoutMs != null) {
                o.put(FrontendConfig.CONNECT_TIMEOUT_ENV, String.valueOf(timeoutMs));
            }
            return print(spec, json, guest(env, o, "as asked: gpusockets doctor guest"));
        }
    }

    /**
     * {@code doctor migration --to URI}: checks what a migration from this backend to the one at URI needs
     * ({@link MigrationChecks}).
     */
    @Command(name = "migration", mixinStandardHelpOptions = true,
            description = {"Check what migrating sessions from this backend (the source) to another (the target) needs:"
                    + " the target is reachable and accepts migrations from this backend (its handshake, proven with"
                    + " --psk-file as the source proves itself), the sessions' tenants are known there, they have"
                    + " address-stable memory, and their device memory fits in the target's free memory.",
                    "Run it on the source's host, e.g. doctor migration --to tcp://target:7070 --psk-file"
                            + " /etc/gpusockets/psk --socket /run/gpusockets/admin.sock."})
    static final class Migration implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Option(names = "--json", description = "Print the findings as JSON (machine-readable).")
        boolean json;

        @Option(names = "--to", required = true, paramLabel = "URI",
                description = "The target backend's listening URI, as the source reaches it (as gpusockets migrate --to).")
        String to;

        @Option(names = "--psk-file", paramLabel = "FILE", description = "The source backend's --psk-file: the key it"
                + " proves itself with (the target must hold the same).")
        Path pskFile;

        @Option(names = "--socket", paramLabel = "PATH", description = "The source backend's admin socket: its sessions'"
                + " tenants and memory are compared with the target. Without it only the target is checked.")
        Path socket;

        @Option(names = "--session", paramLabel = "ID", description = "Only this session of the source's (default: all).")
        Long session;

        @Option(names = "--target-socket", paramLabel = "PATH", description = "The target backend's admin socket, when"
                + " doctor runs on its host: its tenants and devices' free memory are read there.")
        Path targetSocket;

        @Option(names = "--timeout-ms", paramLabel = "MS", defaultValue = "5000",
                description = "Connect and handshake bound (default ${DEFAULT-VALUE}).")
        long timeoutMs;

        @Override
        public Integer call() {
            MigrationChecks checks = new MigrationChecks(to, pskFile, socket, session, targetSocket,
                    java.time.Duration.ofMillis(timeoutMs),
                    p -> io.gpusockets.backend.status.StatusJson.parse(StatusCommand.ask(p, "status").strip()));
            return print(spec, json, new DoctorReport("migration", "as asked: gpusockets doctor migration --to " + to,
                    checks.run()));
        }
    }

    /** Makes the doctor commands with {@code env} as the environment they check (tests); others as usual. */
    static CommandLine.IFactory factory(Map<String, String> env) {
        return new CommandLine.IFactory() {
            @Override
            @SuppressWarnings("unchecked")
            public <K> K create(Class<K> cls) throws Exception {
                if (cls == DoctorCommand.class) {
                    return (K) new DoctorCommand(env);
                } else if (cls == Backend.class) {
                    return (K) new Backend(env);
                } else if (cls == Guest.class) {
                    return (K) new Guest(env);
                }
                return CommandLine.defaultFactory().create(cls);
            }
        };
    }
}
