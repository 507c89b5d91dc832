package io.gpusockets.cli.doctor;

import java.util.List;
import java.util.Locale;

/**
 * The checks of one doctor run for one role, printed one line per check ({@code [ ok ]}, {@code [warn]},
 * {@code [FAIL]}, each failure and warning followed by a {@code fix:} line) or as JSON. Exit status 0
 * when nothing failed (warnings allowed), 1 otherwise.
 */
public record DoctorReport(String role, String why, List<Check> checks) {
    public DoctorReport {
        checks = List.copyOf(checks);
    }

    public long count(Check.Status s) {
        return checks.stream().filter(c -> c.status() == s).count();
    }

    public int exitCode() {
        return count(Check.Status.FAIL) == 0 ? 0 : 1;
    }

    /** The first check named {@code name} (tests and callers that look for one finding). */
    public Check check(String name) {
        return checks.stream().filter(c -> c.name().equals(name)).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("no check named " + name + " in " + checks));
    }

    public String text() {
        StringBuilder b = new StringBuilder();
        b.append("gpusockets doctor: ").append(role).append(" checks (").append(why).append(")\n");
        for (Check c : checks) {
            b.append(c.status().tag()).append(' ').append(c.name()).append(": ").append(c.found()).append('\n');
            if (c.advice() != null && c.status() != Check.Status.OK) {
                b.append("       fix: ").append(c.advice()).append('\n');
            }
        }
        long fails = count(Check.Status.FAIL);
        long warns = count(Check.Status.WARN);
        b.append(fails == 0 ? "all " + checks.size() + " checks passed" : fails + " of " + checks.size() + " checks failed")
                .append(warns == 0 ? "" : ", " + warns + " warning(s)").append('\n');
        return b.toString();
    }

    public String json() {
        StringBuilder b = new StringBuilder();
        b.append("{\"role\":").append(quote(role)).append(",\"why\":").append(quote(why))
                .append(",\"ok\":").append(exitCode() == 0)
                .append(",\"failures\":").append(count(Check.Status.FAIL))
                .append(",\"warnings\":").append(count(Check.Status.WARN)).append(",\"checks\":[");
        for (int i = 0; i < checks.size(); i++) {
            Check c = checks.get(i);
            b.append(i == 0 ? "" : ",").append("{\"status\":").append(quote(c.status().name().toLowerCase(Locale.ROOT)))
                    .append(",\"name\":").append(quote(c.name())).append(",\"found\":").append(quote(c.found()))
                    .append(",\"advice\":").append(c.advice() == null ? "null" : quote(c.advice())).append('}');
        }
        return b.append("]}").toString();
    }

    static String quote(String s) {
        return io.gpusockets.backend.status.StatusJson.string(new StringBuilder(), s).toString();
    }
}
