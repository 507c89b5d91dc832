package io.gpusockets.benchmarks;

/** Workload names, as they appear in results.csv and the tables. */
public final class Workloads {
    /** Plain JDK SocketChannel, 64 bytes each way (tcp and unix only): DESIGN §10's "raw Java socket ping-pong". */
    public static final String SOCKET_PING_PONG = "socket-pingpong-64B";
    /** A 64-byte frame (24-byte header + 40-byte body) each way over the transport's Connection via FrameChannel. */
    public static final String FRAME_PING_PONG = "frame-pingpong-64B";
    /** RemoteCudaDriver.cuCtxGetDevice against an in-process backend. */
    public static final String NULL_CALL = "null-call";
    /** 1 MiB writes over the transport's Connection, one way. */
    public static final String STREAM = "stream-1MiB";
    public static final String HTOD = "memcpy-htod-1MiB";
    public static final String DTOH = "memcpy-dtoh-1MiB";
    /** 16 MiB copies: the size of DESIGN §10's copy target and of the native figures in GPU.md. */
    public static final String HTOD_16M = "memcpy-htod-16MiB";
    public static final String DTOH_16M = "memcpy-dtoh-16MiB";

    private Workloads() {
    }
}
