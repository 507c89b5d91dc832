package io.gpusockets.protocol.api.codegen;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ApiTable;
import java.util.ArrayList;
import java.util.List;

/**
 * Emits the declarations that bind hand-written calls to the table: for each side, one interface
 * per API area ({@code area=}) with one method per entry the side writes by hand, and what holds or
 * dispatches to the implementations ({@code FrontendHandlers}, a record with one component per area;
 * {@code BackendHandlers.bind}, the dispatch array indexed by table entry). A handler class that
 * lacks a method, or a side that lacks an area's class, then fails to compile.
 */
final class HandlerEmitter {
    private final ApiTable table;

    HandlerEmitter(ApiTable table) {
        this.table = table;
    }

    /** The API areas of the entries {@code side} selects, in table order of first appearance. */
    private List<String> areas(java.util.function.Predicate<ApiFunction> side) {
        List<String> areas = new ArrayList<>();
        for (ApiFunction f : table.functions()) {
            if (side.test(f) && !areas.contains(f.area())) {
                areas.add(f.area());
            }
        }
        return areas;
    }

    /** {@code contexts} → {@code Contexts}: the area's interface name. */
    private static String type(String area) {
        return Character.toUpperCase(area.charAt(0)) + area.substring(1);
    }

    static boolean frontendHandled(ApiFunction f) {
        return f.customFrontend() || f.local();
    }

    String frontendHandlers() {
        List<String> areas = areas(HandlerEmitter::frontendHandled);
        StringBuilder b = new StringBuilder("import java.lang.foreign.MemorySegment;\n\n");
        b.append("/**\n * The frontend's hand-written calls (custom=frontend and local in the table), one interface per\n")
                .append(" * API area with one method per entry, each implemented by the class named for its area. The\n")
                .append(" * record holds one implementation per area: a new area, or a new entry in one, does not compile\n")
                .append(" * until its handler exists.\n */\n");
        List<String> components = new ArrayList<>();
        for (String area : areas) {
            components.add(type(area) + " " + area);
        }
        b.append("public record FrontendHandlers(").append(String.join(",\n                               ", components)).append(") {\n");
        b.append("    public FrontendHandlers {\n");
        for (String area : areas) {
            b.append("        java.util.Objects.requireNonNull(").append(area).append(", \"").append(area).append("\");\n");
        }
        b.append("    }\n");
        for (String area : areas) {
            b.append("\n    /** Area {@code ").append(area).append("}. */\n");
            b.append("    public interface ").append(type(area)).append(" {\n");
            for (ApiFunction f : table.functions()) {
                if (frontendHandled(f) && f.area().equals(area)) {
                    b.append("    ").append(ApiGenerator.doc(f)).append("        ").append(ApiGenerator.signature(f)).append(";\n");
                }
            }
            b.append("    }\n");
        }
        return b.append("}\n").toString();
    }

    /** Java type of an input a backend handler receives decoded; null for placeholders (null, zero). */
    private static String decodedType(ApiParam p) {
        return switch (p.type()) {
            case NULL, ZERO -> null;
            case CSTR -> "MemorySegment";
            case BYTES, IMAGE -> "long";
            case PTR, HOSTPTR -> throw new IllegalStateException("no decoded form: " + p);
            default -> p.type().javaType();
        };
    }

    private static String handlerSignature(ApiFunction f) {
        List<String> ps = new ArrayList<>();
        ps.add("Call c");
        if (f.decodedForHandler()) {
            for (ApiParam p : f.params()) {
                String t = p.out() ? null : decodedType(p);
                if (t != null) {
                    ps.add(t + " " + p.name());
                }
            }
        }
        return "int " + f.name() + "(" + String.join(", ", ps) + ")";
    }

    private static String handlerDoc(ApiFunction f) {
        StringBuilder d = new StringBuilder("        /** {@code ").append(f.name()).append("(");
        List<String> ps = new ArrayList<>();
        for (ApiParam p : f.params()) {
            ps.add(p.toString());
        }
        d.append(String.join(", ", ps)).append(")}");
        if (!f.decodedForHandler()) {
            d.append("; its request is in the ").append(f.codec()).append(" codec's layout, which the handler decodes");
        }
        return d.append(". */\n").toString();
    }

    String backendHandlers() {
        List<String> areas = areas(ApiFunction::customBackend);
        StringBuilder b = new StringBuilder();
        b.append("import io.gpusockets.protocol.wire.ProtocolException;\nimport java.io.IOException;\n")
                .append("import java.lang.foreign.MemorySegment;\n\n");
        b.append("/**\n * The backend's hand-written calls (custom=backend in the table): one interface per API area with\n")
                .append(" * one method per entry, each implemented by the class named for its area, and {@link #bind},\n")
                .append(" * which makes the dispatch array indexed by table entry. A new area, or a new entry in one, does\n")
                .append(" * not compile until its handler exists.\n *\n")
                .append(" * <p>A handler receives its inputs in C order, decoded by the generic dispatch: handles translated\n")
                .append(" * to the driver's values, devices and device ranges checked, bytes and image inputs as their\n")
                .append(" * announced length (the data follows as DATA frames, taken through the call). Its outputs go to\n")
                .append(" * {@code c.outs} in C order. An entry with a codec of its own gets only the call and decodes it.\n */\n");
        b.append("final class BackendHandlers {\n    private BackendHandlers() {\n    }\n\n");
        b.append("    /** One hand-written call; {@code args} holds its decoded inputs by parameter index (null for outputs). */\n");
        b.append("    @FunctionalInterface\n    interface Handler {\n")
                .append("        int handle(Call c, Object[] args) throws ProtocolException, CallRejected, InterruptedException, IOException;\n    }\n");
        for (String area : areas) {
            b.append("\n    /** Area {@code ").append(area).append("}. */\n    interface ").append(type(area)).append(" {\n");
            for (ApiFunction f : table.functions()) {
                if (f.customBackend() && f.area().equals(area)) {
                    b.append(handlerDoc(f)).append("        ").append(handlerSignature(f))
                            .append("\n                throws ProtocolException, CallRejected, InterruptedException, IOException;\n\n");
                }
            }
            b.setLength(b.length() - 1);
            b.append("    }\n");
        }
        List<String> params = new ArrayList<>();
        for (String area : areas) {
            params.add(type(area) + " " + area);
        }
        b.append("\n    /** The handler of each table entry by index; null where the generic dispatch serves it. */\n");
        b.append("    static Handler[] bind(").append(String.join(", ", params)).append(") {\n");
        b.append("        Handler[] h = new Handler[").append(table.functions().size()).append("];\n");
        for (ApiFunction f : table.functions()) {
            if (!f.customBackend()) {
                continue;
            }
            List<String> args = new ArrayList<>();
            args.add("c");
            if (f.decodedForHandler()) {
                for (ApiParam p : f.params()) {
                    String t = p.out() ? null : decodedType(p);
                    if (t != null) {
                        args.add("(" + ApiGenerator.boxed(t) + ") a[" + p.index() + "]");
                    }
                }
            }
            b.append("        h[").append(f.index()).append("] = (c, a) -> ").append(f.area()).append(".").append(f.name())
                    .append("(").append(String.join(", ", args)).append("); // ").append(f.name()).append("\n");
        }
        b.append("        return h;\n    }\n}\n");
        return b.toString();
    }
}
