package io.gpusockets.backend.session;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.Set;

/**
 * What the call a lane is running uses now ({@link Uses} of handles, ranges and the lane's context),
 * published for the session's destroys to see: one per lane, written only by the thread running the
 * lane's call (a lane runs one call at a time), read by destroys ({@link SessionUses}). A use costs a
 * volatile store and a volatile load on memory of this lane alone, so lanes that use the same
 * context or function do not contend for a shared counter.
 */
final class UseSlot {
    private static final VarHandle ELEMENT = MethodHandles.arrayElementVarHandle(Uses[].class);

    /** Published uses; null where none (or one that ended). Replaced, never shrunk, when full. */
    private volatile Uses[] using = new Uses[8];
    /** Elements of {@link #using} written by the current call; the owner's alone. */
    private int count;

    /** Publishes a use of {@code u}; false, with nothing published, when it is dying. */
    boolean use(Uses u) {
        Uses[] a = using;
        if (count == a.length) {
            a = Arrays.copyOf(a, count * 2);
            using = a;
        }
        ELEMENT.setVolatile(a, count, u);
        if (u.dying()) {   // read after the store: a destroy that marked it before sees this use, or this sees its mark
            ELEMENT.setVolatile(a, count, (Uses) null);
            return false;
        }
        count++;
        return true;
    }

    /** Ends the uses of what is in {@code set}; returns whether one of them was dying. */
    boolean end(Set<Uses> set) {
        Uses[] a = using;
        boolean dying = false;
        for (int i = 0; i < count; i++) {
            Uses u = (Uses) ELEMENT.getVolatile(a, i);
            if (u != null && set.contains(u)) {
                ELEMENT.setRelease(a, i, (Uses) null);   // in place: a destroy scanning meanwhile misses no other
                dying |= u.dying();
            }
        }
        return dying;
    }

    /** Ends every use; returns whether one of them was dying. */
    boolean endAll() {
        Uses[] a = using;
        boolean dying = false;
        for (int i = 0; i < count; i++) {
            Uses u = (Uses) ELEMENT.getVolatile(a, i);
            if (u != null) {
                // No fence needed to end a use: a destroy that reads it a moment late waits a moment longer
                // (the use's end notifies it when the object is dying, and that read is ordered by the lock).
                ELEMENT.setRelease(a, i, (Uses) null);
                dying |= u.dying();
            }
        }
        count = 0;
        return dying;
    }

    /** Whether a use of one of {@code set} is published here (read by a destroy). */
    boolean usesAny(Set<Uses> set) {
        Uses[] a = using;
        for (int i = 0; i < a.length; i++) {
            Uses u = (Uses) ELEMENT.getVolatile(a, i);
            if (u != null && set.contains(u)) {
                return true;
            }
        }
        return false;
    }
}
