package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A CUgraph: nodes and their dependency edges. A node holds what it does as a re-runnable operation
 * (a kernel with its copied parameters, a device copy or set, a batch of memory operations), or an event to record or wait for, or
 * a child graph (its own copy, as cuGraphAddChildGraphNode makes one). Graphs belong to no context;
 * the work in their nodes does. Thread-safe: every method holds the graph's lock.
 */
final class EmulatedGraph {
    static final int KERNEL = 0;
    static final int MEMCPY = 1;
    static final int MEMSET = 2;
    static final int HOST = 3;
    static final int GRAPH = 4;
    static final int EMPTY = 5;
    static final int WAIT_EVENT = 6;
    static final int EVENT_RECORD = 7;
    static final int MEM_ALLOC = 10;
    static final int MEM_FREE = 11;
    static final int BATCH_MEM_OP = 12;
    static final int CONDITIONAL = 13;

    /** One node. Its fields other than the edges are set when it is made or its parameters are set. */
    static final class Node {
        final long handle;
        final EmulatedGraph graph;
        final int type;
        /** Edges, in the order they were added. Guarded by the graph's lock. */
        final Set<Node> dependencies = new LinkedHashSet<>();
        final Set<Node> dependents = new LinkedHashSet<>();
        volatile EmulatedContext context;
        volatile Runnable op;                 // KERNEL, MEMCPY, MEMSET, BATCH_MEM_OP: the work
        volatile String what;
        volatile EmulatedEvent event;         // WAIT_EVENT, EVENT_RECORD
        volatile EmulatedGraph child;         // GRAPH
        volatile EmulatedGraph[] bodies;      // CONDITIONAL: the body graphs, owned by the node
        volatile Object params;               // KERNEL: what cuGraphKernelNodeGetParams answers

        Node(long handle, EmulatedGraph graph, int type) {
            this.handle = handle;
            this.graph = graph;
            this.type = type;
        }
    }

    final long handle;
    /** Made by cuStreamBeginCapture (not given by the caller): a capture that fails drops it. */
    volatile boolean madeByCapture;
    private final Handles handles;
    /** For a clone: each node of the original graph and its copy here (cuGraphNodeFindInClone). */
    private final Map<Node, Node> originals = new java.util.concurrent.ConcurrentHashMap<>();
    private final List<Node> nodes = new ArrayList<>();   // guarded by this; in creation order

    EmulatedGraph(long handle, Handles handles) {
        this.handle = handle;
        this.handles = handles;
    }

