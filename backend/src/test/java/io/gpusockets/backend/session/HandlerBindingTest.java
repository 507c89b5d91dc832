package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.codegen.HandlerCompilation;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The backend's hand-written calls are bound to the API table at build time, not found by name at run time. */
class HandlerBindingTest {
    private static final Path TABLE = Path.of("../protocol/src/main/api/cuda-driver.api");
    private static final String GENERATED = "io/gpusockets/backend/session/BackendHandlers.java";
    private static final Path CONTEXTS = Path.of("src/main/java/io/gpusockets/backend/session/ContextCalls.java");

    @Test
    void everyCustomEntryAndOnlyThoseHasAHandlerInTheDispatchArray() {
        BackendHandlers.Handler[] h = BackendHandlers.bind(null, null, null, null, null, null, null);
        for (ApiFunction f : ApiTable.get().functions()) {
            assertEquals(f.customBackend(), h[f.index()] != null, f.name());
        }
        assertEquals(ApiTable.get().functions().size(), h.length);
    }

    @Test
    void theRealHandlersCompileAgainstTheTableAsItIs() throws Exception {
        HandlerCompilation.Result r = HandlerCompilation.compile(TABLE, "", "backend", GENERATED, List.of(CONTEXTS));
        assertTrue(r.compiled(), r.diagnostics());
    }

    @Test
    void aTableLineWhoseHandlerMethodIsMissingDoesNotBuild() throws Exception {
        HandlerCompilation.Result r = HandlerCompilation.compile(TABLE,
                "cuCtxGetFavouriteColour(out u32 colour) custom=backend area=contexts", "backend", GENERATED, List.of(CONTEXTS));
        assertFalse(r.compiled());
        assertTrue(r.diagnostics().contains("ContextCalls") && r.diagnostics().contains("cuCtxGetFavouriteColour"),
                r.diagnostics());
    }

    @Test
    void aNewAreaWithoutItsHandlerClassDoesNotBuild() throws Exception {
        // CallDispatcher passes one handler per area to bind(): a new area changes bind's parameters.
        Path dispatcher = Path.of("src/main/java/io/gpusockets/backend/session/CallDispatcher.java");
        HandlerCompilation.Result r = HandlerCompilation.compile(TABLE,
                "cuGraphLaunch(u64 graph) custom=backend area=graphs", "backend", GENERATED, List.of(dispatcher));
        assertFalse(r.compiled());
        assertTrue(r.diagnostics().contains("bind"), r.diagnostics());
    }
}
