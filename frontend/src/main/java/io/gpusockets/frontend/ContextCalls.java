package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.CtxCreateParams;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Area {@code contexts} on the frontend: cuCtxCreate_v4's {@code CUctxCreateParams}, which CUDA 13
 * programs pass zeroed. Parameters that ask for nothing travel as NULL (the backend makes the context
 * as with NULL); execution affinity and CIG are refused here, with a note on stderr the first time,
 * for the reasons {@link CtxCreateParams} gives.
 */
final class ContextCalls implements FrontendHandlers.Contexts {
    private static final AtomicBoolean REFUSAL_NOTED = new AtomicBoolean();

    private final RemoteCudaDriver driver;

    ContextCalls(RemoteCudaDriver driver) {
        this.driver = driver;
    }

    @Override
    public int cuCtxCreate(MemorySegment pctx, MemorySegment ctxCreateParams, int flags, int dev) {
        int r = CtxCreateParams.check(ctxCreateParams);
        if (r == CuResult.CUDA_ERROR_NOT_SUPPORTED && REFUSAL_NOTED.compareAndSet(false, true)) {
            System.err.println("gpusockets: cuCtxCreate: " + CtxCreateParams.refusal(ctxCreateParams)
                    + "; returning CUDA_ERROR_NOT_SUPPORTED (zeroed CUctxCreateParams or NULL make a context)");
        }
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        return driver.call(ApiEntries.cuCtxCreate, pctx, MemorySegment.NULL, flags, dev);
    }
}
