package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Device printf (vprintf) as nvcc emits it: every conversion against glibc, many threads, the return value. */
class PrintfTest {
    static final String INCLUDES = "#include <stdio.h>\n#include <stdint.h>\n#include <stddef.h>\n#include <math.h>\n";

    /** The same printf calls run by a kernel (one thread) and by a host program compiled with gcc. */
    static final String BODY = """
            printf("d: %d %i %5d %-5d| %05d %+d % d %.3d %.0d| %hhd %hd %ld %lld %zd %jd %td\\n", 42, -42, 7, 7, -7, 7, 7, 7, 0,
                   300, 70000, -5000000000L, 123456789012LL, (size_t)99, (intmax_t)-1, (ptrdiff_t)-3);
            printf("u: %u %u %x %X %#x %#X %o %#o %#o %08x %-8x| %.5x %#.3o %hhu %hu %lu %llx %zx %#08x %+u\\n", 3000000000u, -1,
                   255, 255, 255, 0, 8, 8, 0, 0xbeef, 0xbeef, 0xab, 8, 257, 65537, 18446744073709551615UL,
                   0x123456789abcdefULL, (size_t)4096, 0x1f, 5u);
            printf("c s p: %c|%5c|%-5c|%s|%10s|%-10s|%.2s|%5.1s|%p|%20p|%-20p|\\n", 'A', 'b', 'c', "hello", "hi", "left",
                   "truncate", "xyz", (void*)0x1234abcdULL, (void*)0xdeadbeefULL, (void*)0x10ULL);
            printf("f: %f %.2f %10.3f %-10.1f| %+f % f %.0f %.0f %#.0f %F %f %.10f %f %010.2f %f %.3f\\n", 3.14159, 2.675,
                   -1.5, 0.25, 1.0, 1.0, 2.5, 3.5, 3.5, 1e20, -0.0, 1.0 / 3, 1.5f, -3.14159, 1e-7, 0.0005);
            printf("e: %e %.2e %E %10.3e %-12.2e| %+e %e %.0e %#.0e %e %e %012.3e\\n", 12345.6789, 0.000123456, 1e-300, 5e10,
                   -2.5, 1.0, 0.0, 9.5, 9.5, 1.7976931348623157e308, 4.9e-324, -0.5);
            printf("g: %g %g %g %g %g %.3g %.10g %#g %G %g %g %g %.0g %g %#.3g %-10g| %+g %010g\\n", 100000.0, 1000000.0, 0.0001,
                   0.00001, 123.456, 3.14159, 1.0 / 3, 1.0, 1e-10, 0.0, 1e15, 123456789.0, 0.5, 2.5e-5, 100.0, 1.5, 2.0, -3.5);
            printf("a: %a %A %a %a %.2a %.0a %a %#a %a %.3a %.1a %15a %-15a| %015a\\n", 1.0, 255.5, 0.0, -0.1, 1.999, 1.5,
                   4.9e-324, 2.0, 1e300, 0.1, 1.96875, 0.5, 3.0, 1.0);
            printf("star: %*d|%-*d|%*d|%.*f|%*.*e|%%|%.*d\\n", 6, 42, 6, 42, -4, 7, 2, 3.14159, 12, 3, 2.71828, -1, 5);
            printf("inf nan: %f %e %g %F %E %G %5.1f %-6f| %+f %a %06f\\n", (double)INFINITY, -(double)INFINITY, (double)NAN,
                   (double)INFINITY, -(double)NAN, (double)NAN, (double)INFINITY, (double)NAN, (double)INFINITY, -(double)INFINITY,
                   (double)INFINITY);
            printf("plain, no arguments %% done\\n");
            """;

    static final String THREADS = """
            #include <stdio.h>
            extern "C" __global__ void k(int *ret) {
                int t = blockIdx.x * blockDim.x + threadIdx.x;
                ret[t] = printf("thread %4d of block %d says %s, the sum is %d\\n", t, blockIdx.x, "hello from a longer line", t * 3);
                printf("thread %4d second\\n", t);
                if (t == 0) ret[256] = printf("no arguments\\n");
            }
            """;

