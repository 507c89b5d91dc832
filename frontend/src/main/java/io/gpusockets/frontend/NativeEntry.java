package io.gpusockets.frontend;

import static java.lang.foreign.ValueLayout.ADDRESS;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.ArrayList;
import java.util.List;

/**
 * Where the C libcuda.so.1 enters Java: {@link #install} fills the library's table with one FFM
 * upcall stub per API table entry, each calling the {@link CudaDriver} method of the same name.
 * Every stub returns a CUresult: no Java exception ever crosses into C.
 */
public final class NativeEntry {
    private static final MethodHandle DRIVER_FOR;
    private static final MethodHandle INTERNAL_ERROR;

    static {
        StartupTrace.jvmReady();
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            DRIVER_FOR = l.findStatic(NativeEntry.class, "driverFor", MethodType.methodType(CudaDriver.class, int.class));
            INTERNAL_ERROR = l.findStatic(NativeEntry.class, "internalError",
                    MethodType.methodType(int.class, Throwable.class, String.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private NativeEntry() {
    }

    /**
     * Called once by libcuda.so.1 (through JNI, on its boot thread): writes to {@code resolverSlot} the
     * address of a function {@code void *resolve(int index)} that returns the upcall stub of a table
     * entry, made on first request (the library caches it). It also starts connecting to the backend
     * on a thread of its own, so that the connect overlaps the making of the first stubs.
     */
    public static void install(long resolverSlot, int count) throws ReflectiveOperationException {
        if (count != FUNCTIONS.size()) {
            throw new IllegalStateException("libcuda.so.1 has " + count + " entries but the jars have "
                    + FUNCTIONS.size() + ": they come from different builds");
        }
        NativeSession.connectEarly();
        MethodHandle resolve = MethodHandles.lookup().findStatic(NativeEntry.class, "resolve",
                MethodType.methodType(MemorySegment.class, int.class));
        MemorySegment resolver = Linker.nativeLinker().upcallStub(resolve,
                FunctionDescriptor.of(ADDRESS, ValueLayout.JAVA_INT), Arena.global());
        MemorySegment.ofAddress(resolverSlot).reinterpret(ADDRESS.byteSize()).set(ADDRESS, 0, resolver);
        StartupTrace.installed();
    }

    private static final List<ApiFunction> FUNCTIONS = ApiTable.get().functions();
    private static final MemorySegment[] STUBS = new MemorySegment[FUNCTIONS.size()];

    /** The upcall stub of entry {@code index}; NULL (the library then answers as if unavailable) if it cannot be made. */
    private static synchronized MemorySegment resolve(int index) {
        if (index == -1) {
            return exitStub();
        }
        if (index < 0 || index >= STUBS.length) {
            return MemorySegment.NULL;
        }
        if (STUBS[index] == null) {
            long start = System.nanoTime();
            ApiFunction f = FUNCTIONS.get(index);
            try {
                STUBS[index] = Linker.nativeLinker().upcallStub(upcallTarget(f), descriptor(f), Arena.global());
                StartupTrace.stubMade(start);
            } catch (ReflectiveOperationException | RuntimeException e) {
                NativeSession.reportInternalError(f.name(), e);
                return MemorySegment.NULL;
            }
        }
        return STUBS[index];
    }

    private static MemorySegment exitStub;

    /**
     * Entry -1: what the library calls at the program's exit ({@link NativeSession#programExiting}), as an
     * upcall stub of {@code void(void)}; NULL if it cannot be made.
     */
    private static MemorySegment exitStub() {
        if (exitStub == null) {
            try {
                exitStub = Linker.nativeLinker().upcallStub(java.lang.invoke.MethodHandles.lookup().findStatic(
                        NativeSession.class, "programExiting", java.lang.invoke.MethodType.methodType(void.class)),
                        FunctionDescriptor.ofVoid(), Arena.global());
            } catch (ReflectiveOperationException | RuntimeException e) {
                return MemorySegment.NULL;
            }
        }
        return exitStub;
    }

    /** (args...) → CudaDriver.name(args...) on the current driver, with exceptions turned into CUDA_ERROR_UNKNOWN. */
    static MethodHandle upcallTarget(ApiFunction f) throws ReflectiveOperationException {
        List<Class<?>> types = new ArrayList<>();
        for (ApiParam p : f.params()) {
            types.add(javaType(p));
        }
        MethodType type = MethodType.methodType(int.class, types);
        MethodHandle method = MethodHandles.publicLookup().findVirtual(CudaDriver.class, f.name(), type);
        // driver first: (args...) → method(driverFor(index), args...)
        MethodHandle driver = MethodHandles.insertArguments(DRIVER_FOR, 0, f.index());
        MethodHandle call = MethodHandles.foldArguments(method, driver);
        MethodHandle handler = MethodHandles.dropArguments(
                MethodHandles.insertArguments(INTERNAL_ERROR, 1, f.name()), 1, types);
        return MethodHandles.catchException(call, Throwable.class, handler);
    }

    private static Class<?> javaType(ApiParam p) {
        if (p.out()) {
            return MemorySegment.class;
        }
        return switch (p.type().javaType()) {
            case "int" -> int.class;
            case "long" -> long.class;
            case "byte" -> byte.class;
            case "short" -> short.class;
            case "float" -> float.class;
            default -> MemorySegment.class;
        };
    }

    static FunctionDescriptor descriptor(ApiFunction f) {
        List<MemoryLayout> layouts = new ArrayList<>();
        for (ApiParam p : f.params()) {
            Class<?> t = javaType(p);
            layouts.add(t == int.class ? ValueLayout.JAVA_INT : t == long.class ? ValueLayout.JAVA_LONG
                    : t == byte.class ? ValueLayout.JAVA_BYTE : t == short.class ? ValueLayout.JAVA_SHORT
                    : t == float.class ? ValueLayout.JAVA_FLOAT : ADDRESS);
        }
        return FunctionDescriptor.of(ValueLayout.JAVA_INT, layouts.toArray(MemoryLayout[]::new));
    }

    private static CudaDriver driverFor(int index) {
        return NativeSession.driverFor(index);
    }

    private static int internalError(Throwable t, String function) {
        NativeSession.reportInternalError(function, t);
        return CuResult.CUDA_ERROR_UNKNOWN;
    }
}
