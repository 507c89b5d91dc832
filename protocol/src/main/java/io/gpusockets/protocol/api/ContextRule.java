package io.gpusockets.protocol.api;

/**
 * What an entry does to the calling thread's context stack or to a context's life (table attribute
 * {@code context=}). The backend keeps each lane's stack and a session's contexts by these rules; a
 * frontend merging several backends keeps the thread's stack by them; the frontend forgets device
 * ranges after the ones that may free memory it cannot name.
 */
public enum ContextRule {
    /** No effect on contexts. */
    NONE,
    /** {@code create}: makes a context and pushes it on the caller's stack. */
    CREATE,
    /** {@code destroy}: destroys the context named by its first parameter (and pops it if current). */
    DESTROY,
    /** {@code push}: pushes its context parameter. */
    PUSH,
    /** {@code pop}: pops the top into its output. */
    POP,
    /** {@code set}: replaces the top with its (nullable) context parameter; 0 pops. */
    SET,
    /** {@code get}: reports the top. */
    GET,
    /** {@code release}: releases a device's primary context, destroying it when its count reaches 0. */
    RELEASE,
    /** {@code reset}: destroys a device's primary context at once. */
    RESET;

    /** Whether the call may destroy a context, and with it memory the frontend cannot name. */
    public boolean mayDestroy() {
        return this == DESTROY || this == RELEASE || this == RESET;
    }

    static ContextRule parse(String value) {
        for (ContextRule r : values()) {
            if (r != NONE && r.name().equalsIgnoreCase(value)) {
                return r;
            }
        }
        throw new IllegalArgumentException("context= takes create, destroy, push, pop, set, get, release or reset: " + value);
    }
}
