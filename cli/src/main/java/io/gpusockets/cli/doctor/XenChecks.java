package io.gpusockets.cli.doctor;

import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A vchan:// listener's needs (transport-vchan, xen-config/README.md): the Xen devices a server uses
 * (/dev/xen/gntalloc, /dev/xen/evtchn), libxenvchan, the xenstore tools, and the xenstore path of the
 * URI, which the set-up script makes and libxenvchan writes its ring's references under. The listener is
 * not bound: that would publish a ring in xenstore.
 */
final class XenChecks {
    private static final String LIBXENVCHAN = "libxenvchan.so.4.17";

    private XenChecks() {
    }

    static List<Check> forListener(TransportUri uri, Map<String, String> env) {
        List<Check> out = new ArrayList<>();
        String name = "listener " + uri + " (Xen)";
        String rest = uri.rest();
        int slash = rest.indexOf('/');
        String path = slash < 0 ? "" : rest.substring(slash);
        String domid = slash < 0 ? rest : rest.substring(0, slash);
        List<String> missing = new ArrayList<>();
        for (String dev : List.of("/dev/xen/gntalloc", "/dev/xen/evtchn")) {
            if (!Files.exists(Path.of(dev))) {
                missing.add(dev);
            }
        }
        if (!missing.isEmpty()) {
            out.add(Check.fail(name, "no " + String.join(", ", missing) + ": this is not a Xen domain, or its Xen devices are not loaded",
                    "run the backend in the GPU's Xen domain (dom0 or a driver domain); there: modprobe xen-gntalloc xen-evtchn"));
        } else {
            out.add(Check.ok(name, "/dev/xen/gntalloc and /dev/xen/evtchn present"));
        }
        LoaderSearch.Found lib = LoaderSearch.find(LIBXENVCHAN, env);
        if (!lib.any()) {
            lib = LoaderSearch.find("libxenvchan.so", env);
        }
        out.add(lib.any() ? Check.ok("libxenvchan", lib.path() + " (" + lib.how() + ")")
                : Check.fail("libxenvchan", "not found: " + LIBXENVCHAN + " or libxenvchan.so", "apt-get install libxenmisc4.17"));
        String read = tool("xenstore-read", env);
        if (read == null || tool("xenstore-ls", env) == null) {
            out.add(Check.fail("xenstore tools", "xenstore-read / xenstore-ls not on PATH", "apt-get install xen-utils-common"));
            return out;
        }
        String answer = run(List.of(read, path));
        out.add(answer == null ? Check.ok("xenstore path " + path, "exists")
                : Check.fail("xenstore path " + path, "cannot read it: " + answer, "create it for guest " + domid + ": xenstore-write "
                        + path + " '' && xenstore-chmod " + path + " n0 r" + domid + " (xen-config/README.md)"));
        return out;
    }

    private static String tool(String name, Map<String, String> env) {
        for (String dir : env.getOrDefault("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").split(":")) {
            Path p = Path.of(dir.isEmpty() ? "." : dir, name);
            if (Files.isExecutable(p)) {
                return p.toString();
            }
        }
        return null;
    }

    /** Null when the command succeeds, else what it said. */
    private static String run(List<String> cmd) {
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String text;
            try (InputStream in = p.getInputStream()) {
                text = new String(in.readAllBytes(), StandardCharsets.UTF_8).strip();
            }
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return "no answer within 10 s (is xenstored running?)";
            }
            return p.exitValue() == 0 ? null : "exit " + p.exitValue() + (text.isEmpty() ? "" : ": " + text);
        } catch (IOException e) {
            return e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
    }
}
