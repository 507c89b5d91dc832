package io.gpusockets.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * deploy/slurm's Prolog, TaskProlog and Epilog as Slurm would run them, with a fake scontrol (and a
 * fake {@code gpusockets status --json}) first on PATH, SLURM_* variables set by hand, and a settings
 * file pointing every path into a temporary folder.
 */
class SlurmScriptsTest {
    private static final Path SLURM = ShellScripts.root().resolve("deploy/slurm");

    @TempDir
    Path dir;
    Path bin;
    Path run;
    Path conf;
    Path log;

    @BeforeEach
    void fakes() throws IOException {
        bin = dir.resolve("bin");
        run = dir.resolve("run/gpusockets/slurm");
        conf = dir.resolve("slurm.conf");
        log = dir.resolve("commands.log");
        Files.createDirectories(bin);
        try (InputStream in = SlurmScriptsTest.class.getResourceAsStream("fake-scontrol")) {
            Files.copy(in, bin.resolve("scontrol"));
        }
        Files.setPosixFilePermissions(bin.resolve("scontrol"), PosixFilePermissions.fromString("rwxr-xr-x"));
        settings("");
    }

    private void settings(String extra) throws IOException {
        Files.writeString(conf, "# test settings\nGPUSOCKETS_SLURM_RUNDIR=" + run + "\n"
                + "GPUSOCKETS_SLURM_BACKENDS=" + dir.resolve("slurm-backends") + "\n" + extra);
    }

    private Map<String, String> job(String id, String nodes, String scontrolJob) {
        Map<String, String> env = new HashMap<>();
        env.put("GPUSOCKETS_SLURM_CONF", conf.toString());
        env.put("FAKE_LOG", log.toString());
        env.put("SLURM_JOB_ID", id);
        env.put("SLURM_JOB_NODELIST", nodes);
        env.put("SLURM_JOB_UID", "1000");
        env.put("SLURMD_NODENAME", "cn02");
        env.put("FAKE_JOB", scontrolJob);
        return env;
    }

    private ShellScripts.Result script(String name, Map<String, String> env) throws Exception {
        return ShellScripts.run(dir, bin, env, SLURM.resolve(name));
    }

    private Path envFile(String id) {
        return run.resolve("job-" + id + ".env");
    }

    @Test
    void prologListsABackendPerNodeAndTheTaskPrologExportsIt() throws Exception {
        settings("GPUSOCKETS_SLURM_PORT=7443\nGPUSOCKETS_SLURM_SCHEME=tls\n");
        Map<String, String> env = job("42", "cn[01-02],gpu7", "JobId=42 JobName=train TresPerNode=gres/rgpu:2 NumNodes=3");

        ShellScripts.Result prolog = script("gpusockets-prolog.sh", env);
        assertEquals(0, prolog.status(), prolog::toString);
        assertEquals("GPUSOCKETS_SERVER=tls://cn01:7443,tls://cn02:7443,tls://gpu7:7443\n", Files.readString(envFile("42")));
        assertEquals("rw-r--r--", PosixFilePermissions.toString(Files.getPosixFilePermissions(envFile("42"))));
        String calls = Files.readString(log);
        assertTrue(calls.contains("scontrol show job -o 42\n"), calls);
        assertTrue(calls.contains("scontrol show hostnames cn[01-02],gpu7\n"), calls);
        try (var files = Files.list(run)) {
            assertEquals(1, files.count(), "only the job's file is left in " + run);
        }

        ShellScripts.Result task = script("gpusockets-taskprolog.sh", env);
        assertEquals(0, task.status(), task::toString);
        assertEquals("export GPUSOCKETS_SERVER=tls://cn01:7443,tls://cn02:7443,tls://gpu7:7443\n", task.out());
    }

