package io.gpusockets.cli.doctor;

import io.gpusockets.frontend.FrontendConfig;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarFile;

/**
 * The guest's checks: which libcuda.so.1 a program would load (ours, NVIDIA's, another, none), whether
 * ours has its Java runtime and jars beside it and that runtime starts, and for each backend of
 * GPUSOCKETS_SERVER whether it is reachable, speaks this frontend's protocol version and lets this
 * client in ({@link BackendProbe}).
 *
 * @param env       the environment a CUDA program would start with (System.getenv() but in tests)
 * @param overrides settings given on the command line (GPUSOCKETS_SERVER, GPUSOCKETS_PSK_FILE, ...), winning over env
 */
public record GuestChecks(Map<String, String> env, Map<String, String> overrides) {
    static final String LIBCUDA = "libcuda.so.1";
    private static final String ENTRY_CLASS = FrontendLibrary.MARKER + ".class";

    public List<Check> run() {
        List<Check> out = new ArrayList<>();
        libcuda(out);
        backends(out);
        return out;
    }

    private String setting(String name) {
        return overrides.containsKey(name) ? overrides.get(name) : env.get(name);
    }

    private void libcuda(List<Check> out) {
        String name = "libcuda.so.1 a program loads";
        LoaderSearch.Found found = LoaderSearch.find(LIBCUDA, env);
        String skipped = found.skipped().isEmpty() ? "" : "; passed over: " + String.join(", ", found.skipped());
        if (!found.any()) {
            out.add(Check.fail(name, "none: " + found.how() + skipped, "install the frontend (install-frontend --prefix /opt/gpusockets)"
                    + " and export LD_LIBRARY_PATH=/opt/gpusockets/lib (or install-frontend --system)"));
            return;
        }
        Path lib = found.path();
        String where = lib + " (from " + found.how() + ")";
        String confirmed = confirmByDlopen(lib);
        if (confirmed != null) {
            where += "; " + confirmed;
        }
        FrontendLibrary.Kind kind = FrontendLibrary.kindOf(lib);
        if (kind != FrontendLibrary.Kind.OURS) {
            out.add(Check.fail(name, where + ": " + kind.words() + skipped,
                    "put the frontend's lib directory first: export LD_LIBRARY_PATH=PREFIX/lib" + (env.containsKey("LD_LIBRARY_PATH")
                            ? ":$LD_LIBRARY_PATH" : "") + " (PREFIX as given to install-frontend --prefix), or remove "
                            + lib.getParent() + " from LD_LIBRARY_PATH"));
            return;
        }
        out.add(Check.ok(name, where + ": " + kind.words() + skipped));
        runtime(out, lib);
    }

    /**
     * When the environment is this process's own, asks the loader itself (dlopen, then dlinfo for the path it
     * mapped); a difference from the search above wins and is reported. Null when not asked.
     */
    private String confirmByDlopen(Path expected) {
        if (env != System.getenv()) {
            return null;
        }
        String loaded = Dlopen.pathOf(LIBCUDA);
        if (loaded == null) {
            return null;
        }
        try {
            return Path.of(loaded).toRealPath().equals(expected.toRealPath()) ? "dlopen agrees"
                    : "but dlopen in this process loaded " + loaded;
        } catch (IOException e) {
            return "dlopen loaded " + loaded;
        }
    }

    private void runtime(List<Check> out, Path lib) {
        Path prefix;
        try {
            prefix = FrontendLibrary.prefixOf(lib);
        } catch (IOException e) {
            out.add(Check.fail("frontend install", "cannot resolve " + lib + ": " + e.getMessage(), "reinstall: install-frontend --prefix DIR"));
            return;
        }
        String home = setting("GPUSOCKETS_JAVA_HOME");
        Path javaHome = home != null && !home.isBlank() ? Path.of(home) : prefix.resolve("runtime");
        String homeFrom = home != null && !home.isBlank() ? "GPUSOCKETS_JAVA_HOME" : "beside " + lib;
        Path libjvm = javaHome.resolve("lib/server/libjvm.so");
        if (!Files.isReadable(libjvm)) {
            out.add(Check.fail("frontend Java runtime", "no " + libjvm + " (runtime " + homeFrom + ")",
                    "reinstall the frontend with install-frontend --prefix " + prefix + ", or set GPUSOCKETS_JAVA_HOME to a JDK 25 runtime"));
            return;
        }
        String cp = setting("GPUSOCKETS_CLASSPATH");
        List<Path> entries = new ArrayList<>();
        if (cp != null && !cp.isBlank()) {
            for (String e : cp.split(":")) {
                if (!e.isBlank()) {
                    entries.add(Path.of(e));
                }
            }
        } else {
            try (var files = Files.list(prefix.resolve("lib"))) {
                files.filter(p -> p.getFileName().toString().endsWith(".jar")).sorted().forEach(entries::add);
            } catch (IOException e) {
                // none: reported below
            }
        }
        String cpFrom = cp != null && !cp.isBlank() ? "GPUSOCKETS_CLASSPATH" : prefix.resolve("lib") + "/*.jar";
        if (entries.stream().noneMatch(GuestChecks::holdsEntryClass)) {
            out.add(Check.fail("frontend jars", "no " + ENTRY_CLASS.replace('/', '.').replace(".class", "") + " in " + cpFrom
                    + " (" + entries.size() + " entries)", "reinstall the frontend with install-frontend --prefix " + prefix
                    + " (it copies the frontend, protocol and transport jars to " + prefix.resolve("lib") + ")"));
            return;
        }
        out.add(Check.ok("frontend jars", entries.size() + " class path entries from " + cpFrom));
        Path java = javaHome.resolve("bin/java");
        String cpText = String.join(":", entries.stream().map(Path::toString).toList());
        List<String> cmd = new ArrayList<>(List.of(java.toString(), "-Xshare:auto"));
        Path archive = prefix.resolve("lib/gpusockets.jsa");
        if (Files.isReadable(archive)) {
            cmd.add("-XX:SharedArchiveFile=" + archive);
        }
        cmd.addAll(List.of("-cp", cpText, "-version"));
        String result = runJava(cmd);
        if (result.startsWith("ok ")) {
            out.add(Check.ok("frontend Java runtime", javaHome + " (" + homeFrom + ") starts: " + result.substring(3)));
        } else {
            out.add(Check.fail("frontend Java runtime", javaHome + " (" + homeFrom + ") does not start: " + result,
                    "reinstall the frontend with install-frontend --prefix " + prefix + " (its runtime/ is made for this machine)"));
        }
    }

