package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Our {@code libnvidia-ml.so.1} (frontend/native/nvml), which answers NVML from the backend through
 * the {@code libcuda.so.1} beside it: {@code frontend/native/tests/nvml/nvml_query.c}, built by gcc
 * against it, runs against a backend process on the emulated device and must print exactly its
 * golden file ({@code tests/expected/nvml_query.out}), over tcp:// and unix://. Also: the UUIDs and
 * bus ids it gives are the driver's own; {@code nvml_cuda.c}, NVML and the driver API in one
 * program, prints {@code expected/nvml_cuda.out}; two backends are two devices; the functions it cannot
 * answer say NVML_ERROR_NOT_SUPPORTED with one stderr line each; without a backend, or without
 * libcuda.so.1, nvmlInit fails fast with NVML_ERROR_DRIVER_NOT_LOADED, saying why.
 *
 * <p>Skipped (with the reason) when {@code frontend/target/native} lacks either library or gcc is
 * missing. nvml_query needs no CUDA headers (it declares what it uses); nvml_cuda is skipped without
 * {@code /usr/local/cuda/include/cuda.h}.
 */
class NvmlTest {
    private static final int PROGRAM_TIMEOUT_SECONDS = 60;
    private static final int NO_BACKEND_CONNECT_TIMEOUT_MS = 1000;
    private static final long NO_BACKEND_LIMIT_MS = 5000;
    private static final Pattern UUID_LINE = Pattern.compile("^device (\\d+): uuid (GPU-[0-9a-f-]{36})$", Pattern.MULTILINE);
    private static final Pattern PCI_LINE = Pattern.compile("^device (\\d+): pci busId (\\S+), busIdLegacy (\\S+),", Pattern.MULTILINE);

    private static NativePrograms programs;
    private static String skipReason;
    private static Path work;
    private static Path exe;
    private static BackendProcess backend;

    @BeforeAll
    static void setUp() throws Exception {
        programs = NativePrograms.locate();
        skipReason = cannotRun();
        if (skipReason != null) {
            System.err.println("NvmlTest: skipped: " + skipReason);
            return;
        }
        work = Files.createTempDirectory("gpusockets-nvml");
        exe = build();
        // NVML's answers, not isolation: mode context spares a worker JVM per program
        backend = BackendProcess.start("--isolation", "context");
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (backend != null) {
            backend.close();
        }
        NativePrograms.deleteTree(work);
    }

    static Path library() {
        return programs.libDir.resolve("libnvidia-ml.so.1");
    }

    static Path source() {
        return programs.tests.resolve("nvml/nvml_query.c");
    }

    static Path golden() {
        return programs.golden("nvml_query");
    }

    private static String cannotRun() {
        if (!Files.isRegularFile(library())) {
            return library() + " does not exist: libnvidia-ml.so.1 is not built (yet)";
        } else if (!Files.isRegularFile(programs.library())) {
            return programs.library() + " does not exist: libnvidia-ml.so.1 answers through it";
        }
        String noGcc = NativePrograms.gccMissing();
        return noGcc == null ? null : "nvml_query needs gcc: " + noGcc;
    }

    /** gcc against our library, as a guest program links NVML. */
    private static Path build() throws IOException {
        Path out = work.resolve("nvml_query");
        List<String> cmd = List.of("gcc", "-std=c11", "-O1", "-Wall", "-Werror", source().toString(), "-o", out.toString(),
                "-L" + programs.libDir, "-l:libnvidia-ml.so.1", "-lpthread", "-ldl");
        NativePrograms.Run r = NativePrograms.run(cmd, Map.of(), work, 120);
        if (r.exit() != 0) {
            throw new AssertionError("building nvml_query failed (exit " + r.exit() + "):\n" + String.join(" ", cmd) + "\n"
                    + r.stdout() + r.stderr());
        }
        return out;
    }

    private static void assumeRunnable() {
        assumeTrue(skipReason == null, () -> skipReason);
    }

