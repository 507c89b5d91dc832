package io.gpusockets.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.deploy.ShellScripts;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;

/**
 * The READMEs name what exists: every repository path, script and Markdown link in them is there, every
 * {@code gpusockets COMMAND} is a command and every {@code --option} after it one of that command's,
 * every test class named exists, and every {@code GPUSOCKETS_*} variable and {@code -Dgpusockets.*}
 * property is read somewhere outside the documentation. A renamed script, option or class then fails
 * here instead of leaving a stale sentence.
 *
 * <p>What counts as a path: a word of a code span or block whose first segment is a top-level folder of
 * the checkout (or, in a module's README, a folder beside the README other than {@code lib} and
 * {@code bin}, which name the bundle's). {@code ...} stands for any folders, an upper-case
 * segment ({@code NAME.out}) for any name, and a last segment may leave out its extension
 * ({@code cuda/vector_add}). Build outputs ({@code target/}, {@code dist/}), absolute paths and URIs
 * are not checked.
 */
class ReadmeReferencesTest {
    private static final Path ROOT = ShellScripts.root();
    private static final Set<String> SKIPPED_DIRS = Set.of("target", "dist", "node_modules");
    private static final Pattern CODE = Pattern.compile("```[^\\n]*\\n(.*?)```|`([^`\\n]+)`", Pattern.DOTALL);
    private static final Pattern LINK = Pattern.compile("\\]\\(([^)\\s#]+)(?:#[^)]*)?\\)");
    private static final Pattern COMMAND = Pattern.compile("(?:^|(?<=[\\s(]))(?:[\\w.-]*/)*gpusockets[ \\t]+([a-z][\\w-]*)([^|;&\\n]*)");
    private static final Pattern OPTION = Pattern.compile("(?<![\\w-])(--[a-z][\\w-]*\\*?)");
    private static final Pattern TEST_CLASS = Pattern.compile("(?<![\\w$@])([A-Z][A-Za-z0-9]*Test)\\b");
    private static final Pattern ENV = Pattern.compile("\\b(GPUSOCKETS_[A-Z0-9_]*[A-Z0-9])(_\\*)?");
    private static final Pattern PROPERTY = Pattern.compile("-D(gpusockets\\.[A-Za-z0-9.]*[A-Za-z0-9])");
    private static final Pattern PLACEHOLDER = Pattern.compile("[A-Z][A-Z0-9_]*");
    /** Words after {@code gpusockets} that are deliberately not commands (the README's unknown-command example). */
    private static final Set<String> NOT_COMMANDS = Set.of("doctr");
    /** Commands the launcher handles itself, before the CLI (scripts/gpusockets hands them to scripts/bench). */
    private static final Set<String> LAUNCHER_COMMANDS = Set.of("bench");

