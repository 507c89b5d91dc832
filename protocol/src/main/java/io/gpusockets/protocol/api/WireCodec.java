package io.gpusockets.protocol.api;

/**
 * The request layout of an entry (table attribute {@code codec=}): the generic one the table
 * describes, or a hand-written one with its own class in {@code io.gpusockets.protocol.calls}, which
 * both ends use. A backend handler of an entry with its own codec receives the raw request and decodes
 * it with that class; every other handler receives its inputs decoded and checked.
 */
public enum WireCodec {
    /** Inputs in C order as the table describes them. */
    GENERIC,
    /** {@code launch}: cuLaunchKernel's parameters or packed {@code extra} buffer. */
    LAUNCH,
    /** {@code launch-config}: a CUlaunchConfig with its attributes, then cuLaunchKernelEx's parameters (if any). */
    LAUNCH_CONFIG,
    /** {@code pointer-attribute}: an attribute and a device pointer; the value comes back as u64. */
    POINTER_ATTRIBUTE,
    /** {@code pitched-copy}: a CUDA_MEMCPY2D/3D with its host side packed as DATA. */
    PITCHED_COPY,
    /** {@code host-callback}: the gate operations of a host callback. */
    HOST_CALLBACK,
    /** {@code pool-attribute}: a pool, a CUmemPool_attribute and its value as u64 (PoolAttributeRequest). */
    POOL_ATTRIBUTE,
    /** {@code pointer-attributes}: several pointer attributes of one pointer, values as u64 (PointerAttributeRequest). */
    POINTER_ATTRIBUTES,
    /** {@code graph}: node arrays, in/out counts and kernel node parameters of the graph calls (GraphRequest). */
    GRAPH,
    /** {@code link-complete}: a link state, then the size of the linked image or (second step) its bytes as DATA. */
    LINK_COMPLETE;

    /**
     * Whether a request of this layout starts with the entry's handle and scalar inputs as the generic decoding
     * reads them (pool-attribute: pool, attribute, then the value, which a generic {@code ptr} does not read; graph:
     * a setter's handles, then its parameters, which its generic {@code ptr} inputs do not read, so the table lets
     * {@code checkpoint=} on a graph entry only when its other inputs are all {@code ptr}), so that a checkpoint
     * recorder can read a setter's target and key off it ({@code checkpoint=}).
     */
    public boolean readsLikeGeneric() {
        return this == GENERIC || this == POOL_ATTRIBUTE || this == GRAPH;
    }

    static WireCodec parse(String value) {
        return switch (value) {
            case "launch" -> LAUNCH;
            case "launch-config" -> LAUNCH_CONFIG;
            case "pointer-attribute" -> POINTER_ATTRIBUTE;
            case "pitched-copy" -> PITCHED_COPY;
            case "host-callback" -> HOST_CALLBACK;
            case "pool-attribute" -> POOL_ATTRIBUTE;
            case "pointer-attributes" -> POINTER_ATTRIBUTES;
            case "graph" -> GRAPH;
            case "link-complete" -> LINK_COMPLETE;
            default -> throw new IllegalArgumentException(
                    "codec= takes launch, launch-config, pointer-attribute, pitched-copy, host-callback, pool-attribute, "
                            + "pointer-attributes, graph or link-complete: " + value);
        };
    }
}
