package io.gpusockets.backend.isolation;

import java.util.ArrayList;
import java.util.List;

/**
 * The JVM options of a worker process (isolation mode process): the front's own options (system properties,
 * native access, module and logging settings carry over), less those that size or tune the front's JVM (heap,
 * pre-touch, GC choice, stack size, class data and AOT cache, a debugger's port), then the workers' defaults
 * ({@link #DEFAULTS}), then {@value #PROP_NAME} or {@value #ENV_NAME} (split on spaces), which may override any
 * of them: later JVM options win.
 */
public final class WorkerJvmOptions {
    /** Extra JVM options for every worker, after the defaults (split on spaces). */
    public static final String PROP_NAME = "gpusockets.worker.javaOptions";
    /** The same from the environment, where the system property is not set (services: backend.conf). */
    public static final String ENV_NAME = "GPUSOCKETS_WORKER_JAVA_OPTS";

    /** {@value #PROP_NAME}, else {@value #ENV_NAME}, else null. */
    public static String extra() {
        String p = System.getProperty(PROP_NAME);
        return p != null ? p : System.getenv(ENV_NAME);
    }

    /**
     * What every worker runs with unless {@value #PROP_NAME} says otherwise: nothing, so far. Measured for bursts
     * of sessions (benchmarks/RESULTS.md, issue 20) and not kept: the serial collector (no faster start, more
     * resident memory) and C1 only (a faster start, but the session's hot path at C1 speed for the worker's life).
     * What did cut a worker's start is its AOT cache ({@link WorkerAotCache}).
     */
    public static final List<String> DEFAULTS = List.of();

    /** Options of the front that must not reach a worker: they size the front, or would clash (a debugger's port). */
    private static final List<String> FRONT_ONLY = List.of("-Xms", "-Xmx", "-Xmn", "-Xss", "-XX:+AlwaysPreTouch",
            "-XX:-AlwaysPreTouch", "-XX:InitialHeapSize", "-XX:MaxHeapSize", "-XX:MinHeapSize", "-XX:MaxRAMPercentage",
            "-XX:InitialRAMPercentage", "-XX:MinRAMPercentage", "-XX:+UseSerialGC", "-XX:+UseParallelGC", "-XX:+UseG1GC",
            "-XX:+UseZGC", "-XX:+UseShenandoahGC", "-XX:+UseEpsilonGC", "-XX:SharedArchiveFile", "-XX:AOTCache",
            "-XX:AOTMode", "-XX:AOTCacheOutput", "-XX:AOTConfiguration", "-Xshare", "-agentlib:jdwp", "-Xdebug", "-Xrunjdwp",
            "-XX:ArchiveClassesAtExit", "-D" + PROP_NAME);

    private WorkerJvmOptions() {
    }

    /**
     * @param front the front JVM's input arguments ({@code RuntimeMXBean.getInputArguments()})
     * @param extra the value of {@value #PROP_NAME}, or null
     */
    public static List<String> of(List<String> front, String extra) {
        List<String> out = new ArrayList<>();
        for (String o : front) {
            if (FRONT_ONLY.stream().noneMatch(o::startsWith)) {
                out.add(o);
            }
        }
        out.addAll(DEFAULTS);
        if (extra != null && !extra.isBlank()) {
            out.addAll(List.of(extra.strip().split("\\s+")));
        }
        return out;
    }
}
