package io.gpusockets.frontend;

import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Async copies with a host side recorded by stream capture (issue 21). On a local GPU such a copy on a
 * capturing stream becomes a memcpy node of the captured graph that reads or writes the host memory
 * each time the graph runs; through gpusockets the copy's data would travel with the call, which the
 * backend must refuse in a capture. So while a capture may be active on the connection
 * ({@link RemoteCudaDriver#captureActive}: begun and not yet ended; otherwise no stream can capture, so
 * no copy pays for a query and async copies stay pipelined) the frontend asks the stream's capture status (cuStreamGetCaptureInfo) before such a copy.
 * Capturing, the copy is added to the capture's graph after the capture's current dependencies as a
 * memcpy node with a host side, exactly as {@link GraphCalls#cuGraphAddMemcpyNode} files one (the
 * guest reads or writes the program's memory at a gate of each launch, in the graph's order), on the
 * stream's context, and that node becomes the stream's only capture dependency
 * (cuStreamUpdateCaptureDependencies, SET): what capturing the copy does in the driver, so work
 * captured after it follows it. An invalidated capture answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
 * as the driver does for work queued into one. The capture modes' rules (global, thread-local,
 * relaxed) concern calls that are not captured (synchronous copies, for instance) and stay the
 * backend's, as before. Costs: four round trips per captured copy, one per async host copy while
 * a capture is active and the copy's stream is not capturing.
 */
final class CapturedCopies {
    /** What {@link #record} answers when the stream captures nothing: the copy goes as it is. */
    static final int NOT_CAPTURING = -1;
    /** CUmemorytype. */
    static final int MEMORY_HOST = 1, MEMORY_DEVICE = 2;
    /** CUstreamCaptureStatus. */
    private static final int CAPTURE_ACTIVE = 1, CAPTURE_INVALIDATED = 2;
    /** CUstreamUpdateCaptureDependencies_flags: CU_STREAM_SET_CAPTURE_DEPENDENCIES. */
    private static final int SET_CAPTURE_DEPENDENCIES = 1;

    private CapturedCopies() {
    }

    /**
     * Records {@code copy3D} (a CUDA_MEMCPY3D of the program's, at least one side HOST) in the capture
     * of {@code stream} and answers the result, or {@link #NOT_CAPTURING} when the stream captures
     * nothing (or is no stream the backend knows: the copy itself then reports that).
     */
    static int record(RemoteCudaDriver driver, long stream, MemorySegment copy3D) {
        if (!driver.captureActive()) {
            return NOT_CAPTURING;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment status = arena.allocate(4, 4), graph = arena.allocate(8, 8), deps = arena.allocate(8, 8),
                    count = arena.allocate(8, 8);
            if (driver.cuStreamGetCaptureInfo_v2(stream, status, MemorySegment.NULL, graph, deps, count)
                    != CuResult.CUDA_SUCCESS) {
                return NOT_CAPTURING;
            }
            int s = status.get(ValueLayout.JAVA_INT, 0);
            if (s == CAPTURE_INVALIDATED) {
                return CuResult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
            }
            if (s != CAPTURE_ACTIVE) {
                return NOT_CAPTURING;
            }
            long n = count.get(ValueLayout.JAVA_LONG, 0);
            MemorySegment dependencies = n == 0 ? MemorySegment.NULL : arena.allocate(8 * n, 8);
            if (n > 0) {   // copied: the next capture query may free the array handed out
                dependencies.copyFrom(MemorySegment.ofAddress(deps.get(ValueLayout.JAVA_LONG, 0)).reinterpret(8 * n));
            }
            MemorySegment ctx = arena.allocate(8, 8);
            int r = driver.cuStreamGetCtx(stream, ctx);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            MemorySegment node = arena.allocate(8, 8);
            r = driver.cuGraphAddMemcpyNode(node, graph.get(ValueLayout.JAVA_LONG, 0), dependencies, n, copy3D,
                    ctx.get(ValueLayout.JAVA_LONG, 0));
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            return driver.cuStreamUpdateCaptureDependencies_v1(stream, node, 1, SET_CAPTURE_DEPENDENCIES);
        }
    }
}
