package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.tenant.Tenant;
import io.gpusockets.backend.tenant.TenantLimits;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.LimitFootprint;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.api.UnsupportedCudaDriver;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/**
 * The charges that depend on a session's contexts ({@link ContextCharges}), against a device double whose
 * free memory falls by 300 MiB a context: the footprint is measured there, the first context per device is
 * free, libraries cost their footprint per context, and limits are charged by {@link LimitFootprint}'s rule.
 */
class ContextChargesTest {
    private static final long MIB = 1L << 20;
    private static final long CONTEXT = 300 * MIB;
    /** An H200's resident threads: 2048 per multiprocessor, 132 multiprocessors. */
    private static final long THREADS = 2048L * 132;

    /** A device of 141 GiB whose contexts take {@link #CONTEXT} each, with an H200's attributes. */
    static final class MeteredDevice extends UnsupportedCudaDriver {
        long free = 141L << 30;
        long next = 0x100;
        int created;

        @Override
        public int cuDeviceGetAttribute(MemorySegment pi, int attrib, int dev) {
            int v = switch (attrib) {
                case LimitFootprint.ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR -> 2048;
                case LimitFootprint.ATTRIBUTE_MULTIPROCESSOR_COUNT -> 132;
                case 75 -> 9;
                default -> 0;
            };
            pi.set(ValueLayout.JAVA_INT, 0, v);
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public int cuCtxCreate(MemorySegment pctx, MemorySegment params, int flags, int dev) {
            free -= CONTEXT;
            created++;
            pctx.set(ValueLayout.JAVA_LONG, 0, next++);
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public int cuCtxDestroy(long ctx) {
            free += CONTEXT;
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public int cuMemGetInfo(MemorySegment f, MemorySegment total) {
            f.set(ValueLayout.JAVA_LONG, 0, free);
            total.set(ValueLayout.JAVA_LONG, 0, 141L << 30);
            return CuResult.CUDA_SUCCESS;
        }
    }

    private final MeteredDevice device = new MeteredDevice();
    private final Tenant tenant = new Tenant("t", new TenantLimits(1L << 30, 10, 4, 100, 100, MIB, 0));
    private final SessionQuota quota = new SessionQuota(1, tenant, new DeviceFacts(device, 1));
    private final ContextCharges charges = quota.contexts();

    private void context(long real) throws CallRejected {
        SessionQuota.Pending p = quota.beforeContext(0, "cuCtxCreate");
        quota.contextMade(p, real);
    }

    @Test
    void theFirstContextOnADeviceIsFreeAndEveryOtherCostsWhatOneMoreTakes() throws Exception {
        context(0xC1);
        assertEquals(0, tenant.memoryUsed(), "a session's first context is the price of the session");
        context(0xC2);
        assertEquals(141L << 30, device.free, "the contexts made to measure are gone");
        context(0xC3);
        context(0xC4);
        assertEquals(3 * CONTEXT, tenant.memoryUsed(), "measured: the second of two contexts took 300 MiB");
        CallRejected e = assertThrows(CallRejected.class, () -> quota.beforeContext(0, "cuCtxCreate"));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, e.result);
        assertEquals(1, tenant.rejections().get("memory"));
        // the refusal let the lock go: another lane's destroy is not held up
        java.util.concurrent.CompletableFuture.runAsync(() -> quota.handleDropped(new SessionHandles.Entry(9, ParamType.CTX, 0xC2, 0, 0)))
                .get(10, java.util.concurrent.TimeUnit.SECONDS);
        assertEquals(2 * CONTEXT, tenant.memoryUsed());
        assertEquals(2 * CONTEXT, quota.close(), "still charged at the end: reported");
        assertEquals(0, tenant.memoryUsed());
    }

    @Test
    void aTenantWithoutAMemoryLimitIsNotMeasuredForWhatNothingWouldRefuse() throws Exception {
        Tenant free = new Tenant("u", TenantLimits.UNLIMITED);
        SessionQuota q = new SessionQuota(2, free, new DeviceFacts(device, 1));
        for (long real : new long[] {0xC1, 0xC2}) {
            q.contextMade(q.beforeContext(0, "cuCtxCreate"), real);
        }
        assertEquals(0, device.created, "no context made to measure one");
        assertEquals(0, free.memoryUsed());
        assertFalse(q.metered());
        assertTrue(quota.metered());
    }

    @Test
    void aLibraryCostsItsFootprintInEveryContextOfTheSession() throws Exception {
        SessionQuota.Pending lib = charges.libraryBefore(10 * MIB, "cuLibraryLoadData");
        assertEquals(10 * MIB, tenant.memoryUsed(), "no context yet: charged once");
        charges.libraryLoaded(lib, 0x11B);
        context(0xC1);
        assertEquals(10 * MIB, tenant.memoryUsed(), "the first context: the library's one charge covers it");
        context(0xC2);
        assertEquals(CONTEXT + 20 * MIB, tenant.memoryUsed(), "a second context: one more footprint");
        quota.handleDropped(new SessionHandles.Entry(9, ParamType.CTX, 0xC2, 0, 0));
        assertEquals(10 * MIB, tenant.memoryUsed());
        quota.handleDropped(new SessionHandles.Entry(9, ParamType.LIB, 0x11B, 0, 0));
        assertEquals(0, tenant.memoryUsed());
        assertEquals(0, quota.close());
    }

    @Test
    void aLimitIsChargedWhatItReservesAboveWhatTheContextHadAndALowerOneGivesBack() throws Exception {
        context(0xC1);
        SessionQuota.Pending p = charges.limitBefore(0xC1, 0, LimitFootprint.STACK_SIZE, 2048, 1024, "cuCtxSetLimit");
        assertEquals(1024 * THREADS, tenant.memoryUsed(), "1 KiB more for each of 270336 resident threads");
        assertTrue(charges.limitSet(p, 2048));
        p = charges.limitBefore(0xC1, 0, LimitFootprint.STACK_SIZE, 1000, 2048, "cuCtxSetLimit");
        assertEquals(1024 * THREADS, tenant.memoryUsed(), "a decrease gives back after the driver's success");
        assertTrue(charges.limitSet(p, 1008));
        assertEquals(0, tenant.memoryUsed(), "below the baseline: nothing");

        p = charges.limitBefore(0xC1, 0, LimitFootprint.MALLOC_HEAP_SIZE, 512 * MIB, 8 * MIB, "cuCtxSetLimit");
        assertEquals(504 * MIB, tenant.memoryUsed());
        assertTrue(charges.limitSet(p, 256 * MIB), "the driver clamped it");
        assertEquals(248 * MIB, tenant.memoryUsed(), "trued up to what the driver kept");
        p = charges.limitBefore(0xC1, 0, LimitFootprint.PRINTF_FIFO_SIZE, 700 * MIB, 8 * MIB, "cuCtxSetLimit");
        assertFalse(charges.limitSet(p, 900 * MIB), "rounded past the quota: the caller restores the limit");
        assertEquals(248 * MIB, tenant.memoryUsed(), "and the reserve went back");
        CallRejected e = assertThrows(CallRejected.class,
                () -> charges.limitBefore(0xC1, 0, LimitFootprint.PRINTF_FIFO_SIZE, 2L << 30, 8 * MIB, "cuCtxSetLimit"));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, e.result, "past the quota before the driver is asked");
        quota.handleDropped(new SessionHandles.Entry(9, ParamType.CTX, 0xC1, 0, 0));
        assertEquals(0, tenant.memoryUsed(), "the context's limits went with it");
    }

