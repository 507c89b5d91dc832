package io.gpusockets.frontend;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.calls.ModuleImageKind;
import io.gpusockets.protocol.wire.WireValues;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * cuModuleLoad and cuLibraryLoadFromFile: the program's file is read here, in the guest, into native memory (never the Java
 * heap) and loaded as cuModuleLoadData would load it; the backend never sees the path. The errors
 * are the real driver's (driver 580): a missing or unreadable file is CUDA_ERROR_FILE_NOT_FOUND, a
 * directory CUDA_ERROR_OUT_OF_MEMORY (sic), an empty file CUDA_ERROR_INVALID_IMAGE.
 */
final class ModuleFiles {
    private ModuleFiles() {
    }

    static int load(CudaDriver driver, MemorySegment module, MemorySegment fname) {
        return load(module, fname, image -> driver.cuModuleLoadData(module, image));
    }

    /** Reads the file as {@link #load(CudaDriver, MemorySegment, MemorySegment)} does and hands its image to {@code loader}. */
    static int load(MemorySegment out, MemorySegment fname, java.util.function.ToIntFunction<MemorySegment> loader) {
        if (isNull(out)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Path path = path(fname);
        if (path == null) {
            return isNull(fname) ? CuResult.CUDA_ERROR_INVALID_VALUE : CuResult.CUDA_ERROR_FILE_NOT_FOUND;
        }
        if (Files.isDirectory(path)) {
            return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
        }
        try (FileChannel in = FileChannel.open(path, StandardOpenOption.READ); Arena arena = Arena.ofConfined()) {
            long size = in.size();
            if (size == 0 || size > ModuleImageKind.MAX_IMAGE) {
                return CuResult.CUDA_ERROR_INVALID_IMAGE;
            }
            // Zeroed, so PTX text ends in a NUL; at least 16 bytes, so the format probe stays inside it.
            MemorySegment image = arena.allocate(Math.max(size + 1, 16));
            for (long off = 0; off < size; ) {
                int n = in.read(image.asSlice(off, Math.min(size - off, Integer.MAX_VALUE)).asByteBuffer());
                if (n < 0) {
                    break;   // the file shrank while being read: load what is there
                }
                off += n;
            }
            return loader.applyAsInt(image);
        } catch (IOException e) {
            return CuResult.CUDA_ERROR_FILE_NOT_FOUND;
        }
    }

    private static Path path(MemorySegment fname) {
        if (isNull(fname)) {
            return null;
        }
        MemorySegment s = WireValues.sized(fname, WireValues.MAX_CSTR + 1);
        long limit = Math.min(s.byteSize(), WireValues.MAX_CSTR + 1);
        for (long i = 0; i < limit; i++) {
            if (s.get(ValueLayout.JAVA_BYTE, i) == 0) {
                try {
                    return i == 0 ? null : Path.of(new String(s.asSlice(0, i).toArray(ValueLayout.JAVA_BYTE),
                            StandardCharsets.UTF_8));
                } catch (InvalidPathException e) {
                    return null;
                }
            }
        }
        return null;
    }

    private static boolean isNull(MemorySegment s) {
        return s.isNative() && s.address() == 0;
    }
}
