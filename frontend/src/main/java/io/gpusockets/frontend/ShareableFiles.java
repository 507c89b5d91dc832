package io.gpusockets.frontend;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The guest's form of a shareable handle of type CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: a file descriptor that
 * carries the backend's 64-byte token. The descriptor is a sealed memfd (Linux 3.17+) made with
 * {@code memfd_create("gpusockets-share", MFD_CLOEXEC | MFD_ALLOW_SEALING)}, holding exactly
 * <pre>
 *   offset  0  8 bytes  magic "GPUSHARE"
 *   offset  8  u32      version (1), little-endian
 *   offset 12  u32      token length (64), little-endian
 *   offset 16  64 bytes the token, as the backend gave it
 * </pre>
 * and sealed against every change ({@code F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL}), so whoever
 * receives it reads the token the exporter wrote. A program can pass it to another process of the guest over a Unix
 * socket (SCM_RIGHTS), dup it and close it as any descriptor; it names no file of the backend's host, and reading the
 * token gives nothing the backend would honour for another tenant (the backend checks every import).
 *
 * <p>This class owns nothing after a call: {@link #create} hands the descriptor to its caller (in the end to the
 * program, which closes it), and {@link #read} only reads the descriptor it is given. For a descriptor that is not one
 * this class made (not a memfd sealed this way, or of another size or magic), and for a closed or invalid one (EBADF),
 * {@link #read} answers why in words, never with an exception. Calls go to the C library through the FFM linker (no
 * JNI).
 */
final class ShareableFiles {
    /** Bytes of a token, the size of a CUmemFabricHandle and of the wire's shareable handle. */
    static final int TOKEN_BYTES = 64;
    static final int VERSION = 1;
    private static final byte[] MAGIC = "GPUSHARE".getBytes(StandardCharsets.US_ASCII);
    private static final int HEADER_BYTES = 16;
    /** The whole file: header and token. */
    static final int FILE_BYTES = HEADER_BYTES + TOKEN_BYTES;

    private static final int MFD_CLOEXEC = 1;
    private static final int MFD_ALLOW_SEALING = 2;
    private static final int F_ADD_SEALS = 1033;
    private static final int F_GET_SEALS = 1034;
    private static final int F_SEAL_SEAL = 1;
    private static final int F_SEAL_SHRINK = 2;
    private static final int F_SEAL_GROW = 4;
    private static final int F_SEAL_WRITE = 8;
    static final int ALL_SEALS = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
    private static final int EINTR = 4;
    private static final int EBADF = 9;
    private static final ValueLayout.OfInt LE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final Linker.Option SAVE_ERRNO = Linker.Option.captureCallState("errno");
    private static final MethodHandle MEMFD_CREATE = downcall("memfd_create", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle WRITE = downcall("write", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle PREAD = downcall("pread", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
    /** fcntl is variadic: its third argument (an int for the seal commands) is the first variadic one. */
    private static final MethodHandle FCNTL = downcall("fcntl", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT),
            Linker.Option.firstVariadicArg(2));
    private static final MethodHandle CLOSE = downcall("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));

    /** Why a call of this class failed: the C call and its errno. */
    static final class ShareableFileException extends Exception {
        private final int errno;

        ShareableFileException(String call, int errno) {
            super(call + " failed: errno " + errno);
            this.errno = errno;
        }

        int errno() {
            return errno;
        }
    }

    private ShareableFiles() {
    }

    private static MethodHandle downcall(String name, FunctionDescriptor fd, Linker.Option... extra) {
        Linker.Option[] options = new Linker.Option[extra.length + 1];
        options[0] = SAVE_ERRNO;
        System.arraycopy(extra, 0, options, 1, extra.length);
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(
                () -> new UnsatisfiedLinkError("the C library has no " + name)), fd, options);
    }

    /**
     * Makes a new sealed descriptor that carries {@code token} (its first {@link #TOKEN_BYTES} bytes) and returns it;
     * the caller owns it. On any failure nothing stays open.
     */
    static int create(MemorySegment token) throws ShareableFileException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment file = arena.allocate(FILE_BYTES);
            file.asSlice(0, MAGIC.length).copyFrom(MemorySegment.ofArray(MAGIC));
            file.set(LE_INT, 8, VERSION);
            file.set(LE_INT, 12, TOKEN_BYTES);
            file.asSlice(HEADER_BYTES, TOKEN_BYTES).copyFrom(token.asSlice(0, TOKEN_BYTES));
            int fd = (int) MEMFD_CREATE.invokeExact(state, arena.allocateFrom("gpusockets-share"), MFD_CLOEXEC | MFD_ALLOW_SEALING);
            if (fd < 0) {
                throw new ShareableFileException("memfd_create", errno(state));
            }
            boolean done = false;
            try {
                long written = 0;
                while (written < FILE_BYTES) {
                    long n = (long) WRITE.invokeExact(state, fd, file.asSlice(written), (long) FILE_BYTES - written);
                    if (n < 0 && errno(state) == EINTR) {
                        continue;
                    }
                    if (n <= 0) {
                        throw new ShareableFileException("write", n < 0 ? errno(state) : 0);
                    }
                    written += n;
                }
                if ((int) FCNTL.invokeExact(state, fd, F_ADD_SEALS, ALL_SEALS) < 0) {
                    throw new ShareableFileException("fcntl(F_ADD_SEALS)", errno(state));
                }
                done = true;
                return fd;
            } finally {
                if (!done) {
                    close(fd);
                }
            }
        } catch (ShareableFileException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("calling the C library failed", t);
        }
    }

    /**
     * The token {@code fd} carries, copied into {@code token} (at least {@link #TOKEN_BYTES} bytes); {@code null} when it
     * does. Otherwise why not, in words: a descriptor this class did not make (or a closed, invalid one) is refused
     * without blocking (the seals are checked before anything is read, so a pipe or socket is never read).
     */
    static String read(int fd, MemorySegment token) {
        if (fd < 0) {
            return "descriptor " + fd + " is negative";
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int seals = (int) FCNTL.invokeExact(state, fd, F_GET_SEALS, 0);
            if (seals < 0) {
                int e = errno(state);
                return e == EBADF ? "descriptor " + fd + " is not open (EBADF)"
                        : "descriptor " + fd + " is no sealed memfd (fcntl(F_GET_SEALS): errno " + e + ")";
            }
            if (seals != ALL_SEALS) {
                return "descriptor " + fd + " is a memfd sealed 0x" + Integer.toHexString(seals) + ", not 0x"
                        + Integer.toHexString(ALL_SEALS);
            }
            MemorySegment file = arena.allocate(FILE_BYTES + 1);
            long n;
            do {
                n = (long) PREAD.invokeExact(state, fd, file, (long) FILE_BYTES + 1, 0L);
            } while (n < 0 && errno(state) == EINTR);
            if (n < 0) {
                return "descriptor " + fd + " cannot be read (pread: errno " + errno(state) + ")";
            }
            if (n != FILE_BYTES) {
                return "descriptor " + fd + " holds " + (n > FILE_BYTES ? "more than " + FILE_BYTES : n) + " bytes, not "
                        + FILE_BYTES;
            }
            if (file.asSlice(0, MAGIC.length).mismatch(MemorySegment.ofArray(MAGIC)) != -1) {
                return "descriptor " + fd + " does not start with GPUSHARE";
            }
            int version = file.get(LE_INT, 8);
            int length = file.get(LE_INT, 12);
            if (version != VERSION || length != TOKEN_BYTES) {
                return "descriptor " + fd + " has version " + version + " and token length " + length + ", not "
                        + VERSION + " and " + TOKEN_BYTES;
            }
            token.asSlice(0, TOKEN_BYTES).copyFrom(file.asSlice(HEADER_BYTES, TOKEN_BYTES));
            return null;
        } catch (Throwable t) {
            throw new IllegalStateException("calling the C library failed", t);
        }
    }

    /** Closes a descriptor (tests and a failed create; the program closes the ones it got). */
    static void close(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            int ignored = (int) CLOSE.invokeExact(arena.allocate(CALL_STATE), fd);
        } catch (Throwable t) {
            throw new IllegalStateException("calling the C library failed", t);
        }
    }

    private static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }
}
