package io.gpusockets.protocol.api.codegen;

import io.gpusockets.protocol.api.ApiTable;
import java.io.IOException;
import java.io.InputStream;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.tools.JavaCompiler;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;

/**
 * Test support for the modules whose hand-written calls are bound to the table: runs the generator
 * on the real table plus extra lines, then compiles the generated handler declarations together with
 * real handler sources against the test's class path, as the build would. It shows that a table
 * line without its handler method does not build.
 */
public final class HandlerCompilation {
    private HandlerCompilation() {
    }

    /** Whether it compiled, and what the compiler said. */
    public record Result(boolean compiled, String diagnostics) {
    }

    /** The generated class {@code generated} of side {@code emit} ("frontend" or "backend"), from the shipped table. */
    public record Side(String emit, String generated) {
        /** Asserts that {@code sources} compile against the declarations generated from the table as it is. */
        public void assertCompiles(Path... sources) throws IOException {
            Result r = compile("", emit, generated, List.of(sources));
            if (!r.compiled()) {
                throw new AssertionError("the real handlers do not compile against the table:\n" + r.diagnostics());
            }
        }

        /**
         * Asserts that {@code sources} do not compile once {@code line} is added to the table, and that the
         * compiler's complaint names each of {@code names} (the class lacking the handler, the function).
         */
        public void assertFailsWith(String line, List<Path> sources, String... names) throws IOException {
            Result r = compile(line, emit, generated, sources);
            if (r.compiled()) {
                throw new AssertionError("built although the table gained a line without its handler: " + line);
            }
            for (String name : names) {
                if (!r.diagnostics().contains(name)) {
                    throw new AssertionError("the build failure does not name " + name + ":\n" + r.diagnostics());
                }
            }
        }
    }

    /**
     * Generates {@code emit}'s sources from the table the protocol jar ships with {@code extraLines}
     * appended, then compiles {@code generated} (a path under the output directory, e.g.
     * {@code io/gpusockets/backend/session/BackendHandlers.java}) together with {@code sources}.
     */
    public static Result compile(String extraLines, String emit, String generated, List<Path> sources)
            throws IOException {
        Path dir = Files.createTempDirectory("gpusockets-handlers");
        Path tableCopy = dir.resolve("cuda-driver.api");
        String table;
        try (InputStream in = ApiTable.class.getResourceAsStream(ApiTable.RESOURCE)) {
            table = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        Files.writeString(tableCopy, table + "\n" + extraLines + "\n");
        Path out = dir.resolve("generated");
        ApiGenerator.main(new String[] {"--table", tableCopy.toString(), "--emit", emit, "--out", out.toString()});
        Files.createDirectories(dir.resolve("classes"));
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        List<Path> units = new ArrayList<>(sources);
        units.add(out.resolve(generated));
        StringWriter diagnostics = new StringWriter();
        try (StandardJavaFileManager files = javac.getStandardFileManager(null, null, null)) {
            boolean ok = javac.getTask(diagnostics, files, null,
                    List.of("-d", dir.resolve("classes").toString(), "-proc:none", "-cp", System.getProperty("java.class.path")),
                    null, files.getJavaFileObjectsFromPaths(units)).call();
            return new Result(ok, diagnostics.toString());
        }
    }
}