    /**
     * A launch of a kernel needing more stack per thread than the context holds grows the reservation (H28):
     * charged by the stack's rule, refused past the quota, read once from the driver, recomputed by the next
     * stack limit, and covered for later launches without the lock.
     */
    @Test
    void aLaunchThatGrowsTheStackIsChargedUntilAStackLimitResetsIt() throws Exception {
        context(0xC1);
        assertEquals(0, charges.stackCovered(), "nothing known of the context's stack yet");
        int[] asked = {0};
        java.util.function.LongSupplier driverSays = () -> {
            asked[0]++;
            return 1024;
        };
        charges.launchNeeds(0xC1, 0, 1024, driverSays, "cuLaunchKernel");
        assertEquals(0, tenant.memoryUsed(), "a kernel within the default stack grows nothing");
        assertEquals(1024, charges.stackCovered());
        charges.launchNeeds(0xC1, 0, 2048, driverSays, "cuLaunchKernel");
        assertEquals(1024 * THREADS, tenant.memoryUsed(), "grown by 1 KiB for each resident thread");
        assertEquals(2048, charges.stackCovered(), "later launches of it read a field");
        assertEquals(1, asked[0], "the driver's stack is asked once per context");
        CallRejected over = assertThrows(CallRejected.class, () -> charges.launchNeeds(0xC1, 0, 8192, driverSays, "cuLaunchKernel"));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, over.result, "7 KiB x 270336 threads is past the 1 GiB quota");
        assertEquals(1024 * THREADS, tenant.memoryUsed(), "a refused launch charges nothing more");
        assertEquals(2048, charges.stackCovered());

        SessionQuota.Pending p = charges.limitBefore(0xC1, 0, LimitFootprint.STACK_SIZE, 3072, 2048, "cuCtxSetLimit");
        assertTrue(charges.limitSet(p, 3072));
        assertEquals(2048 * THREADS, tenant.memoryUsed(), "the set recomputes from its size over the first value");
        p = charges.limitBefore(0xC1, 0, LimitFootprint.STACK_SIZE, 1024, 3072, "cuCtxSetLimit");
        assertTrue(charges.limitSet(p, 1024));
        assertEquals(0, tenant.memoryUsed(), "set back: the growth went with the reservation the driver made anew");
        assertEquals(1024, charges.stackCovered());
        charges.launchNeeds(0xC1, 0, 2048, driverSays, "cuLaunchKernel");
        assertEquals(1024 * THREADS, tenant.memoryUsed(), "the next launch grows it again");

        context(0xC2);
        assertEquals(0, charges.stackCovered(), "a new context's stack is not known");
        quota.handleDropped(new SessionHandles.Entry(9, ParamType.CTX, 0xC1, 0, 0));
        assertEquals(CONTEXT, tenant.memoryUsed(), "the growth went with its context");
        charges.launchNeeds(0xC2, 0, 2048, () -> 1024, "cuLaunchKernel");
        assertEquals(CONTEXT + 1024 * THREADS, tenant.memoryUsed());
        assertEquals(CONTEXT + 1024 * THREADS, quota.close(), "the session's end gives it back");
        assertEquals(0, tenant.memoryUsed());
    }
}