    /** A new node depending on {@code deps} (each checked to be of this graph). */
    synchronized Node add(int type, List<Node> deps) {
        for (Node d : deps) {
            checkMine(d, "dependencies");
        }
        if (new HashSet<>(deps).size() != deps.size()) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dependencies name a node twice");
        }
        Node n = new Node(handles.issue(), this, type);
        handles.register(n.handle, n);
        nodes.add(n);
        for (Node d : deps) {
            n.dependencies.add(d);
            d.dependents.add(n);
        }
        return n;
    }

    /** A node of a capture: {@code op} as queued on the capturing stream. */
    Node addCaptured(int type, EmulatedContext c, Runnable op, String what, Set<Node> deps) {
        Node n = add(type, List.copyOf(deps));
        n.context = c;
        n.op = op;
        n.what = what;
        return n;
    }

    private void checkMine(Node n, String what) {
        if (n.graph != this || !nodes.contains(n)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + ": node 0x" + Long.toHexString(n.handle) + " is not in this graph");
        }
    }

    synchronized List<Node> nodes() {
        return new ArrayList<>(nodes);
    }

    synchronized List<Node> roots() {
        List<Node> out = new ArrayList<>();
        for (Node n : nodes) {
            if (n.dependencies.isEmpty()) {
                out.add(n);
            }
        }
        return out;
    }

    /** Every edge as {from, to}, nodes in creation order. */
    synchronized List<Node[]> edges() {
        List<Node[]> out = new ArrayList<>();
        for (Node n : nodes) {
            for (Node d : n.dependencies) {
                out.add(new Node[] {d, n});
            }
        }
        return out;
    }

    synchronized List<Node> dependencies(Node n) {
        checkMine(n, "hNode");
        return new ArrayList<>(n.dependencies);
    }

    synchronized List<Node> dependents(Node n) {
        checkMine(n, "hNode");
        return new ArrayList<>(n.dependents);
    }

    /** cuGraphAddDependencies: all edges are checked first (none added twice, no cycle), then added. */
    synchronized void addEdges(List<Node> from, List<Node> to) {
        Set<Node[]> pending = new LinkedHashSet<>();
        for (int i = 0; i < from.size(); i++) {
            Node a = from.get(i), b = to.get(i);
            checkMine(a, "from");
            checkMine(b, "to");
            if (a == b || b.dependencies.contains(a)) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "edge " + i + " exists already or joins a node to itself");
            }
            pending.add(new Node[] {a, b});
        }
        for (Node[] e : pending) {
            e[1].dependencies.add(e[0]);
            e[0].dependents.add(e[1]);
        }
        if (order() == null) {
            for (Node[] e : pending) {
                e[1].dependencies.remove(e[0]);
                e[0].dependents.remove(e[1]);
            }
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "the dependencies would make a cycle");
        }
    }

    synchronized void removeEdges(List<Node> from, List<Node> to) {
        for (int i = 0; i < from.size(); i++) {
            Node a = from.get(i), b = to.get(i);
            checkMine(a, "from");
            checkMine(b, "to");
            if (!b.dependencies.contains(a)) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "edge " + i + " does not exist");
            }
        }
        for (int i = 0; i < from.size(); i++) {
            to.get(i).dependencies.remove(from.get(i));
            from.get(i).dependents.remove(to.get(i));
        }
    }

    /** cuGraphDestroyNode: the node and its edges go. */
    synchronized void remove(Node n) {
        checkMine(n, "hNode");
        for (Node d : n.dependencies) {
            d.dependents.remove(n);
        }
        for (Node d : n.dependents) {
            d.dependencies.remove(n);
        }
        nodes.remove(n);
        handles.remove(n.handle, n);
        if (n.child != null) {
            n.child.destroy();
        }
    }

    /** Drops every node's handle (cuGraphDestroy). */
    synchronized void destroy() {
        for (Node n : nodes) {
            handles.remove(n.handle, n);
            if (n.child != null) {
                n.child.destroy();
            }
        }
        nodes.clear();
    }

    /** Nodes in an order where each comes after its dependencies (creation order where free), or null on a cycle. */
    synchronized List<Node> order() {
        Map<Node, Integer> waiting = new HashMap<>();
        ArrayDeque<Node> ready = new ArrayDeque<>();
        for (Node n : nodes) {
            waiting.put(n, n.dependencies.size());
            if (n.dependencies.isEmpty()) {
                ready.add(n);
            }
        }
        List<Node> out = new ArrayList<>();
        while (!ready.isEmpty()) {
            Node n = ready.poll();
            out.add(n);
            for (Node d : n.dependents) {
                if (waiting.merge(d, -1, Integer::sum) == 0) {
                    ready.add(d);
                }
            }
        }
        return out.size() == nodes.size() ? out : null;
    }

    /** A copy with new node handles; {@code map} receives original to copy. */
    synchronized EmulatedGraph copy(long newHandle, Map<Node, Node> map) {
        EmulatedGraph g = new EmulatedGraph(newHandle, handles);
        for (Node n : nodes) {
            Node m = new Node(handles.issue(), g, n.type);
            m.context = n.context;
            m.op = n.op;
            m.what = n.what;
            m.event = n.event;
            m.child = n.child == null ? null : n.child.copy(handles.issue(), new HashMap<>());
            if (n.bodies != null) {
                EmulatedGraph[] b = new EmulatedGraph[n.bodies.length];
                for (int i = 0; i < b.length; i++) {
                    b[i] = n.bodies[i].copy(handles.issue(), new HashMap<>());
                }
                m.bodies = b;
            }
            m.params = n.params;
            handles.register(m.handle, m);
            g.nodes.add(m);
            map.put(n, m);
            g.originals.put(n, m);
        }
        for (Node n : nodes) {
            Node m = map.get(n);
            for (Node d : n.dependencies) {
                m.dependencies.add(map.get(d));
                map.get(d).dependents.add(m);
            }
        }
        return g;
    }

    /** cuGraphNodeFindInClone: the copy here of {@code original}, a node of the graph this one was cloned from. */
    synchronized Node copyOf(Node original) {
        Node m = originals.get(original);
        if (m == null || !nodes.contains(m)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hOriginalNode has no copy in hClonedGraph");
        }
        return m;
    }

    /** {@code from} and the nodes it depends on, directly or not. */
    static Set<Node> ancestors(Set<Node> from) {
        Set<Node> seen = new HashSet<>();
        ArrayDeque<Node> todo = new ArrayDeque<>(from);
        while (!todo.isEmpty()) {
            Node n = todo.poll();
            if (seen.add(n)) {
                todo.addAll(n.dependencies);
            }
        }
        return seen;
    }
}
