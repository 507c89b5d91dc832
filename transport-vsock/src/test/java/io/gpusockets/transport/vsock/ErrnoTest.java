package io.gpusockets.transport.vsock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.BindException;
import java.net.ConnectException;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import org.junit.jupiter.api.Test;

class ErrnoTest {

    @Test
    void describesWithGlibcTextAndName() {
        assertEquals("Connection refused (ECONNREFUSED)", Errno.describe(Errno.ECONNREFUSED));
        assertEquals("Resource temporarily unavailable (EAGAIN)", Errno.describe(Errno.EAGAIN));
        assertTrue(Errno.describe(4000).endsWith("(errno 4000)"), Errno.describe(4000));
    }

    @Test
    void mapsErrnoOntoSocketExceptionKinds() {
        assertInstanceOf(ConnectException.class, Errno.exception("x", Errno.ECONNREFUSED));
        assertInstanceOf(BindException.class, Errno.exception("x", Errno.EADDRINUSE));
        assertInstanceOf(BindException.class, Errno.exception("x", Errno.EADDRNOTAVAIL));
        assertInstanceOf(SocketTimeoutException.class, Errno.exception("x", Errno.ETIMEDOUT));
        assertInstanceOf(SocketException.class, Errno.exception("x", Errno.EPIPE));
        IOException other = Errno.exception("cannot listen on vsock://any:1", Errno.EAFNOSUPPORT);
        assertEquals(IOException.class, other.getClass());
        assertEquals("cannot listen on vsock://any:1: Address family not supported by protocol (EAFNOSUPPORT)",
                other.getMessage());
    }

    @Test
    void capturesErrnoOfARealFailedCall() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            assertEquals(-1, NativeSockets.shutdown(state, -1, NativeSockets.SHUT_RDWR));
            assertEquals(Errno.EBADF, NativeSockets.errno(state));
            assertEquals(-1, NativeSockets.socket(state, 12345, NativeSockets.SOCK_STREAM));
            assertEquals(Errno.EAFNOSUPPORT, NativeSockets.errno(state));
        }
    }
}
