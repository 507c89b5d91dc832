package io.gpusockets.backend.session;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The stream waits (cuStreamWaitValue32/64, waits in cuStreamBatchMemOp) a session queued, so that its
 * end can release them: the driver's cuCtxDestroy blocks while a stream waits for a value that never
 * comes (seen on the H200 with driver 580), which would keep a departed session's contexts forever.
 * Bounded: the most recent {@value #MAX} distinct waits are kept.
 */
final class SessionWaits {
    static final int MAX = 4096;

    /** CUstreamWaitValue_flags: the comparison in the low two bits. */
    static final int GEQ = 0, EQ = 1, AND = 2, NOR = 3;

    /** One wait: in context (real) {@code context}, on {@code width} bytes at {@code address}. */
    record Wait(long context, long address, long value, int flags, int width) {
        /**
         * A value that satisfies the wait, or null when none can: GEQ and EQ take the value itself, AND
         * the value (when not 0), NOR 0 (when the value is not all ones).
         */
        Long releasing() {
            long mask = width == 4 ? 0xffff_ffffL : -1L;
            long v = value & mask;
            return switch (flags & 0x3) {
                case GEQ, EQ -> v;
                case AND -> v != 0 ? v : null;
                default -> v != mask ? 0L : null;
            };
        }
    }

    private final LinkedHashMap<Wait, Boolean> waits = new LinkedHashMap<>(16, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Wait, Boolean> eldest) {
            return size() > MAX;
        }
    };

    synchronized void queued(Wait w) {
        waits.remove(w);
        waits.put(w, Boolean.TRUE);
    }

    synchronized int count() {
        return waits.size();
    }

    /** Takes every remembered wait, grouped by context, in the order they were queued. */
    synchronized Map<Long, List<Wait>> take() {
        Map<Long, List<Wait>> byContext = new LinkedHashMap<>();
        for (Wait w : waits.keySet()) {
            byContext.computeIfAbsent(w.context(), k -> new ArrayList<>()).add(w);
        }
        waits.clear();
        return byContext;
    }
}