    private static String runJava(List<String> cmd) {
        if (!Files.isExecutable(Path.of(cmd.getFirst()))) {
            return "no executable " + cmd.getFirst();
        }
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String text;
            try (InputStream in = p.getInputStream()) {
                text = new String(in.readAllBytes(), StandardCharsets.UTF_8).strip();
            }
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return "did not finish within 30 s";
            }
            String first = text.lines().findFirst().orElse("");
            return p.exitValue() == 0 ? "ok " + first : "exit " + p.exitValue() + ": " + text.replace('\n', ' ');
        } catch (IOException e) {
            return e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
    }

    private static boolean holdsEntryClass(Path entry) {
        if (Files.isDirectory(entry)) {
            return Files.isRegularFile(entry.resolve(ENTRY_CLASS));
        }
        if (!Files.isRegularFile(entry)) {
            return false;
        }
        try (JarFile jar = new JarFile(entry.toFile())) {
            return jar.getEntry(ENTRY_CLASS) != null;
        } catch (IOException e) {
            return false;
        }
    }

    private void backends(List<Check> out) {
        Map<String, String> o = new HashMap<>();
        for (String k : List.of(FrontendConfig.SERVER_ENV, FrontendConfig.CONNECT_TIMEOUT_ENV, FrontendConfig.PSK_FILE_ENV,
                FrontendConfig.IDENTITY_ENV, FrontendConfig.TLS_CA_ENV, FrontendConfig.TLS_CA_PASSWORD_FILE_ENV,
                FrontendConfig.TLS_KEY_STORE_ENV, FrontendConfig.TLS_KEY_STORE_PASSWORD_FILE_ENV)) {
            String v = setting(k);
            if (v != null) {
                o.put(k, v);
            } else if (env != System.getenv() && !k.equals(FrontendConfig.CONNECT_TIMEOUT_ENV)) {
                o.put(k, ""); // a test's environment: nothing from the real one
            }
        }
        String server = o.getOrDefault(FrontendConfig.SERVER_ENV, "");
        String from = server.isBlank() ? null : overrides.containsKey(FrontendConfig.SERVER_ENV) ? "--server" : "the environment";
        String psk = o.get(FrontendConfig.PSK_FILE_ENV);
        Check pskCheck = null;
        if (psk != null && !psk.isBlank()) {
            pskCheck = SecretFiles.check("PSK file (GPUSOCKETS_PSK_FILE)", Path.of(psk.strip()), null, null);
            if (pskCheck.status() == Check.Status.FAIL && !Files.isReadable(Path.of(psk.strip()))) {
                o.put(FrontendConfig.PSK_FILE_ENV, ""); // unreadable: said once, and the backends are still probed
            }
        }
        FrontendConfig config;
        try {
            config = FrontendConfig.fromEnvironment(o);
        } catch (IllegalArgumentException e) {
            String m = String.valueOf(e.getMessage());
            if (m.startsWith("no backend given")) {
                out.add(Check.fail("GPUSOCKETS_SERVER", "not set (environment, -Dgpusockets.server, " + FrontendConfig.CONFIG_FILE + ")",
                        "export GPUSOCKETS_SERVER=tcp://GPU-HOST:7070 (the backend's --listen address), or put that line in "
                                + FrontendConfig.CONFIG_FILE));
            } else {
                out.add(Check.fail("frontend settings", m, "fix the setting named above"));
            }
            if (pskCheck != null) {
                out.add(pskCheck);
            }
            return;
        }
        out.add(Check.ok("GPUSOCKETS_SERVER", String.join(",", config.servers()) + " (from "
                + (from != null ? from : "-Dgpusockets.server or " + FrontendConfig.CONFIG_FILE) + ")"));
        if (pskCheck != null) {
            out.add(pskCheck);
        }
        for (String uri : config.servers()) {
            out.addAll(BackendProbe.probe(uri, config));
        }
    }
}
