package io.gpusockets.protocol.api;

import java.util.Locale;

/**
 * What an entry makes the driver allocate in device memory, and so what the backend charges the
 * session's tenant before the driver call (table attribute {@code charge=}; the rules are
 * implemented in the backend's SessionQuota, for custom=backend entries by their handlers through
 * it). An entry that shows a sign of allocating ({@link #allocationSign}) must say its rule, or
 * {@code charge=none} when it allocates nothing after all: a table line that forgets fails the
 * parse, and the end-to-end probe (ChargeProbeTest) exercises every entry with a rule against the
 * emulated device, comparing the device memory it takes with the charge.
 */
public enum ChargeRule {
    /** No attribute (nothing to charge), or {@code none}: allocates no device memory, as the table says. */
    NONE,
    /** {@code alloc}: the size of its {@code alloc=} output, until that range is freed or its context goes. */
    ALLOC,
    /** {@code pitch}: cuMemAllocPitch's rows times the pitch the driver chose (estimated before, trued up after). */
    PITCH,
    /**
     * {@code array}: width × max(height, 1) × max(depth, 1) × element bytes of its CUDA_ARRAY_DESCRIPTOR or
     * CUDA_ARRAY3D_DESCRIPTOR (told apart by length), until destroyed.
     */
    ARRAY,
    /**
     * {@code mipmap}: the sum over its levels (each dimension halved per level, at least 1; layers and cubemap
     * faces not) of width × height × depth × element bytes of its CUDA_ARRAY3D_DESCRIPTOR, until destroyed.
     */
    MIPMAP,
    /** {@code module}: the image's footprint (its variables and code), until the module is unloaded or its context goes. */
    MODULE,
    /** {@code library}: the image's footprint in every context of the session (the driver loads a library into each). */
    LIBRARY,
    /** {@code limit}: cuCtxSetLimit's device memory by the limit rule (stack × resident threads, heap, printf FIFO). */
    LIMIT,
    /** {@code context}: a context beyond the session's first on its device, and the session's libraries in it. */
    CONTEXT,
    /** {@code vmm}: cuMemCreate's physical size, until its last reference and mapping are gone (handler). */
    VMM,
    /** {@code info}: charges nothing; cuMemGetInfo answers with the tenant's view of what is charged. */
    INFO;

    /** The attribute's value, as the table spells it. */
    public String attribute() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** Whether the backend's generic path applies the rule (the others are a custom=backend handler's). */
    public boolean generic() {
        return this != VMM;
    }

    static ChargeRule parse(String value) {
        for (ChargeRule r : values()) {
            if (r.attribute().equals(value)) {
                return r;
            }
        }
        throw new IllegalArgumentException("charge= takes none, alloc, pitch, array, mipmap, module, library, limit, context, vmm"
                + " or info: " + value);
    }

    /**
     * Why an entry that reaches the backend looks as if it makes the driver allocate device memory,
     * or null when nothing in its signature says so: an {@code alloc=} output, a module image input, a
     * new array, VMM allocation, module, library or exec-graph handle from an entry that is not
     * {@code quick} (quick entries and outputs with {@code owner=} look up what exists), or a context it
     * creates. A call that allocates
     * without any of these signs (cuCtxSetLimit) carries its rule all the same: the end-to-end probe
     * and the GPU pass are what catch it.
     */
    public static String allocationSign(ApiFunction f) {
        if (!reachesBackend(f)) {
            return null;
        }
        if (f.context() == ContextRule.CREATE) {
            return "it creates a context";
        }
        for (ApiParam p : f.params()) {
            if (p.out() && p.type() == ParamType.DPTR && p.alloc() != null) {
                return "its output " + p.name() + " is a new allocation (alloc=)";
            }
            if (!p.out() && p.type() == ParamType.IMAGE) {
                return "it loads a module image (" + p.name() + ")";
            }
            boolean holdsMemory = p.type() == ParamType.ARRAY || p.type() == ParamType.MIPMAP || p.type() == ParamType.MEMH
                    || p.type() == ParamType.MOD || p.type() == ParamType.LIB || p.type() == ParamType.GEXEC;
            if (p.out() && holdsMemory && p.owner() < 0 && !f.quick()) {
                return "its output " + p.name() + " is a new " + p.type().name().toLowerCase(Locale.ROOT) + " handle";
            }
        }
        return null;
    }

    /**
     * Whether a call of this entry can reach the backend as itself: not answered in the guest, and
     * without guest pointers the backend cannot decode (such entries are sent as another entry).
     */
    public static boolean reachesBackend(ApiFunction f) {
        if (f.local() || f.guest()) {
            return false;
        }
        if (f.customBackend()) {
            return true;
        }
        for (ApiParam p : f.params()) {
            if (!p.out() && (p.type() == ParamType.PTR || p.type() == ParamType.HOSTPTR)) {
                return false;
            }
        }
        return true;
    }
}
