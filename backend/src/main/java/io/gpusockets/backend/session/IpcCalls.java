package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;

/**
 * Area {@code ipc}: IPC memory and event handles between sessions. Not served yet: every call is refused with
 * CUDA_ERROR_NOT_SUPPORTED, as the frontend answered before these calls were forwarded (issue 24 item 1 serves them
 * between sessions of one tenant).
 */
final class IpcCalls implements BackendHandlers.Ipc {
    private static final String NOT_YET = "IPC handles between sessions are not served by this backend yet";

    IpcCalls(Session session) {
    }

    @Override
    public int cuIpcGetMemHandle(Call c, long dptr) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, NOT_YET);
    }

    @Override
    public int cuIpcOpenMemHandle(Call c, long handle, int flags) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, NOT_YET);
    }

    @Override
    public int cuIpcCloseMemHandle(Call c, long dptr) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, NOT_YET);
    }

    @Override
    public int cuIpcGetEventHandle(Call c, long event) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, NOT_YET);
    }

    @Override
    public int cuIpcOpenEventHandle(Call c, long handle) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, NOT_YET);
    }
}
