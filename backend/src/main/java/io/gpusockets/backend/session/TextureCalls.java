package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.structs.ResourceDesc;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code textures}: texture objects. Their resource descriptor names memory, so its device span
 * is checked, or its array handle translated, before the driver sees it.
 */
final class TextureCalls implements BackendHandlers.Textures {
    private final Session session;
    private final CudaDriver driver;

    TextureCalls(Session session) {
        this.session = session;
        this.driver = session.host().driver();
    }

    /**
     * The three descriptors' lengths as announced; their bytes follow as DATA. The resource's device
     * span is checked, or its array handle translated, before the driver sees it. Reply: the texture
     * object as this session's handle id.
     */
    @Override
    public int cuTexObjectCreate(Call c, long resLength, long texLength, long viewLength)
            throws ProtocolException, CallRejected, InterruptedException {
        if (resLength != ResourceDesc.SIZE || texLength != ResourceDesc.TEXTURE_DESC_SIZE
                || (viewLength != 0 && viewLength != ResourceDesc.VIEW_DESC_SIZE)) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "descriptor lengths " + resLength + "/" + texLength + "/" + viewLength);
        }
        MemorySegment res = c.receiveBulk(resLength);
        MemorySegment tex = c.receiveBulk(texLength);
        MemorySegment view = viewLength == 0 ? MemorySegment.NULL : c.receiveBulk(viewLength);
        long target = ResourceDesc.getLong(res, ResourceDesc.HANDLE_OR_POINTER);
        switch (ResourceDesc.type(res)) {
            case ResourceDesc.TYPE_ARRAY -> ResourceDesc.setLong(res, ResourceDesc.HANDLE_OR_POINTER,
                    c.handle(ParamType.ARRAY, target, false));
            case ResourceDesc.TYPE_LINEAR -> c.deviceRange(target, ResourceDesc.getLong(res, ResourceDesc.LINEAR_SIZE));
            case ResourceDesc.TYPE_PITCH2D -> c.deviceRange(target, ResourceDesc.pitch2DSpan(res));
            case ResourceDesc.TYPE_MIPMAPPED_ARRAY ->
                    throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "mipmapped arrays are not forwarded");
            default -> throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "resType " + ResourceDesc.type(res));
        }
        MemorySegment out = c.scratch(8);
        int r = driver.cuTexObjectCreate(out, res, tex, view);
        if (r == CuResult.CUDA_SUCCESS) {
            long context = session.currentContextId(c.lane);
            c.outs.putLong(session.handles().intern(ParamType.TEX, out.get(ValueLayout.JAVA_LONG, 0), 0, context));
        }
        return r;
    }

    /** Reply: the 144-byte descriptor as DATA, an array handle as this session's id. */
    @Override
    public int cuTexObjectGetResourceDesc(Call c, long tex) throws IOException {
        MemorySegment res = c.scratch(ResourceDesc.SIZE);
        int r = driver.cuTexObjectGetResourceDesc(res, tex);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        int type = ResourceDesc.type(res);
        if (type == ResourceDesc.TYPE_ARRAY || type == ResourceDesc.TYPE_MIPMAPPED_ARRAY) {
            long real = ResourceDesc.getLong(res, ResourceDesc.HANDLE_OR_POINTER);
            ResourceDesc.setLong(res, ResourceDesc.HANDLE_OR_POINTER,
                    type == ResourceDesc.TYPE_ARRAY ? session.handles().idOf(ParamType.ARRAY, real) : 0);
        }
        c.sendData(res.asSlice(0, ResourceDesc.SIZE));
        return r;
    }
}
