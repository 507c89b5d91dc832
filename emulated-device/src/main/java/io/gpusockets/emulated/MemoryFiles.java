package io.gpusockets.emulated;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * Physical memory another process can map: an anonymous memory file ({@code memfd_create}) of the allocation's size,
 * mapped {@code MAP_SHARED} into this process, through FFM (Linux, no JNI). The emulated device backs a cuMemCreate
 * that asks for {@code CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR} with one, so that cuMemExportToShareableHandle can
 * give a descriptor (a dup) and cuMemImportFromShareableHandle, in this process or another, maps the same pages, as
 * the driver's exported allocations are the same device memory in every process holding a handle to them.
 *
 * <p>What it owns: nothing beyond the call. A file's pages live while any process holds a descriptor or a mapping.
 */
final class MemoryFiles {
    private static final int MFD_CLOEXEC = 1;
    private static final int PROT_READ = 1, PROT_WRITE = 2, MAP_SHARED = 1;
    private static final int F_DUPFD_CLOEXEC = 1030;
    private static final int SEEK_END = 2;
    private static final long MAP_FAILED = -1L;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final MethodHandle MEMFD_CREATE = function("memfd_create", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle FTRUNCATE = function("ftruncate", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle LSEEK = function("lseek", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_INT));
    private static final MethodHandle FCNTL = function("fcntl", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle CLOSE = function("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle MMAP = function("mmap",
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle MUNMAP = function("munmap", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
    private static final int O_RDWR = 2, O_CLOEXEC = 0x80000;
    /** open(path, flags, mode): variadic from its third argument. */
    private static final MethodHandle OPEN = function("open", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT),
            Linker.Option.firstVariadicArg(2));

    private MemoryFiles() {
    }

    private static MethodHandle function(String name, FunctionDescriptor d, Linker.Option... more) {
        SymbolLookup libc = LINKER.defaultLookup();
        MemorySegment symbol = libc.find(name).orElseThrow(() -> new UnsatisfiedLinkError("libc has no " + name));
        Linker.Option[] options = java.util.Arrays.copyOf(more, more.length + 1);
        options[more.length] = Linker.Option.captureCallState("errno");
        return LINKER.downcallHandle(symbol, d, options);
    }

    /** A failed system call: its name and errno. */
    static final class SystemCallFailed extends Exception {
        final int errno;

        SystemCallFailed(String call, int errno) {
            super(call + " failed: errno " + errno);
            this.errno = errno;
        }
    }

    private static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    private static RuntimeException unexpected(Throwable t) {
        if (t instanceof Error e) {
            throw e;
        }
        return t instanceof RuntimeException r ? r : new IllegalStateException(t);
    }

    /** A new memory file of {@code size} bytes (zero-filled), close-on-exec; the caller closes it. */
    static int create(long size) throws SystemCallFailed {
        return create(size, "gpusockets-emulated-vmm");
    }

    /**
     * Like {@link #create(long)}, named {@code name}: {@code /proc/PID/fd/N} of it reads {@code /memfd:NAME (deleted)},
     * which is how an opener of an IPC handle checks that the descriptor it reached is still the exported file.
     */
    static int create(long size, String name) throws SystemCallFailed {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(STATE);
            int fd = (int) MEMFD_CREATE.invokeExact(state, a.allocateFrom(name), MFD_CLOEXEC);
            if (fd < 0) {
                throw new SystemCallFailed("memfd_create", errno(state));
            }
            int r = (int) FTRUNCATE.invokeExact(state, fd, size);
            if (r != 0) {
                int e = errno(state);
                close(fd);
                throw new SystemCallFailed("ftruncate(" + size + ")", e);
            }
            return fd;
        } catch (SystemCallFailed e) {
            throw e;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** The size of the file {@code fd} (lseek to its end), or a failure (EBADF: no open descriptor; ESPIPE: not a file). */
    static long size(int fd) throws SystemCallFailed {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(STATE);
            long end = (long) LSEEK.invokeExact(state, fd, 0L, SEEK_END);
            if (end < 0) {
                throw new SystemCallFailed("lseek(fd " + fd + ")", errno(state));
            }
            return end;
        } catch (SystemCallFailed e) {
            throw e;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** A new descriptor (close-on-exec) of the file {@code fd} names. */
    static int dup(int fd) throws SystemCallFailed {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(STATE);
            int d = (int) FCNTL.invokeExact(state, fd, F_DUPFD_CLOEXEC, 0);
            if (d < 0) {
                throw new SystemCallFailed("fcntl(F_DUPFD_CLOEXEC, fd " + fd + ")", errno(state));
            }
            return d;
        } catch (SystemCallFailed e) {
            throw e;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /**
     * Opens {@code path} read-write, close-on-exec (for {@code /proc/PID/fd/N}: a new descriptor of the file another
     * process of this user holds); the caller closes it. ENOENT: no such process or descriptor; EACCES: not ours.
     */
    static int open(String path) throws SystemCallFailed {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(STATE);
            int fd = (int) OPEN.invokeExact(state, a.allocateFrom(path), O_RDWR | O_CLOEXEC, 0);
            if (fd < 0) {
                throw new SystemCallFailed("open(" + path + ")", errno(state));
            }
            return fd;
        } catch (SystemCallFailed e) {
            throw e;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** What {@code /proc/self/fd/FD} reads: for a memory file {@code /memfd:NAME (deleted)}; null if unreadable. */
    static String target(int fd) {
        try {
            return java.nio.file.Files.readSymbolicLink(java.nio.file.Path.of("/proc/self/fd/" + fd)).toString();
        } catch (java.io.IOException | UnsupportedOperationException e) {
            return null;
        }
    }

    static void close(int fd) {
        try (Arena a = Arena.ofConfined()) {
            int ignored = (int) CLOSE.invokeExact(a.allocate(STATE), fd);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /**
     * Maps all {@code size} bytes of the file {@code fd} shared, read-write; the mapping is unmapped when {@code arena}
     * closes (the descriptor may be closed at once: the mapping holds the pages).
     */
    static MemorySegment map(int fd, long size, Arena arena) throws SystemCallFailed {
        MemorySegment at;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(STATE);
            at = (MemorySegment) MMAP.invokeExact(state, MemorySegment.NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0L);
            if (at.address() == MAP_FAILED) {
                throw new SystemCallFailed("mmap(fd " + fd + ", " + size + " bytes)", errno(state));
            }
        } catch (SystemCallFailed e) {
            throw e;
        } catch (Throwable t) {
            throw unexpected(t);
        }
        long address = at.address();
        return MemorySegment.ofAddress(address).reinterpret(size, arena, s -> unmap(address, size));
    }

    private static void unmap(long address, long size) {
        try (Arena a = Arena.ofConfined()) {
            int ignored = (int) MUNMAP.invokeExact(a.allocate(STATE), MemorySegment.ofAddress(address), size);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }
}
