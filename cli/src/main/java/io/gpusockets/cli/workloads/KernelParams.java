package io.gpusockets.cli.workloads;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * Builds cuLaunchKernel's {@code void **kernelParams}: a native array of pointers, one per kernel
 * parameter, each to native memory holding that parameter's value (aligned as the parameter's type).
 * Everything lives in the given arena, which must outlive the launch call.
 */
public final class KernelParams {
    private final Arena arena;
    private final List<MemorySegment> values = new ArrayList<>();

    public KernelParams(Arena arena) {
        this.arena = arena;
    }

    /** A device pointer (or any 64-bit value). */
    public KernelParams pointer(long devicePointer) {
        return i64(devicePointer);
    }

    public KernelParams u8(byte v) {
        MemorySegment s = arena.allocate(1, 1);
        s.set(JAVA_BYTE, 0, v);
        return add(s);
    }

    public KernelParams i16(short v) {
        return add(arena.allocateFrom(JAVA_SHORT, v));
    }

    public KernelParams i32(int v) {
        return add(arena.allocateFrom(JAVA_INT, v));
    }

    public KernelParams i64(long v) {
        return add(arena.allocateFrom(JAVA_LONG, v));
    }

    public KernelParams f32(float v) {
        return add(arena.allocateFrom(JAVA_FLOAT, v));
    }

    public KernelParams f64(double v) {
        return add(arena.allocateFrom(JAVA_DOUBLE, v));
    }

    /** A by-value aggregate (float2, int4, char4, double2, ...): its bytes, at the given alignment. */
    public KernelParams bytes(byte[] v, int alignment) {
        MemorySegment s = arena.allocate(v.length, alignment);
        MemorySegment.copy(v, 0, s, JAVA_BYTE, 0, v.length);
        return add(s);
    }

    /** The {@code void*[]} to pass as kernelParams. */
    public MemorySegment build() {
        MemorySegment array = arena.allocate(ADDRESS, Math.max(1, values.size()));
        for (int i = 0; i < values.size(); i++) {
            array.setAtIndex(ADDRESS, i, values.get(i));
        }
        return array;
    }

    private KernelParams add(MemorySegment value) {
        values.add(value);
        return this;
    }
}
