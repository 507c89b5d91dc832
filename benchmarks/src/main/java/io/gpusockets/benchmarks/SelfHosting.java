package io.gpusockets.benchmarks;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/**
 * How to listen on a scheme on this machine, so that a client in the same process can connect. Each
 * endpoint gets its own {@code name} (the raw baselines and the backend listen side by side).
 */
public final class SelfHosting {

    /** A listen URI, or why there is none. */
    public record Recipe(TransportUri listen, String skipReason) {
        public boolean hostable() {
            return listen != null;
        }
    }

    /** Schemes this table knows, whether or not their transport is on the class path. */
    public static final List<String> KNOWN_SCHEMES = List.of("tcp", "unix", "fdunix", "ring", "vsock", "vchan");

    private SelfHosting() {
    }

    public static Recipe recipe(String scheme, Path tmpDir, String name) {
        return switch (scheme) {
            case "tcp" -> listen("tcp://127.0.0.1:0");
            case "unix" -> listen("unix://" + tmpDir.resolve(name + ".sock"));
            case "fdunix" -> listen("fdunix://" + tmpDir.resolve(name + "-fd.sock"));
            case "ring" -> listen("ring://bench-" + ProcessHandle.current().pid() + "-" + name);
            case "vsock" -> new Recipe(null, "needs vsock loopback (CID 1), which neither the dev nor the GPU machine has;"
                    + " measure it between a guest and its host");
            case "vchan" -> new Recipe(null, "needs two Xen domains");
            case "tls" -> new Recipe(null, "needs certificates, which the bench does not make yet (README, Encryption,"
                    + " gives its null-call cost against tcp)");
            default -> new Recipe(null, "no self-hosting recipe for this scheme in " + SelfHosting.class.getSimpleName());
        };
    }

    /** Why {@code scheme} cannot be measured here (its transport missing, or no recipe), or null. */
    public static String skipReason(String scheme, Path tmpDir) {
        return !Transports.byScheme().containsKey(scheme) ? "no transport on the class path"
                : recipe(scheme, tmpDir, "probe").skipReason();
    }

    /**
     * Makes {@code backend} listen on {@code scheme} as endpoint {@code name}, returning the URI a client connects to;
     * null, with "SCHEME: skipped (why)" added to {@code notes}, where the scheme cannot be measured here.
     */
    public static String listenOrNote(BackendServer backend, String scheme, Path tmpDir,
                                      String name, List<String> notes) throws IOException {
        String skip = skipReason(scheme, tmpDir);
        if (skip != null) {
            notes.add(scheme + ": skipped (" + skip + ")");
            return null;
        }
        return backend.listen(recipe(scheme, tmpDir, name).listen()).toString();
    }

    private static Recipe listen(String uri) {
        return new Recipe(TransportUri.parse(uri), null);
    }
}
