package io.gpusockets.transport.vsock;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

class SockAddrTest {

    @Test
    void layoutsMatchTheLinuxHeaders() {
        assertEquals(16, SockAddr.SOCKADDR_VM.byteSize(), "sizeof(struct sockaddr_vm)");
        assertEquals(0, SockAddr.SVM_FAMILY);
        assertEquals(4, SockAddr.SVM_PORT);
        assertEquals(8, SockAddr.SVM_CID);
        assertEquals(110, SockAddr.SOCKADDR_UN.byteSize(), "sizeof(struct sockaddr_un)");
        assertEquals(2, SockAddr.SUN_PATH);
        assertEquals(12, SockAddr.UCRED.byteSize());
        assertEquals(4, SockAddr.UCRED_UID);
        assertEquals(8, SockAddr.POLLFD.byteSize());
        assertEquals(6, SockAddr.POLLFD_REVENTS);
        assertEquals(16, SockAddr.IOVEC.byteSize());
        assertEquals(56, SockAddr.MSGHDR.byteSize(), "sizeof(struct msghdr) on LP64");
        assertEquals(16, SockAddr.MSG_IOV);
        assertEquals(24, SockAddr.MSG_IOVLEN);
    }

    @Test
    void encodesSockaddrVmByteForByte() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment addr = SockAddr.vsock(arena, 3, 7070);
            byte[] expected = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN
                    ? new byte[] {40, 0, 0, 0, (byte) 0x9e, 0x1b, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0}
                    : new byte[] {0, 40, 0, 0, 0, 0, 0x1b, (byte) 0x9e, 0, 0, 0, 3, 0, 0, 0, 0};
            assertArrayEquals(expected, addr.toArray(JAVA_BYTE));
            assertEquals(3, SockAddr.vsockCid(addr));
            assertEquals(7070, SockAddr.vsockPort(addr));
        }
    }

    @Test
    void keepsCidAndPortUnsigned() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment addr = SockAddr.vsock(arena, SockAddr.VMADDR_ANY, SockAddr.VMADDR_ANY);
            assertEquals(0xFFFF_FFFFL, SockAddr.vsockCid(addr));
            assertEquals(0xFFFF_FFFFL, SockAddr.vsockPort(addr));
            assertThrows(IllegalArgumentException.class, () -> SockAddr.vsock(arena, 1L << 32, 1));
            assertThrows(IllegalArgumentException.class, () -> SockAddr.vsock(arena, 3, -1));
        }
    }

    @Test
    void encodesSockaddrUnSizedToThePath() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment addr = SockAddr.unix(arena, "/run/g.sock");
            assertEquals(2 + 11 + 1, addr.byteSize(), "family + path + NUL");
            assertEquals(NativeSockets.AF_UNIX, addr.get(java.lang.foreign.ValueLayout.JAVA_SHORT, 0));
            assertEquals("/run/g.sock", addr.getString(2));
        }
    }

    @Test
    void rejectsUnixPathsTheKernelCannotTake() {
        try (Arena arena = Arena.ofConfined()) {
            assertThrows(IllegalArgumentException.class, () -> SockAddr.unix(arena, "/" + "x".repeat(107)));
            assertThrows(IllegalArgumentException.class, () -> SockAddr.unix(arena, ""));
            assertThrows(IllegalArgumentException.class, () -> SockAddr.unix(arena, "/a\0b"));
            assertEquals(2 + 107 + 1, SockAddr.unix(arena, "/" + "x".repeat(106)).byteSize());
        }
    }
}
