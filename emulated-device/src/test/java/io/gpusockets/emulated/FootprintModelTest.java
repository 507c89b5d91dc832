package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.protocol.api.LimitFootprint;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/**
 * The footprint model: what the device's memory in use counts besides allocations, as the real driver's
 * does: a context, a module's code, the limits set above their defaults, a library in each context it is
 * used in. Each comes back when it goes.
 */
class FootprintModelTest {
    private static final long MIB = 1L << 20;
    private static final String GLOBALS = """
            .version 8.0
            .target sm_80
            .address_size 64
            .visible .global .align 8 .b8 big[4194304];
            .const .align 4 .u32 table[256];
            .visible .entry k() { ret; }
            """;

    @Test
    void aContextHoldsItsShareUntilDestroyed() {
        try (Emulated e = new Emulated()) {
            long before = e.freeBytes();
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
            assertEquals(before - Contexts.CONTEXT_BYTES, e.freeBytes());
            e.ok(e.device.cuCtxDestroy(out.get(ValueLayout.JAVA_LONG, 0)));
            assertEquals(before, e.freeBytes());
        }
    }

    @Test
    void anArrayTakesItsBytesUntilDestroyed() {
        try (Emulated e = new Emulated()) {
            long before = e.freeBytes();
            MemorySegment desc = e.arena.allocate(io.gpusockets.protocol.structs.ArrayDescriptor.SIZE);
            new io.gpusockets.protocol.structs.ArrayDescriptor(1024, 256, 0x20, 4).write(desc);   // FLOAT x 4: 16 bytes each
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuArrayCreate(out, desc));
            assertEquals(before - 1024L * 256 * 16, e.freeBytes());
            e.ok(e.device.cuArrayDestroy(out.get(ValueLayout.JAVA_LONG, 0)));
            assertEquals(before, e.freeBytes());
        }
    }

    @Test
    void aModuleTakesItsVariablesAndItsCodeUntilUnloadedOrItsContextGoes() {
        try (Emulated e = new Emulated()) {
            long before = e.freeBytes();
            long module = load(e, GLOBALS);
            long footprint = 4 * MIB + 1024 + Emulated.codeBytes(GLOBALS);
            assertEquals(before - footprint, e.freeBytes());
            e.ok(e.device.cuModuleUnload(module));
            assertEquals(before, e.freeBytes());

            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
            load(e, GLOBALS);
            e.ok(e.device.cuCtxDestroy(out.get(ValueLayout.JAVA_LONG, 0)));
            assertEquals(before, e.freeBytes(), "the module went with its context");
        }
    }

    @Test
    void aLibraryTakesItsFootprintInEachContextItIsUsedIn() {
        try (Emulated e = new Emulated()) {
            long before = e.freeBytes();
            MemorySegment lib = e.arena.allocate(8);
            e.ok(e.device.cuLibraryLoadData(lib, e.nativeString(GLOBALS), MemorySegment.NULL, MemorySegment.NULL, 0,
                    MemorySegment.NULL, MemorySegment.NULL, 0));
            long library = lib.get(ValueLayout.JAVA_LONG, 0);
            assertEquals(before, e.freeBytes(), "loaded into no context yet");
            MemorySegment mod = e.arena.allocate(8);
            e.ok(e.device.cuLibraryGetModule(mod, library));
            long footprint = 4 * MIB + 1024 + Emulated.codeBytes(GLOBALS);
            assertEquals(before - footprint, e.freeBytes());
            MemorySegment ctx = e.arena.allocate(8);
            e.ok(e.device.cuCtxCreate(ctx, MemorySegment.NULL, 0, 0));
            e.ok(e.device.cuLibraryGetModule(mod, library));
            assertEquals(before - 2 * footprint - Contexts.CONTEXT_BYTES, e.freeBytes(), "and again in a second context");
            e.ok(e.device.cuLibraryUnload(library));
            assertEquals(before - Contexts.CONTEXT_BYTES, e.freeBytes());
        }
    }

    @Test
    void limitsAboveTheirDefaultsReserveByTheLimitRuleAndARefusedOneChangesNothing() {
        try (Emulated e = new Emulated()) {
            long before = e.freeBytes();
            long threads = ContextSettings.RESIDENT_THREADS;
            assertEquals(2048L * 132, threads);
            e.ok(e.device.cuCtxSetLimit(LimitFootprint.STACK_SIZE, 4096));
            assertEquals(before - (4096 - 1024) * threads, e.freeBytes(), "3 KiB more for every resident thread");
            e.ok(e.device.cuCtxSetLimit(LimitFootprint.STACK_SIZE, 512));
            assertEquals(before, e.freeBytes(), "below the default: nothing");
            e.ok(e.device.cuCtxSetLimit(LimitFootprint.MALLOC_HEAP_SIZE, 72 * MIB));
            e.ok(e.device.cuCtxSetLimit(LimitFootprint.PRINTF_FIFO_SIZE, 8650752 + MIB));
            assertEquals(before - 64 * MIB - MIB, e.freeBytes());

            MemorySegment v = e.arena.allocate(8);
            assertEquals(CUDA_ERROR_OUT_OF_MEMORY, e.device.cuCtxSetLimit(LimitFootprint.STACK_SIZE, 64 << 10),
                    "64 KiB for 270336 threads: 17 GiB, past the device's 8");
            e.ok(e.device.cuCtxGetLimit(v, LimitFootprint.STACK_SIZE));
            assertEquals(512, v.get(ValueLayout.JAVA_LONG, 0), "the limit stays");
            assertEquals(before - 64 * MIB - MIB, e.freeBytes());
            e.ok(e.device.cuCtxSetLimit(LimitFootprint.MALLOC_HEAP_SIZE, 8 * MIB));
            e.ok(e.device.cuCtxSetLimit(LimitFootprint.PRINTF_FIFO_SIZE, 8650752));
            assertEquals(before, e.freeBytes());
        }
    }

    /**
     * A kernel reports its {@code .local} bytes (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES), and a launch of one that needs
     * more than the stack reservation grows it to that (rounded up to 1 KiB) for every resident thread, as the
     * driver does, until the stack is set again; a capture grows nothing.
     */
    @Test
    void aLaunchGrowsTheStackToWhatItsKernelNeedsUntilTheStackIsSetAgain() {
        String ptx = """
                .version 8.0
                .target sm_90
                .address_size 64
                .visible .entry deep()
                {
                    .local .align 4 .b8 buf[3000];
                    .reg .u64 %rd<2>;
                    .reg .u32 %r<3>;
                    mov.u64 %rd1, buf;
                    mov.u32 %r1, 7;
                    st.local.u32 [%rd1], %r1;
                    ld.local.u32 %r2, [%rd1];
                    ret;
                }
                .visible .entry flat() { ret; }
                """;
        try (Emulated e = new Emulated()) {
            long module = load(e, ptx);
            long deep = function(e, module, "deep"), flat = function(e, module, "flat");
            MemorySegment v = e.arena.allocate(8);
            e.ok(e.device.cuFuncGetAttribute(v, EmulatedFunction.LOCAL_SIZE_BYTES, deep));
            assertEquals(3008, v.get(ValueLayout.JAVA_INT, 0), "its .local array, 16-aligned");
            e.ok(e.device.cuFuncGetAttribute(v, EmulatedFunction.LOCAL_SIZE_BYTES, flat));
            assertEquals(0, v.get(ValueLayout.JAVA_INT, 0));
            long threads = ContextSettings.RESIDENT_THREADS;
            long before = e.freeBytes();
            launch(e, flat);
            assertEquals(before, e.freeBytes(), "no local memory: nothing");
            launch(e, deep);
            assertEquals(before - (3072 - 1024) * threads, e.freeBytes(), "grown to 3 KiB (3008 rounded up) for every resident thread");
            launch(e, deep);
            assertEquals(before - (3072 - 1024) * threads, e.freeBytes(), "once");
            e.ok(e.device.cuCtxGetLimit(v, LimitFootprint.STACK_SIZE));
            assertEquals(1024, v.get(ValueLayout.JAVA_LONG, 0), "the limit reads what was set");
            e.ok(e.device.cuCtxSetLimit(LimitFootprint.STACK_SIZE, 2048));
            assertEquals(before - 1024 * threads, e.freeBytes(), "the set reserves anew at its size");
            e.ok(e.device.cuCtxSetLimit(LimitFootprint.STACK_SIZE, 1024));
            assertEquals(before, e.freeBytes());
            e.ok(e.device.cuModuleUnload(module));
        }
    }

    private static long function(Emulated e, long module, String name) {
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuModuleGetFunction(out, module, e.nativeString(name)));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    private static void launch(Emulated e, long f) {
        e.ok(e.device.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, MemorySegment.NULL, MemorySegment.NULL));
        e.ok(e.device.cuCtxSynchronize());
    }

    private static long load(Emulated e, String ptx) {
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuModuleLoadData(out, e.nativeString(ptx)));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }
}
