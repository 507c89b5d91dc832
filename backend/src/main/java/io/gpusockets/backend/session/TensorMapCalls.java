package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.structs.TensorMapArgs;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Area {@code tensormaps}: the CUtensorMap encoders, run by this backend's driver (the real one, whose bytes are then
 * the driver's own, or the emulated device's own layout). Every array arrives at its fixed wire size
 * ({@link TensorMapArgs}); the rank and every enum are checked first, then only the rank's entries are copied into
 * native memory of the exact size, and the map is written into a 64-byte-aligned buffer, as the driver requires, before
 * it goes back as DATA. The global address is only the driver's to check (alignment): a map is 128 bytes a program
 * could forge, and a kernel can dereference any pointer anyway, so checking it against the session's allocations would
 * protect nothing; sessions are kept apart by their contexts (or worker processes). A restored module global's address
 * as the program knows it becomes where the global lies now ({@link GlobalTranslation}).
 */
final class TensorMapCalls implements BackendHandlers.Tensormaps {
    private final Session session;
    private final CudaDriver driver;

    TensorMapCalls(Session session) {
        this.session = session;
        this.driver = session.host().driver();
    }

    @Override
    public int cuTensorMapEncodeTiled(Call c, int tensorDataType, int tensorRank, long globalAddress, long globalDim,
                                      long globalStrides, long boxDim, long elementStrides, int interleave, int swizzle,
                                      int l2Promotion, int oobFill)
            throws ProtocolException, CallRejected, InterruptedException, IOException {
        lengths(globalDim, TensorMapArgs.DIMS, globalStrides, TensorMapArgs.STRIDES, boxDim, TensorMapArgs.BOX, elementStrides,
                TensorMapArgs.ELEMENT_STRIDES);
        MemorySegment dims = c.receiveBulk(globalDim), strides = c.receiveBulk(globalStrides);
        MemorySegment box = c.receiveBulk(boxDim), es = c.receiveBulk(elementStrides);
        checked(TensorMapArgs.check(TensorMapArgs.TILED, tensorRank, tensorDataType, interleave, swizzle, l2Promotion, oobFill, -1));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment map = arena.allocate(TensorMapArgs.MAP, TensorMapArgs.MAP_ALIGNMENT);
            int r = driver.cuTensorMapEncodeTiled(map, tensorDataType, tensorRank, session.toReal(globalAddress),
                    TensorMapArgs.exact(arena, dims, 8, tensorRank), TensorMapArgs.exact(arena, strides, 8, tensorRank - 1),
                    TensorMapArgs.exact(arena, box, 4, tensorRank), TensorMapArgs.exact(arena, es, 4, tensorRank),
                    interleave, swizzle, l2Promotion, oobFill);
            return reply(c, r, map);
        }
    }

    @Override
    public int cuTensorMapEncodeIm2col(Call c, int tensorDataType, int tensorRank, long globalAddress, long globalDim,
                                       long globalStrides, long pixelBoxLowerCorner, long pixelBoxUpperCorner,
                                       int channelsPerPixel, int pixelsPerColumn, long elementStrides, int interleave,
                                       int swizzle, int l2Promotion, int oobFill)
            throws ProtocolException, CallRejected, InterruptedException, IOException {
        lengths(globalDim, TensorMapArgs.DIMS, globalStrides, TensorMapArgs.STRIDES, pixelBoxLowerCorner, TensorMapArgs.CORNERS,
                pixelBoxUpperCorner, TensorMapArgs.CORNERS, elementStrides, TensorMapArgs.ELEMENT_STRIDES);
        MemorySegment dims = c.receiveBulk(globalDim), strides = c.receiveBulk(globalStrides);
        MemorySegment lower = c.receiveBulk(pixelBoxLowerCorner), upper = c.receiveBulk(pixelBoxUpperCorner);
        MemorySegment es = c.receiveBulk(elementStrides);
        checked(TensorMapArgs.check(TensorMapArgs.IM2COL, tensorRank, tensorDataType, interleave, swizzle, l2Promotion, oobFill, -1));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment map = arena.allocate(TensorMapArgs.MAP, TensorMapArgs.MAP_ALIGNMENT);
            int r = driver.cuTensorMapEncodeIm2col(map, tensorDataType, tensorRank, session.toReal(globalAddress),
                    TensorMapArgs.exact(arena, dims, 8, tensorRank), TensorMapArgs.exact(arena, strides, 8, tensorRank - 1),
                    TensorMapArgs.exact(arena, lower, 4, tensorRank - 2), TensorMapArgs.exact(arena, upper, 4, tensorRank - 2),
                    channelsPerPixel, pixelsPerColumn, TensorMapArgs.exact(arena, es, 4, tensorRank), interleave, swizzle,
                    l2Promotion, oobFill);
            return reply(c, r, map);
        }
    }

    @Override
    public int cuTensorMapEncodeIm2colWide(Call c, int tensorDataType, int tensorRank, long globalAddress, long globalDim,
                                           long globalStrides, int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth,
                                           int channelsPerPixel, int pixelsPerColumn, long elementStrides, int interleave,
                                           int mode, int swizzle, int l2Promotion, int oobFill)
            throws ProtocolException, CallRejected, InterruptedException, IOException {
        lengths(globalDim, TensorMapArgs.DIMS, globalStrides, TensorMapArgs.STRIDES, elementStrides, TensorMapArgs.ELEMENT_STRIDES);
        MemorySegment dims = c.receiveBulk(globalDim), strides = c.receiveBulk(globalStrides);
        MemorySegment es = c.receiveBulk(elementStrides);
        checked(TensorMapArgs.check(TensorMapArgs.IM2COL_WIDE, tensorRank, tensorDataType, interleave, swizzle, l2Promotion,
                oobFill, mode));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment map = arena.allocate(TensorMapArgs.MAP, TensorMapArgs.MAP_ALIGNMENT);
            int r = driver.cuTensorMapEncodeIm2colWide(map, tensorDataType, tensorRank, session.toReal(globalAddress),
                    TensorMapArgs.exact(arena, dims, 8, tensorRank), TensorMapArgs.exact(arena, strides, 8, tensorRank - 1),
                    pixelBoxLowerCornerWidth, pixelBoxUpperCornerWidth, channelsPerPixel, pixelsPerColumn,
                    TensorMapArgs.exact(arena, es, 4, tensorRank), interleave, mode, swizzle, l2Promotion, oobFill);
            return reply(c, r, map);
        }
    }

    /** The map as received, in a 64-byte-aligned copy the driver changes; it goes back as DATA. */
    @Override
    public int cuTensorMapReplaceAddress(Call c, long tensorMap, long globalAddress)
            throws ProtocolException, CallRejected, InterruptedException, IOException {
        if (tensorMap != TensorMapArgs.MAP) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "tensorMap of " + tensorMap + " bytes");
        }
        MemorySegment received = c.receiveBulk(tensorMap);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment map = arena.allocate(TensorMapArgs.MAP, TensorMapArgs.MAP_ALIGNMENT);
            map.copyFrom(received.asSlice(0, TensorMapArgs.MAP));
            return reply(c, driver.cuTensorMapReplaceAddress(map, session.toReal(globalAddress)), map);
        }
    }

    private static int reply(Call c, int r, MemorySegment map) throws IOException {
        if (r == CuResult.CUDA_SUCCESS) {
            c.sendData(map);
        }
        return r;
    }

    /** Each array's announced length (even positions) must be its wire size (the next position). */
    private static void lengths(long... announcedAndWire) throws CallRejected {
        for (int i = 0; i < announcedAndWire.length; i += 2) {
            if (announcedAndWire[i] != announcedAndWire[i + 1]) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "an array of " + announcedAndWire[i] + " bytes where "
                        + announcedAndWire[i + 1] + " travel");
            }
        }
    }

    private static void checked(String wrong) throws CallRejected {
        if (wrong != null) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, wrong);
        }
    }
}
