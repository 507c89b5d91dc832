package io.gpusockets.backend.isolation;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.transport.vsock.DescriptorPassing;
import java.io.IOException;
import java.net.StandardSocketOptions;
import java.nio.channels.SocketChannel;
import java.util.OptionalInt;

/**
 * The one socket descriptor that carries a frontend's connection, for passing it to a worker, and the
 * front's letting go of it afterwards. vsock:// and fdunix:// connections know their descriptor; for the
 * JDK's tcp:// and unix:// channels (which do not tell it) the channel is marked with a linger value no
 * other socket of this process has, the descriptor is found by that mark in /proc/self/fd, and the mark
 * is taken off again. Connections whose state is more than one socket have none here: ring:// crosses with
 * its shared file ({@link HandedConnection}), vchan:// and TLS are relayed.
 */
final class SocketHandOff {
    /** One marking at a time; marks are 1..{@value #MARKS} seconds (the JDK caps linger at 65535). */
    private static final Object LOCK = new Object();
    private static final int MARKS = 60_000;
    private static int nextMark = 1;

    private SocketHandOff() {
    }

    /** The descriptor, or empty when this connection cannot be handed over whole. */
    static OptionalInt descriptor(Connection c) throws IOException {
        OptionalInt own = DescriptorPassing.descriptorOf(c);
        if (own.isPresent()) {
            return own;
        }
        if (c.socketChannel().isEmpty()) {
            return OptionalInt.empty();
        }
        return descriptor(c.socketChannel().get());
    }

    /** The descriptor of a JDK socket channel of this process (found by a linger mark). */
    static OptionalInt descriptor(SocketChannel ch) throws IOException {
        synchronized (LOCK) {
            int mark = nextMark;
            nextMark = nextMark % MARKS + 1;
            ch.setOption(StandardSocketOptions.SO_LINGER, mark);
            try {
                return DescriptorPassing.findSocketByLinger(mark);
            } finally {
                ch.setOption(StandardSocketOptions.SO_LINGER, -1);
            }
        }
    }

    /** The front's copy goes; the socket lives on in the worker (no shutdown(2)). */
    static void release(Connection c) {
        if (DescriptorPassing.descriptorOf(c).isPresent()) {
            DescriptorPassing.detach(c);
        } else {
            c.close(); // the JDK closes a blocking channel's descriptor without shutdown when linger is off
        }
    }
}
