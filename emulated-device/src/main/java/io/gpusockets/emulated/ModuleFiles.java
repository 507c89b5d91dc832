package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_FILE_NOT_FOUND;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * cuModuleLoad's file, read on the host this driver runs on (behind a backend the frontend reads the
 * program's file instead: the backend never opens a path a client names). The errors are those the
 * real driver gives: a missing or unreadable file is CUDA_ERROR_FILE_NOT_FOUND, a directory
 * CUDA_ERROR_OUT_OF_MEMORY (sic, driver 580), an empty or foreign file CUDA_ERROR_INVALID_IMAGE.
 */
final class ModuleFiles {
    private ModuleFiles() {
    }

    /** The file's bytes. */
    static byte[] read(String fname) {
        Path p;
        try {
            p = Path.of(fname);
        } catch (RuntimeException e) {
            throw new CudaError(CUDA_ERROR_FILE_NOT_FOUND, "fname \"" + fname + "\": " + e.getMessage());
        }
        if (Files.isDirectory(p)) {
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, fname + " is a directory");
        }
        try {
            long size = Files.size(p);
            if (size > ModuleImage.MAX_PTX) {
                throw new CudaError(CUDA_ERROR_INVALID_IMAGE, fname + " has " + size + " bytes, over " + ModuleImage.MAX_PTX);
            }
            return Files.readAllBytes(p);
        } catch (IOException e) {
            throw new CudaError(CUDA_ERROR_FILE_NOT_FOUND, fname + ": " + e);
        }
    }
}
