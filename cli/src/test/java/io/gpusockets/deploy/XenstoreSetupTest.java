package io.gpusockets.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * xen-config/gpusockets-xenstore-setup.sh with stand-ins for xenstore-read/-write/-chmod/-rm/-list
 * and xl that log their arguments: the paths and permissions it asks xenstore for.
 */
class XenstoreSetupTest {
    private static final Path SCRIPT = ShellScripts.root().resolve("xen-config/gpusockets-xenstore-setup.sh");

    @TempDir
    Path dir;
    Path bin;
    Path log;

    @BeforeEach
    void fakes() throws Exception {
        bin = dir.resolve("bin");
        log = dir.resolve("xenstore.log");
        for (String tool : List.of("xenstore-write", "xenstore-chmod", "xenstore-rm", "xenstore-list")) {
            ShellScripts.fakeCommand(bin, tool, "echo \"" + tool + " $*\" >>\"$FAKE_LOG\"");
        }
        ShellScripts.fakeCommand(bin, "xenstore-read", "[[ $1 == domid ]] && echo \"${FAKE_DOMID:-0}\"");
        ShellScripts.fakeCommand(bin, "xl", "[[ $1 == domid && $2 == guest1 ]] && echo 5 || exit 1");
    }

    private ShellScripts.Result setup(Map<String, String> env, String... args) throws Exception {
        Map<String, String> all = new java.util.HashMap<>(env);
        all.put("FAKE_LOG", log.toString());
        return ShellScripts.run(dir, bin, all, SCRIPT, args);
    }

    private List<String> calls() throws Exception {
        return Files.exists(log) ? Files.readAllLines(log) : List.of();
    }

    @Test
    void guestsByNameOrDomidGetADirectoryOnlyTheyCanReadAndTheListenOptionIsPrinted() throws Exception {
        ShellScripts.Result r = setup(Map.of(), "guest1", "6");
        assertEquals(0, r.status(), r::toString);
        assertEquals("--listen vchan://5/local/domain/0/data/gpusockets/5\n--listen vchan://6/local/domain/0/data/gpusockets/6\n", r.out());
        assertEquals(List.of(
                "xenstore-write /local/domain/0/data/gpusockets ", "xenstore-chmod /local/domain/0/data/gpusockets n0",
                "xenstore-write /local/domain/0/data/gpusockets/5 ", "xenstore-chmod /local/domain/0/data/gpusockets/5 n0 r5",
                "xenstore-write /local/domain/0/data/gpusockets/6 ", "xenstore-chmod /local/domain/0/data/gpusockets/6 n0 r6"), calls());
    }

    @Test
    void inADriverDomainThePathsAreUnderItsOwnData() throws Exception {
        ShellScripts.Result r = setup(Map.of("FAKE_DOMID", "1"), "5");
        assertEquals(0, r.status(), r::toString);
        assertEquals("--listen vchan://5/local/domain/1/data/gpusockets/5\n", r.out());
        assertTrue(calls().contains("xenstore-chmod /local/domain/1/data/gpusockets/5 n1 r5"), calls()::toString);
    }

    @Test
    void fromTheBackendsArgumentsOnlyVchanListenersCountAndRemoveUndoesThem() throws Exception {
        String[] args = {"--from-args", "--listen", "tcp://0.0.0.0:7070", "--listen", "vchan://7/local/domain/0/data/gpusockets/7",
                "--admin-socket", "/run/gpusockets/admin.sock", "--listen=vchan://8/local/domain/0/data/gpusockets/8"};
        ShellScripts.Result r = setup(Map.of(), args);
        assertEquals(0, r.status(), r::toString);
        assertEquals("", r.out());
        assertTrue(calls().contains("xenstore-chmod /local/domain/0/data/gpusockets/7 n0 r7"), calls()::toString);
        assertTrue(calls().contains("xenstore-chmod /local/domain/0/data/gpusockets/8 n0 r8"), calls()::toString);
        assertEquals(6, calls().size(), calls()::toString);

        Files.delete(log);
        String[] remove = new String[args.length + 1];
        remove[0] = "--remove";
        System.arraycopy(args, 0, remove, 1, args.length);
        ShellScripts.Result removed = setup(Map.of(), remove);
        assertEquals(0, removed.status(), removed::toString);
        assertEquals(List.of("xenstore-rm /local/domain/0/data/gpusockets/7", "xenstore-rm /local/domain/0/data/gpusockets/8"), calls());
    }

    @Test
    void withoutVchanListenersNothingIsAskedOfXenstore() throws Exception {
        ShellScripts.Result r = setup(Map.of(), "--from-args", "--listen", "tcp://127.0.0.1:7070");
        assertEquals(0, r.status(), r::toString);
        assertEquals(List.of(), calls());
    }

    @Test
    void mistakesAreRefusedBeforeXenstoreIsTouched() throws Exception {
        assertEquals(2, setup(Map.of(), "0").status(), "a vchan to itself");
        assertEquals(1, setup(Map.of(), "no-such-guest").status());
        ShellScripts.Result bad = setup(Map.of(), "--from-args", "--listen", "vchan://x/local/domain/0/data/gpusockets/5");
        assertEquals(2, bad.status(), bad::toString);
        assertTrue(bad.err().contains("not a vchan://DOMID/PATH listener"), bad::toString);
        assertEquals(2, setup(Map.of()).status(), "no guest");
        assertEquals(List.of(), calls());
    }
}
