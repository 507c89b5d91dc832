package io.gpusockets.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * shellcheck over every shell script of the repository, found by what the file says rather than by
 * its name: a shell shebang (sh, bash, dash, ksh, through env or not), a {@code # shellcheck shell=}
 * directive near the top (sourced libraries), or a .sh name. Build outputs (target/, dist/) and
 * hidden folders other than .ci/ are not looked at. Any finding, of any severity, fails the test.
 * Skipped where shellcheck is not installed.
 */
class ShellcheckTest {
    private static final Path ROOT = ShellScripts.root();
    private static final Pattern SHELL_SHEBANG = Pattern.compile("^#!\\s*\\S*/(?:env\\s+(?:-\\S+\\s+)*)?(?:ba|da|k)?sh(?:\\s.*)?$");
    private static final Pattern SHELL_DIRECTIVE = Pattern.compile("(?m)^#\\s*shellcheck\\s+shell=");

    static boolean isShellScript(Path file) throws IOException {
        if (file.getFileName().toString().endsWith(".sh")) {
            return true;
        }
        byte[] head;
        try (InputStream in = Files.newInputStream(file)) {
            head = in.readNBytes(512);
        }
        String text = new String(head, StandardCharsets.ISO_8859_1);
        if (text.indexOf('\0') >= 0) {
            return false;
        }
        String first = text.lines().findFirst().orElse("");
        return SHELL_SHEBANG.matcher(first).matches() || SHELL_DIRECTIVE.matcher(text).find();
    }

    static List<Path> shellScripts(Path root) throws IOException {
        List<Path> found = new ArrayList<>();
        for (Path file : ShellScripts.files(root)) {
            if (isShellScript(file)) {
                found.add(root.relativize(file));
            }
        }
        return found;
    }

    static boolean shellcheckInstalled() {
        try {
            Process p = new ProcessBuilder("shellcheck", "--version").redirectErrorStream(true).start();
            p.getInputStream().readAllBytes();
            return p.waitFor() == 0;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** Runs shellcheck (following sourced files, -x) on the scripts, from {@code dir}. */
    static ShellScripts.Result shellcheck(Path dir, List<Path> scripts) throws Exception {
        Path runner = Files.createTempFile("shellcheck-run", ".sh");
        try {
            Files.writeString(runner, "exec shellcheck -x --format=gcc \"$@\"\n");
            return ShellScripts.run(dir, null, Map.of(), runner, scripts.stream().map(Path::toString).toArray(String[]::new));
        } finally {
            Files.deleteIfExists(runner);
        }
    }

    @Test
    void findsScriptsByTheirShebangOrDirectiveNotOnlyTheirName() throws IOException {
        List<Path> scripts = shellScripts(ROOT);
        for (String must : List.of("scripts/install-backend", "scripts/install-frontend", "scripts/package",
                "scripts/lib/common.sh", ".ci/run", "mvnw", "deploy/slurm/gpusockets-prolog.sh",
                "xen-config/gpusockets-xenstore-setup.sh", "frontend/native/build.sh",
                "cli/src/test/resources/io/gpusockets/deploy/fake-scontrol")) {
            assertTrue(scripts.contains(Path.of(must)), must + " not found among " + scripts);
        }
        assertTrue(scripts.stream().noneMatch(p -> p.startsWith("dist") || p.toString().contains("/target/")), scripts::toString);
        assertTrue(scripts.stream().noneMatch(p -> p.toString().endsWith(".java") || p.toString().endsWith(".md")), scripts::toString);
    }

    @Test
    void everyShellScriptIsCleanUnderShellcheck() throws Exception {
        Assumptions.assumeTrue(shellcheckInstalled(), "shellcheck is not installed: apt-get install shellcheck (Debian)");
        List<Path> scripts = shellScripts(ROOT);
        ShellScripts.Result r = shellcheck(ROOT, scripts);
        assertEquals("", r.out(), "shellcheck findings in " + scripts.size() + " scripts (fix them; a targeted"
                + " '# shellcheck disable=SCxxxx # reason' only where the code is right):\n" + r.out() + r.err());
        assertEquals(0, r.status(), r::toString);
    }

    @Test
    void aFindingFailsTheCheck(@TempDir Path dir) throws Exception {
        Assumptions.assumeTrue(shellcheckInstalled(), "shellcheck is not installed: apt-get install shellcheck (Debian)");
        Files.writeString(dir.resolve("broken"), "#!/usr/bin/env bash\nrm -rf $1/*\n");
        Files.writeString(dir.resolve("clean"), "#!/bin/sh\nrm -rf -- \"$1\"\n");
        Files.writeString(dir.resolve("notes.txt"), "#!/bin/python3\nprint(1)\n");
        assertEquals(List.of(Path.of("broken"), Path.of("clean")), shellScripts(dir));
        ShellScripts.Result r = shellcheck(dir, shellScripts(dir));
        assertTrue(r.status() != 0 && r.out().contains("broken:2:") && r.out().contains("SC2086"), r::toString);
    }
}
