package io.gpusockets.cli.doctor;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Finds a shared library by name as glibc's dynamic loader does for {@code dlopen("libcuda.so.1")} from a
 * program without RUNPATH: each directory of LD_LIBRARY_PATH in order, then the cache that ldconfig
 * keeps ({@code /etc/ld.so.cache}, read through {@code ldconfig -p}), then the default directories. As
 * the loader does, a file that is not a 64-bit ELF object for this machine is passed over, and the
 * search goes on (each one passed over is listed in {@link Found#skipped}).
 */
public final class LoaderSearch {
    private static final String[] LDCONFIG = {"/sbin/ldconfig", "/usr/sbin/ldconfig", "/bin/ldconfig", "/usr/bin/ldconfig"};

    /** What the loader would load ({@code path} null: nothing), how it got there, and what it passed over. */
    public record Found(Path path, String how, List<String> skipped) {
        public boolean any() {
            return path != null;
        }
    }

    private LoaderSearch() {
    }

    /** The library {@code name} for a program started with environment {@code env}. */
    public static Found find(String name, Map<String, String> env) {
        List<String> skipped = new ArrayList<>();
        String llp = env.getOrDefault("LD_LIBRARY_PATH", "");
        if (!llp.isEmpty()) {
            for (String dir : llp.split("[:;]", -1)) {
                Path candidate = Path.of(dir.isEmpty() ? "." : dir).resolve(name);
                if (usable(candidate, skipped)) {
                    return new Found(candidate, "LD_LIBRARY_PATH entry " + (dir.isEmpty() ? "(empty: the current directory)" : dir),
                            skipped);
                }
            }
        }
        for (String cached : cacheEntries(name)) {
            Path candidate = Path.of(cached);
            if (usable(candidate, skipped)) {
                return new Found(candidate, "the loader cache (ldconfig -p)", skipped);
            }
        }
        for (String dir : defaultDirectories()) {
            Path candidate = Path.of(dir).resolve(name);
            if (usable(candidate, skipped)) {
                return new Found(candidate, "the default directory " + dir, skipped);
            }
        }
        return new Found(null, "not in LD_LIBRARY_PATH, the loader cache (ldconfig -p) or " + String.join(", ", defaultDirectories()),
                skipped);
    }

    /** The directories the loader searches last (glibc's trusted directories, Debian multiarch first). */
    static List<String> defaultDirectories() {
        String triplet = switch (System.getProperty("os.arch")) {
            case "amd64", "x86_64" -> "x86_64-linux-gnu";
            case "aarch64" -> "aarch64-linux-gnu";
            default -> null;
        };
        List<String> dirs = new ArrayList<>();
        if (triplet != null) {
            dirs.add("/lib/" + triplet);
            dirs.add("/usr/lib/" + triplet);
        }
        dirs.addAll(List.of("/lib64", "/usr/lib64", "/lib", "/usr/lib"));
        return dirs;
    }

    /** Paths {@code ldconfig -p} lists for {@code name} for this machine's ABI, in its order. */
    static List<String> cacheEntries(String name) {
        String ldconfig = null;
        for (String candidate : LDCONFIG) {
            if (Files.isExecutable(Path.of(candidate))) {
                ldconfig = candidate;
                break;
            }
        }
        if (ldconfig == null) {
            return List.of();
        }
        String abi = switch (System.getProperty("os.arch")) {
            case "amd64", "x86_64" -> "x86-64";
            case "aarch64" -> "AArch64";
            default -> "";
        };
        List<String> out = new ArrayList<>();
        try {
            Process p = new ProcessBuilder(ldconfig, "-p").redirectErrorStream(true).start();
            String text;
            try (InputStream in = p.getInputStream()) {
                text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            }
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return List.of();
            }
            for (String line : text.split("\n")) {
                String l = line.strip();
                int arrow = l.indexOf(" => ");
                if (arrow < 0 || !l.startsWith(name + " ")) {
                    continue;
                }
                String tags = l.substring(name.length(), arrow);
                if (abi.isEmpty() || tags.contains(abi)) {
                    out.add(l.substring(arrow + 4).strip());
                }
            }
        } catch (IOException e) {
            return List.of();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return List.of();
        }
        return out;
    }

    /** Whether the loader would take {@code candidate}: it exists and is a 64-bit ELF object for this machine. */
    private static boolean usable(Path candidate, List<String> skipped) {
        if (!Files.exists(candidate)) {
            return false;
        }
        String why = elfProblem(candidate);
        if (why == null) {
            return true;
        }
        skipped.add(candidate + " (" + why + ")");
        return false;
    }

    /** Null when {@code file} is a 64-bit little-endian ELF shared object or executable for this machine. */
    static String elfProblem(Path file) {
        if (!Files.isReadable(file)) {
            return "not readable by this user";
        }
        try (FileChannel ch = FileChannel.open(file)) {
            ByteBuffer h = ByteBuffer.allocate(20).order(ByteOrder.LITTLE_ENDIAN);
            while (h.hasRemaining() && ch.read(h) > 0) {
                // fill the header
            }
            if (h.position() < 20 || h.get(0) != 0x7f || h.get(1) != 'E' || h.get(2) != 'L' || h.get(3) != 'F') {
                return "not an ELF file";
            }
            if (h.get(4) != 2) {
                return "a 32-bit library";
            }
            int machine = h.getShort(18) & 0xffff;
            int expected = switch (System.getProperty("os.arch")) {
                case "amd64", "x86_64" -> 62;
                case "aarch64" -> 183;
                default -> machine;
            };
            return machine == expected ? null : "built for another machine (ELF e_machine " + machine + ")";
        } catch (IOException e) {
            return "unreadable: " + e.getMessage();
        }
    }
}
