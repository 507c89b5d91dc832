package io.gpusockets.backend.isolation;

import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.Stream;

/**
 * A JDK AOT cache (JEP 483, 514, 515: classes loaded and linked, method profiles) of the worker JVM, so that a
 * worker starts on less CPU: measured on the 2-core development VM, about a quarter less CPU to a worker's
 * readiness and a faster first session (benchmarks/RESULTS.md), which is what a burst of sessions waits for.
 *
 * <p>The cache is only valid for the exact JDK, class path (each jar's path, size and modification time) and
 * JVM options it was made with, and a cache the JVM refuses makes it start slower than none (it then maps no
 * class data at all). So it is made here, on the machine that uses it, under a name that is a hash of all of
 * those ({@code worker-HASH.aot}): the first worker started without one trains it ({@code -XX:AOTCacheOutput}),
 * which the JVM writes when that worker exits, and later workers map it ({@code -XX:AOTCache}). A new JDK or
 * jar gives a new name; the four newest caches are kept.
 *
 * <p>Only a class path of jars can be archived: with a directory on it (a build tree's classes) no cache is kept.
 * The directory holds code the workers load, so it must be this user's and writable by no one else: it is
 * made with mode 0700, and one that is another user's or group- or world-writable is not used. Where:
 * {@value #DIR_PROP_NAME} ({@code off} for no cache), else {@code $CACHE_DIRECTORY} (systemd's
 * {@code CacheDirectory=}), else {@code $XDG_CACHE_HOME/gpusockets}, else {@code ~/.cache/gpusockets}.
 */
final class WorkerAotCache {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");
    static final String DIR_PROP_NAME = "gpusockets.worker.aotCacheDir";
    static final int KEEP = 4;

    private final Path file;
    /** The training worker's output while one runs, else null. Guarded by this. */
    private Path training;

    private WorkerAotCache(Path file) {
        this.file = file;
    }

    /** The cache for workers started with {@code command} (java first, then its options), or null when none is kept. */
    static WorkerAotCache forCommand(List<String> command) {
        String where = System.getProperty(DIR_PROP_NAME);
        if ("off".equals(where)) {
            return null;
        }
        Path dir = where != null ? Path.of(where) : defaultDirectory();
        if (dir == null) {
            return null;
        }
        String directory = classPathDirectory(command);
        if (directory != null) {
            // a build tree's classes (tests, IDE runs): the JDK archives classes from jars only
            LOG.log(Level.DEBUG, "worker AOT cache not used: the class path holds a directory, " + directory);
            return null;
        }
        try {
            Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            String refused = unsafe(dir);
            if (refused != null) {
                LOG.log(Level.WARNING, "worker AOT cache not used: " + dir + " " + refused);
                return null;
            }
            removeStaleTraining(dir);
            return new WorkerAotCache(dir.resolve("worker-" + key(command) + ".aot"));
        } catch (IOException | RuntimeException e) {
            LOG.log(Level.WARNING, "worker AOT cache not used: " + dir + ": " + e.getMessage());
            return null;
        }
    }

    /** The first directory on the command's class path, or null when it names jars only. */
    static String classPathDirectory(List<String> command) {
        int at = Math.max(command.indexOf("-cp"), Math.max(command.indexOf("-classpath"), command.indexOf("--class-path")));
        if (at < 0 || at + 1 >= command.size()) {
            return null;
        }
        for (String entry : command.get(at + 1).split(java.io.File.pathSeparator)) {
            if (Files.isDirectory(Path.of(entry))) {
                return entry;
            }
        }
        return null;
    }

