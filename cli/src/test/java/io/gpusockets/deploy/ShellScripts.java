package io.gpusockets.deploy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Runs the repository's shell scripts from tests: finds the checkout and lists its files, writes fake
 * commands into a bin/ folder put first on PATH, and runs a script under bash with a chosen
 * environment, collecting its exit status, stdout and stderr.
 */
public final class ShellScripts {
    private static final Set<String> SKIPPED_DIRS = Set.of("target", "dist", "node_modules");

    static final long TIMEOUT_SECONDS = 60;

    private ShellScripts() {
    }

    /** The checkout: the first folder above the working directory with scripts/ and deploy/ or xen-config/. */
    public static Path root() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isDirectory(p.resolve("scripts")) && Files.isRegularFile(p.resolve("pom.xml"))
                    && Files.isDirectory(p.resolve("xen-config"))) {
                return p;
            }
        }
        throw new IllegalStateException("no checkout (scripts/, xen-config/, pom.xml) above " + Path.of("").toAbsolutePath());
    }

    /** The files under {@code root}, sorted; build outputs (target/, dist/) and hidden folders other than .ci/ left out. */
    public static List<Path> files(Path root) throws IOException {
        List<Path> found = new ArrayList<>();
        Files.walkFileTree(root, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) {
                String name = dir.getFileName() == null ? "" : dir.getFileName().toString();
                boolean hidden = name.startsWith(".") && !name.equals(".ci") && !dir.equals(root);
                return hidden || SKIPPED_DIRS.contains(name) ? FileVisitResult.SKIP_SUBTREE : FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
                if (attrs.isRegularFile()) {
                    found.add(file);
                }
                return FileVisitResult.CONTINUE;
            }
        });
        found.sort(null);
        return found;
    }

    /** Writes an executable bash script {@code dir/name} with {@code body} under a bash shebang. */
    static Path fakeCommand(Path dir, String name, String body) throws IOException {
        Files.createDirectories(dir);
        Path file = dir.resolve(name);
        Files.writeString(file, "#!/usr/bin/env bash\n" + body + "\n", StandardCharsets.UTF_8);
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
        return file;
    }

    record Result(int status, String out, String err) {
        @Override
        public String toString() {
            return "exit " + status + "\n--- stdout\n" + out + "--- stderr\n" + err;
        }
    }

    /**
     * Runs {@code bash script args...} in {@code dir} with the environment of this JVM minus every
     * SLURM_* and GPUSOCKETS_* variable, plus {@code env}; {@code fakeBin} (when not null) goes first on PATH.
     */
    static Result run(Path dir, Path fakeBin, Map<String, String> env, Path script, String... args)
            throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of("bash", script.toString()));
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command).directory(dir.toFile());
        Map<String, String> e = pb.environment();
        e.keySet().removeIf(k -> k.startsWith("SLURM_") || k.startsWith("GPUSOCKETS_") || k.equals("DESTDIR"));
        if (fakeBin != null) {
            e.put("PATH", fakeBin + ":" + e.getOrDefault("PATH", "/usr/bin:/bin"));
        }
        e.putAll(env);
        Path out = Files.createTempFile("script-out", ".txt");
        Path err = Files.createTempFile("script-err", ".txt");
        try {
            Process p = pb.redirectOutput(out.toFile()).redirectError(err.toFile()).redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile())).start();
            if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor();
                throw new AssertionError(script + " ran over " + TIMEOUT_SECONDS + " s; stderr:\n" + Files.readString(err));
            }
            return new Result(p.exitValue(), Files.readString(out), Files.readString(err));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }
}
