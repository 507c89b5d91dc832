package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.backend.tenant.Tenant;
import io.gpusockets.backend.tenant.TenantLimits;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.StableWindows;
import io.gpusockets.protocol.api.UnsupportedCudaDriver;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.Channels;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * {@link CheckpointContents} on a driver that page-locks: buffers charged to the tenant's pinned limit and given back,
 * copies through them asynchronous on a stream of the contents' own (completed only at its synchronisation, on
 * another thread), copies through plain memory synchronous; past the pinned limit or without page-locking, plain.
 */
class CheckpointContentsTest {
    private static final int CHUNK = CheckpointImage.CHUNK_BYTES;
    private static final long CTX = 0xC0;

    /** A device of one byte array at {@link #BASE}; async copies run on another thread and end at cuStreamSynchronize. */
    static final class PinningDriver extends UnsupportedCudaDriver {
        static final long BASE = StableWindows.DEFAULT_BASE;
        final byte[] memory;
        final int register;
        int registers, unregisters, streamsMade, streamsDestroyed, asyncCopies, syncCopies, pushes, pops;
        long current;
        private CompletableFuture<Void> pending = CompletableFuture.completedFuture(null);

        PinningDriver(int bytes, int register) {
            this.memory = new byte[bytes];
            this.register = register;
        }

        @Override
        public synchronized int cuMemHostRegister(MemorySegment p, long bytesize, int flags) {
            registers++;
            return current == 0 || flags != 1 ? CuResult.CUDA_ERROR_INVALID_VALUE : register;
        }

