package io.gpusockets.protocol.api;

/**
 * How a frontend that merges several backends into one device list answers an entry that concerns
 * them all (table attribute {@code merge=}); entries without one go to a single backend.
 */
public enum MergeRule {
    /** Routed to one backend by its parameters or the current context. */
    NONE,
    /** {@code all}: sent to every backend; the first error is the result. */
    ALL,
    /** {@code lowest}: every backend answers its one int output; the lowest is the answer. */
    LOWEST,
    /** {@code sum}: every backend answers its one int output; the sum is the answer. */
    SUM;

    static MergeRule parse(String value) {
        return switch (value) {
            case "all" -> ALL;
            case "lowest" -> LOWEST;
            case "sum" -> SUM;
            default -> throw new IllegalArgumentException("merge= takes all, lowest or sum: " + value);
        };
    }
}
