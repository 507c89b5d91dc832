package io.gpusockets.emulated.ptx;

import java.util.Locale;
import java.util.concurrent.atomic.LongAdder;

/**
 * Which engine runs a PTX kernel on the emulated device, chosen per launch by the system property
 * {@value #PROPERTY}: {@code auto} (the default: compiled to JVM bytecode where the compiler covers
 * the kernel, else interpreted), {@code interpreter} (always interpreted) or {@code jit} (compiled;
 * a kernel the compiler does not cover is still interpreted, and counted as such in
 * {@link #statistics}). Both engines give the same results; the compiled one is faster.
 */
public enum PtxEngine {
    AUTO, INTERPRETER, JIT;

    /** The system property that picks the engine. */
    public static final String PROPERTY = "gpusockets.emulated.ptx";

    /** Launches and thread-instructions so far in this JVM, per engine that ran them. */
    public record Statistics(long interpretedLaunches, long interpretedInstructions, long compiledLaunches,
                             long compiledInstructions) {
    }

    private static final LongAdder INTERPRETED_LAUNCHES = new LongAdder();
    private static final LongAdder INTERPRETED_INSTRUCTIONS = new LongAdder();
    private static final LongAdder COMPILED_LAUNCHES = new LongAdder();
    private static final LongAdder COMPILED_INSTRUCTIONS = new LongAdder();

    /** The engine the property names now; an unknown value is refused with the ones it may take. */
    public static PtxEngine current() {
        String v = System.getProperty(PROPERTY, "auto").trim().toLowerCase(Locale.ROOT);
        return switch (v) {
            case "auto", "" -> AUTO;
            case "interpreter" -> INTERPRETER;
            case "jit" -> JIT;
            default -> throw new IllegalArgumentException("-D" + PROPERTY + "=" + v + ": expected auto, interpreter or jit");
        };
    }

    /** What ran so far in this JVM. */
    public static Statistics statistics() {
        return new Statistics(INTERPRETED_LAUNCHES.sum(), INTERPRETED_INSTRUCTIONS.sum(), COMPILED_LAUNCHES.sum(),
                COMPILED_INSTRUCTIONS.sum());
    }

    static void count(boolean compiled, long instructions) {
        (compiled ? COMPILED_LAUNCHES : INTERPRETED_LAUNCHES).increment();
        (compiled ? COMPILED_INSTRUCTIONS : INTERPRETED_INSTRUCTIONS).add(instructions);
    }
}
