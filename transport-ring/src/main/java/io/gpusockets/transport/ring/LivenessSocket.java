package io.gpusockets.transport.ring;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.Optional;

/**
 * A connection's set-up socket, kept open and silent after the set-up: EOF on it means the peer process is
 * gone, however it died (SIGKILL included), since the kernel closes a dead process's descriptors. Either the
 * JDK channel the set-up ran on, or (in a process the connection was handed to, {@link RingHandOff}) a
 * descriptor received from the process that ran the set-up.
 */
sealed interface LivenessSocket permits LivenessSocket.Channel, LivenessSocket.Descriptor {

    /** Whether the peer is known to be gone (EOF or an error); never blocks. */
    boolean peerGone();

    /** Closes this process's reference without shutdown(2): another process may hold the same socket. */
    void close();

    /** The JDK channel, where this is one (for finding its descriptor to hand it over). */
    Optional<SocketChannel> channel();

    /** The set-up's own channel, non-blocking by now. */
    record Channel(SocketChannel socket) implements LivenessSocket {
        @Override
        public boolean peerGone() {
            try {
                return socket.read(ByteBuffer.allocate(1)) < 0; // nobody sends after the set-up: -1 is EOF
            } catch (IOException e) {
                return true;
            }
        }

        @Override
        public void close() {
            try {
                // Non-blocking and registered with no selector (the set-up's selectors are closed): the JDK closes
                // the descriptor without shutdown(2), which would end the connection for a process holding a copy.
                socket.close();
            } catch (IOException ignored) {
                // the descriptor is released even when close reports an error
            }
        }

        @Override
        public Optional<SocketChannel> channel() {
            return Optional.of(socket);
        }
    }

    /**
     * A received descriptor of the set-up socket, owned by this object. Asking and closing exclude each other, so
     * that a waiting thread never asks about a descriptor number closed and reused meanwhile.
     */
    final class Descriptor implements LivenessSocket {
        private int fd;

        Descriptor(int fd) {
            this.fd = fd;
        }

        @Override
        public synchronized boolean peerGone() {
            return fd < 0 || Descriptors.peerGone(fd);
        }

        @Override
        public synchronized void close() {
            if (fd >= 0) {
                Descriptors.close(fd);
                fd = -1;
            }
        }

        @Override
        public Optional<SocketChannel> channel() {
            return Optional.empty();
        }
    }
}
