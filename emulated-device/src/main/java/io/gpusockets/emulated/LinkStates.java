package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NO_BINARY_FOR_GPU;

import io.gpusockets.protocol.calls.ModuleImageKind;
import io.gpusockets.protocol.images.FatbinImage;
import io.gpusockets.protocol.images.ImageError;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * JIT link states (cuLinkCreate .. cuLinkDestroy) on the emulated device, which runs PTX: a state
 * collects the PTX of its inputs (PTX text; a fatbin's best PTX entry, as a module load takes it;
 * a -G cubin's PTX section; each fatbin with PTX inside a library archive, linked on demand) and
 * cuLinkComplete links them ({@link PtxLinker}: externs bound,
 * duplicates and unresolved symbols refused with CUDA_ERROR_INVALID_PTX). The image it returns is
 * the linked PTX text, NUL-terminated, owned by the state until cuLinkDestroy: the driver returns a
 * cubin, but any image cuModuleLoadData accepts will do, and PTX is what this device loads. Inputs
 * without PTX (SASS cubins, host objects, archives without PTX, NVVM IR) are CUDA_ERROR_NOT_SUPPORTED, naming
 * what was given. JIT options tune or log a compile that does not happen here: they are ignored.
 * Link states belong to no context (like libraries).
 */
final class LinkStates {
    /** CUjitInputType (cuda.h). */
    static final int INPUT_CUBIN = 0;
    static final int INPUT_PTX = 1;
    static final int INPUT_FATBINARY = 2;
    static final int INPUT_OBJECT = 3;
    static final int INPUT_LIBRARY = 4;
    static final int INPUT_NVVM = 5;
    static final int NUM_INPUT_TYPES = 6;
    /** Most inputs one state takes. */
    static final int MAX_INPUTS = 4096;

    /** One link state: its inputs' PTX and, once complete, the linked image. */
    static final class State {
        final long handle;
        final List<PtxLinker.Unit> units = new ArrayList<>();
        Arena arena;
        MemorySegment image;

        State(long handle) {
            this.handle = handle;
        }
    }

    private final Handles handles;
    private final Contexts contexts;

    LinkStates(Handles handles, Contexts contexts) {
        this.handles = handles;
        this.contexts = contexts;
    }

    void create(int numOptions, MemorySegment options, MemorySegment optionValues, MemorySegment stateOut) {
        contexts.current();   // the driver needs a current context
        if (numOptions < 0 || (numOptions > 0 && (HostSegments.isNull(options) || HostSegments.isNull(optionValues)))) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "numOptions=" + Integer.toUnsignedString(numOptions) + " without its arrays");
        }
        long handle = handles.issue();
        HostSegments.putLong(stateOut, handle, "stateOut");
        handles.register(handle, new State(handle));
    }

    void addData(long state, int type, MemorySegment data, long size, MemorySegment name) {
        State s = state(state);
        if (size <= 0 || size > ModuleImageKind.MAX_IMAGE) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "size=" + Long.toUnsignedString(size) + " is not in 1.." + ModuleImageKind.MAX_IMAGE);
        }
        MemorySegment bytes = HostSegments.sized(data, size, "data");
        String label = HostSegments.isNull(name) ? "input " + (s.units.size() + 1)
                : "input " + (s.units.size() + 1) + " (" + HostSegments.cString(name, HostSegments.MAX_NAME, "name") + ")";
        if (type == INPUT_LIBRARY && startsWith(bytes, ARCHIVE_MAGIC)) {
            add(s, archivePtx(bytes, label));
            return;
        }
        String ptx = switch (type) {
            case INPUT_PTX -> ptxText(bytes, label);
            case INPUT_FATBINARY, INPUT_LIBRARY -> fatbinPtx(bytes, type, label);
            case INPUT_CUBIN, INPUT_OBJECT -> cubinPtx(bytes, type, label);
            case INPUT_NVVM -> throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, label + ": NVVM IR (CU_JIT_INPUT_NVVM) cannot be "
                    + "linked on the emulated device, which runs PTX");
            default -> throw new CudaError(CUDA_ERROR_INVALID_VALUE, "type=" + type + " is not a CUjitInputType (0.."
                    + (NUM_INPUT_TYPES - 1) + ")");
        };
        add(s, List.of(new PtxLinker.Unit(label, ptx)));
    }

    private static void add(State s, List<PtxLinker.Unit> units) {
        for (PtxLinker.Unit u : units) {
            PtxModule.parse(u.ptx());   // as the driver compiles PTX when it is added: a malformed unit fails here
        }
        synchronized (s) {
            if (s.image != null) {
                throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "link state already completed");
            }
            if (s.units.size() + units.size() > MAX_INPUTS) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "more than " + MAX_INPUTS + " inputs to one link state");
            }
            s.units.addAll(units);
        }
    }

    /** "!<arch>\n": an ar archive (a device library from nvcc -lib, of host objects that carry fatbins). */
    static final byte[] ARCHIVE_MAGIC = "!<arch>\n".getBytes(StandardCharsets.US_ASCII);

    /**
     * The PTX of every fatbin inside an archive's members, each an on-demand unit (linked only if it
     * resolves a reference, as nvlink takes archive members). nvcc -lib stores each object's
     * relocatable fatbin in its {@code __nv_relfatbin} section; rather than reading ar and ELF
     * headers, the archive is scanned for the fatbin magic and each candidate is taken only if its
     * headers and entries check out ({@link FatbinImage#entries}).
     */
    private static List<PtxLinker.Unit> archivePtx(MemorySegment archive, String label) {
        List<PtxLinker.Unit> units = new ArrayList<>();
        int withoutPtx = 0;
        long n = archive.byteSize();
        for (long at = ARCHIVE_MAGIC.length; at + ModuleImageKind.FATBIN_MIN_BYTES <= n; at++) {
            if (archive.get(ValueLayout.JAVA_INT_UNALIGNED, at) != ModuleImageKind.FATBIN_MAGIC) {
                continue;
            }
            MemorySegment rest = archive.asSlice(at);
            long length = ModuleImageKind.length(rest);
            if (length < 0) {
                continue;
            }
            MemorySegment fatbin = rest.asSlice(0, length);
            try {
                FatbinImage.entries(fatbin);
            } catch (ImageError notOne) {
                continue;
            }
            try {
                units.add(new PtxLinker.Unit(label + " fatbin " + (units.size() + withoutPtx + 1),
                        FatbinImage.ptx(fatbin, ModuleImage.capability()), true));
            } catch (ImageError none) {
                if (none.code != CUDA_ERROR_NO_BINARY_FOR_GPU) {
                    throw new CudaError(none.code, none.getMessage());
                }
                withoutPtx++;
            }
            at += length - 1;
        }
        if (units.isEmpty()) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, label + ": the library holds " + (withoutPtx == 0 ? "no fatbin"
                    : withoutPtx + " fatbin(s) without PTX for compute capability " + ModuleImage.capability() / 10 + "."
                    + ModuleImage.capability() % 10) + "; the emulated device links PTX only");
        }
        return units;
    }

    private static boolean startsWith(MemorySegment s, byte[] magic) {
        if (s.byteSize() < magic.length) {
            return false;
        }
        for (int i = 0; i < magic.length; i++) {
            if (s.get(ValueLayout.JAVA_BYTE, i) != magic[i]) {
                return false;
            }
        }
        return true;
    }

    void complete(long state, MemorySegment cubinOut, MemorySegment sizeOut) {
        State s = state(state);
        if (HostSegments.isNull(cubinOut)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "cubinOut is NULL");
        }
        synchronized (s) {
            if (s.image == null) {
                if (s.units.isEmpty()) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, "nothing was added to the link state");
                }
                byte[] text = PtxLinker.link(s.units, null).getBytes(StandardCharsets.UTF_8);
                Arena arena = Arena.ofShared();
                MemorySegment image = arena.allocate(text.length + 1L, 8);
                MemorySegment.copy(text, 0, image, ValueLayout.JAVA_BYTE, 0, text.length);
                s.arena = arena;
                s.image = image;
            }
            HostSegments.putLong(cubinOut, s.image.address(), "cubinOut");
            HostSegments.putLongIfPresent(sizeOut, s.image.byteSize(), "sizeOut");
        }
    }

    void destroy(long state) {
        State s = state(state);
        if (!handles.remove(state, s)) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "link state " + Long.toHexString(state) + " was destroyed");
        }
        synchronized (s) {
            if (s.arena != null) {
                s.arena.close();
                s.arena = null;
            }
        }
    }

    private State state(long handle) {
        contexts.requireInit();
        State s = handles.find(handle, State.class);
        if (s == null) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "not a link state: 0x" + Long.toHexString(handle));
        }
        return s;
    }

    private static String ptxText(MemorySegment bytes, String label) {
        long n = HostSegments.strlen(bytes, bytes.byteSize());
        long length = n < 0 ? bytes.byteSize() : n;
        if (length == 0) {
            throw new CudaError(CUDA_ERROR_INVALID_IMAGE, label + " is empty");
        }
        if (length > ModuleImage.MAX_PTX) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, label + ": PTX of " + length + " bytes, over " + ModuleImage.MAX_PTX);
        }
        return new String(bytes.asSlice(0, length).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
    }

    private static String fatbinPtx(MemorySegment bytes, int type, String label) {
        if (ModuleImageKind.of(bytes) != ModuleImageKind.FATBIN) {
            throw new CudaError(CUDA_ERROR_INVALID_IMAGE, label + (type == INPUT_LIBRARY
                    ? ": neither an archive (!<arch>) nor a fatbin" : ": not a fatbin"));
        }
        long length = ModuleImageKind.length(bytes);
        if (length < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_IMAGE, label + ": the fatbin's headers give no length within its "
                    + bytes.byteSize() + " bytes");
        }
        try {
            return FatbinImage.ptx(bytes.asSlice(0, length), ModuleImage.capability());
        } catch (ImageError e) {
            if (e.code == CUDA_ERROR_NO_BINARY_FOR_GPU) {
                throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, label + ": " + e.getMessage());
            }
            throw new CudaError(e.code, e.getMessage());
        }
    }

    private static String cubinPtx(MemorySegment bytes, int type, String label) {
        if (ModuleImageKind.of(bytes) != ModuleImageKind.CUBIN_ELF) {
            throw new CudaError(CUDA_ERROR_INVALID_IMAGE, label + ": not an ELF " + (type == INPUT_CUBIN ? "cubin" : "object"));
        }
        long length = ModuleImageKind.length(bytes);
        if (length < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_IMAGE, label + ": the ELF headers give no length within its " + bytes.byteSize() + " bytes");
        }
        try {
            return FatbinImage.elfPtx(bytes.asSlice(0, length));
        } catch (ImageError e) {
            if (e.code == CUDA_ERROR_NO_BINARY_FOR_GPU) {
                throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, label + ": " + (type == INPUT_CUBIN ? "a cubin" : "an object")
                        + " holds SASS only (no PTX), which the emulated device cannot link or run; add PTX instead");
            }
            throw new CudaError(e.code, e.getMessage());
        }
    }
}
