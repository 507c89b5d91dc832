package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
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
        try {
            FrontendDrivers.connect(FrontendConfig.fromEnvironment(Map.of(
                    FrontendConfig.SERVER_ENV, "tcp://127.0.0.1:1", FrontendConfig.CONNECT_TIMEOUT_ENV, "200")));
        } catch (Exception expected) {
            // nothing listens there
        }
        System.out.println("trained " + functions.size() + " entries");
    }
}
