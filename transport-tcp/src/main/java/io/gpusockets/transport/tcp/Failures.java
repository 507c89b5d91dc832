package io.gpusockets.transport.tcp;

import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.BindException;
import java.net.ConnectException;
import java.net.SocketTimeoutException;

/** Socket errors re-thrown with the address in the message; the JDK's say only "Connection refused". */
final class Failures {
    private Failures() {
    }

    /** An exception of the same kind as {@code e} (timeout, refusal, bind, interrupt), naming {@code uri}. */
    static IOException naming(String action, TransportUri uri, IOException e) {
        String message = action + " " + uri + ": " + e.getMessage();
        IOException named = switch (e) {
            case SocketTimeoutException t -> new SocketTimeoutException(message);
            case InterruptedIOException i -> new InterruptedIOException(message);
            case ConnectException c -> new ConnectException(message);
            case BindException b -> new BindException(message);
            default -> new IOException(message);
        };
        named.initCause(e);
        return named;
    }
}
