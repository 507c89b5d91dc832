package io.gpusockets.backend.isolation;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WorkerAotCacheTest {
    @TempDir
    Path dir;

    @AfterEach
    void clear() {
        System.clearProperty(WorkerAotCache.DIR_PROP_NAME);
    }

    private List<String> command(Path jar) {
        return List.of("/jdk/bin/java", "-Xmx256m", "-cp", jar.toString(), "io.gpusockets.cli.Main", "worker", "--emulated-uuid-seed", "7");
    }

    @Test
    void oneWorkerTrainsTheCacheAndTheWorkersAfterItMapIt() throws Exception {
        Path cacheDir = dir.resolve("cache");
        System.setProperty(WorkerAotCache.DIR_PROP_NAME, cacheDir.toString());
        Path jar = Files.writeString(dir.resolve("a.jar"), "jar");
        WorkerAotCache c = WorkerAotCache.forCommand(command(jar));
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(cacheDir)));
        List<String> first = c.options();
        assertTrue(first.getFirst().startsWith("-XX:AOTCacheOutput=" + c.file() + ".tmp-"), first.toString());
        assertEquals(List.of(), c.options(), "one worker trains at a time; the others start without");
        Files.writeString(Path.of(first.getFirst().substring("-XX:AOTCacheOutput=".length())), "cache"); // the JVM's doing
        c.exited(first);
        assertEquals(List.of("-XX:AOTCache=" + c.file()), c.options());
        try (var files = Files.list(cacheDir)) {
            assertEquals(List.of(c.file()), files.toList(), "the training output was moved into place");
        }
    }

    @Test
    void anotherJarOrOtherOptionsGiveAnotherCacheButTheProgramsArgumentsDoNot() throws Exception {
        Path jar = Files.writeString(dir.resolve("a.jar"), "jar");
        String key = WorkerAotCache.key(command(jar));
        List<String> otherSeed = command(jar).stream().map(a -> a.equals("7") ? "8" : a).toList();
        assertEquals(key, WorkerAotCache.key(otherSeed));
        List<String> otherHeap = command(jar).stream().map(a -> a.equals("-Xmx256m") ? "-Xmx512m" : a).toList();
        assertNotEquals(key, WorkerAotCache.key(otherHeap));
        Files.setLastModifiedTime(jar, FileTime.fromMillis(Files.getLastModifiedTime(jar).toMillis() + 1000));
        assertNotEquals(key, WorkerAotCache.key(command(jar)), "a rebuilt jar");
    }

    @Test
    void aDirectoryOthersCanWriteIsNotTrustedAndOffMeansNone() throws Exception {
        Path open = Files.createDirectory(dir.resolve("open"));
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxrwxrwx"));
        System.setProperty(WorkerAotCache.DIR_PROP_NAME, open.toString());
        assertNull(WorkerAotCache.forCommand(command(dir.resolve("a.jar"))));
        System.setProperty(WorkerAotCache.DIR_PROP_NAME, "off");
        assertNull(WorkerAotCache.forCommand(command(dir.resolve("a.jar"))));
    }

    @Test
    void aClassPathWithADirectoryKeepsNoCache() throws Exception {
        System.setProperty(WorkerAotCache.DIR_PROP_NAME, dir.resolve("cache").toString());
        Path classes = Files.createDirectory(dir.resolve("classes"));
        List<String> command = List.of("/jdk/bin/java", "-cp", dir.resolve("a.jar") + ":" + classes, "Main");
        assertEquals(classes.toString(), WorkerAotCache.classPathDirectory(command));
        assertNull(WorkerAotCache.forCommand(command));
    }
}