    /** printf inside a device function called at depth 2: its argument buffer lies in a deeper frame of the thread's stack. */
    static final String NESTED = """
            #include <stdio.h>
            __device__ __noinline__ int show(int t, const char *who, double x) { return printf("%s %d %.2f\\n", who, t, x); }
            __device__ __noinline__ int outer(int t) {
                int r = printf("outer %d\\n", t);
                return r + show(t, "inner", t * 0.5);
            }
            extern "C" __global__ void k(int *r) { r[threadIdx.x] = outer(threadIdx.x); }
            """;

    Rig rig;

    @BeforeEach
    void open() {
        rig = new Rig();
    }

    @AfterEach
    void close() {
        rig.close();
    }

    /** Runs {@code r} with System.out captured; returns what it printed. */
    static String captured(Runnable r) {
        PrintStream old = System.out;
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        System.setOut(new PrintStream(buffer, true, StandardCharsets.UTF_8));
        try {
            r.run();
        } finally {
            System.setOut(old);
        }
        return buffer.toString(StandardCharsets.UTF_8);
    }

    @Test
    void everyConversionPrintsWhatGlibcPrints(@TempDir Path dir) throws IOException, InterruptedException {
        Path gcc = Path.of("/usr/bin/gcc");
        assumeTrue(Files.isExecutable(gcc), "gcc not found at " + gcc + ": the glibc comparison needs it (formatterMatchesHandWrittenGlibcOutput runs without)");
        String ptx = CallsTest.nvcc(dir, INCLUDES + "extern \"C\" __global__ void k() {\n" + BODY + "}\n");
        Path c = dir.resolve("p.c");
        Files.writeString(c, INCLUDES + "int main(void) {\n" + BODY + "return 0;\n}\n");
        Path exe = dir.resolve("p");
        Process p = new ProcessBuilder(gcc.toString(), "-w", "-o", exe.toString(), c.toString()).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes());
        assumeTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "gcc failed: " + log);
        Process run = new ProcessBuilder(exe.toString()).start();
        String expected = new String(run.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(run.waitFor(30, TimeUnit.SECONDS) && run.exitValue() == 0);
        long f = rig.function(rig.module(ptx), "k");
        String got = captured(() -> rig.run(f, 1, 1));
        assertEquals(expected, got);
    }

    @Test
    void manyThreadsPrintWholeLinesInTheirOwnOrderAndGetTheArgumentCount(@TempDir Path dir) throws IOException, InterruptedException {
        String ptx = CallsTest.nvcc(dir, THREADS);
        long f = rig.function(rig.module(ptx), "k");
        long ret = rig.alloc(4L * 257);
        String out = captured(() -> rig.run(f, 4, 64, ret));
        String[] lines = out.split("\n", -1);
        assertEquals(2 * 256 + 1 + 1, lines.length, out);   // 256 + 256 + 1 lines and the empty tail
        Map<String, Integer> index = new HashMap<>();
        for (int i = 0; i < lines.length - 1; i++) {
            assertEquals(null, index.put(lines[i], i), "line printed once: " + lines[i]);
        }
        for (int t = 0; t < 256; t++) {
            Integer first = index.get(String.format("thread %4d of block %d says hello from a longer line, the sum is %d", t, t / 64, t * 3));
            Integer second = index.get(String.format("thread %4d second", t));
            assertTrue(first != null && second != null && first < second, "thread " + t + "'s lines, whole and in order");
        }
        assertTrue(index.containsKey("no arguments"));
        int[] r = rig.ints(ret, 257);
        for (int t = 0; t < 256; t++) {
            assertEquals(4, r[t], "printf returns the number of arguments, thread " + t);
        }
        assertEquals(0, r[256], "printf without arguments returns 0");
    }

    @Test
    void printfInsideNestedDeviceFunctionsReadsItsOwnFramesArguments(@TempDir Path dir) throws IOException, InterruptedException {
        String ptx = CallsTest.nvcc(dir, NESTED);
        assertTrue(ptx.contains("_Z4showiPKcd"), "show stayed a function");
        long f = rig.function(rig.module(ptx), "k");
        long ret = rig.alloc(4L * 4);
        String out = captured(() -> rig.run(f, 1, 4, ret));
        StringBuilder expected = new StringBuilder();
        for (int t = 0; t < 4; t++) {
            expected.append("outer ").append(t).append('\n');
        }
        for (int t = 0; t < 4; t++) {
            expected.append(String.format("inner %d %.2f%n", t, t * 0.5));
        }
        assertEquals(expected.toString(), out, "a warp runs each printf for its lanes in lane order");
        assertEquals(java.util.List.of(4, 4, 4, 4), java.util.Arrays.stream(rig.ints(ret, 4)).boxed().toList());
    }

    /** Without gcc and nvcc: the formatter against outputs glibc prints (taken from glibc 2.39). */
    @Test
    void formatterMatchesHandWrittenGlibcOutput() {
        assertEquals(" 3.14|42    |ff|010|1.234568e+04|0.0001|0x1p+0|-0x1.999999999999ap-4|(nil)|0x2a|  abc|%",
                format("%5.2f|%-6d|%x|%#o|%e|%g|%a|%a|%p|%p|%5s|%%", 3.14159, 42, 255, 8, 12345.678, 0.0001, 1.0, -0.1, 0L, 42L, "abc"));
        assertEquals("1e+06|1e+01|2|0|+0007|  -inf|-nan|0x1.00p+1|0x2p+0|1.000000e-300",
                format("%g|%.0e|%.0f|%.0f|%+05d|%6f|%f|%.2a|%.0a|%e", 1e6, 9.5, 2.5, 0.5, 7, Double.NEGATIVE_INFINITY,
                        Double.longBitsToDouble(0xFFF8_0000_0000_0000L), 2.0, 1.5, 1e-300));
        assertEquals("44|4464|-1|ffffffffffffffff|4294967295|A", format("%hhd|%hd|%lld|%llx|%u|%c", 300, 70000, -1L, -1L, -1, 'A'));
    }

    /** Lays the arguments out as nvcc does (int/char 4 bytes, long/double/string 8, natural alignment) and formats. */
    private static String format(String fmt, Object... args) {
        Map<Long, Byte> mem = new HashMap<>();
        long fmtAt = 0x1000;
        byte[] f = fmt.getBytes(StandardCharsets.US_ASCII);
        for (int i = 0; i < f.length; i++) {
            mem.put(fmtAt + i, f[i]);
        }
        mem.put(fmtAt + f.length, (byte) 0);
        long argsAt = 0x8000;
        long off = 0;
        long strings = 0x20000;
        for (Object a : args) {
            long v;
            int size;
            switch (a) {
                case Integer i -> {
                    v = i;
                    size = 4;
                }
                case Character ch -> {
                    v = ch;
                    size = 4;
                }
                case Long l -> {
                    v = l;
                    size = 8;
                }
                case Double d -> {
                    v = Double.doubleToRawLongBits(d);
                    size = 8;
                }
                case String s -> {
                    byte[] b = s.getBytes(StandardCharsets.US_ASCII);
                    for (int i = 0; i < b.length; i++) {
                        mem.put(strings + i, b[i]);
                    }
                    mem.put(strings + b.length, (byte) 0);
                    v = strings;
                    strings += 0x100;
                    size = 8;
                }
                default -> throw new IllegalArgumentException(String.valueOf(a));
            }
            off = (off + size - 1) / size * size;
            for (int k = 0; k < size; k++) {
                mem.put(argsAt + off + k, (byte) (v >>> (8 * k)));
            }
            off += size;
        }
        DevicePrintf.Result r = DevicePrintf.format((address, size) -> {
            long v = 0;
            for (int k = 0; k < size; k++) {
                Byte b = mem.get(address + k);
                if (b == null) {
                    throw new IllegalStateException("read outside the test memory at 0x" + Long.toHexString(address + k));
                }
                v |= (b & 0xFFL) << (8 * k);
            }
            return v;
        }, fmtAt, argsAt);
        return new String(r.text(), StandardCharsets.US_ASCII);
    }
}
