package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_DEVICE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * What issue 21 added to the emulated device: stream and kernel-node attributes kept and answered,
 * context flags, peer access answered as the driver answers, SYNC_MEMOPS, RDMA flushes, the
 * location-based pool calls, CUDA 13's zeroed CUctxCreateParams and cuMemcpy2DUnaligned.
 */
class ApiControlsTest {
    private static final int WINDOW = 1, COOPERATIVE = 2, PRIORITY = 8;

    private static MemorySegment value(Emulated e, int first) {
        MemorySegment v = e.arena.allocate(64, 16).fill((byte) 0);
        v.set(JAVA_INT, 0, first);
        return v;
    }

    @Test
    void streamAttributesAreKeptAnsweredAndCopied() {
        try (Emulated e = new Emulated()) {
            long s = e.stream(0), s2 = e.stream(0);
            MemorySegment w = value(e, 0);
            w.set(JAVA_LONG, 0, e.alloc(4096));
            w.set(JAVA_LONG, 8, 4096);
            e.ok(e.device.cuStreamSetAttribute(s, WINDOW, w));
            MemorySegment back = e.arena.allocate(64, 16);
            e.ok(e.device.cuStreamGetAttribute(s, WINDOW, back));
            assertArrayEquals(w.toArray(JAVA_BYTE), back.toArray(JAVA_BYTE));
            e.ok(e.device.cuStreamGetAttribute(s, PRIORITY, back));
            assertEquals(0, back.get(JAVA_INT, 0), "a stream's priority before any is set: its creation priority");
            e.ok(e.device.cuStreamSetAttribute(s, PRIORITY, value(e, -1)));
            e.ok(e.device.cuStreamCopyAttributes(s2, s));
            e.ok(e.device.cuStreamGetAttribute(s2, PRIORITY, back));
            assertEquals(-1, back.get(JAVA_INT, 0));
            e.ok(e.device.cuStreamGetAttribute(s2, WINDOW, back));
            assertArrayEquals(w.toArray(JAVA_BYTE), back.toArray(JAVA_BYTE));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuStreamSetAttribute(s, COOPERATIVE, value(e, 1)),
                    "cooperative is valid for launches and graph nodes, not streams");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuStreamGetAttribute(s, 77, back), "an unknown id");
            e.ok(e.device.cuStreamSetAttribute(0, PRIORITY, value(e, -1)));   // the legacy stream has attributes too
        }
    }

    @Test
    void contextFlagsPeerAccessSyncMemopsAndFlushes() {
        try (Emulated e = new Emulated()) {
            MemorySegment flags = e.arena.allocate(8);
            e.ok(e.device.cuCtxSetFlags(0x04 | 0x80));   // BLOCKING_SYNC | SYNC_MEMOPS
            e.ok(e.device.cuCtxGetFlags(flags));
            assertEquals(0x84, flags.get(JAVA_INT, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxSetFlags(0x03), "no such scheduling mode");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxSetFlags(0x100), "outside CU_CTX_FLAGS_MASK");

            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
            long other = out.get(JAVA_LONG, 0);
            e.ok(e.device.cuCtxPopCurrent(out));
            assertEquals(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, e.device.cuCtxEnablePeerAccess(other, 0),
                    "one device: as the driver answered on an H100 (580.159.04)");
            assertEquals(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, e.device.cuCtxDisablePeerAccess(other));
            e.ok(e.device.cuCtxDestroy(other));

            long p = e.alloc(4096);
            MemorySegment one = e.arena.allocate(4);
            one.set(JAVA_INT, 0, 1);
            MemorySegment got = e.arena.allocate(8);
            e.ok(e.device.cuPointerGetAttribute(got, 6, p));
            assertEquals(0, got.get(JAVA_INT, 0));
            e.ok(e.device.cuPointerSetAttribute(one, 6, p + 100));
            e.ok(e.device.cuPointerGetAttribute(got, 6, p + 8));
            assertEquals(1, got.get(JAVA_INT, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuPointerSetAttribute(one, 1, p), "only SYNC_MEMOPS can be set");

            e.ok(e.device.cuFlushGPUDirectRDMAWrites(0, 100));
            e.ok(e.device.cuFlushGPUDirectRDMAWrites(0, 200));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuFlushGPUDirectRDMAWrites(1, 100));
        }
    }

    @Test
    void peerAccessBetweenTwoDevicesIsUnsupported() {
        try (Emulated e = new Emulated(new EmulatedDevice(2, EmulatedDevice.DEFAULT_MEMORY_BYTES))) {
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuCtxCreate(out, MemorySegment.NULL, 0, 1));
            long onDevice1 = out.get(JAVA_LONG, 0);
            e.ok(e.device.cuCtxPopCurrent(out));
            assertEquals(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, e.device.cuCtxEnablePeerAccess(onDevice1, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxEnablePeerAccess(onDevice1, 1), "flags must be 0");
        }
    }

    @Test
    void zeroedCreateParamsMakeAContextAndAffinityIsRefused() {
        try (Emulated e = new Emulated()) {
            MemorySegment params = e.arena.allocate(24, 8).fill((byte) 0x33);
            params.set(JAVA_LONG, 0, 0);
            params.set(JAVA_INT, 8, 0);
            params.set(JAVA_LONG, 16, 0);   // padding at 12..15 left as it was
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuCtxCreate(out, Emulated.asNative(params), 0, 0));
            e.ok(e.device.cuCtxDestroy(out.get(JAVA_LONG, 0)));
            params.set(JAVA_LONG, 0, e.arena.allocate(16).address());
            params.set(JAVA_INT, 8, 1);
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuCtxCreate(out, Emulated.asNative(params), 0, 0));
            params.set(JAVA_LONG, 0, 0);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxCreate(out, Emulated.asNative(params), 0, 0),
                    "a count without its array");
        }
    }

    @Test
    void locationPoolsAreTheDevicesPools() {
        try (Emulated e = new Emulated()) {
            MemorySegment loc = e.arena.allocate(8);
            loc.set(JAVA_INT, 0, 1);
            loc.set(JAVA_INT, 4, 0);
            MemorySegment a = e.arena.allocate(8), b = e.arena.allocate(8);
            e.ok(e.device.cuDeviceGetDefaultMemPool(a, 0));
            e.ok(e.device.cuMemGetDefaultMemPool(b, loc, 1));
            assertEquals(a.get(JAVA_LONG, 0), b.get(JAVA_LONG, 0));
            e.ok(e.device.cuMemSetMemPool(loc, 1, a.get(JAVA_LONG, 0)));
            e.ok(e.device.cuMemGetMemPool(b, loc, 1));
            assertEquals(a.get(JAVA_LONG, 0), b.get(JAVA_LONG, 0));
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuMemGetMemPool(b, loc, 2), "managed pools");
            loc.set(JAVA_INT, 0, 2);
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuMemGetDefaultMemPool(b, loc, 1), "a host location");
            loc.set(JAVA_INT, 0, 1);
            loc.set(JAVA_INT, 4, 3);
            assertEquals(CUDA_ERROR_INVALID_DEVICE, e.device.cuMemGetDefaultMemPool(b, loc, 1));
        }
    }

    @Test
    void unalignedTwoDimensionalCopiesCopyAsTheAlignedOnes() {
        try (Emulated e = new Emulated()) {
            int w = 13, h = 5, hostPitch = 17, devPitch = 19;
            long dev = e.alloc((long) devPitch * h);
            MemorySegment src = e.arena.allocate((long) hostPitch * h), dst = e.arena.allocate((long) hostPitch * h);
            for (int i = 0; i < hostPitch * h; i++) {
                src.set(JAVA_BYTE, i, (byte) (i * 7 + 3));
            }
            e.ok(e.device.cuMemcpy2DUnaligned(copy2D(e, 0, src.address(), hostPitch, 2, dev, devPitch, w, h)));
            e.ok(e.device.cuMemcpy2DUnaligned(copy2D(e, 2, dev, devPitch, 0, dst.address(), hostPitch, w, h)));
            for (int y = 0; y < h; y++) {
                for (int x = 0; x < w; x++) {
                    assertEquals(src.get(JAVA_BYTE, y * hostPitch + x), dst.get(JAVA_BYTE, y * hostPitch + x), "(" + x + "," + y + ")");
                }
            }
        }
    }

    /** A CUDA_MEMCPY2D (128 bytes, cuda.h 13.0): a host (kind 0) or device (kind 2) side each, offsets 0. */
    private static MemorySegment copy2D(Emulated e, int srcKind, long src, long srcPitch, int dstKind, long dst, long dstPitch,
                                        long width, long height) {
        MemorySegment m = e.arena.allocate(128, 8).fill((byte) 0);
        m.set(JAVA_INT, 16, srcKind == 0 ? 1 : 2);           // srcMemoryType: CU_MEMORYTYPE_HOST or _DEVICE
        m.set(JAVA_LONG, srcKind == 0 ? 24 : 32, src);       // srcHost or srcDevice
        m.set(JAVA_LONG, 48, srcPitch);
        m.set(JAVA_INT, 72, dstKind == 0 ? 1 : 2);
        m.set(JAVA_LONG, dstKind == 0 ? 80 : 88, dst);
        m.set(JAVA_LONG, 104, dstPitch);
        m.set(JAVA_LONG, 112, width);
        m.set(JAVA_LONG, 120, height);
        return m;
    }
}