    /** Regular files of the checkout, build outputs and hidden folders (but .ci) left out. */
    private static List<Path> files(Path dir) {
        try {
            return ShellScripts.files(dir);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static List<Path> readmes() {
        return files(ROOT).stream().filter(p -> p.getFileName().toString().equals("README.md")).toList();
    }

    private static String read(Path p) {
        try {
            return Files.readString(p, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The code of a README: its code spans and its code blocks (continuation lines joined), one entry each. */
    static List<String> code(String markdown) {
        List<String> out = new ArrayList<>();
        Matcher m = CODE.matcher(markdown);
        while (m.find()) {
            String c = m.group(1) != null ? m.group(1).replaceAll("\\\\\\n\\s*", " ") : m.group(2);
            out.add(c.replace("\\|", "/"));
        }
        return out;
    }

    /** Where a README's words are, for messages. */
    private static String where(Path readme) {
        return ROOT.relativize(readme).toString();
    }

    // ---- paths

    /** Whether {@code path} (segments under {@code base}) exists, with the wildcards of the class comment. */
    static boolean exists(Path base, List<String> segments) {
        if (segments.isEmpty()) {
            return true;
        }
        String first = segments.getFirst();
        List<String> rest = segments.subList(1, segments.size());
        if (first.equals("...")) {
            if (exists(base, rest)) {
                return true;
            }
            try (Stream<Path> s = Files.list(base)) {
                return s.filter(Files::isDirectory).anyMatch(d -> exists(d, segments));
            } catch (IOException e) {
                return false;
            }
        }
        String stem = first.contains(".") ? first.substring(0, first.indexOf('.')) : first;
        boolean placeholder = PLACEHOLDER.matcher(stem).matches() && !stem.equals("README") && !stem.equals("RESULTS");
        List<Path> candidates = new ArrayList<>();
        if (!placeholder) {
            candidates.add(base.resolve(first));
        }
        try (Stream<Path> s = Files.isDirectory(base) ? Files.list(base) : Stream.empty()) {
            for (Path c : s.toList()) {
                String n = c.getFileName().toString();
                boolean match = placeholder ? n.endsWith(first.substring(stem.length()))
                        : rest.isEmpty() && n.startsWith(first + ".");
                if (match) {
                    candidates.add(c);
                }
            }
        } catch (IOException e) {
            return false;
        }
        return candidates.stream().anyMatch(c -> rest.isEmpty() ? Files.exists(c) : Files.isDirectory(c) && exists(c, rest));
    }

    /**
     * The folders the root .gitignore keeps out of git by their path from the root (lines such as
     * {@code /compat/corpora/}): what a README names under one is made or fetched there, never in a clean checkout.
     */
    static List<String> ignoredFolders() {
        try {
            return Files.readAllLines(ROOT.resolve(".gitignore")).stream().map(String::strip)
                    .filter(l -> l.startsWith("/") && l.endsWith("/") && l.length() > 2).map(l -> l.substring(1)).toList();
        } catch (IOException e) {
            return List.of();
        }
    }

    /** The repository paths a README's code names that do not exist (outside {@link #ignoredFolders}). */
    static List<String> missingPaths(Path readme, List<String> code) {
        Path dir = readme.getParent();
        List<String> ignored = ignoredFolders();
        Set<String> topLevel = new HashSet<>();
        try (Stream<Path> s = Files.list(ROOT)) {
            s.filter(Files::isDirectory).map(p -> p.getFileName().toString())
                    .filter(n -> !n.startsWith(".") && !SKIPPED_DIRS.contains(n)).forEach(topLevel::add);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        List<String> missing = new ArrayList<>();
        for (String c : code) {
            if (c.startsWith("#include")) {
                continue;   // a C include, relative to the source file that has it
            }
            for (String word : c.split("[\\s,()\\[\\]'\"]+")) {
                if (word.contains("://")) {
                    continue;
                }
                String value = word.substring(word.lastIndexOf('=') + 1);
                for (String token : value.split(":")) {
                    token = token.replaceAll("[.;:]+$", "").replaceFirst("^\\./", "");
                    if (!token.contains("/") || token.startsWith("/") || token.matches(".*[*$<>{}~%|\\\\@].*")) {
                        continue;
                    }
                    List<String> segments = List.of(token.split("/+"));
                    if (segments.contains("target") || segments.contains("dist") || segments.getFirst().isEmpty()) {
                        continue;
                    }
                    String first = segments.getFirst();
                    String asFolder = token.endsWith("/") ? token : token + "/";
                    if (dir.equals(ROOT) && ignored.stream().anyMatch(asFolder::startsWith)) {
                        continue;
                    }
                    Path base;
                    if (topLevel.contains(first)) {
                        base = ROOT;
                    } else if (!dir.equals(ROOT) && !first.equals("lib") && !first.equals("bin")
                            && Files.isDirectory(dir.resolve(first))) {
                        base = dir;
                    } else {
                        continue;
                    }
                    if (!exists(base, segments)) {
                        missing.add(where(readme) + ": " + token);
                    }
                }
            }
        }
        return missing;
    }

    @Test
    void everyPathAReadmeNamesExists() {
        List<String> missing = new ArrayList<>();
        for (Path readme : readmes()) {
            missing.addAll(missingPaths(readme, code(read(readme))));
        }
        assertEquals(List.of(), missing, "paths the READMEs name that are not in the checkout");
    }

    @Test
    void everyMarkdownLinkOfAReadmeLeadsToAFile() {
        List<String> missing = new ArrayList<>();
        for (Path readme : readmes()) {
            Matcher m = LINK.matcher(read(readme));
            while (m.find()) {
                String target = m.group(1);
                if (!target.contains("://") && !target.startsWith("mailto:") && !Files.exists(readme.getParent().resolve(target))) {
                    missing.add(where(readme) + ": " + target);
                }
            }
        }
        assertEquals(List.of(), missing, "links the READMEs make to files that do not exist");
    }

    // ---- commands and options

    /** Option names of a command (every alias), with those it hands on. */
    static Set<String> options(CommandSpec spec, CommandSpec backend) {
        Set<String> names = new TreeSet<>(spec.optionsMap().keySet());
        if (spec.qualifiedName().equals("gpusockets doctor backend")) {
            names.addAll(backend.optionsMap().keySet());   // doctor backend takes the backend's own options
        }
        return names;
    }

    /** What is wrong with the commands and options in {@code code}: unknown commands, unknown options. */
    static List<String> badCommands(String where, List<String> code, CommandLine main) {
        CommandSpec backend = main.getSubcommands().get("backend").getCommandSpec();
        List<String> bad = new ArrayList<>();
        for (String c : code) {
            Matcher m = COMMAND.matcher(c);
            while (m.find()) {
                String before = c.substring(0, m.start()).strip();
                if (before.endsWith("-n") || before.endsWith("namespace")) {
                    continue;   // kubectl -n gpusockets ..., kubectl create namespace gpusockets
                }
                String name = m.group(1);
                if (NOT_COMMANDS.contains(name) || LAUNCHER_COMMANDS.contains(name)) {
                    continue;
                }
                CommandLine cmd = main.getSubcommands().get(name);
                if (cmd == null) {
                    bad.add(where + ": gpusockets " + name + ": no such command");
                    continue;
                }
                bad.addAll(badOptions(where, cmd, m.group(2), backend));
            }
        }
        return bad;
    }

    private static List<String> badOptions(String where, CommandLine cmd, String args, CommandSpec backend) {
        List<String> bad = new ArrayList<>();
        String rest = args;
        int end = rest.indexOf(" -- ");
        if (end >= 0) {
            rest = rest.substring(0, end);   // the program's own arguments follow
        }
        String[] words = rest.strip().split("\\s+");
        CommandLine target = cmd;
        for (String w : words) {
            CommandLine sub = target.getSubcommands().get(w.replaceAll("[\\[\\]]", ""));
            if (sub != null && !w.startsWith("-")) {
                target = sub;
            }
        }
        Set<String> known = options(target.getCommandSpec(), backend);
        Matcher o = OPTION.matcher(rest);
        while (o.find()) {
            String opt = o.group(1);
            boolean ok = opt.endsWith("*") ? known.stream().anyMatch(k -> k.startsWith(opt.substring(0, opt.length() - 1)))
                    : known.contains(opt);
            if (!ok) {
                bad.add(where + ": " + target.getCommandSpec().qualifiedName() + " has no option " + opt);
            }
        }
        return bad;
    }

    @Test
    void everyCommandAndOptionTheReadmesNameExists() {
        CommandLine main = Main.commandLine(CommandLine.defaultFactory());
        List<String> bad = new ArrayList<>();
        for (Path readme : readmes()) {
            bad.addAll(badCommands(where(readme), code(read(readme)), main));
        }
        assertEquals(List.of(), bad, "commands and options the READMEs name that the CLI does not have");
    }

    /** The top README's CLI reference rows name a command without "gpusockets", and its Configuration rows backend options. */
    @Test
    void theCliReferenceAndConfigurationTablesNameRealOptions() {
        CommandLine main = Main.commandLine(CommandLine.defaultFactory());
        CommandSpec backend = main.getSubcommands().get("backend").getCommandSpec();
        String readme = read(ROOT.resolve("README.md"));
        List<String> bad = new ArrayList<>();
        int rows = 0;
        for (String line : readme.split("\n")) {
            Matcher row = Pattern.compile("^\\| ([^|]+?) \\| ([^|]*)\\|").matcher(line.replace("\\|", "/"));
            if (!row.find()) {
                continue;
            }
            String cell = row.group(1).strip();
            String side = row.group(2).strip();
            if (cell.startsWith("`") && cell.indexOf('`', 1) > 0) {
                String span = cell.substring(1, cell.indexOf('`', 1));
                String word = span.split("\\s+")[0];
                CommandLine cmd = main.getSubcommands().get(word);
                if (cmd != null) {
                    rows++;
                    bad.addAll(badOptions("README.md CLI reference", cmd, span.substring(word.length()), backend));
                    continue;
                }
                if (LAUNCHER_COMMANDS.contains(word)) {
                    rows++;
                    continue;
                }
            }
            if (cell.startsWith("`--") && side.startsWith("backend")) {
                rows++;
                Matcher o = OPTION.matcher(cell);
                while (o.find()) {
                    if (!backend.optionsMap().containsKey(o.group(1))) {
                        bad.add("README.md Configuration: gpusockets backend has no option " + o.group(1));
                    }
                }
            }
        }
        assertTrue(rows >= 30, "found only " + rows + " CLI reference and backend configuration rows: has the table changed shape?");
        assertEquals(List.of(), bad);
    }

    // ---- test classes, variables, properties

    @Test
    void everyTestClassTheReadmesNameExists() {
        Set<String> classes = new HashSet<>();
        for (Path p : files(ROOT)) {
            String n = p.getFileName().toString();
            if (n.endsWith(".java")) {
                classes.add(n.substring(0, n.length() - ".java".length()));
            }
        }
        List<String> missing = new ArrayList<>();
        for (Path readme : readmes()) {
            for (String c : code(read(readme))) {
                Matcher m = TEST_CLASS.matcher(c);
                while (m.find()) {
                    if (!classes.contains(m.group(1))) {
                        missing.add(where(readme) + ": " + m.group(1));
                    }
                }
            }
        }
        assertEquals(List.of(), missing, "test classes the READMEs name that do not exist");
    }

    @Test
    void everyVariableAndPropertyTheReadmesNameIsReadSomewhere() {
        StringBuilder sources = new StringBuilder();
        for (Path p : files(ROOT)) {
            if (!p.getFileName().toString().endsWith(".md")) {
                try {
                    sources.append(Files.readString(p, StandardCharsets.UTF_8)).append('\n');
                } catch (IOException | UncheckedIOException e) {
                    // not text (images, archives): nothing is read from it
                }
            }
        }
        String all = sources.toString();
        List<String> unread = new ArrayList<>();
        for (Path readme : readmes()) {
            String text = read(readme);
            Matcher env = ENV.matcher(text);
            while (env.find()) {
                boolean prefix = env.group(2) != null;
                String name = env.group(1) + (prefix ? "_" : "");
                if (prefix ? !all.contains(name) : !Pattern.compile("\\b" + name + "\\b").matcher(all).find()) {
                    unread.add(where(readme) + ": " + name);
                }
            }
            Matcher prop = PROPERTY.matcher(text);
            while (prop.find()) {
                if (!all.contains("\"" + prop.group(1) + "\"") && !all.contains(prop.group(1) + "=")
                        && !all.contains("<" + prop.group(1) + ">")) {
                    unread.add(where(readme) + ": -D" + prop.group(1));
                }
            }
        }
        assertEquals(List.of(), unread.stream().distinct().toList(), "variables and properties the READMEs name that nothing reads");
    }

    // ---- the checks themselves catch what they are for

    @Test
    void theChecksFindPlantedMistakes() {
        Path readme = ROOT.resolve("README.md");
        assertEquals(List.of("README.md: scripts/no-such-script"),
                missingPaths(readme, List.of("scripts/no-such-script --quick", "scripts/bench --quick")));
        assertEquals(List.of(), missingPaths(readme, List.of("protocol/.../wire/WindowSlots.java",
                "frontend/native/tests/expected/NAME.out", "frontend/native/tests/cuda/vector_add", "frontend/target/x")));
        CommandLine main = Main.commandLine(CommandLine.defaultFactory());
        assertEquals(List.of("x: gpusockets statuz: no such command", "x: gpusockets backend has no option --max-sesions"),
                badCommands("x", List.of("gpusockets statuz --json", "gpusockets backend --max-sesions 4 --listen tcp://a:1"), main));
        assertEquals(List.of(), badCommands("x", List.of("scripts/gpusockets run --server tcp://h:1 -- ./app --weird",
                "gpusockets doctor backend --device native --user gs", "kubectl -n gpusockets exec POD -- gpusockets status --json",
                "gpusockets backend --tls-* ..."), main));
    }
}
