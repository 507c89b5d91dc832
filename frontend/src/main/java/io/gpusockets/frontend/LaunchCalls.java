package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.calls.LaunchRequest;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Area {@code launches}: kernel launches. The parameters are copied at the call, as the driver
 * does, by the sizes the backend reports for the function (cached), and pipelined when allowed.
 */
final class LaunchCalls implements FrontendHandlers.Launches {
    private final CallChannel channel;
    /** For the parameter-size query, a call of its own. */
    private final CudaDriver driver;
    private final Map<Long, long[]> paramSizes = new ConcurrentHashMap<>();

    LaunchCalls(CallChannel channel, CudaDriver driver) {
        this.channel = channel;
        this.driver = driver;
    }

    /**
     * Kernel parameters are copied at the call, as the driver does: sizes come from the backend
     * (cuFuncGetParamInfo) once per function; {@code extra} launches send the packed buffer as is.
     */
    @Override
    public int cuLaunchKernel(long f, int gridDimX, int gridDimY, int gridDimZ, int blockDimX, int blockDimY,
                              int blockDimZ, int sharedMemBytes, long hStream, MemorySegment kernelParams,
                              MemorySegment extra) {
        boolean hasParams = kernelParams.address() != 0 || (!kernelParams.isNative() && kernelParams.byteSize() > 0);
        boolean hasExtra = extra.address() != 0 || (!extra.isNative() && extra.byteSize() > 0);
        if (hasParams && hasExtra) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        long[] sizes = null;
        if (!hasExtra) {
            // Asked before the request buffer is filled: the query is a call of its own and uses it too.
            sizes = paramSizes.get(f);
            if (sizes == null) {
                sizes = queryParamSizes(f);
                if (sizes == null) {
                    return CuResult.CUDA_ERROR_INVALID_HANDLE;
                }
                paramSizes.put(f, sizes);
            }
            if (sizes.length > 0 && !hasParams) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
        }
        ByteBuffer req = CallChannel.request();
        LaunchRequest.putHeader(req, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream);
        if (hasExtra) {
            int r = LaunchRequest.putExtra(req, extra);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
        } else {
            LaunchRequest.putKernelParams(req, sizes, kernelParams);
        }
        boolean noReply = channel.pipelining();
        return channel.exchange(ApiEntries.cuLaunchKernel, req.flip(), List.of(), List.of(), noReply).result();
    }

    /** Parameter sizes of {@code f} (cached), or null when the backend does not know it (graph kernel nodes use this too). */
    long[] paramSizesOf(long f) {
        long[] sizes = paramSizes.get(f);
        if (sizes == null) {
            sizes = queryParamSizes(f);
            if (sizes != null) {
                paramSizes.put(f, sizes);
            }
        }
        return sizes;
    }

    /** Parameter sizes of a function, from cuFuncGetParamInfo until it answers INVALID_VALUE. */
    private long[] queryParamSizes(long f) {
        try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment offset = a.allocate(8), size = a.allocate(8);
            List<Long> sizes = new ArrayList<>();
            for (int i = 0; i < LaunchRequest.MAX_PARAMS; i++) {
                int r = driver.cuFuncGetParamInfo(f, i, offset, size);
                if (r == CuResult.CUDA_ERROR_INVALID_VALUE) {
                    break;
                }
                if (r != CuResult.CUDA_SUCCESS) {
                    return null;
                }
                sizes.add(size.get(ValueLayout.JAVA_LONG, 0));
            }
            return sizes.stream().mapToLong(Long::longValue).toArray();
        }
    }
}
