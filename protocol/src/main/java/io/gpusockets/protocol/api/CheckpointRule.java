package io.gpusockets.protocol.api;

/**
 * How a backend recording a session for checkpoint and restore (issue 22) keeps a call that sets state on a
 * live handle or context (table attribute {@code checkpoint=}); entries without one are recorded only when
 * they make handles or allocations. The call's target is its first handle input, or the lane's current
 * context when it has none; the record goes when its target goes.
 */
public enum CheckpointRule {
    /** Not a setter. */
    NONE,
    /**
     * {@code set}: the last call per target and key is kept (the key: its other handle and {@code dev} inputs,
     * and its first other input when it has two or more, the attribute of an attribute/value pair); an earlier one is dropped,
     * unless a call that copies state (an instantiation, a clone, an exec-graph update...) was recorded since: then it
     * stays while that call's record lives.
     */
    SET,
    /** {@code append}: every call is kept, in order (edges added and removed). */
    APPEND;

    static CheckpointRule parse(String value) {
        return switch (value) {
            case "set" -> SET;
            case "append" -> APPEND;
            default -> throw new IllegalArgumentException("checkpoint= takes set or append: " + value);
        };
    }
}
