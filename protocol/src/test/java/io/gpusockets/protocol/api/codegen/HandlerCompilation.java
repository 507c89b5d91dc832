package io.gpusockets.protocol.api.codegen;

import java.io.IOException;
import java.io.StringWriter;
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

    /**
     * Generates {@code emit}'s sources from {@code table} with {@code extraLines} appended, then
     * compiles {@code generated} (a path under the output directory, e.g.
     * {@code io/gpusockets/backend/session/BackendHandlers.java}) together with {@code sources}.
     */
    public static Result compile(Path table, String extraLines, String emit, String generated, List<Path> sources)
            throws IOException {
        Path dir = Files.createTempDirectory("gpusockets-handlers");
        Path tableCopy = dir.resolve("cuda-driver.api");
        Files.writeString(tableCopy, Files.readString(table) + "\n" + extraLines + "\n");
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
