package io.gpusockets.backend.server;

import io.gpusockets.protocol.transport.Connection;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.function.Consumer;

/**
 * The handshakes in progress, oldest first, at most {@code max} of them. Admitting one more than that
 * drops the oldest (its connection is closed, which ends its handshake with an IOException): a peer that
 * connects and says nothing is the likely oldest, so a flood of such peers costs the server a bounded
 * number of connections and threads without locking out peers that complete their handshake promptly.
 */
final class Handshakes {
    private final int max;
    private final Consumer<Connection> onDrop;
    private final LinkedHashSet<Connection> inProgress = new LinkedHashSet<>();

    /** {@code onDrop} is told of each connection dropped to make room (after it was closed). */
    Handshakes(int max, Consumer<Connection> onDrop) {
        if (max < 1) {
            throw new IllegalArgumentException("max=" + max + ": must be at least 1");
        }
        this.max = max;
        this.onDrop = onDrop;
    }

    /** Counts {@code c} as handshaking, dropping the oldest handshakes past the cap. */
    void begin(Connection c) {
        Connection dropped = null;
        synchronized (this) {
            if (inProgress.size() >= max) {
                Iterator<Connection> oldest = inProgress.iterator();
                dropped = oldest.next();
                oldest.remove();
            }
            inProgress.add(c);
        }
        if (dropped != null) {
            dropped.close();
            onDrop.accept(dropped);
        }
    }

    /** {@code c}'s handshake is over, whatever its outcome; false when it was dropped to make room. */
    synchronized boolean end(Connection c) {
        return inProgress.remove(c);
    }

    synchronized int count() {
        return inProgress.size();
    }
}
