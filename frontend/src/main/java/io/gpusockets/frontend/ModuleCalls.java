package io.gpusockets.frontend;

import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code modules}: module loads that need the guest. cuModuleLoad reads its file here and sends
 * it as an image ({@link ModuleFiles}); a backend never opens a path a client names. JIT options of
 * cuModuleLoadDataEx are not forwarded.
 */
final class ModuleCalls implements FrontendHandlers.Modules {
    private final CudaDriver driver;

    ModuleCalls(CudaDriver driver) {
        this.driver = driver;
    }

    /** JIT options are not forwarded; log-size options come back as 0 and log buffers empty. */
    @Override
    public int cuModuleLoadDataEx(MemorySegment module, MemorySegment image, int numOptions, MemorySegment options,
                                  MemorySegment optionValues) {
        int r = driver.cuModuleLoadData(module, image);
        if (numOptions > 0 && options.address() != 0 && optionValues.address() != 0) {
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
        return r;
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
}
