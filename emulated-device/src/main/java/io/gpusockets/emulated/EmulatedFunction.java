package io.gpusockets.emulated;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A kernel of a loaded module. {@code kernel} is its Java implementation, or null when the emulated
 * device has none: the function can still be queried, only launching it fails (NOT_SUPPORTED).
 */
final class EmulatedFunction {
    static final int MAX_THREADS_PER_BLOCK = 0;
    static final int SHARED_SIZE_BYTES = 1;
    static final int CONST_SIZE_BYTES = 2;
    static final int LOCAL_SIZE_BYTES = 3;
    static final int NUM_REGS = 4;
    static final int PTX_VERSION = 5;
    static final int BINARY_VERSION = 6;
    static final int CACHE_MODE_CA = 7;
    static final int MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
    static final int PREFERRED_SHARED_MEMORY_CARVEOUT = 9;
    static final int LAST_SETTABLE = 15;
    /** Registers per thread the emulated device claims for every kernel (used by occupancy). */
    static final int REGISTERS = 32;

    final long handle;
    final EmulatedModule module;
    final PtxModule.Entry entry;
    final EmulatedKernels.Kernel kernel;
    /** Attributes a program may set (8..15); defaults as a freshly loaded function has them. */
    private final Map<Integer, Integer> settable = new ConcurrentHashMap<>(Map.of(
            MAX_DYNAMIC_SHARED_SIZE_BYTES, DeviceProperties.SHARED_MEMORY_PER_BLOCK,
            PREFERRED_SHARED_MEMORY_CARVEOUT, -1));

    EmulatedFunction(long handle, EmulatedModule module, PtxModule.Entry entry) {
        this.handle = handle;
        this.module = module;
        this.entry = entry;
        this.kernel = EmulatedKernels.find(entry.name());
    }

    long maxDynamicShared() {
        return settable.get(MAX_DYNAMIC_SHARED_SIZE_BYTES);
    }

    /** The attribute's value, or null for a number that is no CUfunction_attribute. */
    Integer attribute(int attribute) {
        return switch (attribute) {
            case MAX_THREADS_PER_BLOCK -> entry.maxThreadsPerBlock();
            case SHARED_SIZE_BYTES, CONST_SIZE_BYTES, LOCAL_SIZE_BYTES, CACHE_MODE_CA -> 0;
            case NUM_REGS -> REGISTERS;
            case PTX_VERSION -> module.ptx.ptxVersion;
            case BINARY_VERSION -> module.ptx.targetSm();
            default -> attribute > CACHE_MODE_CA && attribute <= LAST_SETTABLE ? settable.getOrDefault(attribute, 0) : null;
        };
    }

    /** Stores a settable attribute; false when it is read-only, unknown, or out of range. */
    boolean setAttribute(int attribute, int value) {
        boolean ok = switch (attribute) {
            case MAX_DYNAMIC_SHARED_SIZE_BYTES -> value >= 0 && value <= DeviceProperties.SHARED_MEMORY_PER_BLOCK_OPTIN;
            case PREFERRED_SHARED_MEMORY_CARVEOUT -> value >= -1 && value <= 100;
            default -> attribute > PREFERRED_SHARED_MEMORY_CARVEOUT && attribute <= LAST_SETTABLE && value >= 0;
        };
        if (ok) {
            settable.put(attribute, value);
        }
        return ok;
    }
}
