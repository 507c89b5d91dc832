package io.gpusockets.cli;

import io.gpusockets.frontend.FrontendConfig;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code gpusockets run}: one program through the frontend, nothing installed. The program finds our
 * libcuda.so.1 first on LD_LIBRARY_PATH, and that library starts its JVM from this CLI's own runtime
 * and class path (GPUSOCKETS_JAVA_HOME, GPUSOCKETS_CLASSPATH). Where libcuda.so.1 is comes from the
 * system property {@value #LIBDIR_PROPERTY}, which the launchers set.
 */
@Command(name = "run", mixinStandardHelpOptions = true, modelTransformer = RunCommand.StopAtProgram.class,
        customSynopsis = "gpusockets run --server URI [--] PROGRAM [ARGS...]",
        description = {"Run PROGRAM with its CUDA driver calls going to the backend at --server, through the "
                + "frontend's libcuda.so.1, without installing anything. Exits with PROGRAM's exit code.",
                "Options after PROGRAM are PROGRAM's."})
final class RunCommand implements Callable<Integer> {
    static final String LIBDIR_PROPERTY = "gpusockets.libdir";
    static final String JAVA_HOME_ENV = "GPUSOCKETS_JAVA_HOME";
    static final String CLASSPATH_ENV = "GPUSOCKETS_CLASSPATH";
    private static final String LIBCUDA = "libcuda.so.1";
    /** What a shell returns for a command it cannot run. */
    private static final int CANNOT_RUN = 127;

    @Option(names = "--server", required = true, paramLabel = "URI",
            description = "Backend: tcp://HOST:PORT or unix:///PATH; several, comma-separated, merge their devices.")
    String server;

    @Parameters(arity = "1..*", paramLabel = "PROGRAM", description = "The program, then its arguments.")
    List<String> command;

    @Spec
    CommandSpec spec;

    /** The program's own options are not ours: everything from PROGRAM on is passed as is. */
    static final class StopAtProgram implements CommandLine.IModelTransformer {
        @Override
        public CommandSpec transform(CommandSpec spec) {
            spec.parser().stopAtPositional(true);
            return spec;
        }
    }

    @Override
    public Integer call() throws Exception {
        PrintWriter err = spec.commandLine().getErr();
        String libdir = System.getProperty(LIBDIR_PROPERTY);
        if (libdir == null || libdir.isBlank()) {
            err.println("gpusockets run: where the frontend's " + LIBCUDA + " is is not known (system property "
                    + LIBDIR_PROPERTY + " unset): start the CLI with scripts/gpusockets or a bundle's bin/gpusockets");
            return 2;
        }
        Path lib = Path.of(libdir).toAbsolutePath().resolve(LIBCUDA);
        if (!Files.isRegularFile(lib)) {
            err.println("gpusockets run: " + lib + " missing: run ./mvnw install in the checkout (or package a bundle"
                    + " from a checkout that has it)");
            return 2;
        }
        ProcessBuilder pb = new ProcessBuilder(command).inheritIO();
        environment(pb.environment(), lib.getParent().toString(), server);
        Process p;
        try {
            p = pb.start();
        } catch (IOException e) {
            err.println("gpusockets run: cannot start " + command.getFirst() + ": " + e.getMessage());
            return CANNOT_RUN;
        }
        // On SIGTERM to us (not the terminal's SIGINT, which reaches the program too) the program goes with us.
        Thread stop = new Thread(() -> {
            p.destroy();
            try {
                p.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
                // exiting anyway
            }
        }, "gpusockets-run-stop");
        Runtime.getRuntime().addShutdownHook(stop);
        int code = p.waitFor();
        Runtime.getRuntime().removeShutdownHook(stop);
        return code;
    }

    /** The program's environment: ours, with the frontend's library first and its settings. */
    static void environment(Map<String, String> env, String libdir, String server) {
        String path = env.get("LD_LIBRARY_PATH");
        env.put("LD_LIBRARY_PATH", path == null || path.isEmpty() ? libdir : libdir + ":" + path);
        env.put(FrontendConfig.SERVER_ENV, server);
        env.put(JAVA_HOME_ENV, System.getProperty("java.home"));
        env.put(CLASSPATH_ENV, System.getProperty("java.class.path"));
    }
}
