package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.codegen.HandlerCompilation;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The frontend's hand-written calls are bound to the API table at build time. */
class HandlerBindingTest {
    private static final Path TABLE = Path.of("../protocol/src/main/api/cuda-driver.api");
    private static final String GENERATED = "io/gpusockets/frontend/FrontendHandlers.java";
    private static final Path LAUNCHES = Path.of("src/main/java/io/gpusockets/frontend/LaunchCalls.java");

    @Test
    void theRealHandlersCompileAgainstTheTableAsItIs() throws Exception {
        HandlerCompilation.Result r = HandlerCompilation.compile(TABLE, "", "frontend", GENERATED, List.of(LAUNCHES));
        assertTrue(r.compiled(), r.diagnostics());
    }

    @Test
    void aTableLineWhoseHandlerMethodIsMissingDoesNotBuild() throws Exception {
        HandlerCompilation.Result r = HandlerCompilation.compile(TABLE,
                "cuLaunchSomethingElse(func f, ptr how) custom=frontend area=launches", "frontend", GENERATED, List.of(LAUNCHES));
        assertFalse(r.compiled());
        assertTrue(r.diagnostics().contains("LaunchCalls") && r.diagnostics().contains("cuLaunchSomethingElse"),
                r.diagnostics());
    }

    @Test
    void aNewAreaWithoutItsHandlerDoesNotBuild() throws Exception {
        // RemoteCudaDriver builds the FrontendHandlers record, one component per area.
        Path driver = Path.of("src/main/java/io/gpusockets/frontend/RemoteCudaDriver.java");
        HandlerCompilation.Result r = HandlerCompilation.compile(TABLE,
                "cuGraphLaunch(ptr graph) custom=frontend area=graphs", "frontend", GENERATED, List.of(driver));
        assertFalse(r.compiled());
        assertTrue(r.diagnostics().contains("FrontendHandlers"), r.diagnostics());
    }

    @Test
    void everyAreaMustHaveAnImplementation() {
        var e = assertThrows(NullPointerException.class, () -> new FrontendHandlers(null, null, null, null, null, null, null, null));
        assertTrue(e.getMessage().contains("modules"), e.getMessage());
    }
}
