package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.TensorMapArgs;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * Area {@code tensormaps}: the CUtensorMap encoders, which run on the backend's driver (the map's layout is
 * undocumented, so only a driver can write it). Here each array is read only as far as the rank says (the strides one
 * entry less) and sent at its fixed wire size ({@link TensorMapArgs}); a rank out of range, a NULL array or a map not
 * aligned to 64 bytes gets CUDA_ERROR_INVALID_VALUE without a round trip, as the driver answers them.
 */
final class TensorMapCalls implements FrontendHandlers.Tensormaps {
    private final CallChannel channel;
    private final RemoteCudaDriver driver;

    TensorMapCalls(CallChannel channel, RemoteCudaDriver driver) {
        this.channel = channel;
        this.driver = driver;
    }

    @Override
    public int cuTensorMapEncodeTiled(MemorySegment tensorMap, int tensorDataType, int tensorRank, long globalAddress,
                                      MemorySegment globalDim, MemorySegment globalStrides, MemorySegment boxDim,
                                      MemorySegment elementStrides, int interleave, int swizzle, int l2Promotion, int oobFill) {
        if (!mapUsable(tensorMap) || !TensorMapArgs.rankValid(TensorMapArgs.TILED, tensorRank)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dims = arena.allocate(TensorMapArgs.DIMS), strides = arena.allocate(TensorMapArgs.STRIDES);
            MemorySegment box = arena.allocate(TensorMapArgs.BOX), es = arena.allocate(TensorMapArgs.ELEMENT_STRIDES);
            if (!TensorMapArgs.padded(globalDim, 8, tensorRank, dims) || !TensorMapArgs.padded(globalStrides, 8, tensorRank - 1, strides)
                    || !TensorMapArgs.padded(boxDim, 4, tensorRank, box) || !TensorMapArgs.padded(elementStrides, 4, tensorRank, es)) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            return driver.call(ApiEntries.cuTensorMapEncodeTiled, tensorMap, tensorDataType, tensorRank, globalAddress, dims,
                    strides, box, es, interleave, swizzle, l2Promotion, oobFill);
        }
    }

    @Override
    public int cuTensorMapEncodeIm2col(MemorySegment tensorMap, int tensorDataType, int tensorRank, long globalAddress,
                                       MemorySegment globalDim, MemorySegment globalStrides, MemorySegment pixelBoxLowerCorner,
                                       MemorySegment pixelBoxUpperCorner, int channelsPerPixel, int pixelsPerColumn,
                                       MemorySegment elementStrides, int interleave, int swizzle, int l2Promotion, int oobFill) {
        if (!mapUsable(tensorMap) || !TensorMapArgs.rankValid(TensorMapArgs.IM2COL, tensorRank)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dims = arena.allocate(TensorMapArgs.DIMS), strides = arena.allocate(TensorMapArgs.STRIDES);
            MemorySegment lower = arena.allocate(TensorMapArgs.CORNERS), upper = arena.allocate(TensorMapArgs.CORNERS);
            MemorySegment es = arena.allocate(TensorMapArgs.ELEMENT_STRIDES);
            if (!TensorMapArgs.padded(globalDim, 8, tensorRank, dims) || !TensorMapArgs.padded(globalStrides, 8, tensorRank - 1, strides)
                    || !TensorMapArgs.padded(pixelBoxLowerCorner, 4, tensorRank - 2, lower)
                    || !TensorMapArgs.padded(pixelBoxUpperCorner, 4, tensorRank - 2, upper)
                    || !TensorMapArgs.padded(elementStrides, 4, tensorRank, es)) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            return driver.call(ApiEntries.cuTensorMapEncodeIm2col, tensorMap, tensorDataType, tensorRank, globalAddress, dims,
                    strides, lower, upper, channelsPerPixel, pixelsPerColumn, es, interleave, swizzle, l2Promotion, oobFill);
        }
    }

    @Override
    public int cuTensorMapEncodeIm2colWide(MemorySegment tensorMap, int tensorDataType, int tensorRank, long globalAddress,
                                           MemorySegment globalDim, MemorySegment globalStrides, int pixelBoxLowerCornerWidth,
                                           int pixelBoxUpperCornerWidth, int channelsPerPixel, int pixelsPerColumn,
                                           MemorySegment elementStrides, int interleave, int mode, int swizzle, int l2Promotion,
                                           int oobFill) {
        if (!mapUsable(tensorMap) || !TensorMapArgs.rankValid(TensorMapArgs.IM2COL_WIDE, tensorRank)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dims = arena.allocate(TensorMapArgs.DIMS), strides = arena.allocate(TensorMapArgs.STRIDES);
            MemorySegment es = arena.allocate(TensorMapArgs.ELEMENT_STRIDES);
            if (!TensorMapArgs.padded(globalDim, 8, tensorRank, dims) || !TensorMapArgs.padded(globalStrides, 8, tensorRank - 1, strides)
                    || !TensorMapArgs.padded(elementStrides, 4, tensorRank, es)) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            return driver.call(ApiEntries.cuTensorMapEncodeIm2colWide, tensorMap, tensorDataType, tensorRank, globalAddress,
                    dims, strides, pixelBoxLowerCornerWidth, pixelBoxUpperCornerWidth, channelsPerPixel, pixelsPerColumn, es,
                    interleave, mode, swizzle, l2Promotion, oobFill);
        }
    }

    /** The map goes to the backend and comes back with its new address (or unchanged, on an error). */
    @Override
    public int cuTensorMapReplaceAddress(MemorySegment tensorMap, long globalAddress) {
        if (!mapUsable(tensorMap)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment map = WireValues.sized(tensorMap, TensorMapArgs.MAP).asSlice(0, TensorMapArgs.MAP);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment back = arena.allocate(TensorMapArgs.MAP, TensorMapArgs.MAP_ALIGNMENT);
            ByteBuffer req = CallChannel.request().putLong(TensorMapArgs.MAP).putLong(globalAddress);
            CallChannel.Reply r = channel.exchange(ApiEntries.cuTensorMapReplaceAddress, req.flip(), List.of(map), List.of(back), false);
            if (r.result() == CuResult.CUDA_SUCCESS) {
                map.copyFrom(back);
            }
            return r.result();
        }
    }

    /** cuda.h: "tensorMap address must be aligned to 64 bytes" (and not NULL). */
    private static boolean mapUsable(MemorySegment tensorMap) {
        return !(tensorMap.isNative() && (tensorMap.address() == 0 || (tensorMap.address() & (TensorMapArgs.MAP_ALIGNMENT - 1)) != 0));
    }
}
