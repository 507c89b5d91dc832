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
 * Area {@code textures}: texture and surface objects. Their resource descriptor names memory, so its device
 * span is checked, or its array handle translated, before the driver sees it. Their ids are the driver's
 * values (kernels receive them as parameters, which the backend does not read); a program can only name
 * such an object in a call if this session made it, and a value passed to a kernel reaches only the
 * objects of the kernel's own context on the device. A checkpoint records the calls that made them with their
 * values; a restore replays them and refuses to go on when the driver gives another value ({@link SessionRestore}).
 */
final class TextureCalls implements BackendHandlers.Textures {
    private final Session session;
    private final CudaDriver driver;

    TextureCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
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
            case ResourceDesc.TYPE_LINEAR -> ResourceDesc.setLong(res, ResourceDesc.HANDLE_OR_POINTER,
                    c.deviceRange(target, ResourceDesc.getLong(res, ResourceDesc.LINEAR_SIZE)));
            case ResourceDesc.TYPE_PITCH2D -> ResourceDesc.setLong(res, ResourceDesc.HANDLE_OR_POINTER,
                    c.deviceRange(target, ResourceDesc.pitch2DSpan(res)));
            case ResourceDesc.TYPE_MIPMAPPED_ARRAY -> ResourceDesc.setLong(res, ResourceDesc.HANDLE_OR_POINTER,
                    c.handle(ParamType.MIPMAP, target, false));
            default -> throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "resType " + ResourceDesc.type(res));
        }
        MemorySegment out = c.scratch(8);
        int r = driver.cuTexObjectCreate(out, res, tex, view);
        if (r == CuResult.CUDA_SUCCESS) {
            long real = out.get(ValueLayout.JAVA_LONG, 0);
            long id = session.handles().intern(ParamType.TEX, real, 0, session.currentContextId(c.lane));
            if (id == 0) {
                driver.cuTexObjectDestroy(real);
                return CuResult.CUDA_ERROR_OUT_OF_MEMORY;   // its value is another handle's id here: SessionHandles#intern
            }
            c.outs.putLong(id);
        }
        return r;
    }

    /**
     * The resource descriptor's length as announced; its bytes follow as DATA. The resource must be an array,
     * whose handle is translated. Reply: the surface object, whose id is its driver value (SessionHandles#intern).
     */
    @Override
    public int cuSurfObjectCreate(Call c, long resLength) throws ProtocolException, CallRejected, InterruptedException {
        if (resLength != ResourceDesc.SIZE) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "descriptor length " + resLength);
        }
        MemorySegment res = c.receiveBulk(resLength);
        if (ResourceDesc.type(res) != ResourceDesc.TYPE_ARRAY) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "a surface's resource must be an array: resType " + ResourceDesc.type(res));
        }
        ResourceDesc.setLong(res, ResourceDesc.HANDLE_OR_POINTER,
                c.handle(ParamType.ARRAY, ResourceDesc.getLong(res, ResourceDesc.HANDLE_OR_POINTER), false));
        MemorySegment out = c.scratch(8);
        int r = driver.cuSurfObjectCreate(out, res);
        if (r == CuResult.CUDA_SUCCESS) {
            long real = out.get(ValueLayout.JAVA_LONG, 0);
            long id = session.handles().intern(ParamType.SURF, real, 0, session.currentContextId(c.lane));
            if (id == 0) {
                driver.cuSurfObjectDestroy(real);
                return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
            }
            c.outs.putLong(id);
        }
        return r;
    }

    /** Reply: the 144-byte descriptor as DATA, its array handle as this session's id. */
    @Override
    public int cuSurfObjectGetResourceDesc(Call c, long surf) throws IOException {
        MemorySegment res = c.scratch(ResourceDesc.SIZE);
        int r = driver.cuSurfObjectGetResourceDesc(res, surf);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        if (ResourceDesc.type(res) == ResourceDesc.TYPE_ARRAY) {
            ResourceDesc.setLong(res, ResourceDesc.HANDLE_OR_POINTER,
                    session.handles().idOf(ParamType.ARRAY, ResourceDesc.getLong(res, ResourceDesc.HANDLE_OR_POINTER)));
        }
        c.sendData(res.asSlice(0, ResourceDesc.SIZE));
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
                    session.handles().idOf(type == ResourceDesc.TYPE_ARRAY ? ParamType.ARRAY : ParamType.MIPMAP, real));
        }
        c.sendData(res.asSlice(0, ResourceDesc.SIZE));
        return r;
    }
}
