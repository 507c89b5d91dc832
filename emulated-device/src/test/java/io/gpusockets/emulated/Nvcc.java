package io.gpusockets.emulated;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Test helper: runs nvcc (the environment's NVCC if set, else from PATH, else /usr/local/cuda/bin) in a
 * test class's temporary folder.
 * Without nvcc the calling test is skipped (assumption), saying so. Several compiles can be started
 * at once ({@link #start}) and waited for ({@link #await}), since each takes about a second.
 */
final class Nvcc {
    private final Path dir;

    Nvcc(Path dir) {
        this.dir = dir;
    }

    static Path find() {
        String named = System.getenv("NVCC");
        if (named != null) {
            Path p = Path.of(named);
            return Files.isExecutable(p) ? p : null;
        }
        for (String d : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
            Path p = Path.of(d.isEmpty() ? "." : d, "nvcc");
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        Path p = Path.of("/usr/local/cuda/bin/nvcc");
        return Files.isExecutable(p) ? p : null;
    }

    static void assumeNvcc() {
        assumeTrue(find() != null, "nvcc is not installed (NVCC, PATH, /usr/local/cuda/bin): the fatbin tests need it");
    }

    Path write(String name, String text) throws IOException {
        return Files.writeString(dir.resolve(name), text);
    }

    /** Copies a test resource into the folder. */
    Path resource(String resource, String name) throws IOException {
        try (InputStream in = Nvcc.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException(resource + " not on the test classpath");
            }
            return Files.write(dir.resolve(name), in.readAllBytes());
        }
    }

    /** Starts {@code nvcc args... -o out}; returns the process. */
    Process start(Path out, String... args) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(find().toString());
        command.addAll(List.of(args));
        command.add("-o");
        command.add(out.toString());
        return new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
    }

    /** Waits for each compile; fails with nvcc's output if one failed. */
    static void await(Map<Path, Process> compiles) throws IOException, InterruptedException {
        for (Map.Entry<Path, Process> e : compiles.entrySet()) {
            Process p = e.getValue();
            String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0 || !Files.exists(e.getKey())) {
                throw new IllegalStateException("nvcc for " + e.getKey() + " failed: " + output);
            }
        }
    }
}
