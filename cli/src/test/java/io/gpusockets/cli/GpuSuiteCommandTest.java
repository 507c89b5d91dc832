package io.gpusockets.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.driver.NativeCudaDriver;
import io.gpusockets.backend.testing.FakeGpu;
import io.gpusockets.cli.workloads.MemcpyRoundTrips;
import io.gpusockets.cli.workloads.WorkloadSuite;
import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

class GpuSuiteCommandTest {
    static final WorkloadSuite.Options SMALL = new WorkloadSuite.Options(0, 7, 4099, 1000,
            MemcpyRoundTrips.sizes(4L << 10, 64L << 10, 4), 100);

    private final StringWriter output = new StringWriter();

    private int run(GpuSuiteCommand command, String... args) {
        return new CommandLine(command).setOut(new PrintWriter(output, true)).execute(args);
    }

    @Test
    void passesWhenBothSidesAgree() {
        int rc = run(new GpuSuiteCommand(uri -> new FakeGpu(), path -> new FakeGpu(), SMALL), "--server", "tcp://fake:1");
        assertEquals(0, rc, output.toString());
        String out = output.toString();
        assertTrue(out.contains("gpu-suite: PASS"), out);
        for (String name : WorkloadSuite.NAMES) {
            assertTrue(out.lines().anyMatch(l -> l.startsWith(name + " ") && l.endsWith("ok")), name + "\n" + out);
        }
        assertTrue(out.contains("64 KiB"), "memcpy table");
    }

    @Test
    void exitsNonZeroWhenOutputsDifferByOneUlp() {
        FakeGpu remote = new FakeGpu();
        remote.perturbBlockSum = true;
        int rc = run(new GpuSuiteCommand(uri -> remote, path -> new FakeGpu(), SMALL), "--server", "tcp://fake:1");
        assertEquals(GpuSuiteCommand.EXIT_MISMATCH, rc);
        String out = output.toString();
        assertTrue(out.lines().anyMatch(l -> l.startsWith("blockSum ") && l.contains("MISMATCH: outputs differ at byte 0")), out);
        assertTrue(out.contains("gpu-suite: FAIL"), out);
    }

    @Test
    void exitsNonZeroWhenTheRemoteFails() {
        FakeGpu remote = new FakeGpu();
        remote.failLaunches = true;
        int rc = run(new GpuSuiteCommand(uri -> remote, path -> new FakeGpu(), SMALL), "--server", "tcp://fake:1");
        assertEquals(GpuSuiteCommand.EXIT_MISMATCH, rc);
        assertTrue(output.toString().lines().anyMatch(l -> l.startsWith("vectorAdd ") && l.contains("FAIL remote")
                && l.contains("CUDA_ERROR_LAUNCH_FAILED")), output.toString());
    }

    @Test
    void saysWhatIsMissingWithoutARemoteFactory() {
        int rc = run(new GpuSuiteCommand(null, path -> new FakeGpu(), SMALL), "--server", "tcp://fake:1");
        assertEquals(GpuSuiteCommand.EXIT_SETUP, rc);
        assertTrue(output.toString().contains("no remote driver factory installed"), output.toString());
    }

    @Test
    void reportsANativeDriverThatCannotBeOpened() {
        int rc = run(new GpuSuiteCommand(uri -> new FakeGpu(), NativeCudaDriver::open, SMALL),
                "--server", "tcp://fake:1", "--libcuda", "/nonexistent/libcuda.so.1");
        assertEquals(GpuSuiteCommand.EXIT_SETUP, rc);
        assertTrue(output.toString().contains("cannot open the native driver"), output.toString());
        assertTrue(output.toString().contains("/nonexistent/libcuda.so.1"), output.toString());
    }

    @Test
    void reportsARemoteThatCannotBeReached() {
        int rc = run(new GpuSuiteCommand(uri -> {
            throw new java.io.IOException("connection refused");
        }, path -> new FakeGpu(), SMALL), "--server", "tcp://127.0.0.1:1");
        assertEquals(GpuSuiteCommand.EXIT_SETUP, rc);
        assertTrue(output.toString().contains("cannot connect to tcp://127.0.0.1:1: connection refused"), output.toString());
    }

    @Test
    void serverIsRequired() {
        StringWriter err = new StringWriter();
        int rc = new CommandLine(new GpuSuiteCommand(uri -> new FakeGpu())).setErr(new PrintWriter(err, true)).execute();
        assertEquals(CommandLine.ExitCode.USAGE, rc);
        assertTrue(err.toString().contains("--server"), err.toString());
    }
}
