package io.gpusockets.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * scripts/install-backend as a bundle's bin/install-backend, installing a small bundle (the real
 * launcher script, unit, config and xenstore script; stand-ins for the jars and the runtime) into a
 * throwaway root (DESTDIR), with fake useradd, userdel and systemctl on PATH that log their arguments.
 * Nothing outside the temporary folder is touched.
 */
class InstallBackendTest {
    private static final Path ROOT = ShellScripts.root();
    private static final String PREFIX = "/srv/gpusockets";

    @TempDir
    Path dir;
    Path bundle;
    Path dest;
    Path bin;
    Path log;

    @BeforeEach
    void bundleAndRoot() throws IOException {
        bundle = dir.resolve("bundle/gpusockets");
        dest = dir.resolve("root");
        bin = dir.resolve("fake-bin");
        log = dir.resolve("commands.log");
        Files.createDirectories(bundle.resolve("lib"));
        Files.createDirectories(bundle.resolve("runtime/lib"));
        Files.createDirectories(bundle.resolve("xen-config"));
        copy(ROOT.resolve("scripts/install-backend"), bundle.resolve("bin/install-backend"), "rwxr-xr-x");
        copy(ROOT.resolve("xen-config/gpusockets-xenstore-setup.sh"), bundle.resolve("bin/gpusockets-xenstore-setup"), "rwxr-xr-x");
        for (String f : List.of("gpusockets-backend.service", "backend.conf", "README.md")) {
            copy(ROOT.resolve("xen-config").resolve(f), bundle.resolve("xen-config").resolve(f), "rw-r--r--");
        }
        ShellScripts.fakeCommand(bundle.resolve("bin"), "gpusockets", "echo gpusockets \"$@\"");
        ShellScripts.fakeCommand(bundle.resolve("runtime/bin"), "java", "echo 'openjdk version \"25\"'");
        Files.writeString(bundle.resolve("lib/gpusockets-cli-0.1.0.jar"), "cli jar");
        Files.writeString(bundle.resolve("lib/picocli-4.7.jar"), "picocli jar");
        Files.writeString(bundle.resolve("runtime/lib/modules"), "modules");
        Files.createSymbolicLink(bundle.resolve("runtime/lib/libjvm-link.so"), Path.of("modules"));
        Files.writeString(bundle.resolve("BUILD-INFO"), "built: test\n");

        // The throwaway root: a video group, systemd "running" there, an empty passwd.
        Files.createDirectories(dest.resolve("etc"));
        Files.createDirectories(dest.resolve("run/systemd/system"));
        Files.writeString(dest.resolve("etc/group"), "root:x:0:\nvideo:x:44:\n");
        Files.writeString(dest.resolve("etc/passwd"), "root:x:0:0:root:/root:/bin/bash\n");
        // useradd --prefix DIR ...: logs, and adds the user to DIR/etc/passwd as the real one would.
        ShellScripts.fakeCommand(bin, "useradd", """
                echo "useradd $*" >>"$FAKE_LOG"
                [[ $1 == --prefix ]] || { echo "useradd without --prefix would change the real /" >&2; exit 9; }
                echo "${!#}:x:999:999::/nonexistent:/usr/sbin/nologin" >>"$2/etc/passwd"
                """);
        ShellScripts.fakeCommand(bin, "userdel", """
                echo "userdel $*" >>"$FAKE_LOG"
                [[ $1 == --prefix ]] || exit 9
                sed -i "/^${!#}:/d" "$2/etc/passwd"
                """);
        ShellScripts.fakeCommand(bin, "systemctl", "echo \"systemctl $*\" >>\"$FAKE_LOG\"");
    }

    private static void copy(Path from, Path to, String mode) throws IOException {
        Files.createDirectories(to.getParent());
        Files.copy(from, to);
        Files.setPosixFilePermissions(to, PosixFilePermissions.fromString(mode));
    }

    private ShellScripts.Result installBackend(String... args) throws Exception {
        return ShellScripts.run(dir, bin, Map.of("DESTDIR", dest.toString(), "FAKE_LOG", log.toString()),
                bundle.resolve("bin/install-backend"), args);
    }

    private List<String> commands() throws IOException {
        return Files.exists(log) ? Files.readAllLines(log) : List.of();
    }

