package io.gpusockets.protocol.api;

import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * One API table entry.
 *
 * @param index           position in the table (the order of cuda-driver.api)
 * @param name            the cuda.h name without ABI suffix, e.g. {@code cuMemAlloc}
 * @param opcode          stable wire id derived from the name ({@link #opcodeFor})
 * @param symbols         exported names; the first is the one cuda.h 13.0 maps the name to
 * @param params          parameters in C order
 * @param async           no reply awaited when pipelining is on
 * @param sync            returns a latched asynchronous error of its lane
 * @param customFrontend  hand-written in the frontend
 * @param customBackend   hand-written in the backend
 * @param local           answered by the frontend alone
 * @param critical        a trivial getter the backend may call as a critical (non-transitioning) downcall
 * @param since           for each symbol, the CUDA version (e.g. 3020) from which cuGetProcAddress
 *                        returns it for the name; 0 for symbols every version has
 * @param perThread       "_ptds" or "_ptsz" when cuda.h defines a per-thread-default-stream variant of
 *                        the first symbol (exported as first symbol + suffix), else ""
 * @param quick           returns without waiting for the device or for long host work: the backend may
 *                        run it on the session's reader thread when its lane is idle
 * @param area            the API area whose handler class holds the hand-written code (custom and
 *                        local entries), e.g. {@code contexts}; "" for entries the generic code serves
 * @param codec           the request layout: generic, or a hand-written codec both ends share
 * @param context         what the call does to the thread's context stack or a context's life
 * @param merge           how a frontend merging several backends answers it
 * @param connects        the frontend connects to its backend on this call if it has not yet
 * @param guest           its work happens in the guest (custom=frontend); the backend refuses it if sent
 * @param serves          the cuda.h name whose cuGetProcAddress requests this entry's symbols answer:
 *                        the entry's own name, or (attribute {@code serves=NAME@VERSION}) an older name
 *                        whose newer ABI variant has a signature of its own, e.g. cuCtxGetDevice_v2
 * @param known           the answer depends only on the inputs and never changes while a backend runs: a
 *                        frontend asks once, in one batch, for every device of its {@code dev} inputs and every
 *                        value of the {@code known=} lists of its other inputs, then answers those itself
 * @param charge          what the call makes the driver allocate in device memory, charged to the tenant
 *                        before the driver call ({@code charge=}; {@link ChargeRule#NONE} without one)
 * @param checkpoint      how a session recorded for checkpoint keeps this call, a setter of a live handle or
 *                        context ({@code checkpoint=}; {@link CheckpointRule#NONE} without one)
 */
public record ApiFunction(int index, String name, int opcode, List<String> symbols, List<ApiParam> params,
                          boolean async, boolean sync, boolean customFrontend, boolean customBackend,
                          boolean local, boolean critical, java.util.Map<String, Integer> since,
                          String perThread, boolean quick, String area, WireCodec codec, ContextRule context,
                          MergeRule merge, boolean connects, boolean guest, String serves, boolean known,
                          ChargeRule charge, CheckpointRule checkpoint) {

    /** FNV-1a of the name with the top bit cleared, so it never meets the control range 0xFFFFxxxx. */
    public static int opcodeFor(String name) {
        int h = 0x811c9dc5;
        for (byte b : name.getBytes(StandardCharsets.US_ASCII)) {
            h ^= b & 0xff;
            h *= 0x01000193;
        }
        return h & 0x7fffffff;
    }

    /** The CUDA version from which cuGetProcAddress answers {@code symbol} for this entry's name (0: always). */
    public int since(String symbol) {
        return since.getOrDefault(symbol, 0);
    }

    /** Every name the frontend's libcuda.so.1 exports for this entry: the symbols, then the per-thread variant. */
    public List<String> exportedSymbols() {
        if (perThread.isEmpty()) {
            return symbols;
        }
        List<String> all = new java.util.ArrayList<>(symbols);
        all.add(symbols.getFirst() + perThread);
        return List.copyOf(all);
    }

    /** The symbol the backend binds in the real libcuda. */
    public String primarySymbol() {
        return symbols.getFirst();
    }

    /** Whether a hand-written backend handler receives this call's inputs decoded (false: it decodes its codec). */
    public boolean decodedForHandler() {
        return codec == WireCodec.GENERIC;
    }

    public ApiParam param(String paramName) {
        for (ApiParam p : params) {
            if (p.name().equals(paramName)) {
                return p;
            }
        }
        return null;
    }

    public int paramIndex(String paramName) {
        for (int i = 0; i < params.size(); i++) {
            if (params.get(i).name().equals(paramName)) {
                return i;
            }
        }
        return -1;
    }

    @Override
    public String toString() {
        return name;
    }
}
