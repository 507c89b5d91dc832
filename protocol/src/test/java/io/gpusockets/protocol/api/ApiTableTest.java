package io.gpusockets.protocol.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class ApiTableTest {
    private final ApiTable table = ApiTable.get();

    @Test
    void coversTheFunctionsTheWalkingSkeletonPromises() {
        for (String name : List.of("cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName",
                "cuDeviceGetUuid", "cuDeviceTotalMem", "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain",
                "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxGetState",
                "cuDevicePrimaryCtxSetFlags", "cuCtxCreate", "cuCtxDestroy", "cuCtxPushCurrent", "cuCtxPopCurrent",
                "cuCtxSetCurrent", "cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxSynchronize", "cuCtxGetApiVersion",
                "cuModuleLoadData", "cuModuleLoadDataEx", "cuModuleLoadFatBinary", "cuModuleUnload",
                "cuModuleGetFunction", "cuModuleGetGlobal", "cuLibraryLoadData", "cuLibraryUnload",
                "cuLibraryGetKernel", "cuLibraryGetModule", "cuKernelGetFunction", "cuFuncGetAttribute",
                "cuFuncSetAttribute", "cuFuncGetParamInfo", "cuMemAlloc", "cuMemFree", "cuMemGetInfo",
                "cuMemAllocPitch", "cuMemGetAddressRange", "cuMemAllocHost", "cuMemFreeHost", "cuMemHostAlloc",
                "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
                "cuMemcpyDtoDAsync", "cuMemsetD8", "cuMemsetD16", "cuMemsetD32", "cuMemsetD8Async",
                "cuMemsetD16Async", "cuMemsetD32Async", "cuStreamCreate", "cuStreamCreateWithPriority",
                "cuStreamDestroy", "cuStreamSynchronize", "cuStreamQuery", "cuStreamWaitEvent", "cuEventCreate",
                "cuEventRecord", "cuEventSynchronize", "cuEventQuery", "cuEventElapsedTime", "cuEventDestroy",
                "cuLaunchKernel", "cuOccupancyMaxActiveBlocksPerMultiprocessor", "cuPointerGetAttribute",
                "cuGetErrorName", "cuGetErrorString")) {
            assertNotNull(table.byName(name), name);
        }
    }

    @Test
    void opcodesAreStableHashesOfNamesOutsideTheControlRange() {
        Set<Integer> seen = new HashSet<>();
        for (ApiFunction f : table.functions()) {
            assertEquals(ApiFunction.opcodeFor(f.name()), f.opcode());
            assertTrue(f.opcode() >= 0, f.name());
            assertTrue(seen.add(f.opcode()), "collision at " + f.name());
        }
        // A fixed value: changing the derivation would break every deployed frontend.
        assertEquals(0x58896ef3, table.byName("cuInit").opcode());
    }

    @Test
    void everyOpcodeFindsItsFunctionAndNoOtherOpcodeFindsOne() {
        Set<Integer> opcodes = new HashSet<>();
        for (ApiFunction f : table.functions()) {
            assertSame(f, table.byOpcode(f.opcode()), f.name());
            opcodes.add(f.opcode());
        }
        java.util.Random random = new java.util.Random(5);
        int misses = 0;
        for (int i = 0; i < 100_000; i++) {
            int op = random.nextInt();
            if (!opcodes.contains(op)) {
                assertNull(table.byOpcode(op), Integer.toHexString(op));
                misses++;
            }
        }
        assertTrue(misses > 99_000);
        for (int op : new int[] {0, -1, io.gpusockets.protocol.wire.Opcodes.DATA, io.gpusockets.protocol.wire.Opcodes.GOODBYE}) {
            assertNull(table.byOpcode(op));
        }
    }

    @Test
    void theGeneratedInterfaceHasOneMethodPerEntryInTableOrder() {
        List<String> methods = new ArrayList<>();
        for (Method m : CudaDriver.class.getDeclaredMethods()) {
            methods.add(m.getName());
        }
        for (ApiFunction f : table.functions()) {
            assertTrue(methods.contains(f.name()), f.name());
        }
        assertEquals(table.functions().size(), methods.size());
    }

    @Test
    void everySymbolExistsInCudaH13() throws IOException {
        Path cudaH = Path.of("/usr/local/cuda/include/cuda.h");
        assumeTrue(Files.exists(cudaH), "cuda.h not installed here; the symbol check runs where the toolkit is");
        String text = Files.readString(cudaH);
        for (ApiFunction f : table.functions()) {
            for (String symbol : f.symbols()) {
                assertTrue(Pattern.compile("CUresult CUDAAPI\\s+" + symbol + "\\(").matcher(text).find()
                        || Pattern.compile("#define \\w+\\s+(__CUDA_API_\\w+\\()?" + symbol + "\\b").matcher(text).find(),
                        symbol + " not in cuda.h");
            }
            // Per-thread-default-stream variants exactly where cuda.h defines them (for an ABI variant, of the name it serves).
            var perThread = Pattern.compile("#define " + f.serves() + "\\s+__CUDA_API_(PTDS|PTSZ)\\(").matcher(text);
            assertEquals(perThread.find() ? "_" + perThread.group(1).toLowerCase() : "", f.perThread(), f.name());
            // The first symbol is the one cuda.h maps the name to, when it maps it at all.
            // (Not for an entry whose newer ABI is an entry of its own, serves=NAME@V: that one has the mapped symbol.)
            var define = Pattern.compile("#define " + f.name() + "\\s+(?:__CUDA_API_\\w+\\()?(\\w+)").matcher(text);
            boolean servedByNewer = table.functions().stream().anyMatch(g -> g != f && g.serves().equals(f.name()));
            if (f.serves().equals(f.name()) && define.find() && !servedByNewer) {
                assertEquals(define.group(1), f.primarySymbol(), f.name());
            }
        }
    }

    @Test
    void anEntryThatAllocatesMustSayWhatItIsCharged() {
        for (String bad : List.of("cuA(out dptr[alloc=n] p, size n)\n", "cuA(out mod m, image i)\n", "cuA(out array a, bytes[24] d)\n",
                "cuA(out ctx c, dev d) context=create\n", "cuA(out gexec x, graph g)\n", "cuA(out memh h, size n) custom=backend area=vmm\n")) {
            var e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse(bad), bad);
            assertTrue(e.getMessage().contains("charge="), e.getMessage());
        }
        // said, or looked up (owner=, quick), or never reaching the backend as itself: accepted
        for (String good : List.of("cuA(out dptr[alloc=n] p, size n) charge=alloc\n", "cuA(out gexec x, graph g) charge=none\n",
                "cuA(out mod[owner=l] m, lib l) quick\n", "cuA(out lib l, kernel k) quick\n",
                "cuA(out mod m, image i, i32 n, ptr o) custom=frontend area=modules\n")) {
            ApiTable.parse(good);
        }
        for (String misfit : List.of("cuA(i32 x) charge=alloc\n", "cuA(out mod m, image i) charge=library\n",
                "cuA(out memh h, size n) charge=vmm\n", "cuA(i32 l, size v) charge=bogus\n", "cuA(i32 x) local area=host charge=info\n")) {
            assertThrows(IllegalArgumentException.class, () -> ApiTable.parse(misfit), misfit);
        }
        assertEquals(ChargeRule.LIMIT, table.byName("cuCtxSetLimit").charge(), "no sign, but it allocates: said in the table");
        assertEquals(ChargeRule.MODULE, table.byName("cuModuleLoadData").charge());
        assertEquals(ChargeRule.NONE, table.byName("cuModuleGetGlobal").charge(), "globals are charged with their module's load");
    }

    @Test
    void refusesAQuickEntryWithABulkInput() {
        var e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(bytes[n] data, size n) quick\n"));
        assertTrue(e.getMessage().contains("bulk input"), e.getMessage());
        ApiTable.parse("cuA(out bytes[n] data, size n) quick\n"); // a bulk output is fine
    }

    @Test
    void rejectsMalformedEntriesNamingTheLine() {
        var e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(i32 x)\ncuB(bogus y)\n"));
        assertTrue(e.getMessage().contains("line 2") && e.getMessage().contains("bogus"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(out bytes[nope] x)\n"));
        assertTrue(e.getMessage().contains("nope"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(ptr p)\n"));
        assertTrue(e.getMessage().contains("custom=frontend"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA()\ncuA()\n"));
        assertTrue(e.getMessage().contains("duplicate"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA() fast\n"));
        assertTrue(e.getMessage().contains("unknown attribute"), e.getMessage());
    }

    @Test
    void pitchedRangesCoverRowsAtTheirPitch() {
        ApiFunction f = table.byName("cuMemsetD2D32");
        ApiParam dst = f.param("dstDevice");
        java.util.Map<String, Long> v = java.util.Map.of("dstPitch", 512L, "Width", 10L, "Height", 3L);
        assertEquals(2 * 512 + 40, dst.deviceSpan(i -> v.getOrDefault(f.params().get(i).name(), 0L)));
        java.util.Map<String, Long> none = java.util.Map.of("dstPitch", 512L, "Width", 10L, "Height", 0L);
        assertEquals(0, dst.deviceSpan(i -> none.getOrDefault(f.params().get(i).name(), 0L)));
        assertEquals(-1, ApiParam.pitchedSpan(8, Long.MAX_VALUE, 2));
        assertEquals(-1, ApiParam.pitchedSpan(-1, 1, 1));
        var e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(dptr[range=n;rows=n] p, size n)\n"));
        assertTrue(e.getMessage().contains("rows="), e.getMessage());
    }

    @Test
    void evaluatesLengthExpressionsWithoutOverflow() {
        assertEquals(12, Expr.parse("N*4", List.of("N")).evaluate(i -> 3));
        assertEquals(16, Expr.parse("16", List.of()).evaluate(i -> 0));
        assertEquals(-1, Expr.parse("a*b", List.of("a", "b")).evaluate(i -> Long.MAX_VALUE / 2));
        assertEquals(6, Expr.parse("a*b", List.of("a", "b")).evaluate(i -> i == 0 ? 2 : 3));
        assertEquals(-1, Expr.parse("a*2", List.of("a")).evaluate(i -> -5));
        var e = assertThrows(IllegalArgumentException.class, () -> Expr.parse("a*c", List.of("a", "b")));
        assertTrue(e.getMessage().contains("a*c"), e.getMessage());
        assertEquals(Arrays.asList("cuMemAlloc_v2"), table.byName("cuMemAlloc").symbols());
    }

    @Test
    void modifiersAreParsedIntoTypedFieldsWithParameterIndices() {
        ApiFunction pitch = table.byName("cuMemAllocPitch");
        ApiParam dptr = pitch.param("dptr");
        assertTrue(dptr.registersRange());
        assertEquals(512L * 4, dptr.alloc().evaluate(i -> i == pitch.paramIndex("pPitch") ? 512 : 4));
        ApiFunction global = table.byName("cuModuleGetGlobal");
        assertTrue(global.param("dptr").optional() && global.param("bytes").optional());
        assertNotNull(global.param("dptr").global());
        ApiFunction getFunction = table.byName("cuModuleGetFunction");
        assertEquals(getFunction.paramIndex("hmod"), getFunction.param("hfunc").owner());
        assertTrue(table.byName("cuCtxDestroy").param("ctx").destroy());
        assertTrue(table.byName("cuMemFree").param("dptr").free());
        assertTrue(table.byName("cuCtxSetCurrent").param("ctx").nullable());
        assertEquals("ByteCount", table.byName("cuMemcpyHtoD").param("srcHost").length().text());
    }

    @Test
    void rejectsModifiersThatDoNotApplyOrDoNotExist() {
        for (String bad : List.of("cuA(dptr[bogus] p)\n", "cuA(out dptr[range=n] p, size n)\n", "cuA(dptr[alloc=n] p, size n)\n",
                "cuA(ctx[optional] c)\n", "cuA(out ctx[destroy] c)\n", "cuA(i32[nullable] x)\n", "cuA(bytes[n;m] b, size n, size m)\n",
                "cuA(out func[owner=nobody] f)\n")) {
            assertThrows(IllegalArgumentException.class, () -> ApiTable.parse(bad), bad);
        }
    }

    @Test
    void everyHandWrittenEntryNamesItsAreaAndOnlyThose() {
        var e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(i32 x) custom=backend\n"));
        assertTrue(e.getMessage().contains("area="), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(ptr p) local\n"));
        assertTrue(e.getMessage().contains("area="), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(i32 x) area=copies\n"));
        assertTrue(e.getMessage().contains("custom or local"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(i32 x) custom=backend area=Copies\n"));
        assertTrue(e.getMessage().contains("lower-case"), e.getMessage());
        for (ApiFunction f : table.functions()) {
            assertEquals(f.customFrontend() || f.customBackend() || f.local(), !f.area().isEmpty(), f.name());
        }
    }

    @Test
    void aBackendHandlerOfAnUntypedPointerNeedsACodecBothEndsShare() {
        var e = assertThrows(IllegalArgumentException.class,
                () -> ApiTable.parse("cuA(ptr p) custom=frontend custom=backend area=x\n"));
        assertTrue(e.getMessage().contains("codec="), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(i32 x) custom=backend area=x codec=launch\n"));
        assertTrue(e.getMessage().contains("custom=frontend and custom=backend"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> ApiTable.parse("cuA(i32 x) custom=frontend custom=backend area=x codec=telepathy\n"));
        assertTrue(e.getMessage().contains("codec="), e.getMessage());
        assertEquals(WireCodec.LAUNCH, table.byName("cuLaunchKernel").codec());
        assertEquals(WireCodec.GENERIC, table.byName("cuMemcpyHtoD").codec());
    }

    @Test
    void contextAndMergeRulesAreCheckedAgainstTheParameters() {
        assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(i32 x) context=push\n"));
        assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(ctx c) context=destroy\n"));
        assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(ctx c) context=teleport\n"));
        assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(out i32 a, out i32 b) merge=sum\n"));
        assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(out i32 a) merge=max\n"));
        assertThrows(IllegalArgumentException.class, () -> ApiTable.parse("cuA(cstr s) custom=frontend custom=backend guest area=x\n"));
        assertEquals(ContextRule.CREATE, table.byName("cuCtxCreate").context());
        assertEquals(ContextRule.DESTROY, table.byName("cuCtxDestroy").context());
        assertEquals(ContextRule.RESET, table.byName("cuDevicePrimaryCtxReset").context());
        assertEquals(MergeRule.SUM, table.byName("cuDeviceGetCount").merge());
        assertEquals(MergeRule.LOWEST, table.byName("cuDriverGetVersion").merge());
        assertEquals(MergeRule.ALL, table.byName("cuInit").merge());
        assertTrue(table.byName("cuInit").connects() && table.byName("cuDriverGetVersion").connects());
        assertTrue(table.byName("cuModuleLoad").guest() && !table.byName("cuModuleLoad").customBackend());
    }

    @Test
    void knownEntriesArePureQueriesWithTheirValueListsParsed() {
        ApiFunction attribute = table.byName("cuDeviceGetAttribute");
        assertTrue(attribute.known());
        List<Integer> ids = attribute.param("attrib").known();
        assertEquals(147, ids.size(), "0..147 of cuda.h 13.0 (CU_DEVICE_ATTRIBUTE_MAX 148) but compute mode");
        assertTrue(ids.contains(0) && ids.contains(147) && !ids.contains(20) && !ids.contains(148));
        assertEquals(List.of(13, 16, 32, 64), table.byName("cuDeviceGetPCIBusId").param("len").known());
        assertEquals(List.of(), attribute.param("dev").known());
        for (ApiFunction f : table.functions()) {
            if (f.known()) {
                assertTrue(!f.async() && !f.sync() && f.context() == ContextRule.NONE && !f.customBackend(), f.name());
            }
        }
        assertEquals(List.of(1, 2, 3, 7), ApiTable.parse("cuA(out i32 v, i32[known=1..3|7] x) known\n").functions().getFirst()
                .param("x").known());
        for (String bad : List.of("cuA(out i32 v, i32[known=1] x)\n", "cuA(out i32 v, i32 x) known\n",
                "cuA(out i32[known=1] v) known\n", "cuA(out ctx c, dev d) known\n", "cuA(out i32 v, dev d) known sync\n",
                "cuA(out i32 v, dev d) known context=get\n", "cuA(out i32 v, i32[known=3..1] x) known\n",
                "cuA(out i32 v, i32[known=0..5000] x) known\n", "cuA(out i32 v, i32[known=a] x) known\n",
                "cuA(out i32 v, u64[known=1] x) known\n")) {
            assertThrows(IllegalArgumentException.class, () -> ApiTable.parse(bad), bad);
        }
    }
}
