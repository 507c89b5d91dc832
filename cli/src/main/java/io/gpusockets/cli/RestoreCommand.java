package io.gpusockets.cli;

import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code gpusockets restore FILE}: asks a running backend, over its admin socket, to restore the session that
 * {@code gpusockets checkpoint} wrote to FILE (read by the backend, on its host). The session then waits, for
 * its grace period, for its program's frontend to resume it. Progress goes to stderr, the backend's summary
 * (JSON, with the session's id) to stdout. Exit status 0 when restored, 1 when refused or failed. Several FILEs: the
 * images of sessions checkpointed together ({@code gpusockets checkpoint SESSION SESSION... --to DIR}), restored
 * together, their IPC memory shared again, before any resumes.
 */
@Command(name = "restore", mixinStandardHelpOptions = true,
        description = "Restore a session from a `gpusockets checkpoint` image; its program then resumes it.")
final class RestoreCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Parameters(arity = "1..64", paramLabel = "FILE", description = "The image file the backend reads (a relative path is"
            + " taken from this directory); several: the images of sessions checkpointed together, restored together.")
    java.util.List<Path> files;

    @Option(names = "--socket", paramLabel = "PATH", description = "The restoring backend's admin socket. Default: $"
            + AdminClient.SOCKET_VARIABLE + ", else " + AdminClient.DEFAULT_SOCKET + ".")
    Path socket;

    @Override
    public Integer call() {
        String names = files.stream().map(f -> f.toAbsolutePath().normalize().toString())
                .collect(java.util.stream.Collectors.joining("\t"));
        return CheckpointCommand.run(spec, "restore", AdminClient.socket(socket), "restore " + names);
    }
}
