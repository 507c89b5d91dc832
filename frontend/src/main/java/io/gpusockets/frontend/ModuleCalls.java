package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code modules}: module loads that need the guest. cuModuleLoad reads its file here and sends
 * it as an image ({@link ModuleFiles}); a backend never opens a path a client names, and so does
 * cuLibraryLoadFromFile. JIT options of cuModuleLoadDataEx and the JIT and library options of
 * cuLibraryLoadData are checked and not forwarded. The module loading mode is the guest program's.
 */
final class ModuleCalls implements FrontendHandlers.Modules {
    /** Most options of one kind a load may pass (cuda.h defines 33 JIT options and 2 library options). */
    static final int MAX_OPTIONS = 64;
    /** CUlibraryOption values: CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE, CU_LIBRARY_BINARY_IS_PRESERVED. */
    static final int LIBRARY_NUM_OPTIONS = 2;
    /** CUmoduleLoadingMode (cuda.h): CU_MODULE_EAGER_LOADING, CU_MODULE_LAZY_LOADING. */
    static final int EAGER_LOADING = 1;
    static final int LAZY_LOADING = 2;

    private final RemoteCudaDriver driver;

    ModuleCalls(RemoteCudaDriver driver) {
        this.driver = driver;
    }

    /** JIT options are not forwarded; log-size options come back as 0 and log buffers empty. */
    @Override
    public int cuModuleLoadDataEx(MemorySegment module, MemorySegment image, int numOptions, MemorySegment options,
                                  MemorySegment optionValues) {
        int r = driver.cuModuleLoadData(module, image);
        clearJitLogs(numOptions, options, optionValues);
        return r;
    }

    /** JIT log-size options come back as 0 and log buffers empty: nothing was compiled here. */
    private static void clearJitLogs(int numOptions, MemorySegment options, MemorySegment optionValues) {
        if (numOptions > 0 && numOptions <= MAX_OPTIONS && options.address() != 0 && optionValues.address() != 0) {
            MemorySegment opts = WireValues.sized(options, 4L * numOptions);
            MemorySegment vals = WireValues.sized(optionValues, 8L * numOptions);
            for (int i = 0; i < numOptions; i++) {
                int opt = opts.getAtIndex(ValueLayout.JAVA_INT, i);
                if (opt == JIT_INFO_LOG_BUFFER_SIZE_BYTES || opt == JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
                    vals.setAtIndex(ValueLayout.JAVA_LONG, i, 0);
                } else if (opt == JIT_INFO_LOG_BUFFER || opt == JIT_ERROR_LOG_BUFFER) {
                    MemorySegment buf = vals.getAtIndex(ValueLayout.ADDRESS, i);
                    if (buf.address() != 0) {
                        buf.reinterpret(1).set(ValueLayout.JAVA_BYTE, 0, (byte) 0);
                    }
                }
            }
        }
    }

    private static final int JIT_INFO_LOG_BUFFER = 3;
    private static final int JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
    private static final int JIT_ERROR_LOG_BUFFER = 5;
    private static final int JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

    /** The file is read here, in the guest, and sent as an image (see {@link ModuleFiles}). */
    @Override
    public int cuModuleLoad(MemorySegment module, MemorySegment fname) {
        return ModuleFiles.load(driver, module, fname);
    }

    /**
     * The options are checked as the driver checks them (a count needs its array; library options
     * must be known ones) and then dropped: JIT options only tune or log a JIT compile, and
     * CU_LIBRARY_BINARY_IS_PRESERVED, which cudart passes, would let the driver keep pointing at the
     * image instead of copying it; on the backend the image is a wire buffer freed after the call,
     * so it is never passed there (the driver then copies), and the host table of
     * CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE lives in the guest, out of the driver's reach.
     */
    @Override
    public int cuLibraryLoadData(MemorySegment library, MemorySegment code, MemorySegment jitOptions,
                                 MemorySegment jitOptionsValues, int numJitOptions, MemorySegment libraryOptions,
                                 MemorySegment libraryOptionValues, int numLibraryOptions) {
        int r = checkOptions(jitOptions, numJitOptions, libraryOptions, numLibraryOptions);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        r = driver.call(ApiEntries.cuLibraryLoadData, library, code, MemorySegment.NULL, MemorySegment.NULL, 0,
                MemorySegment.NULL, MemorySegment.NULL, 0);
        clearJitLogs(numJitOptions, jitOptions, jitOptionsValues);
        return r;
    }

