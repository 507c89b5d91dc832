package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.PointerAttributeRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The device memory this client has been handed, so that a unified-addressing call (cuMemcpy,
 * CU_MEMORYTYPE_UNIFIED) can tell a device pointer from a guest host pointer without asking the
 * backend. Learned generically from the API table after each successful call: an {@code out dptr}
 * with {@code alloc=} or {@code global=} adds a range, a {@code dptr[free]} input removes one.
 *
 * <p>Destroying a context, module or library (or releasing or resetting a primary context) frees
 * ranges the frontend cannot name, so it makes every range known so far <em>suspect</em>: the first
 * time a suspect range classifies a pointer, the backend is asked (cuPointerGetAttribute, range
 * start and size, answered from the session's own ranges) and the range is replaced or dropped.
 *
 * <p>Ranges that were freed or found gone are remembered (the most recent {@value #RETIRED_MAX}), so
 * that a stale device pointer is refused with CUDA_ERROR_INVALID_VALUE, as the driver would, instead
 * of being read as guest memory.
 *
 * <p>Guest host addresses and backend device addresses live in different processes, so a guest
 * buffer can in principle have the same address as a live (or recently freed) device range; such a
 * buffer is taken for device memory, and the copy fails or reads device memory. Nothing in the
 * arguments of cuMemcpy can tell them apart.
 */
final class DeviceRanges {
    /** What an address is, as far as the frontend knows. */
    enum Kind { DEVICE, HOST, FREED }

    static final int RETIRED_MAX = 16384;

    /** Asks the backend for the range containing a device pointer: {base, size}, or null when it is not device memory. */
    interface Verifier {
        long[] rangeOf(long pointer);
    }

    private record Range(long base, long size, long generation) {
        boolean contains(long p) {
            return p >= base && p - base < size;
        }
    }

    /** Per table index: whether the entry can add, remove or invalidate ranges. */
    private static final boolean[] RELEVANT = relevance(ApiTable.get().functions());

    private final ConcurrentSkipListMap<Long, Range> ranges = new ConcurrentSkipListMap<>();
    private final AtomicLong generation = new AtomicLong();
    /** Freed or vanished ranges, base to size, and their bases oldest first; guarded by itself. */
    private final TreeMap<Long, Long> retired = new TreeMap<>();
    private final ArrayDeque<Long> retiredOrder = new ArrayDeque<>();
    private final Verifier verifier;

    DeviceRanges(Verifier verifier) {
        this.verifier = verifier;
    }

    /** Ranges verified by asking {@code driver} (the backend) for the range around a pointer. */
    static DeviceRanges askingBackend(CudaDriver driver) {
        return new DeviceRanges(p -> {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment start = a.allocate(8), size = a.allocate(8);
                if (driver.cuPointerGetAttribute(start, PointerAttributeRequest.RANGE_START_ADDR, p) != CuResult.CUDA_SUCCESS
                        || driver.cuPointerGetAttribute(size, PointerAttributeRequest.RANGE_SIZE, p) != CuResult.CUDA_SUCCESS) {
                    return null; // no device memory of the session
                }
                return new long[] {start.get(ValueLayout.JAVA_LONG, 0), size.get(ValueLayout.JAVA_LONG, 0)};
            }
        });
    }

    private static boolean[] relevance(List<ApiFunction> functions) {
        boolean[] r = new boolean[functions.size()];
        for (ApiFunction f : functions) {
            r[f.index()] = invalidates(f);
            for (ApiParam p : f.params()) {
                r[f.index()] |= p.type() == ParamType.DPTR && (p.registersRange() || p.free());
            }
        }
        return r;
    }

    /** Calls after which the backend may have dropped ranges that the frontend cannot name. */
    private static boolean invalidates(ApiFunction f) {
        for (ApiParam p : f.params()) {
            ParamType t = p.type();
            if (!p.out() && p.destroy() && (t == ParamType.CTX || t == ParamType.MOD || t == ParamType.LIB)) {
                return true;
            }
        }
        return f.context().mayDestroy();
    }

    /**
     * Learns from a successful call. {@code outs} holds the scalar outputs as the reply carried them
     * (the program may have passed NULL for some), or is null for a pipelined call that had no reply;
     * inputs are in {@code args}.
     */
    void afterCall(ApiFunction f, Object[] args, long[] outs) {
        if (!RELEVANT[f.index()]) {
            return;
        }
        List<ApiParam> params = f.params();
        for (int i = 0; i < params.size(); i++) {
            ApiParam p = params.get(i);
            if (p.type() != ParamType.DPTR) {
                continue;
            }
            if (p.out() && p.registersRange() && outs != null) {
                long size = p.rangeSize().evaluate(k -> valueOf(f, args, outs, k));
                if (size > 0) {
                    add(outs[i], size);
                }
            } else if (!p.out() && p.free()) {
                Range r = ranges.remove(((Number) args[i]).longValue());
                if (r != null) {
                    retire(r);
                }
            }
        }
        if (invalidates(f)) {
            generation.incrementAndGet();
        }
    }

    private static long valueOf(ApiFunction f, Object[] args, long[] outs, int i) {
        return f.params().get(i).out() ? outs[i] : args[i] instanceof Number n ? n.longValue() : 0;
    }

    void add(long base, long size) {
        ranges.put(base, new Range(base, size, generation.get()));
        synchronized (retired) {
            // the driver may hand out addresses again: what is live now is no longer stale
            Map.Entry<Long, Long> below = retired.floorEntry(base);
            if (below != null && below.getKey() + below.getValue() > base) {
                retired.remove(below.getKey());
            }
            retired.subMap(base, true, base + size, false).clear();
        }
    }

    private void retire(Range r) {
        synchronized (retired) {
            if (retired.put(r.base(), r.size()) == null) {
                retiredOrder.add(r.base());
            }
            while (retiredOrder.size() > RETIRED_MAX) {
                retired.remove(retiredOrder.poll());
            }
        }
    }

    /** Whether {@code p} lies in device memory of this session, as far as the frontend knows. */
    boolean isDevice(long p) {
        return classify(p) == Kind.DEVICE;
    }

    /** Device memory of this session, a pointer into memory it freed (or lost with a context), or anything else (host). */
    Kind classify(long p) {
        while (true) {
            Map.Entry<Long, Range> e = ranges.floorEntry(p);
            Range r = e == null ? null : e.getValue();
            if (r == null || !r.contains(p)) {
                return wasDevice(p) ? Kind.FREED : Kind.HOST;
            }
            long now = generation.get();
            if (r.generation() == now) {
                return Kind.DEVICE;
            }
            long[] real = verifier.rangeOf(p);
            ranges.remove(r.base(), r);
            if (real != null) {
                ranges.put(real[0], new Range(real[0], real[1], now));
                return Kind.DEVICE;
            }
            retire(r);
            // gone with its context or module: look again (an older range may still hold p)
        }
    }

    private boolean wasDevice(long p) {
        synchronized (retired) {
            Map.Entry<Long, Long> e = retired.floorEntry(p);
            return e != null && p - e.getKey() < e.getValue();
        }
    }

    int size() {
        return ranges.size();
    }
}
