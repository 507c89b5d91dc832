package io.gpusockets.e2e;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;

/**
 * The C test programs of {@code frontend/native/tests} (see its README.md): where they are, what
 * {@code programs.list} says to pass them, building them with gcc against {@code libcuda.so.1}, and
 * running them with a timeout.
 */
final class NativePrograms {
    static final String CUDA_INCLUDE = "/usr/local/cuda/include";

    /** One line of programs.list that applies to the emulated device: the program and its arguments. */
    record Entry(String name, List<String> args) {
    }

    /** What a finished run left: exit status, both streams, and how long it took. */
    record Run(int exit, String stdout, String stderr, long millis) {
        /** The end of stderr, for failure messages. */
        String stderrTail() {
            return stderr.length() <= 6000 ? stderr : "..." + stderr.substring(stderr.length() - 6000);
        }
    }

    final Path root;
    final Path tests;
    final Path libDir;
    final Path ptx;
    private final Map<String, Path> built = new ConcurrentHashMap<>();

    private NativePrograms(Path root) {
        this.root = root;
        this.tests = root.resolve("frontend/native/tests");
        this.libDir = root.resolve("frontend/target/native");
        this.ptx = root.resolve("frontend/src/main/resources/io/gpusockets/kernels/gpusockets_kernels.ptx");
    }

