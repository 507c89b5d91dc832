package io.gpusockets.backend.session;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Comparator;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link StableAddresses#live()} straight on the emulated device (in the backend's package, from the module that has
 * both): every allocation in the window with its kind, device, context, and for a pool allocation its pool and
 * stream; a stream-ordered free takes it out at the call, whatever the stream has reached.
 */
class StableAddressesLiveTest {
    private static void ok(int r) {
        assertEquals(CuResult.name(CuResult.CUDA_SUCCESS), CuResult.name(r));
    }

    @Test
    void liveListsEveryAllocationWithItsKind() {
        try (EmulatedDevice device = new EmulatedDevice(); Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8), pitch = arena.allocate(8);
            ok(device.cuInit(0));
            ok(device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
            long ctx = out.get(JAVA_LONG, 0);
            ok(device.cuStreamCreate(out, 0));
            long stream = out.get(JAVA_LONG, 0);
            StableAddresses stable = new StableAddresses(device, 42);
            ok(stable.cuMemAlloc(out, 100));
            long plain = out.get(JAVA_LONG, 0);
            ok(stable.cuMemAllocPitch(out, pitch, 100, 6, 4));
            long pitched = out.get(JAVA_LONG, 0);
            MemorySegment props = arena.allocate(MemoryProps.POOL_PROPS_SIZE, 8).fill((byte) 0);
            props.set(JAVA_INT, MemoryProps.TYPE, MemoryProps.ALLOCATION_TYPE_PINNED);
            props.set(JAVA_INT, MemoryProps.LOCATION, MemoryProps.LOCATION_TYPE_DEVICE);
            ok(stable.cuMemPoolCreate(out, props));
            long pool = out.get(JAVA_LONG, 0);
            ok(stable.cuMemAllocFromPoolAsync(out, 5000, pool, stream));
            long fromPool = out.get(JAVA_LONG, 0);
            ok(stable.cuMemAllocFromPoolAsync(out, 1 << 20, pool, stream));
            long large = out.get(JAVA_LONG, 0);

            assertEquals(List.of(
                    new StableAddresses.Live(plain, 100, 0, ctx, StableAddresses.Kind.PLAIN, 0, 0),
                    new StableAddresses.Live(pitched, 512 * 6, 0, ctx, StableAddresses.Kind.PITCHED, 0, 0),
                    new StableAddresses.Live(fromPool, 5000, 0, ctx, StableAddresses.Kind.POOL, pool, stream),
                    new StableAddresses.Live(large, 1 << 20, 0, ctx, StableAddresses.Kind.POOL, pool, stream)),
                    stable.live().stream().sorted(Comparator.comparing(StableAddresses.Live::kind)
                            .thenComparingLong(StableAddresses.Live::size)).toList());
            ok(stable.cuMemFreeAsync(fromPool, stream));
            ok(stable.cuMemFree(pitched));
            assertEquals(List.of(plain, large), stable.live().stream().map(StableAddresses.Live::base).sorted().toList());
            ok(stable.cuStreamSynchronize(stream));
            stable.close();
            ok(device.cuCtxDestroy(ctx));
        }
    }
}