    /** Every file and link under the root: path -> mode and SHA-256 (or link target). */
    private Map<String, String> snapshot() throws Exception {
        Map<String, String> files = new TreeMap<>();
        try (Stream<Path> all = Files.walk(dest)) {
            for (Path p : (Iterable<Path>) all::iterator) {
                String rel = "/" + dest.relativize(p);
                if (Files.isSymbolicLink(p)) {
                    files.put(rel, "-> " + Files.readSymbolicLink(p));
                } else if (Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)) {
                    byte[] sha = MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(p));
                    files.put(rel, PosixFilePermissions.toString(Files.getPosixFilePermissions(p)) + " " + HexFormat.of().formatHex(sha));
                }
            }
        }
        return files;
    }

    private Path at(String absolute) {
        return dest.resolve(absolute.substring(1));
    }

    @Test
    void systemInstallIsCompleteThenChangesNothingThenUninstallLeavesOnlyTheConfig() throws Exception {
        Map<String, String> before = snapshot();

        ShellScripts.Result first = installBackend("--prefix", PREFIX, "--system");
        assertEquals(0, first.status(), first::toString);
        assertTrue(Files.isExecutable(at(PREFIX + "/bin/gpusockets")));
        assertTrue(Files.isExecutable(at(PREFIX + "/bin/gpusockets-xenstore-setup")));
        assertTrue(Files.isExecutable(at(PREFIX + "/runtime/bin/java")));
        assertEquals("cli jar", Files.readString(at(PREFIX + "/lib/gpusockets-cli-0.1.0.jar")));
        assertEquals(Path.of("modules"), Files.readSymbolicLink(at(PREFIX + "/runtime/lib/libjvm-link.so")));
        assertEquals(Files.readString(ROOT.resolve("xen-config/backend.conf")), Files.readString(at("/etc/gpusockets/backend.conf")));
        String unit = Files.readString(at("/etc/systemd/system/gpusockets-backend.service"));
        assertTrue(unit.contains("\nExecStart=" + PREFIX + "/bin/gpusockets backend $GPUSOCKETS_BACKEND_ARGS\n"), unit);
        assertTrue(unit.contains("\nExecStartPre=+" + PREFIX + "/bin/gpusockets-xenstore-setup --from-args $GPUSOCKETS_BACKEND_ARGS\n"), unit);
        assertTrue(unit.contains("\nEnvironmentFile=/etc/gpusockets/backend.conf\n"), unit);
        assertTrue(unit.contains("\nUser=gpusockets\n") && unit.contains("\nRestart=on-failure\n"), unit);
        assertFalse(unit.contains("/opt/gpusockets"), "every path of the template replaced: " + unit);
        assertEquals("rw-r--r--", PosixFilePermissions.toString(Files.getPosixFilePermissions(at("/etc/systemd/system/gpusockets-backend.service"))));
        assertTrue(Files.readString(at("/etc/passwd")).contains("\ngpusockets:x:"), "service user made");
        assertEquals(List.of("useradd --prefix " + dest + " --system --user-group --no-create-home --home-dir /nonexistent"
                + " --shell /usr/sbin/nologin --comment GPUsockets backend --groups video gpusockets", "systemctl daemon-reload"), commands());
        assertTrue(first.out().contains("systemctl enable --now gpusockets-backend"), first::toString);
        Map<String, String> installed = snapshot();

        ShellScripts.Result second = installBackend("--prefix", PREFIX, "--system");
        assertEquals(0, second.status(), second::toString);
        assertTrue(second.err().contains("nothing to change: " + PREFIX + " already holds the bundle"), second::toString);
        assertEquals(installed, snapshot(), "a second install changes no file, mode or link");
        assertEquals(2, commands().size(), "no second useradd and no daemon-reload: " + commands());

        ShellScripts.Result removed = installBackend("--prefix", PREFIX, "--system", "--uninstall");
        assertEquals(0, removed.status(), removed::toString);
        assertTrue(removed.err().contains("kept the config /etc/gpusockets/backend.conf"), removed::toString);
        assertEquals(List.of("systemctl disable --now gpusockets-backend.service", "systemctl daemon-reload"), commands().subList(2, 4));
        Map<String, String> left = snapshot();
        assertEquals(installed.get("/etc/gpusockets/backend.conf"), left.remove("/etc/gpusockets/backend.conf"));
        assertTrue(left.remove("/etc/passwd").length() > 0);
        before.remove("/etc/passwd");
        assertEquals(before, left, "nothing but the config (and the user) is left");
        assertFalse(Files.exists(at(PREFIX)), "the prefix folder goes when empty");
    }

    @Test
    void anEditedConfigIsKeptWithTheNewDefaultBesideItAndPurgeRemovesBothAndTheUser() throws Exception {
        assertEquals(0, installBackend("--prefix", PREFIX, "--system").status());
        Path conf = at("/etc/gpusockets/backend.conf");
        Files.writeString(conf, "GPUSOCKETS_BACKEND_ARGS=\"--listen tcp://0.0.0.0:7070\"\n");

        ShellScripts.Result again = installBackend("--prefix", PREFIX, "--system");
        assertEquals(0, again.status(), again::toString);
        assertEquals("GPUSOCKETS_BACKEND_ARGS=\"--listen tcp://0.0.0.0:7070\"\n", Files.readString(conf));
        assertEquals(Files.readString(ROOT.resolve("xen-config/backend.conf")), Files.readString(at("/etc/gpusockets/backend.conf.new")));
        assertTrue(again.err().contains("kept your /etc/gpusockets/backend.conf"), again::toString);
        Map<String, String> kept = snapshot();
        ShellScripts.Result third = installBackend("--prefix", PREFIX, "--system");
        assertTrue(third.err().contains("nothing to change"), third::toString);
        assertEquals(kept, snapshot());

        ShellScripts.Result purged = installBackend("--prefix", PREFIX, "--system", "--uninstall", "--purge");
        assertEquals(0, purged.status(), purged::toString);
        assertFalse(Files.exists(conf));
        assertFalse(Files.exists(at("/etc/gpusockets")));
        assertTrue(commands().contains("userdel --prefix " + dest + " gpusockets"), commands()::toString);
        assertFalse(Files.readString(at("/etc/passwd")).contains("gpusockets"));
    }

    @Test
    void withoutSystemTheConfigAndUnitStayInThePrefixAndNothingSystemWideRuns() throws Exception {
        ShellScripts.Result r = installBackend("--prefix", PREFIX);
        assertEquals(0, r.status(), r::toString);
        assertTrue(Files.isRegularFile(at(PREFIX + "/etc/backend.conf")));
        String unit = Files.readString(at(PREFIX + "/share/systemd/gpusockets-backend.service"));
        assertTrue(unit.contains("\nEnvironmentFile=" + PREFIX + "/etc/backend.conf\n"), unit);
        assertFalse(Files.exists(at("/etc/systemd")), "no system unit");
        assertFalse(Files.exists(at("/etc/gpusockets")), "no system config");
        assertEquals(List.of(), commands(), "no useradd, no systemctl");

        assertEquals(0, installBackend("--prefix", PREFIX, "--uninstall").status());
        try (Stream<Path> left = Files.walk(at(PREFIX))) {
            assertEquals(List.of(at(PREFIX), at(PREFIX + "/etc"), at(PREFIX + "/etc/backend.conf")), left.sorted().toList());
        }
    }

    @Test
    void systemctlRunsOnlyWhereSystemdRuns() throws Exception {
        Files.delete(dest.resolve("run/systemd/system"));
        ShellScripts.Result r = installBackend("--prefix", PREFIX, "--system");
        assertEquals(0, r.status(), r::toString);
        assertTrue(Files.isRegularFile(at("/etc/systemd/system/gpusockets-backend.service")));
        assertTrue(commands().stream().noneMatch(c -> c.startsWith("systemctl")), commands()::toString);
    }

    @Test
    void withoutAVideoGroupTheUserGetsNoneAndItSaysSo() throws Exception {
        Files.writeString(dest.resolve("etc/group"), "root:x:0:\n");
        ShellScripts.Result r = installBackend("--prefix", PREFIX, "--system");
        assertEquals(0, r.status(), r::toString);
        assertTrue(r.err().contains("no group video here"), r::toString);
        assertFalse(commands().get(0).contains("--groups"), commands()::toString);
    }

    @Test
    void aNewBundleReplacesChangedFilesAndRemovesTheOnesItNoLongerHas() throws Exception {
        assertEquals(0, installBackend("--prefix", PREFIX).status());
        Files.writeString(bundle.resolve("lib/gpusockets-cli-0.1.0.jar"), "cli jar, rebuilt");
        Files.delete(bundle.resolve("lib/picocli-4.7.jar"));
        Files.writeString(bundle.resolve("lib/picocli-4.8.jar"), "picocli jar, newer");

        ShellScripts.Result r = installBackend("--prefix", PREFIX);
        assertEquals(0, r.status(), r::toString);
        assertEquals("cli jar, rebuilt", Files.readString(at(PREFIX + "/lib/gpusockets-cli-0.1.0.jar")));
        assertFalse(Files.exists(at(PREFIX + "/lib/picocli-4.7.jar")), "a jar the bundle dropped must go: the launcher loads lib/*");
        assertTrue(Files.exists(at(PREFIX + "/lib/picocli-4.8.jar")));
        assertTrue(installBackend("--prefix", PREFIX).err().contains("nothing to change"));
    }

    @Test
    void aPrefixHoldingSomethingElseIsRefused() throws Exception {
        Files.createDirectories(at(PREFIX + "/runtime/bin"));
        Files.writeString(at(PREFIX + "/runtime/bin/java"), "someone else's");
        ShellScripts.Result r = installBackend("--prefix", PREFIX);
        assertEquals(1, r.status(), r::toString);
        assertTrue(r.err().contains(PREFIX + "/runtime exists and was not installed by install-backend"), r::toString);
        assertEquals("someone else's", Files.readString(at(PREFIX + "/runtime/bin/java")));
    }

    @Test
    void badArgumentsAndUninstallingNothingFail() throws Exception {
        assertEquals(2, installBackend().status());
        assertEquals(2, installBackend("--prefix", PREFIX, "--purge").status());
        assertEquals(2, installBackend("--prefix", PREFIX, "--bogus").status());
        ShellScripts.Result r = installBackend("--prefix", PREFIX, "--uninstall");
        assertEquals(1, r.status(), r::toString);
        assertTrue(r.err().contains("nothing was installed with --prefix " + PREFIX), r::toString);
    }
}