    @Test
    void mapFileFirstMatchWinsNodeIsSubstitutedAndDuplicatesGo() throws Exception {
        Files.writeString(dir.resolve("slurm-backends"), """
                # comment
                cn0[1-2]   tcp://gpu1:7070
                cn03       tcp://gpu1:7070,tcp://gpu2:7070   trailing words are ignored
                cn*        tcp://{node}-ib:7070

                """);
        Map<String, String> env = job("7", "cn[01-04],login1", "JobId=7 TresPerNode=gres/rgpu:1");

        ShellScripts.Result prolog = script("gpusockets-prolog.sh", env);
        assertEquals(0, prolog.status(), prolog::toString);
        assertEquals("GPUSOCKETS_SERVER=tcp://gpu1:7070,tcp://gpu2:7070,tcp://cn04-ib:7070,tcp://login1:7070\n",
                Files.readString(envFile("7")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"JobId=9 TresPerNode=gres/rgpu:h200:2", "JobId=9 TresPerNode=gres:rgpu:1",
            "JobId=9 Gres=rgpu:4", "JobId=9 TresPerNode=gres/gpu:1,gres/rgpu:2"})
    void everyFormOfTheGresRequestCounts(String scontrolJob) throws Exception {
        ShellScripts.Result prolog = script("gpusockets-prolog.sh", job("9", "cn01", scontrolJob));
        assertEquals(0, prolog.status(), prolog::toString);
        assertEquals("GPUSOCKETS_SERVER=tcp://cn01:7070\n", Files.readString(envFile("9")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"JobId=5 TresPerNode=gres/gpu:1", "JobId=5 TresPerNode=gres/rgpux:1", "JobId=5 NumNodes=1", ""})
    void aJobWithoutTheGresGetsNoBackendAndAStaleFileGoes(String scontrolJob) throws Exception {
        Files.createDirectories(run);
        Files.writeString(envFile("5"), "GPUSOCKETS_SERVER=tcp://stale:1\n");
        Map<String, String> env = job("5", "cn01", scontrolJob);

        ShellScripts.Result prolog = script("gpusockets-prolog.sh", env);
        assertEquals(0, prolog.status(), "a Prolog that fails drains the node: " + prolog);
        assertFalse(Files.exists(envFile("5")), "no file for a job without the GRES");
        ShellScripts.Result task = script("gpusockets-taskprolog.sh", env);
        assertEquals(0, task.status(), task::toString);
        assertEquals("", task.out());
    }

    @Test
    void anEmptyGresSettingServesEveryJobWithoutAskingTheController() throws Exception {
        settings("GPUSOCKETS_SLURM_GRES=\n");
        ShellScripts.Result prolog = script("gpusockets-prolog.sh", job("11", "cn[08-09]", ""));
        assertEquals(0, prolog.status(), prolog::toString);
        assertEquals("GPUSOCKETS_SERVER=tcp://cn08:7070,tcp://cn09:7070\n", Files.readString(envFile("11")));
        assertFalse(Files.readString(log).contains("show job"), Files.readString(log));
    }

    @Test
    void nodeScopeListsOnlyTheNodeTheTaskRunsOn() throws Exception {
        settings("GPUSOCKETS_SLURM_SCOPE=node\n");
        ShellScripts.Result prolog = script("gpusockets-prolog.sh", job("12", "cn[01-03]", "JobId=12 TresPerNode=gres/rgpu:1"));
        assertEquals(0, prolog.status(), prolog::toString);
        assertEquals("GPUSOCKETS_SERVER=tcp://cn02:7070\n", Files.readString(envFile("12")));
    }

    @Test
    void aServerTheUserSetWinsOverTheJobs() throws Exception {
        Map<String, String> env = job("13", "cn01", "JobId=13 TresPerNode=gres/rgpu:1");
        assertEquals(0, script("gpusockets-prolog.sh", env).status());
        env.put("GPUSOCKETS_SERVER", "unix:///tmp/mine.sock");
        ShellScripts.Result task = script("gpusockets-taskprolog.sh", env);
        assertEquals(0, task.status(), task::toString);
        assertEquals("", task.out());
    }

    @Test
    void mapEntriesThatAreNotPlainUrisAreLeftOutAndNothingIsWrittenWithoutABackend() throws Exception {
        Files.writeString(dir.resolve("slurm-backends"), "cn01 tcp://gpu1:7070;touch${IFS}/tmp/x\ncn02 not-a-uri\n");
        ShellScripts.Result prolog = script("gpusockets-prolog.sh", job("14", "cn[01-02]", "JobId=14 TresPerNode=gres/rgpu:1"));
        assertEquals(0, prolog.status(), prolog::toString);
        assertTrue(prolog.err().contains("'tcp://gpu1:7070;touch${IFS}/tmp/x' (node cn01) is not a plain URI"), prolog::toString);
        assertTrue(prolog.err().contains("no backend for nodes cn01 cn02"), prolog::toString);
        assertFalse(Files.exists(envFile("14")));
    }

    @Test
    void taskPrologPrintsOnlyPlainGpusocketsSettings() throws Exception {
        Files.createDirectories(run);
        Files.writeString(envFile("15"), "GPUSOCKETS_SERVER=tcp://a:1,tcp://b:2\nLD_PRELOAD=/tmp/evil.so\nGPUSOCKETS_X=a b\n");
        ShellScripts.Result task = script("gpusockets-taskprolog.sh", job("15", "cn01", ""));
        assertEquals(0, task.status(), task::toString);
        assertEquals("export GPUSOCKETS_SERVER=tcp://a:1,tcp://b:2\n", task.out());
    }

    @Test
    void aJobIdThatIsNotOneWritesNothing() throws Exception {
        ShellScripts.Result prolog = script("gpusockets-prolog.sh", job("../../x", "cn01", "JobId=1 TresPerNode=gres/rgpu:1"));
        assertEquals(0, prolog.status(), prolog::toString);
        assertFalse(Files.exists(run), "nothing made for a bad job id");
        assertTrue(prolog.err().contains("not a job id"), prolog::toString);
    }

    /** A fake gpusockets whose status --json lists the sessions in the file $FAKE_SESSIONS, consumed one line per call. */
    private void fakeBackendOnThisNode(String... answers) throws IOException {
        Path sessions = dir.resolve("sessions");
        Files.write(sessions, java.util.List.of(answers));
        ShellScripts.fakeCommand(bin, "gpusockets", """
                printf 'gpusockets %s (socket %s)\\n' "$*" "$GPUSOCKETS_ADMIN_SOCKET" >>"$FAKE_LOG"
                [[ "$*" == "status --json" ]] || exit 2
                answer=$(head -n 1 "$FAKE_SESSIONS")
                [[ $(wc -l <"$FAKE_SESSIONS") -gt 1 ]] && sed -i 1d "$FAKE_SESSIONS"
                printf '{"time":1,"backend":"b","connections":1,"devices":[],"tenants":[],"sessions":[%s],"traffic":[]}\\n' "$answer"
                """);
        Files.writeString(dir.resolve("admin.sock"), "");
        settings("GPUSOCKETS_BIN=" + bin.resolve("gpusockets") + "\nGPUSOCKETS_ADMIN_SOCKET=" + dir.resolve("admin.sock") + "\n"
                + "GPUSOCKETS_SLURM_SESSION_WAIT=3\n");
    }

    private static String session(long id, String peer) {
        return "{\"id\":" + id + ",\"tenant\":\"default\",\"transport\":\"x\",\"peer\":\"" + peer + "\",\"memoryBytes\":0}";
    }

    @Test
    void epilogRemovesTheFileAndLogsTheJobsSessionsLeftOnThisNodesBackend() throws Exception {
        String left = session(1, "unix:///run/gpusockets/backend.sock (uid 1000)") + ","
                + session(2, "unix:///run/gpusockets/backend.sock (uid 1001)") + ","
                + session(3, "tcp://127.0.0.1:40000") + "," + session(4, "tcp://203.0.113.9:40001");
        fakeBackendOnThisNode(left);
        Map<String, String> env = job("21", "cn01", "JobId=21 TresPerNode=gres/rgpu:1");
        env.put("FAKE_SESSIONS", dir.resolve("sessions").toString());
        assertEquals(0, script("gpusockets-prolog.sh", env).status());
        assertTrue(Files.exists(envFile("21")));

        ShellScripts.Result epilog = script("gpusockets-epilog.sh", env);
        assertEquals(0, epilog.status(), "a failing Epilog drains the node: " + epilog);
        assertFalse(Files.exists(envFile("21")));
        assertTrue(epilog.err().contains("still open on the backend 3 s after the job: "
                + "unix:///run/gpusockets/backend.sock (uid 1000); tcp://127.0.0.1:40000"), epilog::toString);
        assertFalse(epilog.err().contains("uid 1001"), epilog::toString);
        assertFalse(epilog.err().contains("203.0.113.9"), epilog::toString);
        assertTrue(Files.readString(log).contains("gpusockets status --json (socket " + dir.resolve("admin.sock") + ")"));
    }

    @Test
    void epilogIsQuietWhenTheJobsSessionsEndWhileItWaits() throws Exception {
        fakeBackendOnThisNode(session(1, "unix:///run/gpusockets/backend.sock (uid 1000)"), "");
        Map<String, String> env = job("22", "cn01", "");
        env.put("FAKE_SESSIONS", dir.resolve("sessions").toString());
        ShellScripts.Result epilog = script("gpusockets-epilog.sh", env);
        assertEquals(0, epilog.status(), epilog::toString);
        assertEquals("", epilog.err());
        assertEquals(2, Files.readString(log).lines().filter(l -> l.startsWith("gpusockets status")).count(), Files.readString(log));
    }

    @Test
    void epilogOnANodeWithoutABackendOnlyRemovesTheFile() throws Exception {
        Files.createDirectories(run);
        Files.writeString(envFile("23"), "GPUSOCKETS_SERVER=tcp://a:1\n");
        settings("GPUSOCKETS_ADMIN_SOCKET=" + dir.resolve("no-such.sock") + "\nGPUSOCKETS_BIN=" + bin.resolve("gpusockets") + "\n");
        ShellScripts.fakeCommand(bin, "gpusockets", "echo called >>\"$FAKE_LOG\"; exit 3");
        ShellScripts.Result epilog = script("gpusockets-epilog.sh", job("23", "cn01", ""));
        assertEquals(0, epilog.status(), epilog::toString);
        assertFalse(Files.exists(envFile("23")));
        assertFalse(Files.exists(log) && Files.readString(log).contains("called"));
    }
}
