package io.gpusockets.backend.driver;

import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.MutableCallSite;

/**
 * Where the real libcuda.so.1 comes from, and the binding of {@link NativeBindings}' downcalls.
 *
 * <p>{@link NativeBindings} holds one static final MethodHandle per driver function. Those handles
 * are created when the class is initialised, which happens before any static method of a subclass
 * (such as {@code NativeCudaDriver.open(path)}) can run. So {@link #bind} does not look the symbol
 * up at once: it returns the invoker of a {@link MutableCallSite} whose first call loads the
 * configured library, binds the real downcall and installs it as the site's target. After that
 * the JIT sees a constant target and the indirection costs nothing.
 *
 * <p>The library can be (re)configured until it has been loaded successfully; a failed load of one
 * path does not prevent trying another. Once loaded, it stays for the life of the process (the
 * driver starts threads; unloading it is never safe).
 */
public final class NativeLibrary {
    /** System property naming the library; default: "libcuda.so.1" found by the dynamic loader. */
    public static final String PATH_PROP_NAME = "gpusockets.libcuda";
    public static final String PATH_DEFAULT = "libcuda.so.1";

    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle RESOLVE_AND_CALL;
    private static volatile String path;
    private static volatile SymbolLookup lookup;
    private static volatile Throwable loadFailure;

    static {
        try {
            RESOLVE_AND_CALL = MethodHandles.lookup().findVirtual(LazyDowncall.class, "resolveAndCall",
                    MethodType.methodType(Object.class, Object[].class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private NativeLibrary() {
    }

    /**
     * Chooses the library (null: the {@value #PATH_PROP_NAME} property, else {@value #PATH_DEFAULT}).
     * Refused once a different library has been loaded.
     */
    public static synchronized void configure(String libraryPath) {
        String p = libraryPath == null ? System.getProperty(PATH_PROP_NAME, PATH_DEFAULT) : libraryPath;
        if (lookup != null) {
            if (!p.equals(path)) {
                throw new IllegalStateException("libcuda already bound: path=" + path + " requested=" + p);
            }
            return;
        }
        if (!p.equals(path())) {
            loadFailure = null; // a failed load of another path says nothing about this one
        }
        path = p;
    }

    /** The configured path (after {@link #configure} or the default). */
    public static String path() {
        String p = path;
        return p != null ? p : System.getProperty(PATH_PROP_NAME, PATH_DEFAULT);
    }

    /** Whether a library has been loaded (and the path can no longer change). */
    public static boolean isLoaded() {
        return lookup != null;
    }

    /** Loads the library, or returns null and remembers why. */
    public static synchronized SymbolLookup lookup() {
        if (lookup == null && loadFailure == null) {
            String p = path();
            try {
                lookup = SymbolLookup.libraryLookup(p, Arena.global());
                path = p;
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

    /**
     * A downcall handle for {@code symbol}, bound lazily on its first call. While the library cannot
     * be loaded, or when it lacks the symbol, the handle answers CUDA_ERROR_NOT_FOUND.
     */
    static MethodHandle bind(String symbol, FunctionDescriptor descriptor, boolean critical) {
        return new LazyDowncall(symbol, descriptor, critical).site.dynamicInvoker();
    }

    static IllegalStateException downcallFailed(String symbol, Throwable t) {
        return new IllegalStateException("downcall to " + symbol + " failed", t);
    }

    private static final class LazyDowncall {
        private final String symbol;
        private final FunctionDescriptor descriptor;
        private final boolean critical;
        private final MethodHandle notFound;
        final MutableCallSite site;

        LazyDowncall(String symbol, FunctionDescriptor descriptor, boolean critical) {
            this.symbol = symbol;
            this.descriptor = descriptor;
            this.critical = critical;
            MethodType type = descriptor.toMethodType();
            if (type.returnType() != int.class) {
                throw new IllegalArgumentException("driver functions return CUresult (int): symbol=" + symbol);
            }
            this.notFound = MethodHandles.dropArguments(
                    MethodHandles.constant(int.class, CuResult.CUDA_ERROR_NOT_FOUND), 0, type.parameterList());
            this.site = new MutableCallSite(type);
            site.setTarget(RESOLVE_AND_CALL.bindTo(this)
                    .asCollector(Object[].class, type.parameterCount())
                    .asType(type));
        }

        @SuppressWarnings("unused") // through RESOLVE_AND_CALL
        Object resolveAndCall(Object[] args) throws Throwable {
            return resolve().invokeWithArguments(args);
        }

        private synchronized MethodHandle resolve() {
            SymbolLookup l = lookup();
            if (l == null) {
                return notFound; // keep resolving: the library may be configured and loaded later
            }
            MethodHandle target = l.find(symbol)
                    .map(s -> critical
                            ? LINKER.downcallHandle(s, descriptor, Linker.Option.critical(false))
                            : LINKER.downcallHandle(s, descriptor))
                    .orElse(notFound);
            site.setTarget(target);
            MutableCallSite.syncAll(new MutableCallSite[] {site});
            return target;
        }
    }
}
