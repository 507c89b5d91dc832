package io.gpusockets.cli.doctor;

/**
 * One finding of {@code gpusockets doctor}: what was checked, what was found and, when it is not
 * {@link Status#OK}, what to do about it (a command or a setting, never just "check your set-up").
 */
public record Check(Status status, String name, String found, String advice) {

    /** The three outcomes, each with the tag a line of the report starts with. */
    public enum Status {
        OK("[ ok ]"), WARN("[warn]"), FAIL("[FAIL]");

        private final String tag;

        Status(String tag) {
            this.tag = tag;
        }

        public String tag() {
            return tag;
        }
    }

    public Check {
        java.util.Objects.requireNonNull(status, "status");
        java.util.Objects.requireNonNull(name, "name");
        java.util.Objects.requireNonNull(found, "found");
        if (status != Status.OK && (advice == null || advice.isBlank())) {
            throw new IllegalArgumentException("a " + status + " check needs advice: name=" + name);
        }
    }

    public static Check ok(String name, String found) {
        return new Check(Status.OK, name, found, null);
    }

    public static Check warn(String name, String found, String advice) {
        return new Check(Status.WARN, name, found, advice);
    }

    public static Check fail(String name, String found, String advice) {
        return new Check(Status.FAIL, name, found, advice);
    }
}
