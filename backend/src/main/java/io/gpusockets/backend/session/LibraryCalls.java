package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code libraries}: the calls that hand out several handles at once (the enumerations, each
 * interned with its library or module as owner, so that unloading it drops them) and the names of
 * kernels and functions, which the driver returns as pointers into its own memory and which travel
 * here as text.
 */
final class LibraryCalls implements BackendHandlers.Libraries {
    /** Most handles one enumeration may ask for (a module with more kernels is asked in vain). */
    static final int MAX_ENUMERATED = 1 << 16;
    /** Longest name sent back (mangled C++ names can be long; the driver's own limit is not documented). */
    static final int MAX_NAME = 16 << 10;

    private final Session session;
    private final CudaDriver driver;

    LibraryCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
    }

    @Override
    public int cuLibraryEnumerateKernels(Call c, int numKernels, long lib) throws CallRejected, IOException {
        MemorySegment out = room(c, numKernels);
        int r = driver.cuLibraryEnumerateKernels(out, numKernels, lib);
        if (r == CuResult.CUDA_SUCCESS) {
            sendInterned(c, out, numKernels, ParamType.KERNEL, session.handles().idOf(ParamType.LIB, lib), 0);
        }
        return r;
    }

    @Override
    public int cuModuleEnumerateFunctions(Call c, int numFunctions, long mod) throws CallRejected, IOException {
        MemorySegment out = room(c, numFunctions);
        int r = driver.cuModuleEnumerateFunctions(out, numFunctions, mod);
        if (r == CuResult.CUDA_SUCCESS) {
            sendInterned(c, out, numFunctions, ParamType.FUNC, session.handles().idOf(ParamType.MOD, mod),
                    session.currentContextId(c.lane));
        }
        return r;
    }

    /**
     * The variable's range is registered as owned by the library's module in the current context
     * (interned owned by the library, made in the context): the driver frees the variable when the
     * library is unloaded or the context destroyed, and the range must not outlive either, or the
     * session could reach memory the driver has since given to someone else.
     */
    @Override
    public int cuLibraryGetGlobal(Call c, long library, MemorySegment name) throws CallRejected {
        MemorySegment mod = c.scratch(8), dptr = c.scratch(8), bytes = c.scratch(8);
        int r = driver.cuLibraryGetModule(mod, library);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        r = driver.cuLibraryGetGlobal(dptr, bytes, library, name);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        c.reserveUnknown(ParamType.MOD, mod, 1);
        long libId = session.handles().idOf(ParamType.LIB, library);
        long context = session.currentContextId(c.lane);
        long modId = session.handles().intern(ParamType.MOD, mod.get(ValueLayout.JAVA_LONG, 0), libId, context);
        session.handles().claim(modId, libId, context);
        long base = dptr.get(ValueLayout.JAVA_LONG, 0), size = bytes.get(ValueLayout.JAVA_LONG, 0);
        // (its memory was charged with the library's load, in every context: ContextCharges)
        GlobalTranslation translation = session.translation();
        long program = translation == null ? base : translation.placed(base, size); // as the program knows it
        session.memory().add(new SessionMemory.Range(base, size, modId, false));
        c.outs.putLong(program).putLong(size);
        return r;
    }

    /** Reply: the name's length u32, its bytes (no NUL) as DATA. */
    @Override
    public int cuKernelGetName(Call c, long hfunc) throws CallRejected, IOException {
        MemorySegment out = c.scratch(8);
        return sendName(c, driver.cuKernelGetName(out, hfunc), out);
    }

    /** As {@link #cuKernelGetName}. */
    @Override
    public int cuFuncGetName(Call c, long hfunc) throws CallRejected, IOException {
        MemorySegment out = c.scratch(8);
        return sendName(c, driver.cuFuncGetName(out, hfunc), out);
    }

    /** Zeroed room for {@code count} handles (the call's scratch), the count bounded first. */
    private static MemorySegment room(Call c, int count) throws CallRejected {
        if (count < 0 || count > MAX_ENUMERATED) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "count=" + count + " (at most " + MAX_ENUMERATED + ")");
        }
        return count == 0 ? MemorySegment.NULL : c.scratch(8L * count).fill((byte) 0);
    }

    /** Replaces each real handle the driver wrote by this session's id (owned by {@code owner}) and sends the array. */
    private void sendInterned(Call c, MemorySegment out, int count, ParamType kind, long owner, long context)
            throws IOException, CallRejected {
        if (count == 0) {
            return;
        }
        c.reserveUnknown(kind, out, count);
        for (int i = 0; i < count; i++) {
            long real = out.getAtIndex(ValueLayout.JAVA_LONG, i);
            out.setAtIndex(ValueLayout.JAVA_LONG, i, session.handles().intern(kind, real, owner, context));
        }
        c.sendData(out);
    }

    private static int sendName(Call c, int r, MemorySegment out) throws CallRejected, IOException {
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        MemorySegment p = out.get(ValueLayout.ADDRESS, 0);
        if (p.address() == 0) {
            return CuResult.CUDA_ERROR_NOT_FOUND;
        }
        MemorySegment text = p.reinterpret(MAX_NAME + 1L);
        int n = 0;
        while (n <= MAX_NAME && text.get(ValueLayout.JAVA_BYTE, n) != 0) {
            n++;
        }
        if (n > MAX_NAME) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "name longer than " + MAX_NAME + " bytes");
        }
        c.outs.putInt(n);
        if (n > 0) {
            c.sendData(text.asSlice(0, n));
        }
        return r;
    }
}
