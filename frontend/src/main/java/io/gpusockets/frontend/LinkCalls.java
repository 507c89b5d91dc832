package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.LinkCompleteRequest;
import io.gpusockets.protocol.calls.ModuleImageKind;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Area {@code linking}: JIT link states. Options are checked (at most {@link ModuleCalls#MAX_OPTIONS},
 * a count needs its arrays, each a CUjit_option) and never forwarded; the log buffers
 * ({@code CU_JIT_INFO_LOG_BUFFER} / {@code CU_JIT_ERROR_LOG_BUFFER} and their sizes) are guest
 * memory, and the driver's log does not travel: after cuLinkComplete (and a failed cuLinkAddData)
 * the info log is left empty and, on failure, the error log says that the log is not forwarded and
 * names the CUresult; each size option then holds the bytes written, NUL included, as the driver
 * reports it. The {@code optionValues} array must stay valid until cuLinkDestroy, as cuda.h requires.
 * cuLinkAddFile reads its file here ({@link ModuleFiles}). cuLinkComplete copies the linked image
 * into guest memory owned by the state ({@link LinkCompleteRequest}), freed at cuLinkDestroy: the
 * pointer the program gets is loadable by cuModuleLoadData and cuLibraryLoadData through us.
 */
final class LinkCalls implements FrontendHandlers.Linking {
    static final int JIT_INFO_LOG_BUFFER = 3;
    static final int JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
    static final int JIT_ERROR_LOG_BUFFER = 5;
    static final int JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
    /** CU_JIT_NUM_OPTIONS in cuda.h 13.0. */
    static final int JIT_NUM_OPTIONS = 35;

    /** A link state's guest side: its log options and, once complete, the guest's copy of the image. */
    private static final class State {
        /** The program's option names and values (the values' array stays the program's). */
        final int[] options;
        final MemorySegment values;
        /** The log buffers' sizes as given at cuLinkCreate (the size options are rewritten with the bytes written). */
        final long[] capacities;
        Arena arena;
        MemorySegment image;

        State(int[] options, MemorySegment values) {
            this.options = options;
            this.values = values;
            this.capacities = new long[options.length];
            for (int i = 0; i < options.length; i++) {
                if (options[i] == JIT_INFO_LOG_BUFFER_SIZE_BYTES || options[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
                    capacities[i] = values.getAtIndex(ValueLayout.JAVA_LONG, i) & 0xFFFF_FFFFL;   // an unsigned int in the void*
                }
            }
        }
    }

    private final RemoteCudaDriver driver;
    private final CallChannel channel;
    private final Map<Long, State> states = new ConcurrentHashMap<>();

    LinkCalls(RemoteCudaDriver driver, CallChannel channel) {
        this.driver = driver;
        this.channel = channel;
    }

    @Override
    public int cuLinkCreate(int numOptions, MemorySegment options, MemorySegment optionValues, MemorySegment stateOut) {
        int[] opts = options(numOptions, options, optionValues);
        if (opts == null || isNull(stateOut)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        int r = driver.call(ApiEntries.cuLinkCreate, 0, MemorySegment.NULL, MemorySegment.NULL, stateOut);
        if (r == CuResult.CUDA_SUCCESS) {
            long state = WireValues.sized(stateOut, 8).get(ValueLayout.JAVA_LONG, 0);
            states.put(state, new State(opts, opts.length == 0 ? MemorySegment.NULL
                    : WireValues.sized(optionValues, 8L * opts.length)));
        }
        return r;
    }

    @Override
    public int cuLinkAddData(long state, int type, MemorySegment data, long size, MemorySegment name, int numOptions,
                             MemorySegment options, MemorySegment optionValues) {
        if (options(numOptions, options, optionValues) == null || isNull(data) || size <= 0 || size > ModuleImageKind.MAX_IMAGE) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment label = isNull(name) ? Arena.ofAuto().allocateFrom("") : name;
        int r = driver.call(ApiEntries.cuLinkAddData, state, type, data, size, label, 0, MemorySegment.NULL, MemorySegment.NULL);
        if (r != CuResult.CUDA_SUCCESS) {
            writeLogs(states.get(state), "cuLinkAddData", r);
        }
        return r;
    }

    /** The file is read here, in the guest, and added as its bytes, named by its path. */
    @Override
    public int cuLinkAddFile(long state, int type, MemorySegment path, int numOptions, MemorySegment options,
                             MemorySegment optionValues) {
        if (options(numOptions, options, optionValues) == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return ModuleFiles.load(MemorySegment.ofArray(new byte[8]), path, image -> cuLinkAddData(state, type, image,
                image.byteSize(), path, numOptions, options, optionValues));
    }

    @Override
    public int cuLinkComplete(long state, MemorySegment cubinOut, MemorySegment sizeOut) {
        if (isNull(cubinOut)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        State s = states.get(state);
        if (s == null) {
            // Not made here: the backend decides (it refuses a handle not issued to this session).
            s = new State(new int[0], MemorySegment.NULL);
        }
        int r = complete(state, s);
        if (r == CuResult.CUDA_SUCCESS) {
            s = Objects.requireNonNullElse(states.putIfAbsent(state, s), s);
        }
        writeLogs(s, "cuLinkComplete", r);
        if (r == CuResult.CUDA_SUCCESS) {
            WireValues.sized(cubinOut, 8).set(ValueLayout.ADDRESS, 0, s.image);
            if (!isNull(sizeOut)) {
                WireValues.sized(sizeOut, 8).set(ValueLayout.JAVA_LONG, 0, s.image.byteSize());
            }
        }
        return r;
    }

    /** Asks the image's size, then its bytes, into guest memory the state owns (once: later calls give the same copy). */
    private int complete(long state, State s) {
        synchronized (s) {
            if (s.image != null) {
                return CuResult.CUDA_SUCCESS;
            }
            CallChannel.Reply sized = exchange(state, 0, List.of());
            if (sized.result() != CuResult.CUDA_SUCCESS) {
                return sized.result();
            }
            long size = LinkCompleteRequest.readSize(sized.body());
            if (size <= 0 || size > ModuleImageKind.MAX_IMAGE) {
                return CuResult.CUDA_ERROR_INVALID_IMAGE;
            }
            Arena arena = Arena.ofShared();
            MemorySegment image = arena.allocate(size, 16);
            CallChannel.Reply bytes = exchange(state, size, List.of(image));
            if (bytes.result() != CuResult.CUDA_SUCCESS) {
                arena.close();
                return bytes.result();
            }
            s.arena = arena;
            s.image = image;
            return CuResult.CUDA_SUCCESS;
        }
    }

    private CallChannel.Reply exchange(long state, long capacity, List<MemorySegment> out) {
        ByteBuffer req = CallChannel.request();
        LinkCompleteRequest.put(req, state, capacity);
        req.flip();
        return channel.exchange(ApiEntries.cuLinkComplete, req, List.of(), out, false);
    }

    /** The backend destroys the state (its image with it); then the guest's copy is freed. */
    @Override
    public int cuLinkDestroy(long state) {
        int r = driver.call(ApiEntries.cuLinkDestroy, state);
        if (r == CuResult.CUDA_SUCCESS) {
            State s = states.remove(state);
            if (s != null) {
                synchronized (s) {
                    if (s.arena != null) {
                        s.arena.close();
                        s.arena = null;
                        s.image = null;
                    }
                }
            }
        }
        return r;
    }

    /** The program's options, checked; null when the count or an option is invalid. */
    private static int[] options(int numOptions, MemorySegment options, MemorySegment optionValues) {
        // an unsigned count: a negative int is beyond any bound
        if (numOptions < 0 || numOptions > ModuleCalls.MAX_OPTIONS
                || (numOptions > 0 && (isNull(options) || isNull(optionValues)))) {
            return null;
        }
        int[] out = new int[numOptions];
        if (numOptions > 0) {
            MemorySegment opts = WireValues.sized(options, 4L * numOptions);
            for (int i = 0; i < numOptions; i++) {
                out[i] = opts.getAtIndex(ValueLayout.JAVA_INT, i);
                if (out[i] < 0 || out[i] >= JIT_NUM_OPTIONS) {
                    return null;
                }
            }
        }
        return out;
    }

    /**
     * Fills the state's log buffers in guest memory: the info log empty; the error log, when
     * {@code result} is an error, a line saying so (the driver's own log is not forwarded), cut to
     * the buffer's size; each size option set to the bytes written, NUL included.
     */
    private static void writeLogs(State s, String call, int result) {
        if (s == null) {
            return;
        }
        String error = result == CuResult.CUDA_SUCCESS ? "" : "gpusockets: " + call + " failed with " + CuResult.name(result)
                + "; the driver's JIT log is not forwarded to the guest";
        writeLog(s, JIT_INFO_LOG_BUFFER, JIT_INFO_LOG_BUFFER_SIZE_BYTES, "");
        writeLog(s, JIT_ERROR_LOG_BUFFER, JIT_ERROR_LOG_BUFFER_SIZE_BYTES, error);
    }

    private static void writeLog(State s, int bufferOption, int sizeOption, String text) {
        int buffer = indexOf(s.options, bufferOption);
        int size = indexOf(s.options, sizeOption);
        if (buffer < 0 || size < 0) {
            return;
        }
        long capacity = s.capacities[size];
        MemorySegment buf = s.values.getAtIndex(ValueLayout.ADDRESS, buffer);
        if (capacity == 0 || buf.address() == 0) {
            return;
        }
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        int n = (int) Math.min(bytes.length, capacity - 1);
        MemorySegment dst = buf.reinterpret(capacity);
        MemorySegment.copy(bytes, 0, dst, ValueLayout.JAVA_BYTE, 0, n);
        dst.set(ValueLayout.JAVA_BYTE, n, (byte) 0);
        s.values.setAtIndex(ValueLayout.JAVA_LONG, size, n + 1L);
    }

    private static int indexOf(int[] options, int option) {
        for (int i = 0; i < options.length; i++) {
            if (options[i] == option) {
                return i;
            }
        }
        return -1;
    }

    private static boolean isNull(MemorySegment s) {
        return s == null || (s.isNative() && s.address() == 0);
    }
}
