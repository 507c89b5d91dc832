package io.gpusockets.protocol.api;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The public functions of cuda.h 13.0 that GPUsockets does not forward, each with the reason and the
 * error it returns ({@code not-forwarded.api}), and the header's list of public functions with the
 * ABI symbol each maps to ({@code cuda-h-13.0.txt}). libcuda.so.1 exports every not-forwarded function
 * as a stub under its name and that symbol: the stub returns the error and logs one line the first
 * time; cuGetProcAddress answers "not found" for them, as an older driver would, so that libraries
 * which probe for a function fall back instead of failing on it.
 *
 * <pre>
 *   not-forwarded.api:  NAME ERROR REASON...      e.g. cuIpcGetMemHandle CUDA_ERROR_NOT_SUPPORTED IPC handles ...
 *   cuda-h-13.0.txt:    NAME [SYMBOL]             e.g. cuMemAlloc cuMemAlloc_v2
 * </pre>
 */
public final class NotForwarded {
    public static final String RESOURCE = "/io/gpusockets/protocol/api/not-forwarded.api";
    public static final String CUDA_H_RESOURCE = "/io/gpusockets/protocol/api/cuda-h-13.0.txt";
    /** The functions libcuda.so.1 implements by hand in C (procaddress.c, export_tables.c): neither table lists them. */
    public static final List<String> HAND_WRITTEN_IN_C = List.of("cuGetProcAddress", "cuGetExportTable");

    /** One function not forwarded: the error its stub returns and why. */
    public record Entry(String name, String error, int code, String reason) {
    }

    private NotForwarded() {
    }

    /** The entries of not-forwarded.api, in file order. */
    public static List<Entry> parse(String text) {
        List<Entry> out = new ArrayList<>();
        Map<String, Entry> seen = new HashMap<>();
        for (String raw : text.split("\n")) {
            String line = raw.strip();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String[] w = line.split("\\s+", 3);
            if (w.length < 3 || !w[0].startsWith("cu") || !w[1].startsWith("CUDA_ERROR_")) {
                throw new IllegalArgumentException("not-forwarded.api: want NAME CUDA_ERROR_... REASON: " + line);
            }
            int code = CuResult.code(w[1]);
            if (code < 0) {
                throw new IllegalArgumentException("not-forwarded.api: unknown error " + w[1] + " in: " + line);
            }
            Entry e = new Entry(w[0], w[1], code, w[2]);
            if (seen.put(e.name(), e) != null) {
                throw new IllegalArgumentException("not-forwarded.api: listed twice: " + e.name());
            }
            out.add(e);
        }
        return List.copyOf(out);
    }

    /** cuda-h-13.0.txt: each public name and the ABI symbol cuda.h maps it to (the name itself when none). */
    public static Map<String, String> parseCudaH(String text) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String raw : text.split("\n")) {
            String line = raw.strip();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String[] w = line.split("\\s+");
            if (w.length > 2) {
                throw new IllegalArgumentException("cuda-h-13.0.txt: want NAME [SYMBOL]: " + line);
            }
            out.put(w[0], w.length == 2 ? w[1] : w[0]);
        }
        return out;
    }
}
