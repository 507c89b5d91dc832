package io.gpusockets.cli;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.status.StatusJson;
import org.junit.jupiter.api.Test;

/** The text of {@code gpusockets status}: its first line counts sessions, connections and live shares. */
class StatusTableTest {
    private static final String ANSWER = "{\"time\":1,\"backend\":\"emulated device: x\",\"connections\":2,%s\"poisoned\":null,"
            + "\"devices\":[],\"tenants\":[],\"sessions\":[],\"traffic\":[]}";

    @Test
    void theFirstLineCountsTheLiveSharesBetweenSessions() {
        String text = StatusCommand.table(StatusJson.parse(String.format(ANSWER, "\"shares\":4,")));
        assertTrue(text.startsWith("gpusockets backend: emulated device, 0 session(s), 2 connection(s), 4 share(s) between"
                + " sessions\n"), text);
    }

    @Test
    void anOlderBackendsAnswerWithoutSharesLeavesThemOut() {
        String text = StatusCommand.table(StatusJson.parse(String.format(ANSWER, "")));
        assertTrue(text.startsWith("gpusockets backend: emulated device, 0 session(s), 2 connection(s)\n"), text);
    }
}
