package io.gpusockets.emulated;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * A CUgraphExec: a snapshot of a graph taken at instantiation (later changes to the graph do not
 * reach it), as steps in dependency order; a child graph node's steps and a conditional node's
 * bodies' steps are held by its step and run in its place (a WHILE body as often as its condition says). A launch runs the steps
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
        /** CONDITIONAL: the steps of each body graph, in order. */
        volatile List<List<Step>> bodies;

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
    /** The conditional nodes' handles at any depth: those made with CU_GRAPH_COND_ASSIGN_DEFAULT are reset at each launch. */
    private final List<Graphs.Conditional> conditionals = new ArrayList<>();

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

    private void flatten(Step s, List<Step> into) {
        if (s.type == EmulatedGraph.CONDITIONAL) {
            // A conditional body runs zero or more times per launch: its steps stay apart (Graphs.addConditional).
            List<List<Step>> bodies = new ArrayList<>();
            for (EmulatedGraph b : s.source.bodies) {
                bodies.add(stepsOf(b));
            }
            s.bodies = bodies;
            conditionals.add(((Graphs.CondParams) s.params).handle());
            into.add(s);
            return;
        }
        EmulatedGraph child = s.source.child;
        if (child == null) {
            into.add(s);
            return;
        }
        s.bodies = List.of(stepsOf(child));   // a child graph runs in place, as one body
        into.add(s);
    }

    /** The steps of a graph, in dependency order. */
    private List<Step> stepsOf(EmulatedGraph g) {
        List<EmulatedGraph.Node> order = g.order();
        if (order == null) {
            throw new CudaError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE, "a child graph has a cycle");
        }
        List<Step> steps = new ArrayList<>();
        for (EmulatedGraph.Node n : order) {
            flatten(new Step(n), steps);
        }
        return steps;
    }

    /**
     * cuGraphExecChildGraphNodeSetParams: the child graph node's work becomes {@code child}'s (a copy),
     * which must have the same nodes (types, in order) as the one it replaces, as the driver requires.
     */
    void replaceChild(Step s, EmulatedGraph child) {
        List<Step> now = stepsOf(child);
        List<Step> before = s.bodies.get(0);
        boolean same = now.size() == before.size();
        for (int i = 0; same && i < now.size(); i++) {
            same = now.get(i).type == before.get(i).type;
        }
        if (!same) {
            throw new CudaError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE,
                    "childGraph's nodes differ from those of the graph the node was instantiated with");
        }
        s.bodies = List.of(now);
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
        for (Graphs.Conditional c : conditionals) {
            if ((c.flags & Graphs.COND_ASSIGN_DEFAULT) != 0) {
                c.value = c.defaultValue;
            }
        }
        run(steps);
    }

    /**
     * A conditional node: IF runs body 0 when the value is non-zero (else body 1, if there is one),
     * WHILE runs body 0 while the value is non-zero (read again after each pass), SWITCH runs body n
     * for the value n, if there is one. The value is what cudaGraphSetConditional last set.
     */
    private void runConditional(Step s) {
        Graphs.CondParams p = (Graphs.CondParams) s.params;
        List<List<Step>> b = s.bodies;
        switch (p.type()) {
            case Graphs.COND_IF -> {
                if (p.handle().value != 0) {
                    run(b.get(0));
                } else if (b.size() == 2) {
                    run(b.get(1));
                }
            }
            case Graphs.COND_WHILE -> {
                while (p.handle().value != 0 && !context.destroyed()) {
                    run(b.get(0));
                }
            }
            default -> {
                long v = Integer.toUnsignedLong(p.handle().value);
                if (v < b.size()) {
                    run(b.get((int) v));
                }
            }
        }
    }

    private void run(List<Step> steps) {
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
                case EmulatedGraph.CONDITIONAL -> runConditional(s);
                case EmulatedGraph.GRAPH -> run(s.bodies.get(0));
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
