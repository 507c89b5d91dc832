package io.gpusockets.cli.doctor;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Tells GPUsockets' {@code libcuda.so.1} (frontend/native) from NVIDIA's and others. Ours is small and
 * holds the name of the Java class its bootstrap starts ({@value #MARKER}); NVIDIA's is tens of MiB
 * and its file is named for the driver version (libcuda.so.580.95.05); the CUDA toolkit's stub lives in
 * a {@code stubs} directory.
 */
public final class FrontendLibrary {
    /** The class bootstrap.c looks up with FindClass: no other libcuda.so.1 names it. */
    static final String MARKER = "io/gpusockets/frontend/NativeEntry";
    /** Ours is about 1 MiB; a file far larger is not ours, and is not read through. */
    private static final long MAX_OURS = 32L << 20;

    public enum Kind {
        OURS("GPUsockets' frontend"), NVIDIA("NVIDIA's driver library"), STUB("the CUDA toolkit's stub (no driver behind it)"),
        OTHER("not GPUsockets' (another libcuda.so.1)");

        private final String words;

        Kind(String words) {
            this.words = words;
        }

        public String words() {
            return words;
        }
    }

    private FrontendLibrary() {
    }

    public static Kind kindOf(Path file) {
        Path real;
        try {
            real = file.toRealPath();
        } catch (IOException e) {
            real = file;
        }
        if (real.toString().contains("/stubs/")) {
            return Kind.STUB;
        }
        try {
            if (Files.size(real) <= MAX_OURS && contains(real, MARKER.getBytes(StandardCharsets.US_ASCII))) {
                return Kind.OURS;
            }
        } catch (IOException e) {
            return Kind.OTHER;
        }
        String name = real.getFileName().toString();
        return name.matches("libcuda\\.so\\.[0-9]{3,}\\..*") ? Kind.NVIDIA : Kind.OTHER;
    }

    /** Where ours is installed: the directory above its lib/ (what bootstrap.c takes as PREFIX, from its real path). */
    public static Path prefixOf(Path library) throws IOException {
        Path lib = library.toRealPath().getParent();
        return lib.getParent();
    }

    private static boolean contains(Path file, byte[] needle) throws IOException {
        byte[] buf = new byte[1 << 16];
        int keep = needle.length - 1;
        int have = 0;
        try (InputStream in = Files.newInputStream(file)) {
            for (int n; (n = in.read(buf, have, buf.length - have)) > 0; ) {
                int end = have + n;
                for (int i = 0; i + needle.length <= end; i++) {
                    if (buf[i] == needle[0] && matches(buf, i, needle)) {
                        return true;
                    }
                }
                int tail = Math.min(keep, end);
                System.arraycopy(buf, end - tail, buf, 0, tail);
                have = tail;
            }
        }
        return false;
    }

    private static boolean matches(byte[] buf, int at, byte[] needle) {
        for (int j = 1; j < needle.length; j++) {
            if (buf[at + j] != needle[j]) {
                return false;
            }
        }
        return true;
    }
}
