package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.codegen.HandlerCompilation;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The frontend's hand-written calls are bound to the API table at build time. */
class HandlerBindingTest {
    private static final HandlerCompilation.Side FRONTEND = new HandlerCompilation.Side(
            "frontend", "io/gpusockets/frontend/FrontendHandlers.java");
    private static final Path SOURCES = Path.of("src/main/java/io/gpusockets/frontend");

    @Test
    void theRealHandlersCompileAgainstTheTableAsItIs() throws Exception {
        FRONTEND.assertCompiles(SOURCES.resolve("LaunchCalls.java"));
    }

    @Test
    void aTableLineWhoseHandlerMethodIsMissingDoesNotBuild() throws Exception {
        FRONTEND.assertFailsWith("cuLaunchSomethingElse(func f, ptr how) custom=frontend area=launches",
                List.of(SOURCES.resolve("LaunchCalls.java")), "LaunchCalls", "cuLaunchSomethingElse");
    }

    @Test
    void aNewAreaWithoutItsHandlerDoesNotBuild() throws Exception {
        // RemoteCudaDriver builds the FrontendHandlers record, one component per area.
        FRONTEND.assertFailsWith("cuGraphDebugDotPrint(ptr graph) custom=frontend area=debugging",
                List.of(SOURCES.resolve("RemoteCudaDriver.java")), "FrontendHandlers");
    }

    @Test
    void everyAreaMustHaveAnImplementation() {
        var e = assertThrows(NullPointerException.class, () -> new FrontendHandlers(null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null));
        assertTrue(e.getMessage().contains("contexts"), e.getMessage());
    }
}
