package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.calls.LaunchConfigRequest;
import io.gpusockets.protocol.calls.LaunchRequest;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Area {@code launches}: kernel launches (cuLaunchKernel, cuLaunchCooperativeKernel, cuLaunchKernelEx)
 * and the cluster occupancy queries, which take a CUlaunchConfig too. The parameters are copied at the
 * call, as the driver does, by the sizes the backend reports for the function or kernel (cached; ids
 * are never reused), and launches are pipelined when allowed.
 */
final class LaunchCalls implements FrontendHandlers.Launches {
    private final CallChannel channel;
    /** For the parameter-size query, a call of its own. */
    private final CudaDriver driver;
    private final Map<Long, long[]> paramSizes = new ConcurrentHashMap<>();
    private final LaunchLimits limits;

    LaunchCalls(CallChannel channel, CudaDriver driver) {
        this.channel = channel;
        this.driver = driver;
        this.limits = new LaunchLimits(driver);
    }

    /**
     * Kernel parameters are copied at the call, as the driver does: sizes come from the backend
     * (cuFuncGetParamInfo, which takes a CUkernel too) once per function or kernel; {@code extra}
     * launches send the packed buffer as is.
     */
    @Override
    public int cuLaunchKernel(long f, int gridDimX, int gridDimY, int gridDimZ, int blockDimX, int blockDimY,
                              int blockDimZ, int sharedMemBytes, long hStream, MemorySegment kernelParams,
                              MemorySegment extra) {
        int bad = limits.check(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes);
        if (bad != CuResult.CUDA_SUCCESS) {
            return bad;
        }
        Params p = params(f, kernelParams, extra);
        if (p.error != CuResult.CUDA_SUCCESS) {
            return p.error;
        }
        ByteBuffer req = CallChannel.request();
        LaunchRequest.putHeader(req, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream);
        int r = putParams(req, p, kernelParams, extra);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        boolean noReply = channel.pipelining();
        return channel.launch(ApiEntries.cuLaunchKernel, req.flip(), hStream, noReply).result();
    }

    /** As cuLaunchKernel, without {@code extra}. */
    @Override
    public int cuLaunchCooperativeKernel(long f, int gridDimX, int gridDimY, int gridDimZ, int blockDimX, int blockDimY,
                                         int blockDimZ, int sharedMemBytes, long hStream, MemorySegment kernelParams) {
        int bad = limits.check(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes);
        if (bad != CuResult.CUDA_SUCCESS) {
            return bad;
        }
        Params p = params(f, kernelParams, MemorySegment.NULL);
        if (p.error != CuResult.CUDA_SUCCESS) {
            return p.error;
        }
        ByteBuffer req = CallChannel.request();
        LaunchRequest.putHeader(req, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream);
        putParams(req, p, kernelParams, MemorySegment.NULL);
        boolean noReply = channel.pipelining();
        return channel.launch(ApiEntries.cuLaunchCooperativeKernel, req.flip(), hStream, noReply).result();
    }

    /** The config and its attribute array are copied at the call ({@link LaunchConfigRequest}), then as cuLaunchKernel. */
    @Override
    public int cuLaunchKernelEx(MemorySegment config, long f, MemorySegment kernelParams, MemorySegment extra) {
        Params p = params(f, kernelParams, extra);
        if (p.error != CuResult.CUDA_SUCCESS) {
            return p.error;
        }
        ByteBuffer req = CallChannel.request();
        LaunchConfigRequest.Config c = LaunchConfigRequest.putAttributes(req, config);
        if (c == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        LaunchRequest.putHeader(req, f, c.gridX(), c.gridY(), c.gridZ(), c.blockX(), c.blockY(), c.blockZ(),
                c.sharedMemBytes(), c.stream());
        int r = putParams(req, p, kernelParams, extra);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        boolean noReply = channel.pipelining();
        return channel.launch(ApiEntries.cuLaunchKernelEx, req.flip(), c.stream(), noReply).result();
    }

    @Override
    public int cuOccupancyMaxPotentialClusterSize(MemorySegment clusterSize, long func, MemorySegment config) {
        return clusterQuery(ApiEntries.cuOccupancyMaxPotentialClusterSize, clusterSize, func, config);
    }

    @Override
    public int cuOccupancyMaxActiveClusters(MemorySegment numClusters, long func, MemorySegment config) {
        return clusterQuery(ApiEntries.cuOccupancyMaxActiveClusters, numClusters, func, config);
    }

    private int clusterQuery(io.gpusockets.protocol.api.ApiFunction entry, MemorySegment out, long func, MemorySegment config) {
        if (out.isNative() && out.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ByteBuffer req = CallChannel.request();
        LaunchConfigRequest.Config c = LaunchConfigRequest.putAttributes(req, config);
        if (c == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        LaunchConfigRequest.putHeaderWithoutParams(req, func, c);
        CallChannel.Reply reply = channel.exchange(entry, req.flip(), List.of(), List.of(), false);
        if (reply.result() == CuResult.CUDA_SUCCESS) {
            io.gpusockets.protocol.wire.WireValues.sized(out, 4).set(ValueLayout.JAVA_INT, 0, reply.body().getInt());
        }
        return reply.result();
    }

    /** How a launch's parameters travel: the sizes for kernelParams, or null for {@code extra}; or an error. */
    private record Params(long[] sizes, boolean extra, int error) {
    }

    private Params params(long f, MemorySegment kernelParams, MemorySegment extra) {
        boolean hasParams = kernelParams.address() != 0 || (!kernelParams.isNative() && kernelParams.byteSize() > 0);
        boolean hasExtra = extra.address() != 0 || (!extra.isNative() && extra.byteSize() > 0);
        if (hasParams && hasExtra) {
            return new Params(null, false, CuResult.CUDA_ERROR_INVALID_VALUE);
        }
        if (hasExtra) {
            return new Params(null, true, CuResult.CUDA_SUCCESS);
        }
        // Asked before the request buffer is filled: the query is a call of its own and uses it too.
        long[] sizes = paramSizes.get(f);
        if (sizes == null) {
            sizes = queryParamSizes(f);
            if (sizes == null) {
                return new Params(null, false, CuResult.CUDA_ERROR_INVALID_HANDLE);
            }
            paramSizes.put(f, sizes);
        }
        if (sizes.length > 0 && !hasParams) {
            return new Params(null, false, CuResult.CUDA_ERROR_INVALID_VALUE);
        }
        return new Params(sizes, false, CuResult.CUDA_SUCCESS);
    }

    private static int putParams(ByteBuffer req, Params p, MemorySegment kernelParams, MemorySegment extra) {
        if (p.extra) {
            return LaunchRequest.putExtra(req, extra);
        }
        LaunchRequest.putKernelParams(req, p.sizes, kernelParams);
        return CuResult.CUDA_SUCCESS;
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
            // A CUkernel (cudart launches those) is asked through cuKernelGetParamInfo: the real driver
            // refuses it in cuFuncGetParamInfo with CUDA_ERROR_INVALID_HANDLE (seen on the H200, driver 580).
            boolean kernel = false;
            for (int i = 0; i < LaunchRequest.MAX_PARAMS; i++) {
                int r = kernel ? driver.cuKernelGetParamInfo(f, i, offset, size) : driver.cuFuncGetParamInfo(f, i, offset, size);
                if (i == 0 && !kernel && r == CuResult.CUDA_ERROR_INVALID_HANDLE) {
                    kernel = true;
                    r = driver.cuKernelGetParamInfo(f, i, offset, size);
                }
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