    /** Training output left by a worker killed before it finished writing (older than an hour). */
    private static void removeStaleTraining(Path dir) throws IOException {
        long before = System.currentTimeMillis() - java.util.concurrent.TimeUnit.HOURS.toMillis(1);
        try (Stream<Path> all = Files.list(dir)) {
            for (Path p : all.filter(p -> p.getFileName().toString().matches("worker-[0-9a-f]+\\.aot\\.tmp-.*")).toList()) {
                if (Files.getLastModifiedTime(p).toMillis() < before) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    private static Path defaultDirectory() {
        String systemd = System.getenv("CACHE_DIRECTORY");
        if (systemd != null && !systemd.isBlank()) {
            return Path.of(systemd.split(":")[0]);
        }
        String xdg = System.getenv("XDG_CACHE_HOME");
        if (xdg != null && !xdg.isBlank()) {
            return Path.of(xdg, "gpusockets");
        }
        String home = System.getProperty("user.home");
        return home == null || home.isBlank() || home.equals("?") ? null : Path.of(home, ".cache", "gpusockets");
    }

    /** Why {@code p} must not be trusted with code (another user's, or writable by others), or null. */
    private static String unsafe(Path p) throws IOException {
        PosixFileAttributes a = Files.readAttributes(p, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        String me = System.getProperty("user.name");
        if (!a.owner().getName().equals(me)) {
            return "belongs to " + a.owner().getName() + ", not " + me;
        }
        Set<PosixFilePermission> perms = a.permissions();
        if (perms.contains(PosixFilePermission.GROUP_WRITE) || perms.contains(PosixFilePermission.OTHERS_WRITE)) {
            return "is writable by others (" + PosixFilePermissions.toString(perms) + ")";
        }
        return null;
    }

    /**
     * A hash of the JDK, the command's JVM options (up to its class path; the program's own arguments change
     * nothing) and every class path entry's path, size and modification time.
     */
    static String key(List<String> command) throws IOException {
        try {
            MessageDigest d = MessageDigest.getInstance("SHA-256");
            StringBuilder b = new StringBuilder(System.getProperty("java.home")).append('\n')
                    .append(System.getProperty("java.vm.version")).append('\n');
            for (int i = 0; i < command.size(); i++) {
                String a = command.get(i);
                b.append(a).append('\n');
                if ((a.equals("-cp") || a.equals("-classpath") || a.equals("--class-path")) && i + 1 < command.size()) {
                    for (String entry : command.get(i + 1).split(java.io.File.pathSeparator)) {
                        Path p = Path.of(entry);
                        if (Files.exists(p)) {
                            b.append(entry).append(' ').append(Files.size(p)).append(' ')
                                    .append(Files.getLastModifiedTime(p).toMillis()).append('\n');
                        }
                    }
                    break;
                }
            }
            return HexFormat.of().formatHex(d.digest(b.toString().getBytes(StandardCharsets.UTF_8))).substring(0, 24);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * The JVM options for the next worker: the cache where it is made; else, for one worker at a time, the
     * options that train it (errors only in its log); else none.
     */
    synchronized List<String> options() {
        if (Files.isRegularFile(file)) {
            try {
                if (unsafe(file) == null) {
                    return List.of("-XX:AOTCache=" + file);
                }
            } catch (IOException e) {
                return List.of();
            }
            return List.of();
        }
        if (training != null) {
            return List.of();
        }
        training = file.resolveSibling(file.getFileName() + ".tmp-" + Long.toHexString(ThreadLocalRandom.current().nextLong()));
        return List.of("-XX:AOTCacheOutput=" + training, "-Xlog:aot*=error");
    }

    /** A worker started with {@code options} has exited: a cache it trained is put in place. */
    synchronized void exited(List<String> options) {
        Path t = training;
        if (t == null || !options.contains("-XX:AOTCacheOutput=" + t)) {
            return;
        }
        training = null;
        try {
            if (Files.isRegularFile(t) && Files.size(t) > 0) {
                Files.move(t, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                LOG.log(Level.INFO, "worker AOT cache made: " + file + " (" + (Files.size(file) >> 20) + " MiB); workers"
                        + " started from now on map it");
                prune();
            }
            Files.deleteIfExists(t);
            Files.deleteIfExists(Path.of(t + ".config"));
        } catch (IOException e) {
            LOG.log(Level.WARNING, "worker AOT cache not made: " + e.getMessage());
        }
    }

    /** Keeps the {@value #KEEP} newest caches of the directory (every new JDK or jar makes another). */
    private void prune() throws IOException {
        List<Path> caches = new ArrayList<>();
        try (Stream<Path> all = Files.list(file.getParent())) {
            all.filter(p -> p.getFileName().toString().matches("worker-[0-9a-f]+\\.aot")).forEach(caches::add);
        }
        caches.sort(Comparator.comparing((Path p) -> {
            try {
                return Files.getLastModifiedTime(p);
            } catch (IOException e) {
                return java.nio.file.attribute.FileTime.fromMillis(0);
            }
        }).reversed());
        for (Path old : caches.subList(Math.min(KEEP, caches.size()), caches.size())) {
            Files.deleteIfExists(old);
        }
    }

    Path file() {
        return file;
    }
}
