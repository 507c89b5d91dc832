package io.gpusockets.transport.vsock;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.nio.charset.StandardCharsets;

/**
 * The C structs the socket layer passes to the kernel, laid out once with {@link MemoryLayout}
 * (Linux, LP64: x86_64 and aarch64).
 *
 * <pre>
 * struct sockaddr_vm  (16 bytes)           struct sockaddr_un  (110 bytes)
 *   0  u16 svm_family = AF_VSOCK (40)        0  u16  sun_family = AF_UNIX (1)
 *   2  u16 svm_reserved1 = 0                 2  char sun_path[108], NUL-terminated
 *   4  u32 svm_port
 *   8  u32 svm_cid                         struct ucred  (12 bytes)
 *  12  u8  svm_flags = 0                     0 pid, 4 uid, 8 gid (32 bits each)
 *  13  u8  svm_zero[3] = 0
 *                                          struct pollfd (8 bytes): 0 int fd, 4 short events, 6 short revents
 * struct msghdr (56 bytes)                 struct iovec  (16 bytes): 0 void *base, 8 size_t len
 *   0 void *msg_name      8 u32 msg_namelen (+4 padding)
 *  16 iovec *msg_iov     24 size_t msg_iovlen
 *  32 void *msg_control  40 size_t msg_controllen
 *  48 int msg_flags (+4 padding)
 * </pre>
 */
final class SockAddr {
    static final StructLayout SOCKADDR_VM = MemoryLayout.structLayout(
            JAVA_SHORT.withName("svm_family"),
            JAVA_SHORT.withName("svm_reserved1"),
            JAVA_INT.withName("svm_port"),
            JAVA_INT.withName("svm_cid"),
            JAVA_BYTE.withName("svm_flags"),
            MemoryLayout.sequenceLayout(3, JAVA_BYTE).withName("svm_zero"));
    static final StructLayout SOCKADDR_UN = MemoryLayout.structLayout(
            JAVA_SHORT.withName("sun_family"),
            MemoryLayout.sequenceLayout(108, JAVA_BYTE).withName("sun_path"));
    static final StructLayout UCRED = MemoryLayout.structLayout(
            JAVA_INT.withName("pid"), JAVA_INT.withName("uid"), JAVA_INT.withName("gid"));
    static final StructLayout POLLFD = MemoryLayout.structLayout(
            JAVA_INT.withName("fd"), JAVA_SHORT.withName("events"), JAVA_SHORT.withName("revents"));
    static final StructLayout IOVEC = MemoryLayout.structLayout(
            ADDRESS.withName("iov_base"), JAVA_LONG.withName("iov_len"));
    static final StructLayout MSGHDR = MemoryLayout.structLayout(
            ADDRESS.withName("msg_name"),
            JAVA_INT.withName("msg_namelen"), MemoryLayout.paddingLayout(4),
            ADDRESS.withName("msg_iov"),
            JAVA_LONG.withName("msg_iovlen"),
            ADDRESS.withName("msg_control"),
            JAVA_LONG.withName("msg_controllen"),
            JAVA_INT.withName("msg_flags"), MemoryLayout.paddingLayout(4));

