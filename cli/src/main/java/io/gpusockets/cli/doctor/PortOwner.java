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
 * the answer says how to ask.
 */
public final class PortOwner {
    private static final String LISTEN = "0A";

    private PortOwner() {
    }

    /** E.g. "pid 4242 (java ... gpusockets backend ...)", or how to find it when /proc does not tell. */
    public static String describe(int port) {
        Set<String> inodes = listeningInodes(port);
        String how = "sudo ss -ltnp 'sport = :" + port + "'";
        if (inodes.isEmpty()) {
            return "a listener this user cannot see (find it: " + how + ")";
        }
        return owner(inodes).orElse("a process of another user (find it: " + how + ")");
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

    private static Optional<String> owner(Set<String> inodes) {
        try (DirectoryStream<Path> procs = Files.newDirectoryStream(Path.of("/proc"), p -> p.getFileName().toString().matches("[0-9]+"))) {
            for (Path proc : procs) {
                try (DirectoryStream<Path> fds = Files.newDirectoryStream(proc.resolve("fd"))) {
                    for (Path fd : fds) {
                        String target = Files.readSymbolicLink(fd).toString();
                        if (target.startsWith("socket:[") && inodes.contains(target.substring(8, target.length() - 1))) {
                            return Optional.of("pid " + proc.getFileName() + " (" + commandLine(proc) + ")");
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

    private static String commandLine(Path proc) {
        try {
            String s = new String(Files.readAllBytes(proc.resolve("cmdline")), java.nio.charset.StandardCharsets.UTF_8)
                    .replace('\0', ' ').strip();
            return s.length() > 160 ? s.substring(0, 157) + "..." : s;
        } catch (IOException e) {
            return "?";
        }
    }
}
