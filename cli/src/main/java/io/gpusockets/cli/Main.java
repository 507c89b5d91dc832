package io.gpusockets.cli;

import io.gpusockets.frontend.RemoteCudaDriver;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** {@code gpusockets}: the command line (scripts/gpusockets and the bundle's bin/gpusockets run this). */
@Command(name = "gpusockets", mixinStandardHelpOptions = true, versionProvider = Main.Version.class,
        description = "Transparent CUDA driver API remoting: serve a GPU to remote programs, try it, test it.",
        subcommands = {BackendCommand.class, WorkerCommand.class, DemoCommand.class, GpuSuiteCommand.class, RunCommand.class, SoakCommand.class, StatusCommand.class, CommandLine.HelpCommand.class})
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
        int code = new CommandLine(new Main()).setCaseInsensitiveEnumValuesAllowed(true).execute(args);
        System.exit(code);
    }

    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            String v = Main.class.getPackage().getImplementationVersion();
            return new String[] {"gpusockets " + (v != null ? v : "development build")};
        }
    }
}
