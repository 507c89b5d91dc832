package io.gpusockets.frontend;

import static java.lang.foreign.ValueLayout.ADDRESS;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * CUDA user objects (cuUserObjectCreate/Retain/Release, cuGraphRetainUserObject/ReleaseUserObject),
 * answered in the guest (issue 21). A user object's destructor is a function of the program, so the
 * object lives here: its reference count, destructor and pointer, under an opaque handle made here
 * (the program's CUuserObject), for the process's life; no call reaches a backend. The references a
 * graph owns are kept here by the graph's handle, following the driver's rules (CUDA Programming Guide,
 * "CUDA User Objects"):
 * <ul>
 *   <li>cuGraphRetainUserObject adds references owned by the graph (or, with CU_GRAPH_USER_OBJECT_MOVE,
 *   moves the caller's to it); cuGraphReleaseUserObject drops some; cuGraphDestroy drops them all;
 *   cuGraphClone copies them to the clone;</li>
 *   <li>a child graph node's graph owns a copy of the references of the graph it was made from, which are
 *   that child graph's, not the parent's (the node's graph from cuGraphChildGraphNodeGetGraph may retain
 *   more); cuGraphDestroyNode of the child node drops them;</li>
 *   <li>an exec graph owns a copy of the references of its graph and of every child graph in it, made by
 *   the instantiation; cuGraphExecUpdate and cuGraphExecChildGraphNodeSetParams replace them (the node's
 *   part only) with those of the new graph; cuGraphExecDestroy drops them;</li>
 *   <li>a graph being captured (from cuStreamGetCaptureInfo) is the graph cuStreamEndCapture returns;
 *   if the capture ends in failure, the driver destroys it and its references go.</li>
 * </ul>
 * The graph calls are seen as {@link RemoteCudaDriver#call} makes them ({@link #before}, {@link #after}),
 * whichever path made them (a program's call, GraphNodeParams, cuGraphInstantiateWithParams), and only
 * once this connection's first graph has retained a user object: until then no graph owns a reference,
 * and nothing is kept (a child graph node's parent and the graph of each such node are noted always, a
 * map entry each, so that a later retain into a node's graph finds its parent).
 *
 * <p>When an object's last reference goes, its destructor is called here, on a thread of this process
 * ({@code gpusockets-user-objects}), never inside the API call that dropped it, as the driver calls it
 * from a thread of its own. References an exec graph drops (destroy, update) go only once the work of
 * its launches has completed, as in the driver: after each cuGraphLaunch of an exec graph that owns
 * references, an event (timing off, made once per exec graph and stream, in the exec graph's context) is
 * recorded on the launch's stream, and the destructor thread waits for those events before it drops
 * them. A launch into a stream that captures records nothing (the capture's graph does not own the exec
 * graph's references). Destructors run one at a time, in the order their objects died; a CUDA call from
 * one is refused with CUDA_ERROR_NOT_PERMITTED (the driver forbids them; here one that waited would hold up
 * the rest).
 *
 * <p>Not followed (a destructor then runs later than the driver's would, never earlier): a graph
 * reached only through a child graph of a child graph's copy, or a child node of a clone (their node
 * handles are new, and this class never saw them made): references retained into such a graph stay until
 * the program releases them, and destroying such a node leaves its references to the clone's end.
 * Conditional nodes' body graphs are nodes' graphs too but are noted by no child node: references
 * retained into them belong to no parent here.
 */
final class UserObjects {
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    /** CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, the only flag, required; CU_GRAPH_USER_OBJECT_MOVE. */
    static final int NO_DESTRUCTOR_SYNC = 1, GRAPH_MOVE = 1;
    /** CU_EVENT_DISABLE_TIMING. */
    private static final int EVENT_DISABLE_TIMING = 2;
    /** Handles made here: opaque, never 0, untagged for a frontend merging backends (top byte 0). */
    private static final long HANDLE_BASE = 0x5553_0000_0000L;

    /** A user object of the program's. Its reference count is guarded by the object. */
    private static final class UserObject {
        final long handle, ptr, fn;
        long refs;

        UserObject(long handle, long ptr, long fn, long refs) {
            this.handle = handle;
            this.ptr = ptr;
            this.fn = fn;
            this.refs = refs;
        }
    }

    /** The objects of this process, by handle: every connection's graphs may name them. */
    private static final Map<Long, UserObject> OBJECTS = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT = new AtomicLong(1);
    /** Work for the destructor thread, started at the first object. */
    private static final LinkedBlockingQueue<Runnable> WORK = new LinkedBlockingQueue<>();
    private static volatile Thread runner;

    /** void (*CUhostFn)(void *userData), target first; made at the first destructor called. */
    private static final class Downcall {
        static final MethodHandle HOST_FN = Linker.nativeLinker().downcallHandle(FunctionDescriptor.ofVoid(ADDRESS));
    }

    /** References owned by one graph: its own, and its child graph nodes' graphs by node. */
    private static final class Refs {
        final Map<UserObject, Long> own = new IdentityHashMap<>();
        final Map<Long, Refs> children = new HashMap<>();

        Refs copy() {
            Refs c = new Refs();
            c.own.putAll(own);
            children.forEach((node, r) -> c.children.put(node, r.copy()));
            return c;
        }

        /** Every reference of this graph and its child graphs, by object. */
        void flatten(Map<UserObject, Long> into) {
            own.forEach((o, n) -> into.merge(o, n, Long::sum));
            children.values().forEach(r -> r.flatten(into));
        }

        boolean isEmpty() {
            if (!own.isEmpty()) {
                return false;
            }
            return children.values().stream().allMatch(Refs::isEmpty);
        }
    }

    /** An exec graph's references and the events recorded after its launches, by stream (guarded by UserObjects.this). */
    private static final class Exec {
        Refs refs;
        long context;
        final Map<Long, Long> events = new HashMap<>();
    }

    private final RemoteCudaDriver driver;
    /** Whether a graph of this connection has retained a user object: from then on graph calls are followed. */
    private volatile boolean tracking;
    private final Map<Long, Refs> graphs = new HashMap<>();
    private final Map<Long, Exec> execs = new HashMap<>();
    /** Child graph nodes and their parent graphs; child graph nodes' graphs and their nodes. */
    private final Map<Long, Long> childParents = new ConcurrentHashMap<>();
    private final Map<Long, Long> nodeGraphs = new ConcurrentHashMap<>();

    UserObjects(RemoteCudaDriver driver) {
        this.driver = driver;
    }

    // ---- the program's calls ------------------------------------------------------------------

    int create(MemorySegment objectOut, MemorySegment ptr, MemorySegment destroy, int initialRefcount, int flags) {
        if (isNull(objectOut) || isNull(destroy) || initialRefcount <= 0 || flags != NO_DESTRUCTOR_SYNC) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        long handle = HANDLE_BASE + NEXT.getAndIncrement();
        OBJECTS.put(handle, new UserObject(handle, ptr.address(), destroy.address(), initialRefcount));
        startRunner();
        WireValues.sized(objectOut, 8).set(LONG, 0, handle);
        return CuResult.CUDA_SUCCESS;
    }

    static int retain(long object, int count) {
        UserObject o = OBJECTS.get(object);
        if (o == null || count <= 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        synchronized (o) {
            if (o.refs == 0) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;   // destroyed, its destructor queued
            }
            o.refs += count;
        }
        return CuResult.CUDA_SUCCESS;
    }

    /** The caller's references; more than the object has (undefined in the driver) is refused. */
    static int release(long object, int count) {
        UserObject o = OBJECTS.get(object);
        if (o == null || count <= 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        synchronized (o) {
            if (count > o.refs) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
        }
        drop(Map.of(o, (long) count));
        return CuResult.CUDA_SUCCESS;
    }

    int graphRetain(long graph, long object, int count, int flags) {
        UserObject o = OBJECTS.get(object);
        if (o == null || count <= 0 || (flags & ~GRAPH_MOVE) != 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        int r = checkGraph(graph);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        tracking = true;
        synchronized (o) {
            if (o.refs == 0 || ((flags & GRAPH_MOVE) != 0 && count > o.refs)) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            if ((flags & GRAPH_MOVE) == 0) {
                o.refs += count;
            }
        }
        synchronized (this) {
            graphRefs(graph).own.merge(o, (long) count, Long::sum);
        }
        return CuResult.CUDA_SUCCESS;
    }

    int graphRelease(long graph, long object, int count) {
        UserObject o = OBJECTS.get(object);
        if (o == null || count <= 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        synchronized (this) {
            Refs refs = graphs.get(graph);
            Long held = refs == null ? null : refs.own.get(o);
            if (held == null || held < count) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            if (held == count) {
                refs.own.remove(o);
            } else {
                refs.own.put(o, held - count);
            }
        }
        drop(Map.of(o, (long) count));
        return CuResult.CUDA_SUCCESS;
    }

    /** The driver refuses a graph it does not know: asked of the backend (the node count, nothing else). */
    private int checkGraph(long graph) {
        if (graph == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        try (Arena arena = Arena.ofConfined()) {
            return driver.cuGraphGetNodes(graph, MemorySegment.NULL, arena.allocate(8, 8));
        }
    }

    /** The references of {@code graph}: the ones of a child node's graph if it is one (guarded by this). */
    private Refs graphRefs(long graph) {
        Refs refs = graphs.get(graph);
        if (refs != null) {
            return refs;
        }
        Long node = nodeGraphs.get(graph);
        Long parent = node == null ? null : childParents.get(node);
        refs = parent == null ? new Refs() : graphRefs(parent).children.computeIfAbsent(node, n -> new Refs());
        graphs.put(graph, refs);
        return refs;
    }

    // ---- the graph calls, as RemoteCudaDriver makes them ----------------------------------------

    /** Before a call: the graph a capture builds, for cuStreamEndCapture (it is gone if the capture fails); else 0. */
    long before(ApiFunction f, Object[] args) {
        if (!tracking || f != ApiEntries.cuStreamEndCapture) {
            return 0;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment status = arena.allocate(4, 4), graph = arena.allocate(8, 8);
            int r = driver.cuStreamGetCaptureInfo_v2((Long) args[0], status, MemorySegment.NULL, graph, MemorySegment.NULL,
                    MemorySegment.NULL);
            return r == CuResult.CUDA_SUCCESS && status.get(ValueLayout.JAVA_INT, 0) != 0 ? graph.get(LONG, 0) : 0;
        }
    }

    /** After a call: what it did to graphs' and exec graphs' references. */
    void after(ApiFunction f, Object[] args, int result, long captureGraph) {
        if (f == ApiEntries.cuStreamEndCapture && result != CuResult.CUDA_SUCCESS && captureGraph != 0) {
            graphGone(captureGraph);
            return;
        }
        if (result != CuResult.CUDA_SUCCESS) {
            return;
        }
        if (f == ApiEntries.cuGraphAddChildGraphNode) {
            long node = out(args[0]);
            childParents.put(node, (Long) args[1]);
            if (tracking) {
                childAdded((Long) args[1], node, (Long) args[4]);
            }
        } else if (f == ApiEntries.cuGraphChildGraphNodeGetGraph) {
            nodeGraphs.put(out(args[1]), (Long) args[0]);
            if (tracking) {
                aliasChild((Long) args[0], out(args[1]));
            }
        } else if (!tracking) {
            return;
        } else if (f == ApiEntries.cuGraphClone) {
            cloned((Long) args[1], out(args[0]));
        } else if (f == ApiEntries.cuGraphDestroy) {
            graphGone((Long) args[0]);
        } else if (f == ApiEntries.cuGraphDestroyNode) {
            nodeGone((Long) args[0]);
        } else if (f == ApiEntries.cuGraphInstantiateWithFlags) {
            instantiated(out(args[0]), (Long) args[1]);
        } else if (f == ApiEntries.cuGraphLaunch) {
            launched((Long) args[0], (Long) args[1]);
        } else if (f == ApiEntries.cuGraphExecDestroy) {
            execGone((Long) args[0]);
        } else if (f == ApiEntries.cuGraphExecChildGraphNodeSetParams) {
            execChildReplaced((Long) args[0], (Long) args[1], (Long) args[2]);
        }
    }

    /** cuGraphExecUpdate succeeded: the exec graph's references become a copy of the graph's. */
    void execUpdated(long exec, long graph) {
        if (!tracking) {
            return;
        }
        Refs old;
        long context;
        Map<Long, Long> events;
        Map<UserObject, Long> added;
        synchronized (this) {
            Exec e = execs.get(exec);
            Refs fresh = copyOf(graph);
            if (e == null && fresh == null) {
                return;
            }
            if (e == null) {
                e = new Exec();
                e.context = currentContext();
                execs.put(exec, e);
            }
            old = e.refs;
            e.refs = fresh;
            context = e.context;
            events = Map.copyOf(e.events);
            added = fresh == null ? Map.of() : flatten(fresh);
        }
        retainAll(added);
        dropAfter(old, context, events, false);
    }

    private void childAdded(long parent, long node, long child) {
        Map<UserObject, Long> added;
        synchronized (this) {
            Refs refs = copyOf(child);
            if (refs == null) {
                return;
            }
            graphRefs(parent).children.put(node, refs);
            added = flatten(refs);
        }
        retainAll(added);
    }

    /** A child node's graph, now known by its handle: retains into it go to the node's references. */
    private synchronized void aliasChild(long node, long graph) {
        Long parent = childParents.get(node);
        Refs p = parent == null ? null : graphs.get(parent);
        Refs child = p == null ? null : p.children.get(node);
        if (child != null) {
            graphs.put(graph, child);
        }
    }

    private void cloned(long original, long clone) {
        Map<UserObject, Long> added;
        synchronized (this) {
            Refs refs = copyOf(original);
            if (refs == null) {
                return;
            }
            graphs.put(clone, refs);
            added = flatten(refs);
        }
        retainAll(added);
    }

    private void graphGone(long graph) {
        Refs refs;
        synchronized (this) {
            refs = graphs.remove(graph);
            if (refs == null) {
                return;
            }
            forgetAliases(refs);
        }
        drop(flatten(refs));
    }

    private void nodeGone(long node) {
        Long parent = childParents.remove(node);
        Refs refs;
        synchronized (this) {
            Refs p = parent == null ? null : graphs.get(parent);
            refs = p == null ? null : p.children.remove(node);
            if (refs == null) {
                return;
            }
            forgetAliases(refs);
        }
        drop(flatten(refs));
    }

    /** Handles naming {@code refs} or a child of it go with it (guarded by this). */
    private void forgetAliases(Refs refs) {
        graphs.values().removeIf(r -> r == refs);
        refs.children.values().forEach(this::forgetAliases);
    }

    private void instantiated(long exec, long graph) {
        Map<UserObject, Long> added;
        synchronized (this) {
            Refs refs = copyOf(graph);
            if (refs == null) {
                return;
            }
            Exec e = new Exec();
            e.refs = refs;
            e.context = currentContext();
            execs.put(exec, e);
            added = flatten(refs);
        }
        retainAll(added);
    }

    /** An event after the launch on its stream, made once per stream, unless the stream captures. */
    private void launched(long exec, long stream) {
        long event;
        synchronized (this) {
            Exec e = execs.get(exec);
            if (e == null || e.refs == null || e.refs.isEmpty()) {
                return;
            }
            Long known = e.events.get(stream);
            if (known == null) {
                if (capturing(stream)) {
                    return;
                }
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment out = arena.allocate(8, 8);
                    if (driver.cuEventCreate(out, EVENT_DISABLE_TIMING) != CuResult.CUDA_SUCCESS) {
                        return;
                    }
                    known = out.get(LONG, 0);
                }
                e.events.put(stream, known);
            } else if (capturing(stream)) {
                return;
            }
            event = known;
        }
        driver.cuEventRecord(event, stream);
    }

    private boolean capturing(long stream) {
        if (!driver.captureActive()) {
            return false;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment status = arena.allocate(4, 4);
            return driver.cuStreamIsCapturing(stream, status) != CuResult.CUDA_SUCCESS || status.get(ValueLayout.JAVA_INT, 0) != 0;
        }
    }

    private void execGone(long exec) {
        Exec e;
        synchronized (this) {
            e = execs.remove(exec);
        }
        if (e != null) {
            dropAfter(e.refs, e.context, Map.copyOf(e.events), true);
        }
    }

    private void execChildReplaced(long exec, long node, long child) {
        Refs old;
        long context;
        Map<Long, Long> events;
        Map<UserObject, Long> added;
        synchronized (this) {
            Exec e = execs.get(exec);
            Refs fresh = copyOf(child);
            if (e == null || e.refs == null) {
                if (fresh == null) {
                    return;
                }
                if (e == null) {
                    e = new Exec();
                    e.context = currentContext();
                    execs.put(exec, e);
                }
                e.refs = new Refs();
            }
            old = fresh == null ? e.refs.children.remove(node) : e.refs.children.put(node, fresh);
            added = fresh == null ? Map.of() : flatten(fresh);
            context = e.context;
            events = Map.copyOf(e.events);
        }
        retainAll(added);
        dropAfter(old, context, events, false);
    }

    // ---- references ---------------------------------------------------------------------------

    /** A copy of a graph's references, or null when it has none (guarded by this). */
    private Refs copyOf(long graph) {
        Refs refs = graphs.get(graph);
        return refs == null || refs.isEmpty() ? null : refs.copy();
    }

    private static Map<UserObject, Long> flatten(Refs refs) {
        Map<UserObject, Long> all = new IdentityHashMap<>();
        refs.flatten(all);
        return all;
    }

    private static void retainAll(Map<UserObject, Long> refs) {
        refs.forEach((o, n) -> {
            synchronized (o) {
                o.refs += n;
            }
        });
    }

    /** Drops references; objects left with none are destroyed on the destructor thread. */
    private static void drop(Map<UserObject, Long> refs) {
        List<UserObject> dead = new ArrayList<>();
        refs.forEach((o, n) -> {
            synchronized (o) {
                o.refs -= n;
                if (o.refs <= 0) {
                    o.refs = 0;
                    dead.add(o);
                }
            }
        });
        for (UserObject o : dead) {
            OBJECTS.remove(o.handle);
            WORK.add(() -> destroy(o));
        }
    }

    /**
     * Drops an exec graph's references once the work of its launches so far has completed: on the
     * destructor thread, which waits for the launches' events first ({@code destroyEvents}: and then
     * destroys them, the exec graph being gone).
     */
    private void dropAfter(Refs refs, long context, Map<Long, Long> events, boolean destroyEvents) {
        if ((refs == null || refs.isEmpty()) && (!destroyEvents || events.isEmpty())) {
            return;
        }
        Map<UserObject, Long> gone = refs == null ? Map.of() : flatten(refs);
        WORK.add(() -> {
            if (!events.isEmpty()) {
                driver.cuCtxSetCurrent(context);   // the events' context (gone with it: the waits then fail at once)
                for (long event : events.values()) {
                    driver.cuEventSynchronize(event);
                    if (destroyEvents) {
                        driver.cuEventDestroy(event);
                    }
                }
            }
            drop(gone);
        });
        startRunner();
    }

    private long currentContext() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8, 8);
            return driver.cuCtxGetCurrent(out) == CuResult.CUDA_SUCCESS ? out.get(LONG, 0) : 0;
        }
    }

    /** The destructor thread while it is inside a program's destructor. */
    private static volatile Thread inDestructor;

    /**
     * Whether the calling thread is inside a user object's destructor: CUDA calls from there are refused
     * with CUDA_ERROR_NOT_PERMITTED (destructors may not call CUDA, as the driver documents).
     */
    static boolean runningHere() {
        return inDestructor == Thread.currentThread();
    }

    private static void destroy(UserObject o) {
        inDestructor = Thread.currentThread();
        try {
            Downcall.HOST_FN.invokeExact(MemorySegment.ofAddress(o.fn), MemorySegment.ofAddress(o.ptr));
        } catch (Throwable t) {
            System.err.println("gpusockets: a user object's destructor failed: " + t);
        } finally {
            inDestructor = null;
        }
    }

    private static void startRunner() {
        if (runner == null) {
            synchronized (UserObjects.class) {
                if (runner == null) {
                    runner = Thread.ofPlatform().daemon().name("gpusockets-user-objects").start(UserObjects::serve);
                }
            }
        }
    }

    private static void serve() {
        try {
            while (true) {
                Runnable work = WORK.take();
                try {
                    work.run();
                } catch (RuntimeException e) {
                    System.err.println("gpusockets: user object work failed: " + e);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static long out(Object segment) {
        return WireValues.sized((MemorySegment) segment, 8).get(LONG, 0);
    }

    private static boolean isNull(MemorySegment s) {
        return s == null || (s.isNative() && s.address() == 0);
    }
}
