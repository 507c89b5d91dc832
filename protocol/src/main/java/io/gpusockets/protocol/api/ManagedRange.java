package io.gpusockets.protocol.api;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentSkipListMap;

/**
 * The guest address range that holds a session's managed memory (issue 25, item 1): the frontend reserves it in the
 * guest process ({@code PROT_NONE}, {@code MAP_NORESERVE}: address space only) before it connects, announces it to the
 * backend in the handshake, and the backend places the session's managed allocations (and, with address-stable
 * windows on, its windows, so all of its allocations) inside it, reserved at the same addresses in the backend process
 * ({@code cuMemAddressReserve} at a fixed address, as the windows are). The guest then maps its managed pages over its
 * own reservation ({@code MAP_FIXED}), so no other mapping of the guest can lie there, and a clash in the backend
 * process (something of its own already maps part of the range) is refused at the first allocation placed there,
 * naming the range.
 *
 * <p><b>The announcement</b> travels in the HELLO of a new session ({@link
 * io.gpusockets.protocol.wire.Handshake#FEATURE_MANAGED_RANGE}: base and size after the resume token), so the backend
 * knows the range before the session's first call, and a process-isolated session's worker gets it with the session's
 * ticket. A backend that places managed memory there echoes the feature in WELCOME; an older one does not, and the
 * frontend then gives its reservation back and keeps the driver's addresses. A range is a multiple of {@link #ALIGNMENT}
 * at a multiple of it, above 4 GiB and below {@link StableWindows#USER_LIMIT} ({@link #check}); the backend refuses
 * a HELLO with any other (REFUSE naming it). Nothing of the announcement is a driver call: no flag of
 * {@code cuMemAllocManaged} is overloaded, and the driver never sees the range except as the fixed addresses of
 * {@code cuMemAddressReserve}.
 *
 * <p><b>Where</b>: the frontend asks for a place at random from {@link #HINT_LOW} to {@link #HINT_HIGH} (16 to 80 TiB:
 * above the brk heap of a program loaded low, far below Linux's top-down mmap region and the emulated device's own
 * addresses, and below the address-stable windows' default base), where neither the guest nor the backend process
 * normally maps anything, so that sessions of one backend process rarely ask for overlapping ranges; the kernel may
 * place it elsewhere, and the range is what it gave.
 *
 * <p><b>One process hosting both</b> (tests, and a Java program with an in-process backend): the guest's reservation is
 * then a mapping of the backend's process too, which a fixed reservation of the driver would meet. {@link #guest}
 * registers it, and {@link #withoutGuestReservations} drops what lies in it (the reservation, and the guest's managed
 * pages mapped over it, which stand for the backend's memory at the same addresses) from a maps file, for the emulated device's check of a fixed reservation and the backend's message naming what lies in a range.
 * The real driver sees the mapping; such a backend refuses the range, and the frontend keeps the driver's addresses.
 */
public final class ManagedRange {
    /** What a range's base and size are multiples of: 1 GiB. */
    public static final long ALIGNMENT = 1L << 30;
    /** The default size: 256 GiB of address space. */
    public static final long DEFAULT_SIZE = 256L << 30;
    /** The lowest base a range may have: 4 GiB. */
    public static final long LOWEST = 1L << 32;
    /** Where the frontend asks for its range: from 16 TiB ... */
    public static final long HINT_LOW = 0x1000_0000_0000L;
    /** ... to 80 TiB (the range ends below). */
    public static final long HINT_HIGH = 0x5000_0000_0000L;

    /** The guest reservations of this process (base to end), for a process that hosts a guest and a backend. */
    private static final ConcurrentSkipListMap<Long, Long> GUEST = new ConcurrentSkipListMap<>();

    private ManagedRange() {
    }

    /** Null when {@code [base, base + size)} may be a managed range, else why not. */
    public static String check(long base, long size) {
        if (base < LOWEST || size < ALIGNMENT || base % ALIGNMENT != 0 || size % ALIGNMENT != 0
                || size > StableWindows.USER_LIMIT - base) {
            return String.format("managed range 0x%x+0x%x: a multiple of 1 GiB at a multiple of 1 GiB, from 4 GiB to 0x%x",
                    base, size, StableWindows.USER_LIMIT);
        }
        return null;
    }

    /** {@code [base, base + size)} is a guest reservation of this process (until {@link #guestGone}). */
    public static void guest(long base, long size) {
        GUEST.put(base, base + size);
    }

    /** Whether {@code p} lies in a guest reservation of this process ({@link #guest}). */
    public static boolean inGuest(long p) {
        var g = GUEST.floorEntry(p);
        return g != null && p < g.getValue();
    }

        /** The guest reservation at {@code base} is gone. */
    public static void guestGone(long base) {
        GUEST.remove(base);
    }

    /**
     * The lines of a maps file ({@code start-end perms ...}) without the mappings that lie inside a guest reservation of
     * this process ({@link #guest}: the reservation itself, {@code ---p}, and the managed pages the guest mapped over
     * it): in a process hosting a backend too, they stand for the guest's process, not the backend's. Nothing else can
     * lie there: the guest maps only its own managed pages over its reservation.
     */
    public static List<String> withoutGuestReservations(List<String> maps) {
        if (GUEST.isEmpty()) {
            return maps;
        }
        List<String> out = new ArrayList<>(maps.size());
        for (String line : maps) {
            if (!isGuestReservation(line)) {
                out.add(line);
            }
        }
        return out;
    }

    private static boolean isGuestReservation(String line) {
        String[] f = line.trim().split("\\s+", 3);
        int dash = f[0].indexOf('-');
        if (f.length < 2 || dash <= 0) {
            return false;
        }
        try {
            long s = Long.parseUnsignedLong(f[0], 0, dash, 16), e = Long.parseUnsignedLong(f[0], dash + 1, f[0].length(), 16);
            var g = GUEST.floorEntry(s);
            return g != null && e <= g.getValue();
        } catch (NumberFormatException x) {
            return false;
        }
    }
}
