package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.LinkCompleteRequest;
import io.gpusockets.protocol.calls.ModuleImageKind;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Area {@code linking}: the linked image of cuLinkComplete, which lives in driver memory owned by
 * the link state, reaches the guest in two steps ({@link LinkCompleteRequest}): its size, then its
 * bytes. The image's address and size are kept here per link handle between the steps and
 * forgotten at cuLinkDestroy; the driver frees the image then.
 */
final class LinkCalls implements BackendHandlers.Linking {
    /** A completed link: where the driver put the image and how long it is. */
    private record Linked(long address, long size) {
    }

    private final Session session;
    private final CudaDriver driver;
    private final Map<Long, Linked> linked = new ConcurrentHashMap<>();

    LinkCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
    }

    /**
     * Synchronized with {@link #cuLinkDestroy}: the image is read while it is sent, and the driver
     * frees it when the state is destroyed (another lane of the session may ask that meanwhile).
     */
    @Override
    public synchronized int cuLinkComplete(Call c) throws ProtocolException, CallRejected, IOException {
        LinkCompleteRequest.Request q;
        try {
            q = LinkCompleteRequest.read(c.body);
        } catch (IllegalArgumentException e) {
            throw new ProtocolException(e.getMessage());
        }
        c.expectEnd();
        long state = c.handle(ParamType.LINK, q.state(), false);
        Linked done = linked.get(q.state());
        if (q.capacity() == 0) {
            if (done == null) {   // one driver cuLinkComplete per state, whichever lane asks first
                MemorySegment out = c.scratch(16);
                int r = driver.cuLinkComplete(state, out, out.asSlice(8, 8));
                if (r != CuResult.CUDA_SUCCESS) {
                    return r;
                }
                long size = out.get(ValueLayout.JAVA_LONG, 8);
                long address = out.get(ValueLayout.JAVA_LONG, 0);
                if (address == 0 || size <= 0 || size > ModuleImageKind.MAX_IMAGE) {
                    throw new CallRejected(CuResult.CUDA_ERROR_INVALID_IMAGE, "linked image of " + size + " bytes at 0x"
                            + Long.toHexString(address) + " (at most " + ModuleImageKind.MAX_IMAGE + " are sent)");
                }
                done = new Linked(address, size);
                linked.put(q.state(), done);
            }
            LinkCompleteRequest.putSize(c.outs, done.size());
            return CuResult.CUDA_SUCCESS;
        }
        if (done == null || q.capacity() != done.size()) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "cuLinkComplete: capacity " + q.capacity()
                    + (done == null ? " before the link was completed" : " differs from the image's " + done.size() + " bytes"));
        }
        c.sendData(MemorySegment.ofAddress(done.address()).reinterpret(done.size()));
        LinkCompleteRequest.putSize(c.outs, done.size());
        return CuResult.CUDA_SUCCESS;
    }

    /** The driver frees the state's image: forget it, and the handle. */
    @Override
    public synchronized int cuLinkDestroy(Call c, long state) {
        long id = session.handles().idOf(ParamType.LINK, state);
        int r = driver.cuLinkDestroy(state);
        if (r == CuResult.CUDA_SUCCESS) {
            linked.remove(id);
            session.dropHandle(id);
        }
        return r;
    }
}
