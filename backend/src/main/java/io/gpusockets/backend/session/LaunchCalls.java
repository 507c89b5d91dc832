package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.LaunchConfigRequest;
import io.gpusockets.protocol.calls.LaunchRequest;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code launches}: kernel launches, whose parameters are rebuilt as the native arrays the
 * driver reads, and the calls that take a CUlaunchConfig, whose attributes are checked here: events
 * translated, an access-policy window's device range checked, graph-only and unknown ids refused
 * ({@link LaunchAttributes}). The same values set on a stream (cuStreamSetAttribute) or a kernel node
 * (cuGraphKernelNodeSetAttribute) are checked the same way. Each launch first charges the stack growth its
 * kernel makes the driver reserve ({@link LaunchStack}).
 */
final class LaunchCalls implements BackendHandlers.Launches {
    private final CudaDriver driver;
    private final Session session;

    LaunchCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
    }

    /** Waits for the device-time scheduler's admission, when tenants have shares; else null at once. */
    private io.gpusockets.backend.tenant.DeviceShare.Ticket admit() throws CallRejected {
        LaunchShares ls = session.launchShares();
        if (ls == null) {
            return null;
        }
        try {
            return ls.before();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CallRejected(CuResult.CUDA_ERROR_UNKNOWN, "interrupted while waiting for the device");
        }
    }

    /**
     * A restored session whose module globals moved ({@link GlobalTranslation}): every 8-byte aligned word of the
     * kernel's parameters (each parameter's copy, or mode 1's buffer) whose value lies in a global's range as the
     * program knows it becomes the real address (a pointer-sized parameter, or a pointer inside a struct). The
     * parameters' sizes are read again from the request {@code body} at {@code at} (where
     * {@link LaunchRequest#readKernelParams} read them). Nothing is done, nor read, for a session without
     * translations. Launches and graph kernel nodes ({@link GraphCalls}) both.
     */
    static void translate(Session session, java.nio.ByteBuffer body, int at, MemorySegment kernelParams,
                          MemorySegment extra) {
        GlobalTranslation t = session.translation();
        if (t == null) {
            return;
        }
        if (!extra.equals(MemorySegment.NULL)) {
            MemorySegment buffer = extra.getAtIndex(ValueLayout.ADDRESS, 1);
            long size = extra.getAtIndex(ValueLayout.ADDRESS, 3).reinterpret(8).get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            translateWords(t, buffer.reinterpret(size));
            return;
        }
        java.nio.ByteBuffer b = body.duplicate().order(java.nio.ByteOrder.LITTLE_ENDIAN).position(at);
        int count = b.getInt();
        for (int i = 0; i < count; i++) {
            int size = b.getInt();
            b.position(b.position() + size);
            translateWords(t, kernelParams.getAtIndex(ValueLayout.ADDRESS, i).reinterpret(size));
        }
    }

    private static void translateWords(GlobalTranslation t, MemorySegment s) {
        for (long off = 0; off + 8 <= s.byteSize(); off += 8) {
            long v = s.get(ValueLayout.JAVA_LONG_UNALIGNED, off);
            long real = t.toReal(v);
            if (real != v) {
                s.set(ValueLayout.JAVA_LONG_UNALIGNED, off, real);
            }
        }
    }

    /**
     * The real function behind a launch's function id, the stack its launch grows charged first
     * ({@link LaunchStack}): past the tenant's quota the launch is refused before the driver sees it.
     */
    private long launchable(Call c, long id) throws CallRejected {
        SessionHandles.Entry e = c.entry(ParamType.FUNC, id);
        LaunchStack.charge(session, c, e);
        return e.real();
    }

    /** After the launch: the scheduler follows it to its completion. */
    private int launched(io.gpusockets.backend.tenant.DeviceShare.Ticket t, Call c, long stream, int r) {
        if (t != null) {
            session.launchShares().after(t, c.lane.topContext(), stream, r);
        }
        return r;
    }

    /** The request is {@link LaunchRequest}'s; the parameters are copied into this call's scratch memory. */
    @Override
    public int cuLaunchKernel(Call c) throws ProtocolException, CallRejected {
        LaunchRequest.Header h = LaunchRequest.readHeader(c.body);
        SegmentAllocator scratch = (bytes, alignment) -> c.scratch(bytes);
        MemorySegment kernelParams = MemorySegment.NULL;
        MemorySegment extra = MemorySegment.NULL;
        int params = c.body.position();
        if (h.mode() == LaunchRequest.MODE_KERNEL_PARAMS) {
            kernelParams = LaunchRequest.readKernelParams(c.body, scratch);
        } else {
            extra = LaunchRequest.readExtra(c.body, scratch);
        }
        c.expectEnd();
        translate(session, c.body, params, kernelParams, extra);
        long f = launchable(c, h.function());
        long stream = c.handle(ParamType.STREAM, h.stream(), true);
        var t = admit();
        return launched(t, c, stream, driver.cuLaunchKernel(f, h.gridX(), h.gridY(), h.gridZ(), h.blockX(), h.blockY(),
                h.blockZ(), h.sharedMemBytes(), stream, kernelParams, extra));
    }

    /** As {@link #cuLaunchKernel}; a cooperative launch takes no {@code extra}. */
    @Override
    public int cuLaunchCooperativeKernel(Call c) throws ProtocolException, CallRejected {
        LaunchRequest.Header h = LaunchRequest.readHeader(c.body);
        if (h.mode() != LaunchRequest.MODE_KERNEL_PARAMS) {
            throw new ProtocolException("cuLaunchCooperativeKernel: mode=" + h.mode() + " (only kernel parameters)");
        }
        int params = c.body.position();
        MemorySegment kernelParams = LaunchRequest.readKernelParams(c.body, (bytes, alignment) -> c.scratch(bytes));
        c.expectEnd();
        translate(session, c.body, params, kernelParams, MemorySegment.NULL);
        long f = launchable(c, h.function());
        long stream = c.handle(ParamType.STREAM, h.stream(), true);
        var t = admit();
        return launched(t, c, stream, driver.cuLaunchCooperativeKernel(f, h.gridX(), h.gridY(), h.gridZ(), h.blockX(),
                h.blockY(), h.blockZ(), h.sharedMemBytes(), stream, kernelParams));
    }

    /** The request is {@link LaunchConfigRequest}'s: attributes, then {@link LaunchRequest}'s header and parameters. */
    @Override
    public int cuLaunchKernelEx(Call c) throws ProtocolException, CallRejected {
        SegmentAllocator scratch = (bytes, alignment) -> c.scratch(bytes);
        LaunchConfigRequest.Attributes attrs = LaunchConfigRequest.readAttributes(c.body, scratch);
        LaunchRequest.Header h = LaunchRequest.readHeader(c.body);
        MemorySegment kernelParams = MemorySegment.NULL;
        MemorySegment extra = MemorySegment.NULL;
        int params = c.body.position();
        if (h.mode() == LaunchRequest.MODE_KERNEL_PARAMS) {
            kernelParams = LaunchRequest.readKernelParams(c.body, scratch);
        } else {
            extra = LaunchRequest.readExtra(c.body, scratch);
        }
        c.expectEnd();
        translate(session, c.body, params, kernelParams, extra);
        MemorySegment config = config(c, scratch, attrs, h);
        long f = launchable(c, h.function());
        var t = admit();
        return launched(t, c, c.handle(ParamType.STREAM, h.stream(), true),
                driver.cuLaunchKernelEx(config, f, kernelParams, extra));
    }

    @Override
    public int cuOccupancyMaxPotentialClusterSize(Call c) throws ProtocolException, CallRejected {
        return clusterQuery(c, true);
    }

    @Override
    public int cuOccupancyMaxActiveClusters(Call c) throws ProtocolException, CallRejected {
        return clusterQuery(c, false);
    }

    /** The two cluster occupancy queries: a config without parameters; reply the i32 answer. */
    private int clusterQuery(Call c, boolean size) throws ProtocolException, CallRejected {
        SegmentAllocator scratch = (bytes, alignment) -> c.scratch(bytes);
        LaunchConfigRequest.Attributes attrs = LaunchConfigRequest.readAttributes(c.body, scratch);
        LaunchRequest.Header h = LaunchRequest.readHeader(c.body);
        if (h.mode() != LaunchRequest.MODE_KERNEL_PARAMS || c.body.getInt() != 0) {
            throw new ProtocolException("cluster occupancy: parameters are not part of this request");
        }
        c.expectEnd();
        MemorySegment config = config(c, scratch, attrs, h);
        long f = c.handle(ParamType.FUNC, h.function(), false);
        MemorySegment out = c.scratch(4);
        int r = size ? driver.cuOccupancyMaxPotentialClusterSize(out, f, config) : driver.cuOccupancyMaxActiveClusters(out, f, config);
        if (r == CuResult.CUDA_SUCCESS) {
            c.outs.putInt(out.get(ValueLayout.JAVA_INT, 0));
        }
        return r;
    }

    /** The value travels as its 64 bytes of DATA; it is checked by its id before the driver sees it. */
    @Override
    public int cuStreamSetAttribute(Call c, long hStream, int attr, long value)
            throws ProtocolException, CallRejected, InterruptedException {
        MemorySegment v = attributeValue(c, value);
        LaunchAttributes.check(c, attr, v, LaunchAttributes.Target.STREAM);
        return driver.cuStreamSetAttribute(hStream, attr, v);
    }

    /** As {@link #cuStreamSetAttribute}, for a kernel node of one of the session's graphs. */
    @Override
    public int cuGraphKernelNodeSetAttribute(Call c, long hNode, int attr, long value)
            throws ProtocolException, CallRejected, InterruptedException {
        MemorySegment v = attributeValue(c, value);
        LaunchAttributes.check(c, attr, v, LaunchAttributes.Target.KERNEL_NODE);
        return driver.cuGraphKernelNodeSetAttribute(hNode, attr, v);
    }

    /** A CUlaunchAttributeValue off the call's DATA: exactly its 64 bytes. */
    private static MemorySegment attributeValue(Call c, long length)
            throws ProtocolException, CallRejected, InterruptedException {
        if (length != LaunchConfigRequest.VALUE_BYTES) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "attribute value of " + length + " bytes");
        }
        return c.receiveBulk(length);
    }

    /** The native CUlaunchConfig, its stream and attributes checked and translated. */
    private static MemorySegment config(Call c, SegmentAllocator scratch, LaunchConfigRequest.Attributes attrs,
                                        LaunchRequest.Header h) throws CallRejected {
        for (int i = 0; i < attrs.count(); i++) {
            LaunchAttributes.check(c, attrs.id(i), attrs.value(i), LaunchAttributes.Target.LAUNCH);
        }
        long stream = c.handle(ParamType.STREAM, h.stream(), true);
        return LaunchConfigRequest.config(scratch, h, stream, attrs);
    }
}
