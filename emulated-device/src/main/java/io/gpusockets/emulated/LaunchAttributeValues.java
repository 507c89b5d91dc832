package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;

import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;

/**
 * The launch attributes set on streams (cuStreamSetAttribute) and kernel nodes
 * (cuGraphKernelNodeSetAttribute): each value kept as the 64 bytes of its {@code CUlaunchAttributeValue}
 * and answered by the gets; a copy takes all of one owner's. Which ids each takes is cuda.h 13.0's
 * "valid for" list; others are CUDA_ERROR_INVALID_VALUE. The emulated device runs every stream and node
 * alike whatever they say (priorities, access-policy windows and domains are hints to a GPU's
 * scheduler and caches), so storing them is all there is to do. A device-updatable kernel node
 * (id 13) is not emulated: CUDA_ERROR_NOT_SUPPORTED. An attribute never set reads as zeros, except a
 * stream's priority, which is the one it was created with. Values are kept per stream or node object,
 * weakly, so they go with it; a graph's clone (cuGraphClone) starts without its nodes' values, where the
 * driver copies them, which only a get on the clone could see.
 */
final class LaunchAttributeValues {
    static final int VALUE_BYTES = 64;
    static final int ACCESS_POLICY_WINDOW = 1;
    static final int PRIORITY = 8;
    static final int DEVICE_UPDATABLE_KERNEL_NODE = 13;
    /** CU_LAUNCH_ATTRIBUTE_* valid for streams: access-policy window, synchronization policy, priority, memory sync domain map and domain, NVLink-centric scheduling. */
    private static final Set<Integer> STREAM_IDS = Set.of(1, 3, 8, 9, 10, 16);
    /** ... valid for graph nodes: window, cooperative, cluster dimension and scheduling, priority, domains, preferred cluster, carveout, NVLink-centric scheduling. */
    private static final Set<Integer> NODE_IDS = Set.of(1, 2, 4, 5, 8, 9, 10, 11, 14, 16);

    private final Map<Object, Map<Integer, byte[]>> values = new WeakHashMap<>();

    synchronized void setOnStream(EmulatedStream s, int id, MemorySegment value) {
        put(s, id, value, STREAM_IDS);
    }

    synchronized void setOnNode(EmulatedGraph.Node n, int id, MemorySegment value) {
        requireKernel(n);
        put(n, id, value, NODE_IDS);
    }

    synchronized void getOfStream(EmulatedStream s, int id, MemorySegment out) {
        get(s, id, out, STREAM_IDS, s.priority);
    }

    synchronized void getOfNode(EmulatedGraph.Node n, int id, MemorySegment out) {
        requireKernel(n);
        get(n, id, out, NODE_IDS, 0);
    }

    /** All of {@code src}'s values replace {@code dst}'s. */
    synchronized void copy(Object dst, Object src) {
        if (dst instanceof EmulatedGraph.Node d) {
            requireKernel(d);
            requireKernel((EmulatedGraph.Node) src);
        }
        Map<Integer, byte[]> from = values.get(src);
        if (from == null) {
            values.remove(dst);
        } else {
            values.put(dst, new HashMap<>(from));
        }
    }

    private void put(Object owner, int id, MemorySegment value, Set<Integer> valid) {
        check(id, valid);
        MemorySegment v = HostSegments.sized(value, VALUE_BYTES, "value");
        values.computeIfAbsent(owner, k -> new HashMap<>()).put(id, v.asSlice(0, VALUE_BYTES).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
    }

    private void get(Object owner, int id, MemorySegment out, Set<Integer> valid, int priority) {
        check(id, valid);
        MemorySegment o = HostSegments.sized(out, VALUE_BYTES, "value_out");
        byte[] v = values.getOrDefault(owner, Map.of()).get(id);
        if (v != null) {
            MemorySegment.copy(MemorySegment.ofArray(v), 0, o, 0, VALUE_BYTES);
            return;
        }
        o.asSlice(0, VALUE_BYTES).fill((byte) 0);
        if (id == PRIORITY) {
            o.set(HostSegments.INT, 0, priority);
        }
    }

    private static void check(int id, Set<Integer> valid) {
        if (id == DEVICE_UPDATABLE_KERNEL_NODE && valid == NODE_IDS) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "device-updatable kernel nodes are not emulated");
        }
        if (!valid.contains(id)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attribute " + id + " is not valid here");
        }
    }

    private static void requireKernel(EmulatedGraph.Node n) {
        if (n.type != EmulatedGraph.KERNEL) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "not a kernel node");
        }
    }
}
