package io.gpusockets.backend.driver;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import io.gpusockets.protocol.api.CuResult;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * The real CUDA driver in this process: libcuda.so.1 through the generated FFM downcalls of
 * {@link NativeBindings}. Obtain it with {@link #open}, which loads the library, runs cuInit(0) and
 * checks that there is a device, so a returned instance is ready for use; {@link #available} asks
 * the same question without throwing (to choose between the real and the emulated device).
 *
 * <p>One library per process: once one has loaded, asking for another path fails.
 */
public final class NativeCudaDriver extends NativeBindings {
    private static final int CU_DEVICE_NAME_MAX = 256;

    private final String libraryPath;
    private final int driverVersion;
    private final int deviceCount;
    private final String description;

    private NativeCudaDriver(String libraryPath, int driverVersion, int deviceCount, String deviceName) {
        this.libraryPath = libraryPath;
        this.driverVersion = driverVersion;
        this.deviceCount = deviceCount;
        String more = deviceCount > 1 ? " and " + (deviceCount - 1) + " more" : "";
        this.description = deviceName + more + " (real driver " + driverVersion + " via " + whereLoaded(libraryPath) + ")";
    }

    /**
     * Loads libcuda from {@code libraryPath} (null: the {@value NativeLibrary#PATH_PROP_NAME} system
     * property, else libcuda.so.1 through the dynamic loader), initialises the driver and checks that
     * it sees at least one device.
     *
     * @throws NativeDriverException naming the path and why it cannot be used
     */
    public static synchronized NativeCudaDriver open(String libraryPath) {
        String p = libraryPath != null ? libraryPath : System.getProperty(NativeLibrary.PATH_PROP_NAME, NativeLibrary.PATH_DEFAULT);
        try {
            NativeLibrary.configure(p);
        } catch (IllegalStateException e) {
            throw new NativeDriverException(p, NativeDriverException.NO_RESULT,
                    "cannot use libcuda at " + p + ": this process already loaded " + NativeLibrary.path()
                            + " (one driver library per process)", e);
        }
        if (NativeLibrary.lookup() == null) {
            Throwable why = NativeLibrary.loadFailure();
            throw new NativeDriverException(p, NativeDriverException.NO_RESULT,
                    "cannot load libcuda from " + p + ": " + explainLoadFailure(p, why) + hintFor(p), why);
        }
        NativeBindings cu = new NativeBindings();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            check(p, cu.cuInit(0), "cuInit(0)");
            check(p, cu.cuDriverGetVersion(out), "cuDriverGetVersion");
            int version = out.get(JAVA_INT, 0);
            check(p, cu.cuDeviceGetCount(out), "cuDeviceGetCount");
            int count = out.get(JAVA_INT, 0);
            if (count < 1) {
                check(p, CuResult.CUDA_ERROR_NO_DEVICE, "cuDeviceGetCount (0 devices)");
            }
            check(p, cu.cuDeviceGet(out, 0), "cuDeviceGet(0)");
            int dev = out.get(JAVA_INT, 0);
            MemorySegment name = arena.allocate(CU_DEVICE_NAME_MAX);
            check(p, cu.cuDeviceGetName(name, CU_DEVICE_NAME_MAX, dev), "cuDeviceGetName");
            return new NativeCudaDriver(p, version, count, name.getString(0));
        }
    }

    /**
     * Whether {@link #open} would succeed for {@code libraryPath}: the library loads, cuInit(0)
     * succeeds and there is a device. Never throws.
     */
    public static boolean available(String libraryPath) {
        try {
            open(libraryPath);
            return true;
        } catch (RuntimeException | LinkageError e) {
            return false;
        }
    }

    /** E.g. "NVIDIA H200 (real driver 13000 via libcuda.so.1 = /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05)". */
    public String description() {
        return description;
    }

    /** The path or name the library was loaded from, as configured. */
    public String libraryPath() {
        return libraryPath;
    }

    /** cuDriverGetVersion, e.g. 13000. */
    public int driverVersion() {
        return driverVersion;
    }

    /** cuDeviceGetCount at open. */
    public int deviceCount() {
        return deviceCount;
    }

    @Override
    public String toString() {
        return "NativeCudaDriver[" + description + "]";
    }

    private static void check(String path, int result, String call) {
        if (result == CuResult.CUDA_SUCCESS) {
            return;
        }
        String hint = switch (result) {
            case CuResult.CUDA_ERROR_NO_DEVICE -> " (no usable GPU: is the NVIDIA kernel module loaded, and is "
                    + "/dev/nvidia* accessible to this user? check nvidia-smi)";
            case CuResult.CUDA_ERROR_STUB_LIBRARY -> " (this is the CUDA toolkit's stub libcuda, not the driver's)";
            case CuResult.CUDA_ERROR_NOT_FOUND -> " (the library lacks the symbol: is it libcuda?)";
            case CuResult.CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, CuResult.CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE ->
                    " (libcuda does not match the loaded NVIDIA kernel module)";
            default -> "";
        };
        throw new NativeDriverException(path, result, call + " failed with " + CuResult.name(result) + " (" + result
                + "): " + CuResult.description(result) + hint + " [libcuda: " + path + "]", null);
    }

    /** The loader's own reason (dlerror), which the JDK's message leaves out. */
    private static String explainLoadFailure(String path, Throwable why) {
        String jdk = why == null ? "unknown reason" : String.valueOf(why.getMessage());
        try {
            Optional<String> dlerror = dlopenError(path);
            return dlerror.map(e -> e + " (" + jdk + ")").orElse(jdk);
        } catch (Throwable t) {
            return jdk;
        }
    }

    private static Optional<String> dlopenError(String path) throws Throwable {
        Linker linker = Linker.nativeLinker();
        SymbolLookup libc = linker.defaultLookup();
        Optional<MemorySegment> dlopen = libc.find("dlopen");
        Optional<MemorySegment> dlerror = libc.find("dlerror");
        Optional<MemorySegment> dlclose = libc.find("dlclose");
        if (dlopen.isEmpty() || dlerror.isEmpty() || dlclose.isEmpty()) {
            return Optional.empty();
        }
        MethodHandle open = linker.downcallHandle(dlopen.get(), FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
        MethodHandle error = linker.downcallHandle(dlerror.get(), FunctionDescriptor.of(ADDRESS));
        MethodHandle close = linker.downcallHandle(dlclose.get(), FunctionDescriptor.of(JAVA_INT, ADDRESS));
        try (Arena arena = Arena.ofConfined()) {
            final int rtldLazy = 1;
            MemorySegment handle = (MemorySegment) open.invokeExact(arena.allocateFrom(path), rtldLazy);
            if (!MemorySegment.NULL.equals(handle)) {
                int ignored = (int) close.invokeExact(handle);
                return Optional.empty();
            }
            MemorySegment message = (MemorySegment) error.invokeExact();
            if (MemorySegment.NULL.equals(message)) {
                return Optional.empty();
            }
            return Optional.of(message.reinterpret(4096).getString(0));
        }
    }

    private static String hintFor(String path) {
        if (path.contains("/")) {
            return "";
        }
        return "; " + path + " is not on the dynamic loader's path: install the NVIDIA driver, or pass the library's "
                + "full path (--libcuda /usr/local/nvidia/lib64/libcuda.so.1, or -D" + NativeLibrary.PATH_PROP_NAME + "=...)";
    }

    /** The configured path, plus the file the loader mapped when that differs (a bare name, a symlink). */
    private static String whereLoaded(String path) {
        Optional<String> mapped = mappedLibcuda();
        if (mapped.isEmpty() || mapped.get().equals(path)) {
            return path;
        }
        return path + " = " + mapped.get();
    }

    private static Optional<String> mappedLibcuda() {
        try {
            List<String> maps = Files.readAllLines(Path.of("/proc/self/maps"));
            for (String line : maps) {
                String[] fields = line.trim().split("\\s+", 6);
                if (fields.length == 6 && fields[5].startsWith("/")
                        && Path.of(fields[5]).getFileName().toString().startsWith("libcuda.so")) {
                    return Optional.of(fields[5]);
                }
            }
        } catch (IOException | RuntimeException e) {
            // not Linux, or /proc hidden: the configured path will do
        }
        return Optional.empty();
    }
}
