package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.LimitFootprint;
import io.gpusockets.protocol.api.ParamType;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The stack a launch makes the driver grow, charged before the launch. The driver reserves a context's stack
 * for every thread the device can hold at once ({@link LimitFootprint}); a launch of a kernel whose local
 * memory per thread ({@code CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES}) is more than the reservation grows it to what
 * the kernel needs, set or not, and keeps it until the next stack cuCtxSetLimit (measured on an H100, driver
 * 580: a kernel of 16 KiB of {@code .local} took (16 KiB - 1 KiB) × 270336 threads over the context's default
 * 1 KiB stack, and (16 KiB - 2 KiB) × 270336 after the stack was set to 2 KiB). The growth is charged as
 * setting the stack limit to the kernel's need would be ({@link ContextCharges#launchNeeds}).
 *
 * <p>The need is the kernel's local size rounded up to a multiple of 1 KiB: the driver's own rounding of
 * the grown size is not known (the measurement's 16 KiB kernel grew it to exactly 16 KiB, which any rounding
 * to a power of two up to 16 KiB would also give); the stack limit's sizes are kept in whole KiB here too.
 *
 * <p>The need is asked of the driver once per function or kernel handle, at its first launch, and kept on its
 * handle entry ({@link SessionHandles.Entry#stackNeed}): a CUfunction by cuFuncGetAttribute, a CUkernel by
 * cuKernelGetAttribute on the launching context's device (the driver refuses cuFuncGetAttribute of a CUkernel;
 * a kernel is assumed to need the same on every device it is launched on). A query the driver refuses leaves
 * the need 0: the launch is not held up by what it cannot tell. Every later launch reads that field and
 * compares it with {@link ContextCharges#stackCovered}; only a kernel that needs more takes the charges' lock.
 *
 * <p>Covered: cuLaunchKernel, cuLaunchCooperativeKernel and cuLaunchKernelEx (a launch into a capturing stream
 * too, charged at the capture), and the kernels of graphs, charged when they enter a graph (cuGraphAddKernelNode,
 * cuGraphKernelNodeSetParams, cuGraphExecKernelNodeSetParams) rather than at cuGraphLaunch: earlier than the
 * driver grows the stack, never later, and kept though the graph is never launched. A launch runs in the lane's
 * current context (the driver refuses a CUfunction of another context); a kernel node that names another context
 * ({@code ctx} of its parameters) is still weighed against the current context's reservation, which may charge
 * the named context's growth wrongly. Kernels launched from the device (dynamic parallelism) are not asked: the
 * charge follows the host-launched parent's local size only.
 */
final class LaunchStack {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES (cuda.h), for cuFuncGetAttribute and cuKernelGetAttribute. */
    static final int ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
    /** The granularity a kernel's local size is rounded up to (see the class comment). */
    static final long GRANULE = 1024;

    private LaunchStack() {
    }

    /**
     * Before launching {@code function} (a FUNC or KERNEL entry) in the calling lane's current context, or putting
     * it in a graph: charges the stack growth the launch makes, or refuses the call (CUDA_ERROR_OUT_OF_MEMORY) past
     * the tenant's quota.
     */
    static void charge(Session session, Call c, SessionHandles.Entry function) throws CallRejected {
        int need = function.stackNeed;
        if (need < 0) {
            need = need(session.driver(), c, function);
            function.stackNeed = need;
        }
        ContextCharges charges = session.quota().contexts();
        if (need <= charges.stackCovered()) {
            return;
        }
        CudaDriver driver = session.driver();
        charges.launchNeeds(c.lane.topContext(), SessionQuota.currentDevice(driver, c), need,
                () -> stackNow(driver, c), c.name());
    }

    /** The per-thread stack a launch of {@code function} needs: its local size rounded up to {@link #GRANULE}. */
    private static int need(CudaDriver driver, Call c, SessionHandles.Entry function) {
        MemorySegment pi = c.scratch(4);
        int r = function.kind() == ParamType.KERNEL
                ? driver.cuKernelGetAttribute(pi, ATTRIBUTE_LOCAL_SIZE_BYTES, function.real(), SessionQuota.currentDevice(driver, c))
                : driver.cuFuncGetAttribute(pi, ATTRIBUTE_LOCAL_SIZE_BYTES, function.real());
        if (r != CuResult.CUDA_SUCCESS) {
            LOG.log(Level.DEBUG, () -> c.name() + ": the driver did not tell the local size of function 0x"
                    + Long.toHexString(function.real()) + " (" + CuResult.name(r) + "): its launches are charged no stack");
            return 0;
        }
        return rounded(pi.get(ValueLayout.JAVA_INT, 0));
    }

    /** {@code localBytes} rounded up to a multiple of {@link #GRANULE} (0 stays 0; a negative answer counts as 0). */
    static int rounded(int localBytes) {
        if (localBytes <= 0) {
            return 0;
        }
        long up = (localBytes + GRANULE - 1) / GRANULE * GRANULE;
        return (int) Math.min(up, Integer.MAX_VALUE / GRANULE * GRANULE);
    }

    /** The current context's stack limit as the driver reads it, or -1 when it cannot. */
    private static long stackNow(CudaDriver driver, Call c) {
        MemorySegment v = c.scratch(8);
        return driver.cuCtxGetLimit(v, LimitFootprint.STACK_SIZE) == CuResult.CUDA_SUCCESS ? v.get(ValueLayout.JAVA_LONG, 0) : -1;
    }
}
