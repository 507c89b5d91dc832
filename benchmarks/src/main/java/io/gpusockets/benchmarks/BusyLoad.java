package io.gpusockets.benchmarks;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * N processes that do nothing but burn a core each, for {@code bench transports --busy N}: a machine whose
 * cores are oversubscribed by other work. Processes, not threads of the bench, so that the bench's own CPU
 * figures stay its own and the scheduler weighs them as it would another program. Each is a POSIX shell
 * loop ({@code /bin/sh}) that counts in its head and, every few tens of milliseconds, checks that its parent (the
 * bench) still lives: a bench that dies without {@link #close} leaves no loop running for long.
 */
final class BusyLoad implements AutoCloseable {
    /** Pure arithmetic in the shell, a parent check ({@code kill -0 $PPID}) between rounds. */
    static final String LOOP = "while kill -0 $PPID 2>/dev/null; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; done";

    private final List<Process> processes;

    private BusyLoad(List<Process> processes) {
        this.processes = processes;
    }

    /** Starts {@code n} busy processes (none for 0). */
    static BusyLoad start(int n) throws IOException {
        if (n < 0) {
            throw new IllegalArgumentException("busy processes: n=" + n);
        }
        List<Process> started = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                started.add(new ProcessBuilder("/bin/sh", "-c", LOOP)
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                        .redirectError(ProcessBuilder.Redirect.DISCARD).start());
            }
        } catch (IOException | RuntimeException e) {
            new BusyLoad(started).close();
            throw e;
        }
        return new BusyLoad(started);
    }

    int size() {
        return processes.size();
    }

    /** Kills them and waits until they are gone. */
    @Override
    public void close() {
        for (Process p : processes) {
            p.destroyForcibly();
        }
        for (Process p : processes) {
            try {
                p.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
