package io.gpusockets.cli;

import io.gpusockets.frontend.RemoteCudaDriver;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** {@code gpusockets}: the command line (scripts/gpusockets and the bundle's bin/gpusockets run this). */
@Command(name = "gpusockets", mixinStandardHelpOptions = true, versionProvider = Main.Version.class,
        description = "Transparent CUDA driver API remoting: serve a GPU to remote programs, try it, test it.",
        subcommands = {BackendCommand.class, WorkerCommand.class, DemoCommand.class, GpuSuiteCommand.class, RunCommand.class, SoakCommand.class, StatusCommand.class, CheckpointCommand.class, RestoreCommand.class, MigrateCommand.class, DoctorCommand.class, CommandLine.HelpCommand.class})
public final class Main {

    public static void main(String[] args) {
        // One line per log record: "06:31:45 INFO gpusockets.session: session 1 ended ..."
        // (java.logging's formatter in a full JDK, the JDK's fallback logger in the jlinked bundle)
        for (String prop : new String[] {"java.util.logging.SimpleFormatter.format", "jdk.system.logger.format"}) {
            if (System.getProperty(prop) == null) {
                System.setProperty(prop, "%1$tT %4$s %3$s: %5$s%6$s%n");
            }
        }
        GpuSuiteCommand.useRemoteFactory(RemoteCudaDriver::connect);
        System.exit(commandLine(CommandLine.defaultFactory()).execute(args));
    }

    /** The command line as main runs it; tests pass a factory of their own. */
    static CommandLine commandLine(CommandLine.IFactory factory) {
        return new CommandLine(new Main(), factory).setCaseInsensitiveEnumValuesAllowed(true)
                .setParameterExceptionHandler(Main::badInput);
    }

    /**
     * Bad input exits 2 (picocli's usage code) with a short message. A word where a command goes is an
     * unknown command, said so with the commands there are (picocli's default is "Unmatched argument at
     * index 0" followed by the whole usage).
     */
    static int badInput(CommandLine.ParameterException e, String[] args) {
        CommandLine cmd = e.getCommandLine();
        java.io.PrintWriter err = cmd.getErr();
        String name = cmd.getCommandSpec().qualifiedName();
        if (e instanceof CommandLine.UnmatchedArgumentException u && !cmd.getSubcommands().isEmpty()
                && cmd.getCommandSpec().positionalParameters().isEmpty() && !u.getUnmatched().isEmpty()
                && !u.getUnmatched().getFirst().startsWith("-")) {
            err.println(name + ": unknown command '" + u.getUnmatched().getFirst() + "'");
            java.util.List<String> commands = cmd.getSubcommands().entrySet().stream()
                    .filter(s -> !s.getValue().getCommandSpec().usageMessage().hidden()).map(java.util.Map.Entry::getKey).toList();
            err.println("Commands: " + String.join(", ", commands));
            err.println("See '" + name + " --help'.");
        } else {
            err.println(e.getMessage());
            if (!CommandLine.UnmatchedArgumentException.printSuggestions(e, err)) {
                cmd.usage(err);
            }
        }
        err.flush();
        return cmd.getCommandSpec().exitCodeOnInvalidInput();
    }

    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            String v = Main.class.getPackage().getImplementationVersion();
            return new String[] {"gpusockets " + (v != null ? v : "development build")};
        }
    }
}
