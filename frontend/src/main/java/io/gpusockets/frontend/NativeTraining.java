package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;

/**
 * A training run for the class-data-sharing archive that libcuda.so.1's JVM starts with: it loads
 * and links what the first CUDA calls of a program need (the table, the upcall machinery, the
 * frontend and its transports), so that `scripts/install-frontend` and `scripts/package` can dump
 * them with {@code -XX:ArchiveClassesAtExit}. Run with the same class path libcuda.so.1 uses.
 */
public final class NativeTraining {
    private NativeTraining() {
    }

    public static void main(String[] args) throws Exception {
        List<ApiFunction> functions = ApiTable.get().functions();
        for (ApiFunction f : functions) {
            Linker.nativeLinker().upcallStub(NativeEntry.upcallTarget(f), NativeEntry.descriptor(f), Arena.ofAuto());
        }
        // The connect path up to the socket, against an address nobody listens on.
        if (!hasBackend()) {
            System.out.println(throughTheLibrarysPath("tcp://127.0.0.1:1"));
        }
        try {
            FrontendDrivers.connect(FrontendConfig.fromEnvironment(Map.of(
                    FrontendConfig.SERVER_ENV, "tcp://127.0.0.1:1", FrontendConfig.CONNECT_TIMEOUT_ENV, "200")));
        } catch (Exception expected) {
            // nothing listens there
        }
        String sessions = withBackend();
        System.out.println("trained " + functions.size() + " entries" + sessions);
    }

    /**
     * Where the backend's jars are on the class path too (a bundle, or an install made from one): a
     * program's first calls, over tcp and over ring, against a backend on the emulated device in this
     * process, so that the handshake, the frames, the ring set-up and the shared window are in the
     * archive as well. Reflection, since the backend depends on this module and not the other way.
     */
    private static String withBackend() {
        try {
            Class<?> hostClass = Class.forName("io.gpusockets.backend.session.DriverHost");
            Class<?> settingsClass = Class.forName("io.gpusockets.backend.session.BackendSettings");
            Class<?> serverClass = Class.forName("io.gpusockets.backend.server.BackendServer");
            Object device = Class.forName("io.gpusockets.emulated.EmulatedDevice").getConstructor().newInstance();
            Object host = hostClass.getMethod("initialise", CudaDriver.class, String.class).invoke(null, device, "training");
            Object settings = settingsClass.getMethod("fromSystemProperties").invoke(null);
            try (AutoCloseable server = (AutoCloseable) serverClass.getConstructor(hostClass, settingsClass).newInstance(host, settings)) {
                java.lang.reflect.Method listen = serverClass.getMethod("listen", TransportUri.class);
                StringBuilder done = new StringBuilder();
                done.append(", ").append(throughTheLibrarysPath(listen.invoke(server, TransportUri.parse("tcp://127.0.0.1:0")).toString()));
                for (String uri : List.of("tcp://127.0.0.1:0", "ring://training-" + ProcessHandle.current().pid())) {
                    String bound = listen.invoke(server, TransportUri.parse(uri)).toString();
                    try (RemoteCudaDriver d = RemoteCudaDriver.connect(bound)) {
                        firstCalls(d);
                        done.append(", ").append(TransportUri.parse(bound).scheme());
                    } catch (Exception | LinkageError e) {
                        done.append(", not ").append(uri).append(" (").append(e).append(')');
                    }
                }
                return done.toString();
            }
        } catch (ClassNotFoundException e) {
            return "; no backend on the class path: the connect path only";
        } catch (Exception | LinkageError e) {
            return "; the backend could not be trained with: " + e;
        }
    }

    private static boolean hasBackend() {
        try {
            Class.forName("io.gpusockets.backend.server.BackendServer", false, NativeTraining.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }

    /**
     * The way libcuda.so.1 goes: {@link NativeEntry#install} (the resolver, the early connect to
     * {@code uri}), then the first calls through their upcall stubs, called as C calls them, so that
     * NativeSession, its connect and the stubs' own classes are in the archive too.
     */
    private static String throughTheLibrarysPath(String uri) {
        System.setProperty("gpusockets.server", uri);
        System.setProperty("gpusockets.connect.timeout.ms", "2000");
        List<ApiFunction> functions = ApiTable.get().functions();
        Linker linker = Linker.nativeLinker();
        try {
            MemorySegment slot = Arena.global().allocate(ValueLayout.ADDRESS);
            NativeEntry.install(slot.address(), functions.size());
            java.lang.invoke.MethodHandle resolve = linker.downcallHandle(slot.get(ValueLayout.ADDRESS, 0),
                    java.lang.foreign.FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
            MemorySegment cell = Arena.global().allocate(64);
            StringBuilder results = new StringBuilder();
            for (String name : List.of("cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet")) {
                ApiFunction f = functions.stream().filter(x -> x.name().equals(name)).findFirst().orElseThrow();
                MemorySegment stub = (MemorySegment) resolve.invoke(f.index());
                java.lang.invoke.MethodHandle call = linker.downcallHandle(stub, NativeEntry.descriptor(f));
                Object r = switch (name) {
                    case "cuInit" -> call.invoke(0);
                    case "cuDeviceGet" -> call.invoke(cell, 0);
                    default -> call.invoke(cell);
                };
                results.append(' ').append(name).append('=').append(r);
            }
            return "through the library's path to " + uri + ":" + results;
        } catch (Throwable t) {
            return "not through the library's path to " + uri + " (" + t + ")";
        }
    }

    /** What a short program does first: query the device, make a context, copy small and large, launch nothing. */
    private static void firstCalls(RemoteCudaDriver d) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment cell = a.allocate(256);
            d.cuInit(0);
            d.cuDriverGetVersion(cell);
            d.cuDeviceGetCount(cell);
            d.cuDeviceGet(cell, 0);
            d.cuDeviceGetName(cell, 256, 0);
            d.cuDeviceGetAttribute(cell, 75, 0);
            d.cuDeviceTotalMem(cell, 0);
            d.cuDevicePrimaryCtxRetain(cell, 0);
            d.cuCtxSetCurrent(cell.get(ValueLayout.JAVA_LONG, 0));
            d.cuCtxGetCurrent(cell);
            d.cuCtxGetDevice(cell);
            long bytes = 2 << 20;
            d.cuMemAlloc(cell, bytes);
            long dptr = cell.get(ValueLayout.JAVA_LONG, 0);
            MemorySegment host = a.allocate(bytes);
            for (long n : new long[] {8, bytes}) {
                d.cuMemsetD8(dptr, (byte) 1, n);
                d.cuMemcpyHtoD(dptr, host, n);
                d.cuMemcpyDtoH(host, dptr, n);
            }
            d.cuStreamCreate(cell, 0);
            long stream = cell.get(ValueLayout.JAVA_LONG, 0);
            d.cuStreamSynchronize(stream);
            d.cuStreamDestroy(stream);
            d.cuCtxSynchronize();
            d.cuMemFree(dptr);
            d.cuDevicePrimaryCtxRelease(0);
        }
    }
}
