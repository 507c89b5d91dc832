package io.gpusockets.backend.driver;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/**
 * Where the real libcuda.so.1 comes from. {@link #configure} must run before {@link NativeBindings}
 * is first touched, because its MethodHandles are static finals bound once.
 */
public final class NativeLibrary {
    /** System property naming the library; default: "libcuda.so.1" found by the dynamic loader. */
    public static final String PATH_PROP_NAME = "gpusockets.libcuda";
    public static final String PATH_DEFAULT = "libcuda.so.1";

    private static final Linker LINKER = Linker.nativeLinker();
    private static volatile String path;
    private static volatile SymbolLookup lookup;
    private static volatile Throwable loadFailure;

    private NativeLibrary() {
    }

    /** Chooses the library; later calls with another path after binding are refused. */
    public static synchronized void configure(String libraryPath) {
        String p = libraryPath == null ? System.getProperty(PATH_PROP_NAME, PATH_DEFAULT) : libraryPath;
        if (lookup != null && !p.equals(path)) {
            throw new IllegalStateException("libcuda already bound: path=" + path + " requested=" + p);
        }
        path = p;
    }

    /** The configured path (after {@link #configure} or the default). */
    public static String path() {
        String p = path;
        return p != null ? p : System.getProperty(PATH_PROP_NAME, PATH_DEFAULT);
    }

    /** Loads the library, or returns null and remembers why. */
    public static synchronized SymbolLookup lookup() {
        if (lookup == null && loadFailure == null) {
            try {
                lookup = SymbolLookup.libraryLookup(path(), Arena.global());
            } catch (IllegalArgumentException | UnsatisfiedLinkError e) {
                loadFailure = e;
            }
        }
        return lookup;
    }

    /** Why loading failed, or null. */
    public static Throwable loadFailure() {
        lookup();
        return loadFailure;
    }

    /** A downcall handle for {@code symbol}, or null when the library or the symbol is missing. */
    static MethodHandle bind(String symbol, FunctionDescriptor descriptor, boolean critical) {
        SymbolLookup l = lookup();
        if (l == null) {
            return null;
        }
        return l.find(symbol)
                .map(s -> critical
                        ? LINKER.downcallHandle(s, descriptor, Linker.Option.critical(false))
                        : LINKER.downcallHandle(s, descriptor))
                .orElse(null);
    }

    static IllegalStateException downcallFailed(String symbol, Throwable t) {
        return new IllegalStateException("downcall to " + symbol + " failed", t);
    }
}
