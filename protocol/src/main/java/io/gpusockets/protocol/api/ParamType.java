package io.gpusockets.protocol.api;

/** The types a parameter in the API table may have; see cuda-driver.api for their meaning. */
public enum ParamType {
    I32("int", "JAVA_INT", 4),
    U32("int", "JAVA_INT", 4),
    U8("byte", "JAVA_BYTE", 4),
    U16("short", "JAVA_SHORT", 4),
    I64("long", "JAVA_LONG", 8),
    U64("long", "JAVA_LONG", 8),
    SIZE("long", "JAVA_LONG", 8),
    F32("float", "JAVA_FLOAT", 4),
    DEV("int", "JAVA_INT", 4),
    DPTR("long", "JAVA_LONG", 8),
    CTX("long", "JAVA_LONG", 8),
    MOD("long", "JAVA_LONG", 8),
    FUNC("long", "JAVA_LONG", 8),
    STREAM("long", "JAVA_LONG", 8),
    EVENT("long", "JAVA_LONG", 8),
    LIB("long", "JAVA_LONG", 8),
    KERNEL("long", "JAVA_LONG", 8),
    ARRAY("long", "JAVA_LONG", 8),
    TEX("long", "JAVA_LONG", 8),
    SURF("long", "JAVA_LONG", 8),
    MIPMAP("long", "JAVA_LONG", 8),
    POOL("long", "JAVA_LONG", 8),
    GRAPH("long", "JAVA_LONG", 8),
    GNODE("long", "JAVA_LONG", 8),
    GEXEC("long", "JAVA_LONG", 8),
    LINK("long", "JAVA_LONG", 8),
    MEMH("long", "JAVA_LONG", 8),
    BYTES("MemorySegment", "ADDRESS", 8),
    IMAGE("MemorySegment", "ADDRESS", 8),
    CSTR("MemorySegment", "ADDRESS", 0),
    NULL("MemorySegment", "ADDRESS", 0),
    ZERO("int", "JAVA_INT", 0),
    PTR("MemorySegment", "ADDRESS", 0),
    HOSTPTR("MemorySegment", "ADDRESS", 0);

    private final String javaType;
    private final String layout;
    private final int wireBytes;

    ParamType(String javaType, String layout, int wireBytes) {
        this.javaType = javaType;
        this.layout = layout;
        this.wireBytes = wireBytes;
    }

    /** Java type of an input parameter of this type in {@link CudaDriver}. Output parameters are always MemorySegment. */
    public String javaType() {
        return javaType;
    }

    /** Name of the ValueLayout constant for the downcall descriptor (inputs). */
    public String layout() {
        return layout;
    }

    /**
     * Bytes a scalar of this type takes in a request or reply body (u8/u16 are widened to 4); for
     * bytes/image this is the inline length field; 0 for types that are not sent inline as a scalar.
     */
    public int wireBytes() {
        return wireBytes;
    }

    /** Bytes the driver writes through an output pointer of this type. */
    public int outBytes() {
        return switch (this) {
            case U8 -> 1;
            case U16 -> 2;
            case I32, U32, F32, DEV -> 4;
            default -> 8;
        };
    }

    public boolean isHandle() {
        return switch (this) {
            case CTX, MOD, FUNC, STREAM, EVENT, LIB, KERNEL, ARRAY, TEX, SURF, MIPMAP, POOL, GRAPH, GNODE, GEXEC, LINK, MEMH -> true;
            default -> false;
        };
    }

    /**
     * Handles whose session id is the driver's value itself: texture and surface objects, which programs pass
     * to kernels as parameters the backend never reads, so the value a kernel gets must be the real one.
     */
    public boolean isIdentityHandle() {
        return this == TEX || this == SURF;
    }

    public boolean isBulk() {
        return this == BYTES || this == IMAGE;
    }
}
