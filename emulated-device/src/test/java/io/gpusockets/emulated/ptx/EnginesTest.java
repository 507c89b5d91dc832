package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * The two engines side by side: each kernel runs once interpreted and once compiled
 * ({@link PtxEngine}), with the same inputs; outputs must be equal bit for bit and so must the
 * thread-instruction counts, and the compiled run must really have been compiled.
 */
class EnginesTest {
    /** One run: the output bytes and what the engines' statistics counted for it. */
    record Outcome(byte[] output, long interpretedLaunches, long compiledLaunches, long instructions) {
    }

    /** {@code body} with {@link PtxEngine#PROPERTY} set to {@code engine}, the property restored after. */
    static <T> T withEngine(PtxEngine engine, java.util.concurrent.Callable<T> body) throws Exception {
        String before = System.getProperty(PtxEngine.PROPERTY);
        System.setProperty(PtxEngine.PROPERTY, engine.name().toLowerCase(java.util.Locale.ROOT));
        try {
            return body.call();
        } finally {
            if (before == null) {
                System.clearProperty(PtxEngine.PROPERTY);
            } else {
                System.setProperty(PtxEngine.PROPERTY, before);
            }
        }
    }

    static Outcome runWith(PtxEngine engine, Function<Rig, Long> body, long bytes) {
        try {
            return withEngine(engine, () -> {
                try (Rig rig = new Rig()) {
                    PtxEngine.Statistics s0 = PtxEngine.statistics();
                    long out = body.apply(rig);
                    PtxEngine.Statistics s1 = PtxEngine.statistics();
                    return new Outcome(rig.download(out, bytes).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE),
                            s1.interpretedLaunches() - s0.interpretedLaunches(), s1.compiledLaunches() - s0.compiledLaunches(),
                            s1.interpretedInstructions() - s0.interpretedInstructions() + s1.compiledInstructions()
                                    - s0.compiledInstructions());
                }
            });
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** Runs {@code body} under both engines; asserts equal results and counts and that the compiled run was compiled. */
    static Outcome same(String what, Function<Rig, Long> body, long bytes) {
        Outcome interpreted = runWith(PtxEngine.INTERPRETER, body, bytes);
        Outcome compiled = runWith(PtxEngine.JIT, body, bytes);
        assertEquals(0, interpreted.compiledLaunches(), what + ": the interpreter ran it");
        assertEquals(0, compiled.interpretedLaunches(), what + ": the compiler took it");
        assertEquals(interpreted.interpretedLaunches(), compiled.compiledLaunches(), what + ": launches");
        assertArrayEquals(interpreted.output(), compiled.output(), what + ": output differs between the engines");
        assertEquals(interpreted.instructions(), compiled.instructions(), what + ": thread-instructions");
        return compiled;
    }

    @Test
    void nvccKernelsRunCompiledWithTheInterpretersResultsAndCounts() throws Exception {
        String ptx = NvccKernelsTest.ptx();
        int n = 5000;
        Random r = new Random(9);
        float[] a = new float[n];
        float[] b = new float[n];
        int[] ints = new int[n];
        for (int i = 0; i < n; i++) {
            a[i] = r.nextFloat() * 10 - 5;
            b[i] = (float) r.nextGaussian();
            ints[i] = r.nextInt(2000) - 1000;
        }
        same("vadd", rig -> {
            long m = rig.module(ptx);
            long dc = rig.upload(new float[n + 7]);
            rig.run(rig.function(m, "vadd"), (n + 255) / 256, 256, rig.upload(a), rig.upload(b), dc, n);
            return dc;
        }, 4L * (n + 7));
        same("matmul", rig -> {
            long m = rig.module(ptx);
            int k = 48;
            long dc = rig.upload(new float[k * k]);
            rig.ok(rig.launch(rig.function(m, "matmul"), new int[] {k / 16, k / 16, 1}, new int[] {16, 16, 1}, 0,
                    rig.upload(a), rig.upload(b), dc, k));
            rig.ok(rig.device.cuCtxSynchronize());
            return dc;
        }, 4L * 48 * 48);
        same("reduce (one block: one atomic, one order)", rig -> {
            long m = rig.module(ptx);
            long out = rig.upload(new float[1]);
            rig.run(rig.function(m, "reduce"), 1, 160, rig.upload(a), out, n);
            return out;
        }, 4);
        byte[] data = new byte[n];
        r.nextBytes(data);
        same("hist", rig -> {
            long m = rig.module(ptx);
            long bins = rig.upload(new int[256]);
            rig.run(rig.function(m, "hist"), 5, 96, rig.upload(rig.arena.allocateFrom(java.lang.foreign.ValueLayout.JAVA_BYTE, data)),
                    bins, n);
            return bins;
        }, 4 * 256);
        same("scan", rig -> {
            long m = rig.module(ptx);
            long out = rig.upload(new int[n]);
            rig.ok(rig.launch(rig.function(m, "scan"), new int[] {(n + 127) / 128, 1, 1}, new int[] {128, 1, 1}, 4 * 128,
                    rig.upload(ints), out, n));
            rig.ok(rig.device.cuCtxSynchronize());
            return out;
        }, 4L * n);
    }
}
