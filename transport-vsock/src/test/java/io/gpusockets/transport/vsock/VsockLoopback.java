package io.gpusockets.transport.vsock;

import java.io.IOException;
import java.lang.foreign.Arena;
import org.junit.jupiter.api.Assumptions;

/** Whether this machine has vsock loopback (CID 1, the vsock_loopback module); probed once by binding, never by connecting. */
final class VsockLoopback {
    /** Null where loopback works, else why not. */
    private static final String MISSING = probe();

    private VsockLoopback() {
    }

    private static String probe() {
        try (Arena arena = Arena.ofConfined()) {
            int fd = SocketCalls.listen(NativeSockets.AF_VSOCK,
                    SockAddr.vsock(arena, SockAddr.VMADDR_CID_LOCAL, SockAddr.VMADDR_ANY), "bind vsock://1:any");
            SocketFd.closeQuietly(NativeSockets.newCallState(arena), fd);
            return null;
        } catch (IOException e) {
            String errnoText = e.getMessage().substring(e.getMessage().indexOf(": ") + 2);
            return "no vsock loopback on this machine (binding CID 1 failed: " + errnoText + ")";
        }
    }

    static void require() {
        if (MISSING != null) {
            Assumptions.abort(MISSING);
        }
    }
}
