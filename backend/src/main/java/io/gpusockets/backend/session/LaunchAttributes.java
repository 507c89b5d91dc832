package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.LaunchConfigRequest;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The checks of a {@code CUlaunchAttributeValue} (64 bytes) by its {@code CUlaunchAttributeID}, for the
 * three places cuda.h 13.0 takes one: a launch's CUlaunchConfig, cuStreamSetAttribute and
 * cuGraphKernelNodeSetAttribute. What a value names is checked before the driver sees it: an
 * access-policy window ({@code base_ptr}, {@code num_bytes}) must lie in the session's memory; a
 * launch's events are translated to the driver's. Plain values (flags, priorities, dimensions, domain
 * maps, policies) go to the driver, which answers for ids it does not take where they are set (the
 * cooperative flag on a stream, say). Ids cuda.h 13.0 does not define are refused with
 * CUDA_ERROR_INVALID_VALUE on streams and kernel nodes (what they would carry is unknown), and with
 * CUDA_ERROR_NOT_SUPPORTED on launches, as before. Events on streams and kernel nodes, which cuda.h
 * documents as valid for launches only, are refused with CUDA_ERROR_INVALID_VALUE, so no real event
 * handle is ever stored where a later get would hand it to the guest. A device-updatable kernel node
 * (id 13) hands out a device-side handle through which kernels rewrite the node's parameters, which
 * the backend could no longer check: refused with CUDA_ERROR_NOT_SUPPORTED everywhere.
 */
final class LaunchAttributes {
    /** Where an attribute is set. */
    enum Target { LAUNCH, STREAM, KERNEL_NODE }

    private LaunchAttributes() {
    }

    /** Checks (and for launches translates) the value {@code v} of attribute {@code id}; throws what to answer. */
    static void check(Call c, int id, MemorySegment v, Target target) throws CallRejected {
        switch (id) {
            case LaunchConfigRequest.PROGRAMMATIC_EVENT, LaunchConfigRequest.LAUNCH_COMPLETION_EVENT -> {
                if (target != Target.LAUNCH) {
                    throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE,
                            "attribute " + id + " (an event) is valid for launches only");
                }
                v.set(ValueLayout.JAVA_LONG, 0, c.handle(ParamType.EVENT, v.get(ValueLayout.JAVA_LONG, 0), false));
            }
            case LaunchConfigRequest.ACCESS_POLICY_WINDOW -> {
                long base = v.get(ValueLayout.JAVA_LONG, 0), bytes = v.get(ValueLayout.JAVA_LONG, 8);
                if (bytes != 0) {
                    v.set(ValueLayout.JAVA_LONG, 0, c.deviceRange(base, bytes));
                }
            }
            case LaunchConfigRequest.DEVICE_UPDATABLE_KERNEL_NODE -> throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED,
                    "device-updatable kernel nodes are not forwarded: kernels would rewrite the node's parameters unchecked");
            // plain values: ignore, cooperative, synchronization policy, cluster dimension, cluster scheduling,
            // programmatic serialization, priority, memory sync domain map and domain, preferred cluster
            // dimension, shared memory carveout, NVLink-centric scheduling
            case 0, 2, 3, 4, 5, 6, 8, 9, 10, 11, 14, 16 -> {
            }
            default -> throw new CallRejected(target == Target.LAUNCH ? CuResult.CUDA_ERROR_NOT_SUPPORTED
                    : CuResult.CUDA_ERROR_INVALID_VALUE, "launch attribute " + id + " is not forwarded");
        }
    }
}
