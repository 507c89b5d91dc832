package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.codegen.HandlerCompilation;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The backend's hand-written calls are bound to the API table at build time, not found by name at run time. */
class HandlerBindingTest {
    private static final HandlerCompilation.Side BACKEND = new HandlerCompilation.Side(
            "backend", "io/gpusockets/backend/session/BackendHandlers.java");
    private static final Path SESSION = Path.of("src/main/java/io/gpusockets/backend/session");

    @Test
    void everyCustomEntryAndOnlyThoseHasAHandlerInTheDispatchArray() {
        BackendHandlers.Handler[] h = BackendHandlers.bind(null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null);
        for (ApiFunction f : ApiTable.get().functions()) {
            assertEquals(f.customBackend(), h[f.index()] != null, f.name());
        }
        assertEquals(ApiTable.get().functions().size(), h.length);
    }

    @Test
    void theRealHandlersCompileAgainstTheTableAsItIs() throws Exception {
        BACKEND.assertCompiles(SESSION.resolve("ContextCalls.java"), SESSION.resolve("CallDispatcher.java"));
    }

    @Test
    void aTableLineWhoseHandlerMethodIsMissingDoesNotBuild() throws Exception {
        BACKEND.assertFailsWith("cuCtxGetFavouriteColour(out u32 colour) custom=backend area=contexts",
                List.of(SESSION.resolve("ContextCalls.java")), "ContextCalls", "cuCtxGetFavouriteColour");
    }

    @Test
    void aNewAreaWithoutItsHandlerClassDoesNotBuild() throws Exception {
        // CallDispatcher passes one handler per area to bind(): a new area changes bind's parameters.
        BACKEND.assertFailsWith("cuGraphDebugDotPrint(u64 graph) custom=backend area=debugging",
                List.of(SESSION.resolve("CallDispatcher.java")), "bind");
    }
}