        @Override
        public synchronized int cuMemHostUnregister(MemorySegment p) {
            unregisters++;
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuCtxPushCurrent(long ctx) {
            pushes++;
            current = ctx;
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuCtxPopCurrent(MemorySegment pctx) {
            pops++;
            current = 0;
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuStreamCreate(MemorySegment phStream, int flags) {
            phStream.set(ValueLayout.JAVA_LONG, 0, 0x5000 + ++streamsMade);
            return current == CTX ? CuResult.CUDA_SUCCESS : CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }

        @Override
        public synchronized int cuStreamDestroy(long hStream) {
            streamsDestroyed++;
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public int cuStreamSynchronize(long hStream) {
            pending.join();
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemcpyDtoHAsync(MemorySegment dstHost, long srcDevice, long byteCount, long hStream) {
            asyncCopies++;
            pending = CompletableFuture.runAsync(() -> MemorySegment.copy(memory, (int) (srcDevice - BASE), dstHost,
                    ValueLayout.JAVA_BYTE, 0, (int) byteCount));
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemcpyHtoDAsync(long dstDevice, MemorySegment srcHost, long byteCount, long hStream) {
            asyncCopies++;
            pending = CompletableFuture.runAsync(() -> MemorySegment.copy(srcHost, ValueLayout.JAVA_BYTE, 0, memory,
                    (int) (dstDevice - BASE), (int) byteCount));
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemcpyDtoH(MemorySegment dstHost, long srcDevice, long byteCount) {
            syncCopies++;
            MemorySegment.copy(memory, (int) (srcDevice - BASE), dstHost, ValueLayout.JAVA_BYTE, 0, (int) byteCount);
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public synchronized int cuMemcpyHtoD(long dstDevice, MemorySegment srcHost, long byteCount) {
            syncCopies++;
            MemorySegment.copy(srcHost, ValueLayout.JAVA_BYTE, 0, memory, (int) (dstDevice - BASE), (int) byteCount);
            return CuResult.CUDA_SUCCESS;
        }
    }

    private static Tenant tenant(long pinnedLimit) {
        return new Tenant("t", new TenantLimits(Long.MAX_VALUE, 9, 9, 9, 9, pinnedLimit, 0));
    }

    /** Checkpoints {@code from}'s memory, restores it into {@code to}'s, each with its own buffers charged to {@code t}. */
    private static void roundTrip(PinningDriver from, PinningDriver to, Tenant t, int expectPinned) throws IOException {
        long size = from.memory.length;
        List<CheckpointImage.Range> ranges = List.of(new CheckpointImage.Range(PinningDriver.BASE, size));
        ByteArrayOutputStream image = new ByteArrayOutputStream();
        image.write(new byte[] {0, 0, 0, 1}); // the range count, which the header ends with
        try (CheckpointContents contents = new CheckpointContents(from, 1, CTX, new SessionQuota(1, t));
             CheckpointContents.DriverDevice device = new CheckpointContents.DriverDevice(from, (a, n) -> CTX)) {
            assertEquals(expectPinned, contents.pinnedBuffers());
            assertEquals(expectPinned * (long) CHUNK, t.pinnedUsed(), "the page-locked buffers are charged while they exist");
            var ch = Channels.newChannel(image);
            assertEquals(size, contents.write(ch, ranges, device, CheckpointProgress.NONE, size));
            CheckpointImage.writeEnd(ch);
        }
        assertEquals(0, t.pinnedUsed(), "given back");
        try (CheckpointContents contents = new CheckpointContents(to, 2, CTX, new SessionQuota(2, t));
             CheckpointContents.DriverDevice device = new CheckpointContents.DriverDevice(to, (a, n) -> CTX)) {
            assertEquals(size, contents.read(Channels.newChannel(new ByteArrayInputStream(image.toByteArray())), device,
                    CheckpointProgress.NONE, size));
        }
        assertEquals(0, t.pinnedUsed(), "given back");
        assertArrayEquals(from.memory, to.memory);
    }

    @Test
    void pageLockedBuffersAreChargedAndCopiedThroughAsynchronouslyOnAStreamOfTheirOwn() throws IOException {
        PinningDriver from = new PinningDriver(5 * CHUNK + 4321, CuResult.CUDA_SUCCESS);
        new Random(5).nextBytes(from.memory);
        PinningDriver to = new PinningDriver(from.memory.length, CuResult.CUDA_SUCCESS);
        Tenant t = tenant(64L << 20);
        roundTrip(from, to, t, CheckpointContents.BUFFERS);
        for (PinningDriver d : List.of(from, to)) {
            assertEquals(6, d.asyncCopies, "every chunk asynchronous");
            assertEquals(0, d.syncCopies);
            assertEquals(CheckpointContents.BUFFERS, d.registers);
            assertEquals(CheckpointContents.BUFFERS, d.unregisters, "every buffer unpinned");
            assertEquals(1, d.streamsMade, "one stream in the one context");
            assertEquals(1, d.streamsDestroyed);
            assertEquals(d.pushes, d.pops, "every context pushed was popped");
        }
    }

    @Test
    void pastTheTenantsPinnedLimitOrWithoutPageLockingBuffersArePlainAndCopiedThroughSynchronously() throws IOException {
        PinningDriver from = new PinningDriver(3 * CHUNK + 1, CuResult.CUDA_SUCCESS);
        new Random(6).nextBytes(from.memory);
        PinningDriver to = new PinningDriver(from.memory.length, CuResult.CUDA_ERROR_NOT_SUPPORTED);
        Tenant t = tenant(CHUNK + 100); // room for one buffer
        roundTrip(from, to, t, 1);
        assertEquals(1, from.registers, "past the limit the driver is not asked");
        assertEquals(1, t.rejections().get("pinned"));
        assertEquals(4, from.asyncCopies + from.syncCopies);
        assertEquals(1, from.unregisters);
        assertEquals(1, to.registers, "not asked again once it said NOT_SUPPORTED");
        assertEquals(0, to.unregisters);
        assertEquals(0, to.asyncCopies, "plain memory is copied synchronously");
        assertEquals(4, to.syncCopies);
        assertEquals(0, to.streamsMade);
    }
}
