package io.gpusockets.benchmarks;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Running a C or CUDA program as a process of its own, natively or through GPUsockets' libcuda.so.1, for the benches
 * that time whole programs ({@link CopiesBench}, {@link ProgramsBench}): where the checkout and our library are, the
 * environment of each side, and one run with a timeout, its wall time taken from just before the process starts to its
 * exit. Only the environment differs between the sides; the binary is the same (it names {@code libcuda.so.1}, which
 * the loader finds first in {@code LD_LIBRARY_PATH}).
 */
final class ProgramRuns {
    /** What a finished run left: exit status (124 when it was killed for its time), stdout, stderr, wall ms. */
    record Run(int exit, String stdout, String stderr, double wallMs) {
    }

    private ProgramRuns() {
    }

    /** The checkout above the working directory (one with pom.xml and frontend/native/tests), or null. */
    static Path checkout() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("pom.xml")) && Files.isDirectory(p.resolve("frontend/native/tests"))) {
                return p;
            }
        }
        return null;
    }

    /** The folder of GPUsockets' libcuda.so.1: {@code given}, else frontend/target/native of the checkout; null if neither has one. */
    static Path library(Path given) {
        Path root = checkout();
        Path dir = given != null ? given : root == null ? null : root.resolve("frontend/target/native");
        return dir != null && Files.isRegularFile(dir.resolve("libcuda.so.1")) ? dir.toAbsolutePath() : null;
    }

    /**
     * The environment of a run through GPUsockets: our library first on the loader's path, the backend's URI, and,
     * unless the library is a bundle's or an install's (a {@code runtime/} beside it: it finds its own Java), this
     * JVM's runtime and class path for the embedded JVM.
     */
    static Map<String, String> remoteEnv(Path library, String uri) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("LD_LIBRARY_PATH", library.toAbsolutePath().toString());
        env.put("GPUSOCKETS_SERVER", uri);
        Path parent = library.toAbsolutePath().getParent();
        if (parent != null && Files.isDirectory(parent.resolve("runtime"))) {
            return env;
        }
        env.put("GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"));
        // absolute: the program runs in a directory of its own
        env.put("GPUSOCKETS_CLASSPATH", String.join(File.pathSeparator, Arrays.stream(
                System.getProperty("java.class.path").split(File.pathSeparator)).map(e -> Path.of(e).toAbsolutePath().toString()).toList()));
        return env;
    }

    /**
     * The environment of a native run: the real driver's folder first on the loader's path, that of {@code libcuda}
     * (the real libcuda.so.1 as given) where it names one, else that of the libcuda this process has mapped (the
     * backend's driver, loaded by name), else this process's own LD_LIBRARY_PATH, if any (the loader's search).
     */
    static Map<String, String> nativeEnv(String libcuda) {
        Map<String, String> env = new LinkedHashMap<>();
        Path dir = libcuda == null ? null : Path.of(libcuda).getParent();
        if (dir == null) {
            dir = mappedLibcudaDir();
        }
        if (dir != null) {
            env.put("LD_LIBRARY_PATH", dir.toAbsolutePath().toString());
        } else if (System.getenv("LD_LIBRARY_PATH") != null) {
            env.put("LD_LIBRARY_PATH", System.getenv("LD_LIBRARY_PATH"));
        }
        return env;
    }

    /** The folder of a libcuda.so* mapped into this process (/proc/self/maps), or null. */
    static Path mappedLibcudaDir() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
                String[] fields = line.trim().split("\\s+", 6);
                if (fields.length == 6 && fields[5].startsWith("/")
                        && Path.of(fields[5]).getFileName().toString().startsWith("libcuda.so")) {
                    return Path.of(fields[5]).getParent();
                }
            }
        } catch (IOException | RuntimeException e) {
            // not Linux, or /proc hidden: the loader's own search
        }
        return null;
    }

    /**
     * Runs {@code command} in {@code dir} with the environment {@code env} added (every GPUSOCKETS_ variable and
     * LD_LIBRARY_PATH of this process removed first), stdin empty, for at most {@code timeoutSeconds}.
     */
    static Run run(List<String> command, Map<String, String> env, Path dir, int timeoutSeconds) throws IOException, InterruptedException {
        return run(command, env, dir, timeoutSeconds, false);
    }

    /**
     * {@link #run(List, Map, Path, int)}, keeping this process's LD_LIBRARY_PATH where {@code keepLibraryPath} (the
     * start-up benches: a native run finds the driver as this process would).
     */
    static Run run(List<String> command, Map<String, String> env, Path dir, int timeoutSeconds, boolean keepLibraryPath)
            throws IOException, InterruptedException {
        Path stdout = Files.createTempFile(dir, "out", ".txt");
        Path stderr = Files.createTempFile(dir, "err", ".txt");
        try {
            ProcessBuilder pb = new ProcessBuilder(new ArrayList<>(command)).directory(dir.toFile())
                    .redirectOutput(stdout.toFile()).redirectError(stderr.toFile()).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
            pb.environment().keySet().removeIf(k -> k.startsWith("GPUSOCKETS_") || !keepLibraryPath && k.equals("LD_LIBRARY_PATH"));
            pb.environment().putAll(env);
            long t0 = System.nanoTime();
            Process p = pb.start();
            boolean done = p.waitFor(timeoutSeconds, TimeUnit.SECONDS);
            double wall = (System.nanoTime() - t0) / 1e6;
            if (!done) {
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
            }
            return new Run(done ? p.exitValue() : 124, Files.readString(stdout, StandardCharsets.ISO_8859_1),
                    Files.readString(stderr, StandardCharsets.ISO_8859_1), wall);
        } finally {
            Files.deleteIfExists(stdout);
            Files.deleteIfExists(stderr);
        }
    }

    /** The last {@code lines} lines of {@code text}, for failure messages. */
    static String tail(String text, int lines) {
        String[] all = text.strip().split("\n");
        return String.join("\n", Arrays.asList(all).subList(Math.max(0, all.length - lines), all.length));
    }

    /** Deletes a folder and everything in it. */
    static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (java.util.stream.Stream<Path> paths = Files.walk(dir)) {
            for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    /** The median of the values that are not NaN; NaN if none is. */
    static double median(double[] v) {
        double[] s = Arrays.stream(v).filter(x -> !Double.isNaN(x)).sorted().toArray();
        if (s.length == 0) {
            return Double.NaN;
        }
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
