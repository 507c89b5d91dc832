package io.gpusockets.protocol.api;

/**
 * Where a backend's address-stable windows lie (issue 22; the backend's {@code StableAddresses}): the range of device
 * virtual addresses from {@link #base()} to {@code base() + }{@link #SPAN} in which each session's window is reserved
 * with {@code cuMemAddressReserve}. The one place that says it: the backend, the emulated device's tests and the
 * end-to-end tests read it here.
 *
 * <p>Why {@link #DEFAULT_BASE} ({@code 0x6000_0000_0000}, 96 TiB): the CUDA driver's device addresses share the
 * process's virtual address space, so a window must lie where the backend process itself maps nothing. Linux's top-down
 * mmap places a process's own mappings (shared libraries, the JVM's code and metadata, the CUDA driver's mappings, and
 * a JVM heap of 32 GiB or more, which has no compressed pointers: the default heap on a host of 128 GiB and up) just
 * below a base chosen at random in the top TiB of the 47-bit user address space ({@code 0x7efd..} to {@code 0x7ffb..}
 * on the hosts measured), which is where the windows were before ({@code 0x7f00_0000_0000}: one restore in six was
 * refused there). Below {@code 0x6100_0000_0000} that mmap reaches only after some 30 TiB of mappings; the brk heap
 * grows up from the program's image ({@code 0x55..} to {@code 0x56..} for a PIE program such as {@code java}) and
 * would need some 10 TiB to reach the base. A checkpoint image records the window bases it had, so a restore asks for
 * those, whatever the base of the restoring backend: images written with the old base restore at the old addresses.
 *
 * <p>{@value #PROPERTY} moves the windows ({@code 0x...} hexadecimal or decimal): a multiple of {@link #ALIGNMENT},
 * with the whole span below {@link #USER_LIMIT} (47-bit user space).
 */
public final class StableWindows {
    /** The system property that sets the base. */
    public static final String PROPERTY = "gpusockets.backend.windowsBase";
    /** The default base: 96 TiB, far below the region of Linux's top-down mmap, far above the brk heap. */
    public static final long DEFAULT_BASE = 0x6000_0000_0000L;
    /** Room for windows above the base: 1020 GiB (a device's windows are its memory rounded up to a power of two). */
    public static final long SPAN = 0x00ff_0000_0000L;
    /** What a base must be a multiple of: 1 GiB, so that every window starts on a granule of any device. */
    public static final long ALIGNMENT = 1L << 30;
    /** The end of the 47-bit user address space (x86-64 with 4-level page tables: the last page is never mapped). */
    public static final long USER_LIMIT = 0x7fff_ffff_f000L;

    private StableWindows() {
    }

    /** The base in effect: {@value #PROPERTY} where set (checked by {@link #base(String)}), else {@link #DEFAULT_BASE}. */
    public static long base() {
        return base(System.getProperty(PROPERTY));
    }

    /** {@code base()}{@code + }{@link #SPAN}: where the windows end (exclusive). */
    public static long end() {
        return base() + SPAN;
    }

    /**
     * The base {@code value} names ({@code 0x} hexadecimal, underscores allowed, or decimal), or {@link #DEFAULT_BASE}
     * for null; throws with {@value #PROPERTY}=value when it is not a multiple of {@link #ALIGNMENT} above 0 whose span
     * ends at or below {@link #USER_LIMIT}.
     */
    public static long base(String value) {
        if (value == null) {
            return DEFAULT_BASE;
        }
        String v = value.strip().replace("_", "");
        long base;
        try {
            base = v.startsWith("0x") || v.startsWith("0X") ? Long.parseUnsignedLong(v.substring(2), 16) : Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(PROPERTY + "=" + value + ": not an address (0x... or decimal)");
        }
        if (base <= 0 || base % ALIGNMENT != 0) {
            throw new IllegalArgumentException(PROPERTY + "=" + value + ": must be a positive multiple of 1 GiB (0x40000000)");
        }
        if (base > USER_LIMIT - SPAN) {
            throw new IllegalArgumentException(PROPERTY + "=" + value + String.format(": the windows' span (0x%x) would end"
                    + " past the 47-bit user address space (0x%x); at most 0x%x", SPAN, USER_LIMIT, (USER_LIMIT - SPAN) & -ALIGNMENT));
        }
        return base;
    }
}
