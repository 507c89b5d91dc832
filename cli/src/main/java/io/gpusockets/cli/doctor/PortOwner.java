package io.gpusockets.cli.doctor;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * Which process listens on a TCP port, from /proc: the listening sockets' inodes in /proc/net/tcp and
 * tcp6, then the process whose /proc/PID/fd holds one. Another user's process shows only to root; then
 * the answer says how to ask. Listening Unix sockets come from /proc/net/unix the same way.
 */
public final class PortOwner {
    private static final String LISTEN = "0A";

    private PortOwner() {
    }

    /** Who holds a listening socket: {@code pid} 0 when /proc does not tell, then {@code words} says how to find out. */
    public record Holder(long pid, String words, boolean gpusocketsBackend) {
    }

    /** Who listens on TCP {@code port}. */
    public static Holder tcp(int port) {
        return holder(listeningInodes(port), "sudo ss -ltnp 'sport = :" + port + "'");
    }

    /** Who listens on the Unix socket file {@code path}. */
    public static Holder unix(String path) {
        Set<String> inodes = new HashSet<>();
        try {
            for (String line : Files.readAllLines(Path.of("/proc/net/unix"))) {
                String[] f = line.strip().split("\\s+");
                if (f.length >= 8 && f[7].equals(path)) {
                    inodes.add(f[6]);
                }
            }
        } catch (IOException | RuntimeException e) {
            // no /proc/net/unix: said below
        }
        return holder(inodes, "sudo ss -xlp | grep " + path);
    }

    private static Holder holder(Set<String> inodes, String how) {
        if (inodes.isEmpty()) {
            return new Holder(0, "a listener this user cannot see (find it: " + how + ")", false);
        }
        return owner(inodes).orElse(new Holder(0, "a process of another user (find it: " + how + ")", false));
    }

    static Set<String> listeningInodes(int port) {
        Set<String> inodes = new HashSet<>();
        for (String table : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
            try {
                for (String line : Files.readAllLines(Path.of(table))) {
                    String[] f = line.strip().split("\\s+");
                    if (f.length < 10 || !f[3].equals(LISTEN)) {
                        continue;
                    }
                    int colon = f[1].lastIndexOf(':');
                    if (colon > 0 && Integer.parseInt(f[1].substring(colon + 1), 16) == port) {
                        inodes.add(f[9]);
                    }
                }
            } catch (IOException | RuntimeException e) {
                // no such table (no IPv6): nothing listens there
            }
        }
        return inodes;
    }

    private static Optional<Holder> owner(Set<String> inodes) {
        try (DirectoryStream<Path> procs = Files.newDirectoryStream(Path.of("/proc"), p -> p.getFileName().toString().matches("[0-9]+"))) {
            for (Path proc : procs) {
                try (DirectoryStream<Path> fds = Files.newDirectoryStream(proc.resolve("fd"))) {
                    for (Path fd : fds) {
                        String target = Files.readSymbolicLink(fd).toString();
                        if (target.startsWith("socket:[") && inodes.contains(target.substring(8, target.length() - 1))) {
                            String cmd = commandLine(proc);
                            long pid = Long.parseLong(proc.getFileName().toString());
                            return Optional.of(new Holder(pid, "pid " + pid + " (" + cmd + ")",
                                    cmd.contains("io.gpusockets.cli.Main backend") || cmd.contains("io.gpusockets.cli.Main worker")));
                        }
                    }
                } catch (IOException | SecurityException e) {
                    // another user's process, or gone
                }
            }
        } catch (IOException e) {
            return Optional.empty();
        }
        return Optional.empty();
    }

    /** The command line, with a class path's value left out (it says nothing here and runs long). */
    private static String commandLine(Path proc) {
        try {
            String[] args = new String(Files.readAllBytes(proc.resolve("cmdline")), java.nio.charset.StandardCharsets.UTF_8).split("\0");
            StringBuilder b = new StringBuilder();
            for (int i = 0; i < args.length; i++) {
                String a = i == 0 ? Path.of(args[0]).getFileName().toString() : args[i];
                b.append(i == 0 ? "" : " ").append(a);
                if ((a.equals("-cp") || a.equals("-classpath") || a.equals("--class-path")) && i + 1 < args.length) {
                    b.append(" ...");
                    i++;
                }
            }
            String s = b.toString().strip();
            return s.length() > 200 ? s.substring(0, 197) + "..." : s;
        } catch (IOException | RuntimeException e) {
            return "?";
        }
    }
}