    /** The file is read here, in the guest, and loaded as cuLibraryLoadData loads an image (see {@link ModuleFiles}). */
    @Override
    public int cuLibraryLoadFromFile(MemorySegment library, MemorySegment fileName, MemorySegment jitOptions,
                                     MemorySegment jitOptionsValues, int numJitOptions, MemorySegment libraryOptions,
                                     MemorySegment libraryOptionValues, int numLibraryOptions) {
        int r = checkOptions(jitOptions, numJitOptions, libraryOptions, numLibraryOptions);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        return ModuleFiles.load(library, fileName, image -> cuLibraryLoadData(library, image, jitOptions, jitOptionsValues,
                numJitOptions, MemorySegment.NULL, MemorySegment.NULL, 0));
    }

    private static int checkOptions(MemorySegment jitOptions, int numJitOptions, MemorySegment libraryOptions,
                                    int numLibraryOptions) {
        // unsigned int counts: a negative int is a count beyond any bound
        if (numJitOptions < 0 || numJitOptions > MAX_OPTIONS || numLibraryOptions < 0 || numLibraryOptions > MAX_OPTIONS
                || (numJitOptions > 0 && jitOptions.address() == 0) || (numLibraryOptions > 0 && libraryOptions.address() == 0)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        if (numLibraryOptions > 0) {
            MemorySegment opts = WireValues.sized(libraryOptions, 4L * numLibraryOptions);
            for (int i = 0; i < numLibraryOptions; i++) {
                int opt = opts.getAtIndex(ValueLayout.JAVA_INT, i);
                if (opt < 0 || opt >= LIBRARY_NUM_OPTIONS) {
                    return CuResult.CUDA_ERROR_INVALID_VALUE;
                }
            }
        }
        return CuResult.CUDA_SUCCESS;
    }

    /** The driver's: CUDA_MODULE_LOADING=EAGER loads eagerly; LAZY, unset or anything else is lazy (the default since CUDA 12.2). */
    @Override
    public int cuModuleGetLoadingMode(MemorySegment mode) {
        if (mode.isNative() && mode.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        WireValues.sized(mode, 4).set(ValueLayout.JAVA_INT, 0, loadingMode(System.getenv("CUDA_MODULE_LOADING")));
        return CuResult.CUDA_SUCCESS;
    }

    /** The mode a CUDA_MODULE_LOADING value selects (null: unset). */
    static int loadingMode(String value) {
        return "EAGER".equals(value) ? EAGER_LOADING : LAZY_LOADING;
    }

    /**
     * A library's {@code __managed__} variable (cudart asks for each one it registers): the variable's device range,
     * as cuLibraryGetGlobal answers it, becomes managed memory of the guest at the same address
     * ({@link ManagedMemory#adoptGlobal}), with the device's initial value fetched at the CPU's first touch. Without a
     * current context the variable is device 0's primary context's, retained for the program's life.
     */
    @Override
    public int cuLibraryGetManaged(MemorySegment dptr, MemorySegment bytes, long library, MemorySegment name) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment address = arena.allocate(8), size = arena.allocate(8), ctx = arena.allocate(8);
            int r = driver.cuLibraryGetGlobal(address, size, library, name);
            boolean pushed = false;
            if (r == CuResult.CUDA_ERROR_INVALID_CONTEXT) {
                // The driver's managed variables belong to no context; cudart asks before it has made one. The variable
                // is taken from device 0's primary context, which stays retained for it (the one cudart uses).
                r = driver.cuDevicePrimaryCtxRetain(ctx, 0);
                if (r != CuResult.CUDA_SUCCESS) {
                    return r;
                }
                r = driver.cuCtxPushCurrent(ctx.get(ValueLayout.JAVA_LONG, 0));
                if (r != CuResult.CUDA_SUCCESS) {
                    return r;
                }
                pushed = true;
                r = driver.cuLibraryGetGlobal(address, size, library, name);
            }
            try {
                if (r == CuResult.CUDA_SUCCESS) {
                    r = driver.managedGlobal(address.get(ValueLayout.JAVA_LONG, 0), size.get(ValueLayout.JAVA_LONG, 0), library);
                }
            } finally {
                if (pushed) {
                    driver.cuCtxPopCurrent(ctx);
                }
            }
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            if (!(dptr.isNative() && dptr.address() == 0)) {
                WireValues.sized(dptr, 8).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, address.get(ValueLayout.JAVA_LONG, 0));
            }
            if (!(bytes.isNative() && bytes.address() == 0)) {
                WireValues.sized(bytes, 8).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, size.get(ValueLayout.JAVA_LONG, 0));
            }
            return CuResult.CUDA_SUCCESS;
        }
    }

    /** A unified function is device code callable from the host through a pointer: the backend's code cannot run here. */
    @Override
    public int cuLibraryGetUnifiedFunction(MemorySegment fptr, long library, MemorySegment symbol) {
        return CuResult.CUDA_ERROR_NOT_SUPPORTED;
    }
}