    /** Finds the checkout from the working directory (Maven runs a module's tests in the module's folder). */
    static NativePrograms locate() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("frontend/native/tests/programs.list")) && Files.isRegularFile(p.resolve("pom.xml"))) {
                return new NativePrograms(p);
            }
        }
        throw new IllegalStateException("no checkout with frontend/native/tests/programs.list above " + Path.of("").toAbsolutePath());
    }

    Path library() {
        return libDir.resolve("libcuda.so.1");
    }

    /**
     * The source of a program: in tests/, tests/cuda/ for those with kernels of their own, or
     * tests/gpu/ for GPU-only ones; null if none exists.
     */
    Path source(String name) {
        for (Path dir : List.of(tests, cudaDir(), tests.resolve("gpu"))) {
            Path p = dir.resolve(name + ".c");
            if (Files.isRegularFile(p)) {
                return p;
            }
        }
        return null;
    }

    /** tests/cuda/: programs whose kernels (NAME.cu beside NAME.c) nvcc builds during the run. */
    Path cudaDir() {
        return tests.resolve("cuda");
    }

    /** Whether the program is one of tests/cuda/, with a kernel source of its own. */
    boolean hasOwnKernels(String name) {
        Path src = source(name);
        return src != null && src.getParent().equals(cudaDir());
    }

    /** The kernels of a tests/cuda/ program: cuda/NAME.cu. */
    Path kernelSource(String name) {
        return cudaDir().resolve(name + ".cu");
    }

    Path golden(String name) {
        return tests.resolve("expected").resolve(name + ".out");
    }

    /** The entries of programs.list for {@code target} ("emulated" or "gpu"), placeholders as written. */
    List<Entry> entries(String target) throws IOException {
        List<Entry> out = new ArrayList<>();
        for (String line : Files.readAllLines(tests.resolve("programs.list"), StandardCharsets.UTF_8)) {
            String s = line.strip();
            if (s.isEmpty() || s.startsWith("#")) {
                continue;
            }
            List<String> words = List.of(s.split("\\s+"));
            String name = words.getFirst();
            int at = name.indexOf('@');
            if (at >= 0) {
                if (!name.substring(at + 1).equals(target)) {
                    continue;
                }
                name = name.substring(0, at);
            }
            out.add(new Entry(name, words.subList(1, words.size())));
        }
        return out;
    }

    /** Arguments with {ptx} replaced by the shipped PTX file. */
    List<String> arguments(Entry e) {
        return e.args().stream().map(a -> a.replace("{ptx}", ptx.toString())).toList();
    }

    /** Arguments with {ptx} replaced by the shipped PTX file and {cu} by the program's fatbin. */
    List<String> arguments(Entry e, Path fatbin) {
        return arguments(e).stream().map(a -> a.replace("{cu}", fatbin.toString())).toList();
    }

    /** nvcc: the one on the PATH, else /usr/local/cuda/bin/nvcc; null if neither is there. */
    static Path nvcc() {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, "nvcc"))) {
                return Path.of(dir, "nvcc");
            }
        }
        Path p = Path.of("/usr/local/cuda/bin/nvcc");
        return Files.isExecutable(p) ? p : null;
    }

    /**
     * Builds cuda/NAME.cu into {@code dir}/NAME.fatbin with {@code nvcc -arch=sm_90 -fatbin} (sm_90
     * SASS and compute_90 PTX: the emulated device runs the PTX); throws AssertionError with nvcc's output.
     */
    static Path buildFatbin(Path nvcc, Path cu, Path fatbin, Path dir) {
        List<String> cmd = List.of(nvcc.toString(), "-arch=sm_90", "-fatbin", "-o", fatbin.toString(), cu.toString());
        Run r;
        try {
            r = run(cmd, Map.of(), dir, 300);
        } catch (IOException e) {
            throw new AssertionError("cannot run nvcc for " + cu + ": " + e, e);
        }
        if (r.exit() != 0) {
            throw new AssertionError("nvcc failed (exit " + r.exit() + "):\n" + String.join(" ", cmd) + "\n" + r.stdout()
                    + r.stderr());
        }
        return fatbin;
    }

    /** Whether gcc runs; null if so, else why not. */
    /**
     * Why {@code what} (C programs built from this tree) cannot be built and run here, or null: the
     * C libcuda.so.1 not built, no gcc, or no CUDA headers.
     */
    String cannotRun(String what) {
        Path cudaH = Path.of(CUDA_INCLUDE, "cuda.h");
        String noGcc = gccMissing();
        if (!Files.isRegularFile(library())) {
            return library() + " does not exist: the C libcuda.so.1 is not built (yet), so its programs cannot run";
        } else if (noGcc != null) {
            return what + " need gcc: " + noGcc;
        } else if (!Files.isRegularFile(cudaH)) {
            return what + " need the CUDA headers: " + cudaH + " does not exist";
        }
        return null;
    }

    /** A check of what a program does when no backend listens at {@code server} ({@code mention}: how its message names it). */
    interface NoBackendCheck {
        void run(String server, String mention) throws Exception;
    }

    /**
     * The two ways of having no backend, as dynamic tests named {@code label (...)}: a loopback tcp
     * port nobody listens on (bound, then closed) and a unix socket path that does not exist.
     */
    static Stream<DynamicTest> noBackendCases(String label, Runnable assume, Path work, NoBackendCheck check) {
        return Stream.of(
                DynamicTest.dynamicTest(label + " (closed tcp port)", () -> {
                    assume.run();
                    int port;
                    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                        port = s.getLocalPort();
                    }
                    check.run("tcp://127.0.0.1:" + port, "127.0.0.1:" + port);
                }),
                DynamicTest.dynamicTest(label + " (missing unix socket)", () -> {
                    assume.run();
                    Path socket = work.resolve("nobody-listens-here.sock");
                    check.run("unix://" + socket, socket.toString());
                }));
    }

    static String gccMissing() {
        try {
            Process p = new ProcessBuilder("gcc", "--version").redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return "gcc --version did not finish in 30 s";
            }
            return p.exitValue() == 0 ? null : "gcc --version exited with " + p.exitValue();
        } catch (IOException e) {
            return "gcc is not on the PATH (" + e.getMessage() + ")";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
    }

    /** Builds the program once into {@code dir}, as the README says; throws AssertionError with gcc's output. */
    Path build(String name, Path dir) {
        return built.computeIfAbsent(name, n -> {
            Path src = source(n);
            if (src == null) {
                throw new AssertionError("no source " + n + ".c in " + tests + " or its gpu/ folder");
            }
            Path exe = dir.resolve(n);
            List<String> cmd = List.of("gcc", "-std=c11", "-O1", "-Wall", "-Werror", "-I" + CUDA_INCLUDE, src.toString(),
                    "-o", exe.toString(), "-L" + libDir, "-l:libcuda.so.1", "-lpthread");
            Run r;
            try {
                r = run(cmd, Map.of(), dir, 120);
            } catch (IOException e) {
                throw new AssertionError("cannot run gcc for " + n + ": " + e, e);
            }
            if (r.exit() != 0) {
                throw new AssertionError("building " + n + " failed (exit " + r.exit() + "):\n" + String.join(" ", cmd) + "\n"
                        + r.stdout() + r.stderr());
            }
            return exe;
        });
    }

    /**
     * Runs a command with the given variables added to this process's environment (those named
     * GPUSOCKETS_* removed first, so a developer's own settings do not leak in), stdout and stderr
     * to files in {@code dir}. A command still running after {@code timeoutSeconds} is killed and
     * reported as exit 124 with a note on stderr.
     */
    static Run run(List<String> cmd, Map<String, String> env, Path dir, int timeoutSeconds) throws IOException {
        Path out = Files.createTempFile(dir, "stdout", ".txt");
        Path err = Files.createTempFile(dir, "stderr", ".txt");
        try {
            ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile())
                    .redirectOutput(out.toFile()).redirectError(err.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
            pb.environment().keySet().removeIf(k -> k.startsWith("GPUSOCKETS_"));
            pb.environment().putAll(env);
            long t0 = System.nanoTime();
            Process p = pb.start();
            boolean done;
            try {
                done = p.waitFor(timeoutSeconds, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                p.destroyForcibly();
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while running " + cmd.getFirst(), e);
            }
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            int exit;
            String note = "";
            if (done) {
                exit = p.exitValue();
            } else {
                p.destroyForcibly();
                try {
                    p.waitFor(10, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                exit = 124;
                note = "\n[killed: still running after " + timeoutSeconds + " s]\n";
            }
            // Not Files.readString: a crashing program may leave bytes that are no UTF-8.
            return new Run(exit, new String(Files.readAllBytes(out), StandardCharsets.UTF_8),
                    new String(Files.readAllBytes(err), StandardCharsets.UTF_8) + note, millis);
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }

    /** Deletes a directory tree (best effort). */
    static void deleteTree(Path dir) throws IOException {
        if (dir == null || !Files.exists(dir)) {
            return;
        }
        try (var paths = Files.walk(dir)) {
            for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
