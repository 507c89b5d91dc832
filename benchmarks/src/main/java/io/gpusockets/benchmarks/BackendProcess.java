package io.gpusockets.benchmarks;

import io.gpusockets.cli.DeviceChoice;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * {@code gpusockets backend} in a JVM of its own, for the benches whose backend must not share the bench's process:
 * this JVM's java and class path with {@code --enable-native-access=ALL-UNNAMED}, {@code backend --device D} and the
 * bench's arguments. On the real driver a backend in the bench's process would reserve its device allocations'
 * addresses in the bench's address space (UVA), where the frontend's guest mappings of managed memory or of a
 * restored session's window must go too; a process of its own keeps them apart.
 * <p>
 * A reader thread keeps every output line (stdout and stderr together) in {@link #lines} (a bench's backend says
 * little: the lines are not bounded) and, when a log file is given, writes each there as it comes. {@link #await}
 * waits for a line, {@link #listening} for the URIs of the "listening on" lines, both failing with the output's tail
 * when the time runs out or the backend ends first; {@link #close} ends the process (SIGTERM, after 30 s SIGKILL).
 */
final class BackendProcess implements AutoCloseable {
    private static final String LISTENING = "listening on ";

    final Process process;
    final List<String> lines = new CopyOnWriteArrayList<>();
    private final String name;

    /**
     * Starts {@code backend --device device} with {@code args} ({@code device} auto is passed as is: the child decides);
     * {@code log} null keeps its output in memory only.
     */
    BackendProcess(String name, DeviceChoice device, List<String> args, Path log) throws IOException {
        this.name = name;
        List<String> cmd = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElse("java"),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                "io.gpusockets.cli.Main", "backend", "--device", device.name().toLowerCase(Locale.ROOT)));
        cmd.addAll(args);
        process = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        PrintStream w = log == null ? null : new PrintStream(Files.newOutputStream(log), true, StandardCharsets.UTF_8);
        Thread.ofPlatform().daemon().name("backend-" + name + "-output").start(() -> {
            try (r) {
                for (String line; (line = r.readLine()) != null; ) {
                    if (w != null) { // first: a line seen in lines is in the log too
                        w.println(line); // a log file that went (the bench's folder deleted) is not needed any more
                    }
                    lines.add(line);
                }
            } catch (IOException ignored) {
                // the process ended
            } finally {
                if (w != null) {
                    w.close();
                }
            }
        });
    }

    /** The first line containing {@code text}, waited for at most {@code seconds}. */
    String await(String text, int seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (true) {
            boolean ended = !process.isAlive();
            if (ended) {
                Thread.sleep(100); // the reader may still hold the last lines
            }
            for (String l : lines) {
                if (l.contains(text)) {
                    return l;
                }
            }
            if (ended) {
                throw new IllegalStateException("backend " + name + " ended (" + process.exitValue() + ") before '" + text
                        + "': " + tail());
            }
            if (System.nanoTime() >= deadline) {
                throw new IllegalStateException("backend " + name + ": no '" + text + "' within " + seconds + " s: " + tail());
            }
            Thread.sleep(10);
        }
    }

    /**
     * The URIs of the first {@code count} distinct "listening on URI" lines (in their order), waited for at most
     * {@code seconds}.
     */
    List<String> listening(int count, int seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (true) {
            boolean ended = !process.isAlive();
            if (ended) {
                Thread.sleep(100);
            }
            List<String> uris = new ArrayList<>();
            for (String l : lines) {
                int at = l.indexOf(LISTENING);
                if (at >= 0) { // "listening on URI", perhaps followed by what it serves
                    String uri = l.substring(at + LISTENING.length()).strip().split("\\s+")[0];
                    if (!uris.contains(uri)) {
                        uris.add(uri);
                    }
                }
            }
            if (uris.size() >= count) {
                return uris.subList(0, count);
            }
            if (ended) {
                throw new IllegalStateException("backend " + name + " ended (" + process.exitValue() + ") before it listened: "
                        + tail());
            }
            if (System.nanoTime() >= deadline) {
                throw new IllegalStateException("backend " + name + " did not listen within " + seconds + " s: " + tail());
            }
            Thread.sleep(10);
        }
    }

    /** The last 30 lines of its output. */
    String tail() {
        List<String> l = List.copyOf(lines);
        return String.join("\n", l.subList(Math.max(0, l.size() - 30), l.size()));
    }

    @Override
    public void close() throws InterruptedException {
        process.destroy();
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
        }
    }
}
