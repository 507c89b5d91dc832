package io.gpusockets.frontend;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import org.junit.jupiter.api.Test;

/** The guest descriptors of POSIX shareable handles, through real memfds, and the refusals that need no backend. */
class ShareableFilesTest {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle PIPE = libc("pipe", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    private static final MethodHandle OPEN = libc("open", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle WRITE = libc("write", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle PWRITE = libc("pwrite", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle FTRUNCATE = libc("ftruncate", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle DUP = libc("dup", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle MEMFD_CREATE = libc("memfd_create", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));

    private static MethodHandle libc(String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), fd);
    }

    private static MemorySegment token(Arena a, int seed) {
        MemorySegment t = a.allocate(ShareableFiles.TOKEN_BYTES);
        for (int i = 0; i < ShareableFiles.TOKEN_BYTES; i++) {
            t.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 7));
        }
        return t;
    }

    @Test
    void tokenWrittenToAMemfdIsReadBackFromItAndFromADuplicate() throws Throwable {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment token = token(a, 3);
            int fd = ShareableFiles.create(token);
            int copy = (int) DUP.invokeExact(fd);
            try {
                assertTrue(fd >= 0 && copy >= 0);
                MemorySegment back = a.allocate(ShareableFiles.TOKEN_BYTES);
                assertNull(ShareableFiles.read(fd, back));
                assertEquals(-1, back.mismatch(token));
                MemorySegment again = a.allocate(ShareableFiles.TOKEN_BYTES);
                assertNull(ShareableFiles.read(copy, again), "a dup'ed descriptor carries the same token");
                assertEquals(-1, again.mismatch(token));
            } finally {
                ShareableFiles.close(copy);
                ShareableFiles.close(fd);
            }
        }
    }

    @Test
    void sealsHoldAgainstWritesAndResizing() throws Throwable {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment token = token(a, 11);
            int fd = ShareableFiles.create(token);
            try {
                MemorySegment junk = a.allocate(8);
                assertEquals(-1L, (long) PWRITE.invokeExact(fd, junk, 8L, 16L), "F_SEAL_WRITE refuses a write in place");
                assertEquals(-1L, (long) WRITE.invokeExact(fd, junk, 8L), "F_SEAL_GROW/WRITE refuse an append");
                assertEquals(-1, (int) FTRUNCATE.invokeExact(fd, 0L), "F_SEAL_SHRINK refuses truncation");
                MemorySegment back = a.allocate(ShareableFiles.TOKEN_BYTES);
                assertNull(ShareableFiles.read(fd, back));
                assertEquals(-1, back.mismatch(token), "the token is unchanged");
            } finally {
                ShareableFiles.close(fd);
            }
        }
    }

    @Test
    void foreignAndClosedDescriptorsAreRefusedWithoutBlocking() throws Throwable {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment back = a.allocate(ShareableFiles.TOKEN_BYTES);
            MemorySegment fds = a.allocate(8);
            assertEquals(0, (int) PIPE.invokeExact(fds));
            int readEnd = fds.get(JAVA_INT, 0), writeEnd = fds.get(JAVA_INT, 4);
            int devNull = (int) OPEN.invokeExact(a.allocateFrom("/dev/null"), 0);
            int unsealed = (int) MEMFD_CREATE.invokeExact(a.allocateFrom("not-ours"), 0);
            int resealedForeign = -1;
            try {
                assertTrue(devNull >= 0 && unsealed >= 0);
                assertNotNull(ShareableFiles.read(readEnd, back), "the read end of an empty pipe (would block if read)");
                assertNotNull(ShareableFiles.read(writeEnd, back), "a pipe's write end");
                assertNotNull(ShareableFiles.read(devNull, back), "/dev/null");
                assertNotNull(ShareableFiles.read(unsealed, back), "a memfd without seals");
                MemorySegment data = a.allocate(ShareableFiles.FILE_BYTES);
                assertEquals((long) ShareableFiles.FILE_BYTES, (long) WRITE.invokeExact(unsealed, data, (long) ShareableFiles.FILE_BYTES));
                assertNotNull(ShareableFiles.read(unsealed, back), "a memfd of the right size but no seals or magic");
                assertNotNull(ShareableFiles.read(-1, back), "a negative descriptor");
                assertTrue(ShareableFiles.read(1 << 20, back).contains("EBADF"), "a descriptor that is not open");
            } finally {
                ShareableFiles.close(readEnd);
                ShareableFiles.close(writeEnd);
                ShareableFiles.close(devNull);
                ShareableFiles.close(unsealed);
            }
        }
    }

    @Test
    void vmmCallsRefuseNullPointersAndForeignDescriptorsWithoutABackend() throws Throwable {
        VmmCalls vmm = new VmmCalls(null); // every case here is answered before the backend would be asked
        try (Arena a = Arena.ofConfined()) {
            MemorySegment handle = a.allocate(8);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                    vmm.cuMemExportToShareableHandle(MemorySegment.NULL, 1, VmmCalls.POSIX_FILE_DESCRIPTOR, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                    vmm.cuMemImportFromShareableHandle(MemorySegment.NULL, MemorySegment.ofAddress(0), VmmCalls.POSIX_FILE_DESCRIPTOR));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                    vmm.cuMemImportFromShareableHandle(handle, MemorySegment.NULL, VmmCalls.FABRIC));
            int devNull = (int) OPEN.invokeExact(a.allocateFrom("/dev/null"), 0);
            try {
                assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, vmm.cuMemImportFromShareableHandle(handle,
                        MemorySegment.ofAddress(devNull), VmmCalls.POSIX_FILE_DESCRIPTOR));
            } finally {
                ShareableFiles.close(devNull);
            }
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, vmm.cuMemImportFromShareableHandle(handle,
                    MemorySegment.ofAddress(1 << 20), VmmCalls.POSIX_FILE_DESCRIPTOR), "a closed descriptor: EBADF");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, vmm.cuMemImportFromShareableHandle(handle,
                    MemorySegment.ofAddress(1L << 40), VmmCalls.POSIX_FILE_DESCRIPTOR), "no int descriptor");
            assertEquals(0L, handle.get(JAVA_LONG, 0), "nothing written on a refusal");
        }
    }
}
