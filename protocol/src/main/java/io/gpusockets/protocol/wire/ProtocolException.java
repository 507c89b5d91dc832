package io.gpusockets.protocol.wire;

import java.io.IOException;

/** The peer broke the wire protocol; the connection cannot continue. */
public class ProtocolException extends IOException {
    public ProtocolException(String message) {
        super(message);
    }
}
