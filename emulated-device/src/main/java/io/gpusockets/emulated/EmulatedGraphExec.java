package io.gpusockets.emulated;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * A CUgraphExec: a snapshot of a graph taken at instantiation (later changes to the graph do not
 * reach it), as steps in dependency order, child graphs flattened in place. A launch runs the steps
 * one after another on the stream's thread, which keeps every edge; kernel faults become the
 * context's sticky error as for launched work. Belongs to the context it was instantiated in.
 */
final class EmulatedGraphExec {
    /** One node of the snapshot; {@code op} may be replaced by cuGraphExec*SetParams and cuGraphExecUpdate. */
    static final class Step {
        final EmulatedGraph.Node source;
        final int type;
        volatile Runnable op;
        volatile EmulatedEvent event;
        volatile Object params;
        volatile boolean enabled = true;

        Step(EmulatedGraph.Node source) {
            this.source = source;
            this.type = source.type;
            this.op = source.op;
            this.event = source.event;
            this.params = source.params;
        }
    }

    final long handle;
    final EmulatedContext context;
    final long flags;
    final EmulatedGraph source;
    private final List<Step> steps;
    /** Steps by the node of the instantiated graph (top level only: those cuGraphExec*SetParams may name). */
    private final Map<EmulatedGraph.Node, Step> bySource = new HashMap<>();

    EmulatedGraphExec(long handle, EmulatedContext context, long flags, EmulatedGraph source, List<EmulatedGraph.Node> order) {
        this.handle = handle;
        this.context = context;
        this.flags = flags;
        this.source = source;
        this.steps = new ArrayList<>();
        for (EmulatedGraph.Node n : order) {
            Step s = new Step(n);
            bySource.put(n, s);
            flatten(s, steps);
        }
    }

    private static void flatten(Step s, List<Step> into) {
        EmulatedGraph child = s.source.child;
        if (child == null) {
            into.add(s);
            return;
        }
        List<EmulatedGraph.Node> order = child.order();
        for (EmulatedGraph.Node n : order) {
            flatten(new Step(n), into);
        }
    }

    Step step(EmulatedGraph.Node n) {
        return bySource.get(n);
    }

    /** The steps in order (cuGraphExecUpdate matches them with a new graph's nodes). */
    List<Step> topLevel(List<EmulatedGraph.Node> order) {
        List<Step> out = new ArrayList<>();
        for (EmulatedGraph.Node n : order) {
            out.add(bySource.get(n));
        }
        return out;
    }

    Map<EmulatedGraph.Node, Step> steps() {
        return bySource;
    }

    /** One launch, on a stream thread. */
    void run() {
        for (Step s : steps) {
            if (!s.enabled) {
                continue;
            }
            switch (s.type) {
                case EmulatedGraph.EVENT_RECORD -> {
                    EmulatedEvent.Recording r = new EmulatedEvent.Recording();
                    r.nanos = System.nanoTime();
                    r.reached = CompletableFuture.completedFuture(null);
                    s.event.recording(r);
                }
                case EmulatedGraph.WAIT_EVENT -> {
                    EmulatedEvent.Recording r = s.event.recording();
                    if (r != null) {
                        r.reached.join();
                    }
                }
                default -> {
                    Runnable op = s.op;
                    if (op != null) {
                        op.run();
                    }
                }
            }
        }
    }
}