    static final long SVM_FAMILY = offset(SOCKADDR_VM, "svm_family");
    static final long SVM_PORT = offset(SOCKADDR_VM, "svm_port");
    static final long SVM_CID = offset(SOCKADDR_VM, "svm_cid");
    static final long SUN_FAMILY = offset(SOCKADDR_UN, "sun_family");
    static final long SUN_PATH = offset(SOCKADDR_UN, "sun_path");
    static final long SUN_PATH_MAX = 108;
    static final long UCRED_UID = offset(UCRED, "uid");
    static final long POLLFD_FD = offset(POLLFD, "fd");
    static final long POLLFD_EVENTS = offset(POLLFD, "events");
    static final long POLLFD_REVENTS = offset(POLLFD, "revents");
    static final long IOV_BASE = offset(IOVEC, "iov_base");
    static final long IOV_LEN = offset(IOVEC, "iov_len");
    static final long MSG_IOV = offset(MSGHDR, "msg_iov");
    static final long MSG_IOVLEN = offset(MSGHDR, "msg_iovlen");
    static final long MSG_CONTROL = offset(MSGHDR, "msg_control");
    static final long MSG_CONTROLLEN = offset(MSGHDR, "msg_controllen");
    static final long MSG_FLAGS = offset(MSGHDR, "msg_flags");
    static final long UCRED_PID = offset(UCRED, "pid");
    /** struct cmsghdr: 0 size_t cmsg_len, 8 int cmsg_level, 12 int cmsg_type, 16 data (LP64). */
    static final long CMSG_LEN = 0;
    static final long CMSG_LEVEL = 8;
    static final long CMSG_TYPE = 12;
    static final long CMSG_DATA = 16;
    /** MSG_CTRUNC in msg_flags: the kernel had more ancillary data than room (and closed what did not fit). */
    static final int MSG_CTRUNC = 0x8;

    /** VMADDR_CID_ANY and VMADDR_PORT_ANY: -1U. */
    static final long VMADDR_ANY = 0xFFFF_FFFFL;
    /** VMADDR_CID_LOCAL: loopback inside this machine (needs the vsock_loopback module). */
    static final long VMADDR_CID_LOCAL = 1;
    /** VMADDR_CID_HOST: the hypervisor host. */
    static final long VMADDR_CID_HOST = 2;

    private SockAddr() {
    }

    private static long offset(StructLayout layout, String field) {
        return layout.byteOffset(PathElement.groupElement(field));
    }

    /** A sockaddr_vm for {@code cid}:{@code port}, both unsigned 32-bit values. */
    static MemorySegment vsock(Arena arena, long cid, long port) {
        checkU32("cid", cid);
        checkU32("port", port);
        MemorySegment addr = arena.allocate(SOCKADDR_VM); // zeroed: reserved, flags and svm_zero stay 0
        addr.set(JAVA_SHORT, SVM_FAMILY, (short) NativeSockets.AF_VSOCK);
        addr.set(JAVA_INT, SVM_PORT, (int) port);
        addr.set(JAVA_INT, SVM_CID, (int) cid);
        return addr;
    }

    static long vsockCid(MemorySegment addr) {
        return Integer.toUnsignedLong(addr.get(JAVA_INT, SVM_CID));
    }

    static long vsockPort(MemorySegment addr) {
        return Integer.toUnsignedLong(addr.get(JAVA_INT, SVM_PORT));
    }

    /**
     * A sockaddr_un for a filesystem path, sized to the path (offsetof(sun_path) + length + NUL), as
     * bind and connect take it.
     */
    static MemorySegment unix(Arena arena, String path) {
        byte[] bytes = path.getBytes(StandardCharsets.UTF_8);
        if (bytes.length == 0 || bytes.length >= SUN_PATH_MAX) {
            throw new IllegalArgumentException("unix socket path must be 1.." + (SUN_PATH_MAX - 1)
                    + " bytes: length=" + bytes.length + " path=" + path);
        }
        if (path.indexOf('\0') >= 0) {
            throw new IllegalArgumentException("unix socket path contains NUL: path=" + path);
        }
        MemorySegment addr = arena.allocate(SUN_PATH + bytes.length + 1, SOCKADDR_UN.byteAlignment());
        addr.set(JAVA_SHORT, SUN_FAMILY, (short) NativeSockets.AF_UNIX);
        MemorySegment.copy(bytes, 0, addr, JAVA_BYTE, SUN_PATH, bytes.length);
        return addr;
    }

    static void checkU32(String name, long value) {
        if (value < 0 || value > 0xFFFF_FFFFL) {
            throw new IllegalArgumentException(name + " out of range 0..4294967295: " + name + "=" + value);
        }
    }
}
