package io.gpusockets.backend.isolation;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class WorkerJvmOptionsTest {

    /** A soak's -Xms512m with pre-touch, or a debugger's port, would be paid (or clash) once per session. */
    @Test
    void theFrontsSizingAndDebuggerStayWithTheFrontAndExtraOptionsComeLast() {
        List<String> front = List.of("--enable-native-access=ALL-UNNAMED", "-Xms512m", "-Xmx512m", "-XX:+AlwaysPreTouch",
                "-XX:+UseSerialGC", "-Xss2m", "-XX:MaxRAMPercentage=50", "-Dgpusockets.backend.laneSpinMicros=20",
                "-agentlib:jdwp=transport=dt_socket,server=y,address=5005", "-XX:AOTCache=/x/front.aot",
                "-Dgpusockets.worker.javaOptions=-Xmx1g", "-Xshare:off", "-XX:NativeMemoryTracking=summary");
        List<String> expected = new ArrayList<>(List.of("--enable-native-access=ALL-UNNAMED",
                "-Dgpusockets.backend.laneSpinMicros=20", "-XX:NativeMemoryTracking=summary"));
        expected.addAll(WorkerJvmOptions.DEFAULTS);
        expected.addAll(List.of("-Xmx1g", "-XX:+UseParallelGC"));
        assertEquals(expected, WorkerJvmOptions.of(front, "  -Xmx1g   -XX:+UseParallelGC "));
        expected.removeAll(List.of("-Xmx1g", "-XX:+UseParallelGC"));
        assertEquals(expected, WorkerJvmOptions.of(front, null));
    }
}