    /** Our libraries first on the loader's path, a backend, and the JVM libcuda.so.1 starts. */
    private static Map<String, String> environment(String server) {
        Map<String, String> env = new HashMap<>();
        env.put("LD_LIBRARY_PATH", programs.libDir.toString());
        env.put("GPUSOCKETS_SERVER", server);
        env.put("GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"));
        env.put("GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path"));
        return env;
    }

    private static NativePrograms.Run query(Map<String, String> env, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(exe.toString());
        cmd.addAll(List.of(args));
        NativePrograms.Run r = NativePrograms.run(cmd, env, work, PROGRAM_TIMEOUT_SECONDS);
        System.out.printf("nvml_query %s with %s: exit %d in %d ms%n", String.join(" ", args), env.get("GPUSOCKETS_SERVER"),
                r.exit(), r.millis());
        return r;
    }

    private static String context(NativePrograms.Run r) {
        return "\n--- stdout:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail();
    }

    @TestFactory
    Stream<DynamicTest> nvmlQueryPrintsItsGoldenOutput() {
        return Stream.of("tcp", "unix").map(scheme -> DynamicTest.dynamicTest("nvml_query over " + scheme, () -> {
            assumeRunnable();
            NativePrograms.Run r = query(environment(backend.address(scheme)));
            assertTrue(backend.alive(), () -> "the backend died; its log:\n" + String.join("\n", backend.output()) + context(r));
            assertEquals(0, r.exit(), () -> "exit status" + context(r));
            assertEquals(Files.readString(golden(), StandardCharsets.UTF_8), r.stdout(),
                    () -> "stdout differs from " + golden() + "\n--- stderr:\n" + r.stderrTail());
        }));
    }

    /**
     * nvml_cuda: NVML and the driver API in one program, as NCCL and PyTorch use them (UUID and bus id
     * lookups, NVML's used memory following a cuMemAlloc in the program's primary context, the
     * current context left alone, NVML after cuDevicePrimaryCtxReset). Needs cuda.h.
     */
    @Test
    void nvmlAndTheDriverApiAgreeInOneProgram() throws Exception {
        assumeRunnable();
        Path cudaH = Path.of(NativePrograms.CUDA_INCLUDE, "cuda.h");
        assumeTrue(Files.isRegularFile(cudaH), () -> "nvml_cuda needs the CUDA headers: " + cudaH + " does not exist");
        Path out = work.resolve("nvml_cuda");
        List<String> cmd = List.of("gcc", "-std=c11", "-O1", "-Wall", "-Werror", "-I" + NativePrograms.CUDA_INCLUDE,
                programs.tests.resolve("nvml/nvml_cuda.c").toString(), "-o", out.toString(), "-L" + programs.libDir,
                "-l:libcuda.so.1", "-l:libnvidia-ml.so.1", "-lpthread", "-ldl");
        NativePrograms.Run b = NativePrograms.run(cmd, Map.of(), work, 120);
        assertEquals(0, b.exit(), () -> "building nvml_cuda:\n" + String.join(" ", cmd) + "\n" + b.stdout() + b.stderr());
        NativePrograms.Run r = NativePrograms.run(List.of(out.toString()), environment(backend.unix()), work, PROGRAM_TIMEOUT_SECONDS);
        System.out.printf("nvml_cuda: exit %d in %d ms%n", r.exit(), r.millis());
        assertEquals(0, r.exit(), () -> "exit status" + context(r));
        Path golden = programs.golden("nvml_cuda");
        assertEquals(Files.readString(golden, StandardCharsets.UTF_8), r.stdout(),
                () -> "stdout differs from " + golden + "\n--- stderr:\n" + r.stderrTail());
    }

    /** NVML's UUID is cuDeviceGetUuid's 16 bytes; its legacy bus id is cuDeviceGetPCIBusId's text. */
    @Test
    void uuidsAndBusIdsAreTheDriversOwn() throws Exception {
        assumeRunnable();
        NativePrograms.Run r = query(environment(backend.unix()), "--uuid");
        assertEquals(0, r.exit(), () -> "exit status" + context(r));
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            assertEquals(List.of(uuidText(cu, 0)), matches(UUID_LINE, r.stdout(), 2), () -> "UUIDs" + context(r));
            assertEquals(List.of(busId(cu, 0).toUpperCase()), matches(PCI_LINE, r.stdout(), 3), () -> "legacy bus ids" + context(r));
        }
    }

    /** A second backend is a second device, with its own UUID; peer access between them is not supported. */
    @Test
    void twoBackendsAreTwoDevices() throws Exception {
        assumeRunnable();
        try (BackendProcess second = BackendProcess.start("--isolation", "context")) {
            NativePrograms.Run r = query(environment(backend.tcp() + "," + second.unix()), "--uuid");
            assertEquals(0, r.exit(), () -> "exit status" + context(r));
            assertTrue(r.stdout().endsWith("PASS\n"), () -> "no PASS" + context(r));
            assertTrue(r.stdout().contains("\ndevices: 2\n"), () -> "device count" + context(r));
            List<String> expected = new ArrayList<>();
            for (BackendProcess b : List.of(backend, second)) {
                try (RemoteCudaDriver d = RemoteCudaDriver.connect(b.tcp())) {
                    Cuda.ok(d.cuInit(0), "cuInit");
                    expected.add(uuidText(new Cuda(d), 0));
                }
            }
            assertEquals(expected, matches(UUID_LINE, r.stdout(), 2), () -> "UUIDs, backend by backend" + context(r));
            for (String pair : List.of("0,1", "1,0")) {
                assertTrue(r.stdout().contains("p2p " + pair + ": read NVML_SUCCESS NOT_SUPPORTED, write NVML_SUCCESS NOT_SUPPORTED\n"),
                        () -> "p2p " + pair + context(r));
            }
        }
    }

    private static final List<String> NOT_SUPPORTED = List.of("nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkCapability",
            "nvmlDeviceGetFieldValues", "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetGpuFabricInfoV",
            "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetTemperature", "nvmlSystemGetDriverVersion",
            "nvmlSystemGetNVMLVersion", "nvmlDeviceGetP2PStatus");

    @Test
    void unsupportedFunctionsAnswerNotSupportedAndSayWhyOnce() throws Exception {
        assumeRunnable();
        NativePrograms.Run r = query(environment(backend.unix()), "--not-supported");
        assertEquals(0, r.exit(), () -> "exit status" + context(r));
        StringBuilder expected = new StringBuilder();
        for (int round = 0; round < 2; round++) {
            for (String f : NOT_SUPPORTED) {
                expected.append(f).append(f.equals("nvmlDeviceGetP2PStatus") ? "(NVLINK)" : "").append(": NVML_ERROR_NOT_SUPPORTED\n");
            }
        }
        expected.append("PASS\n");
        assertEquals(expected.toString(), r.stdout(), () -> "stdout" + context(r));
        List<String> lines = r.stderr().lines().filter(l -> !l.isBlank()).toList();
        assertEquals(NOT_SUPPORTED.size(), lines.size(), () -> "one stderr line per function" + context(r));
        for (int i = 0; i < NOT_SUPPORTED.size(); i++) {
            String line = lines.get(i);
            String f = NOT_SUPPORTED.get(i);
            assertTrue(line.startsWith("gpusockets nvml: " + f + " answers NVML_ERROR_NOT_SUPPORTED") && line.length() > 80,
                    () -> "line naming " + f + " and saying why: " + line);
        }
    }

    @TestFactory
    Stream<DynamicTest> withoutABackendNvmlInitFailsFastSayingWhy() {
        return NativePrograms.noBackendCases("nvmlInit", NvmlTest::assumeRunnable, work, NvmlTest::noBackend);
    }

    private static void noBackend(String server, String mention) throws Exception {
        Map<String, String> env = environment(server);
        env.put("GPUSOCKETS_CONNECT_TIMEOUT_MS", Integer.toString(NO_BACKEND_CONNECT_TIMEOUT_MS));
        NativePrograms.Run r = query(env, "--init-only");
        assertEquals("nvmlInit_v2: NVML_ERROR_DRIVER_NOT_LOADED\n"
                + "nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS): NVML_SUCCESS, nvmlDeviceGetCount_v2: NVML_SUCCESS, devices: 0\n",
                r.stdout(), () -> "stdout" + context(r));
        assertEquals(9, r.exit(), () -> "exit status (NVML_ERROR_DRIVER_NOT_LOADED)" + context(r));
        assertTrue(r.millis() < NO_BACKEND_LIMIT_MS, () -> "took " + r.millis() + " ms" + context(r));
        List<String> lines = r.stderr().lines().filter(l -> !l.isBlank()).toList();
        assertEquals(2, lines.size(), () -> "libcuda.so.1's line and ours" + context(r));
        assertTrue(lines.get(0).contains(mention), () -> "libcuda.so.1's line names " + mention + context(r));
        assertTrue(lines.get(1).startsWith("gpusockets nvml: ") && lines.get(1).contains("NVML_ERROR_DRIVER_NOT_LOADED"),
                () -> "our line says what nvmlInit returns" + context(r));
    }

    /** libnvidia-ml.so.1 alone in a folder, and no libcuda.so.1 the loader could find either. */
    @Test
    void withoutLibcudaNvmlInitSaysSo() throws Exception {
        assumeRunnable();
        assumeTrue(!systemHasLibcuda(), "a libcuda.so.1 is installed on this machine, so the library would find that one");
        Path alone = Files.createDirectories(work.resolve("alone"));
        Files.copy(library(), alone.resolve("libnvidia-ml.so.1"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        Map<String, String> env = environment("tcp://127.0.0.1:1");
        env.put("LD_LIBRARY_PATH", alone.toString());
        NativePrograms.Run r = query(env, "--init-only");
        assertEquals("nvmlInit_v2: NVML_ERROR_DRIVER_NOT_LOADED\nnvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS): NVML_ERROR_DRIVER_NOT_LOADED\n",
                r.stdout(), () -> "stdout" + context(r));
        assertEquals(9, r.exit(), () -> "exit status" + context(r));
        List<String> lines = r.stderr().lines().filter(l -> !l.isBlank()).toList();
        assertEquals(1, lines.size(), () -> "one stderr line" + context(r));
        assertTrue(lines.getFirst().contains("cannot load libcuda.so.1") && lines.getFirst().contains(alone.toString()),
                () -> "the line says libcuda.so.1 was not found beside " + alone + context(r));
    }

    private static boolean systemHasLibcuda() throws IOException {
        for (String dir : List.of("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64", "/lib/x86_64-linux-gnu")) {
            if (Files.exists(Path.of(dir, "libcuda.so.1"))) {
                return true;
            }
        }
        NativePrograms.Run r = NativePrograms.run(List.of("sh", "-c", "ldconfig -p 2>/dev/null | grep -F 'libcuda.so.1 ' || true"),
                Map.of(), work, 30);
        return !r.stdout().isBlank();
    }

    private static List<String> matches(Pattern p, String text, int group) {
        List<String> out = new ArrayList<>();
        Matcher m = p.matcher(text);
        while (m.find()) {
            out.add(m.group(group));
        }
        return out;
    }

    /** NVML's text of cuDeviceGetUuid's bytes: "GPU-" and lowercase 8-4-4-4-12 hexadecimal. */
    private static String uuidText(Cuda cu, int dev) {
        MemorySegment u = cu.arena.allocate(16);
        Cuda.ok(cu.d.cuDeviceGetUuid(u, dev), "cuDeviceGetUuid");
        String hex = HexFormat.of().formatHex(u.toArray(JAVA_BYTE));
        return "GPU-" + hex.substring(0, 8) + "-" + hex.substring(8, 12) + "-" + hex.substring(12, 16) + "-"
                + hex.substring(16, 20) + "-" + hex.substring(20);
    }

    private static String busId(Cuda cu, int dev) {
        MemorySegment s = cu.arena.allocate(64);
        Cuda.ok(cu.d.cuDeviceGetPCIBusId(s, 64, dev), "cuDeviceGetPCIBusId");
        return s.getString(0);
    }
}
