package io.gpusockets.protocol.fuzz;

import io.gpusockets.protocol.api.StableWindows;
import io.gpusockets.protocol.calls.HostCallbackOps;
import io.gpusockets.protocol.calls.LaunchRequest;
import io.gpusockets.protocol.calls.LinkCompleteRequest;
import io.gpusockets.protocol.calls.PointerAttributeRequest;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The seed corpus of {@link WireDecoderFuzzTest}: valid frames and request bodies, made with the
 * protocol's own encoders, from which the fuzzer mutates. {@link SeedCorpusTest} checks that the
 * committed files are these and rewrites them when asked.
 */
public final class WireSeeds {
    private WireSeeds() {
    }

    /** One frame as it travels: header then body. */
    public static byte[] frame(int opcode, int flags, int lane, long requestId, byte[] body) {
        return ByteBuffer.allocate(FrameHeader.BYTES + body.length).order(ByteOrder.LITTLE_ENDIAN)
                .putInt(body.length).putInt(opcode).putInt(flags).putInt(lane).putLong(requestId).put(body).array();
    }

    public static byte[] bytes(ByteBuffer b) {
        byte[] d = new byte[b.remaining()];
        b.duplicate().get(d);
        return d;
    }

    public static byte[] concat(byte[]... parts) {
        int n = 0;
        for (byte[] p : parts) {
            n += p.length;
        }
        ByteBuffer all = ByteBuffer.allocate(n);
        for (byte[] p : parts) {
            all.put(p);
        }
        return all.array();
    }

    private static ByteBuffer le(int n) {
        return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** Seeds of the frames target, by file name. */
    static Map<String, byte[]> frames() {
        Map<String, byte[]> m = new LinkedHashMap<>();
        byte[] nonce = new byte[Handshake.NONCE_BYTES];
        m.put("seed-server-hello", frame(Opcodes.SERVER_HELLO, 0, 0, 0,
                bytes(new Handshake.ServerHello(1, 1, Handshake.AUTH_PSK, nonce).encode())));
        m.put("seed-hello-welcome", concat(
                frame(Opcodes.HELLO, 0, 0, 0, bytes(new Handshake.Hello(1, Handshake.FEATURE_ASYNC, "guest", new byte[32]).encode())),
                frame(Opcodes.WELCOME, 0, 0, 0, bytes(new Handshake.Welcome(7, 13000, 1, 1, "Fake GPU").encode()))));
        m.put("seed-refuse", frame(Opcodes.REFUSE, 0, 0, 0, bytes(Handshake.encodeString("not allowed"))));
        m.put("seed-call-data-goodbye", concat(
                frame(0x1234, FrameHeader.FLAG_NO_REPLY, 3, 9, new byte[]{1, 2, 3, 4, 5, 6, 7, 8}),
                frame(Opcodes.DATA, 0, 3, 9, "bulk".getBytes(StandardCharsets.UTF_8)),
                frame(Opcodes.LANE_END, 0, 3, 0, new byte[0]),
                frame(Opcodes.GOODBYE, 0, 0, 0, new byte[0])));
        return m;
    }

    /** Seeds of the request codecs target: the codec's ordinal, then a valid body. */
    static Map<String, byte[]> requestCodecs() {
        Map<String, byte[]> m = new LinkedHashMap<>();
        put(m, WireDecoderFuzzTest.Codec.HELLO, bytes(new Handshake.Hello(1, 3, "tenant-a", new byte[32]).encode()));
        put(m, WireDecoderFuzzTest.Codec.SERVER_HELLO, bytes(new Handshake.ServerHello(1, 1, 0, new byte[32]).encode()));
        put(m, WireDecoderFuzzTest.Codec.WELCOME, bytes(new Handshake.Welcome(1, 13000, 1, 3, "H200").encode()));
        ByteBuffer launch = le(LaunchRequest.HEADER_BYTES + 4 + 4 + 4 + 8 + 4 + 4);
        LaunchRequest.putHeader(launch, 1, 2, 1, 1, 128, 1, 1, 0, 0);
        launch.putInt(LaunchRequest.MODE_KERNEL_PARAMS).putInt(2).putInt(8).putLong(StableWindows.DEFAULT_BASE).putInt(4).putInt(1000);
        put(m, WireDecoderFuzzTest.Codec.LAUNCH_KERNEL, bytes(launch.flip()));
        ByteBuffer extra = le(LaunchRequest.HEADER_BYTES + 4 + 4 + 16);
        LaunchRequest.putHeader(extra, 1, 1, 1, 1, 32, 1, 1, 0, 0);
        extra.putInt(LaunchRequest.MODE_EXTRA).putInt(16).putLong(1).putLong(2);
        put(m, "-extra", WireDecoderFuzzTest.Codec.LAUNCH_KERNEL, bytes(extra.flip()));
        ByteBuffer config = le(LaunchRequest.HEADER_BYTES + 4 + 4 + 68);
        LaunchRequest.putHeader(config, 1, 1, 1, 1, 32, 1, 1, 0, 0);
        config.putInt(LaunchRequest.MODE_KERNEL_PARAMS).putInt(1).putInt(2).put(new byte[64]);
        put(m, WireDecoderFuzzTest.Codec.LAUNCH_CONFIG, bytes(config.flip()));
        ByteBuffer node = le(4 + 8 + LaunchRequest.HEADER_BYTES + 4 + 4 + 8);
        node.putInt(0).putLong(1);
        LaunchRequest.putHeader(node, 1, 1, 1, 1, 32, 1, 1, 0, 0);
        node.putInt(LaunchRequest.MODE_KERNEL_PARAMS).putInt(1).putInt(8).putLong(5);
        put(m, WireDecoderFuzzTest.Codec.GRAPH_KERNEL_NODE, bytes(node.flip()));
        ByteBuffer callback = le(HostCallbackOps.ENQUEUE_BYTES);
        HostCallbackOps.putEnqueue(callback, 1, 0, 0);
        put(m, WireDecoderFuzzTest.Codec.HOST_CALLBACK, bytes(callback.flip()));
        ByteBuffer link = le(LinkCompleteRequest.REQUEST_BYTES);
        LinkCompleteRequest.put(link, 1, 0);
        put(m, WireDecoderFuzzTest.Codec.LINK_COMPLETE, bytes(link.flip()));
        ByteBuffer memcpy3d = le(2 * (4 + 8 * 8) + 3 * 8 + 16);
        for (int side = 0; side < 2; side++) {
            memcpy3d.putInt(side == 0 ? 1 : 2).putLong(0).putLong(0).putLong(0).putLong(0).putLong(StableWindows.DEFAULT_BASE)
                    .putLong(0).putLong(256).putLong(4);
        }
        memcpy3d.putLong(64).putLong(4).putLong(1).putLong(0).putLong(256);
        put(m, WireDecoderFuzzTest.Codec.PITCHED_COPY_ASYNC, bytes(memcpy3d.flip()));
        ByteBuffer pointer = le(12 + 8);
        PointerAttributeRequest.putSeveral(pointer, new int[]{1, 2}, StableWindows.DEFAULT_BASE);
        put(m, WireDecoderFuzzTest.Codec.POINTER_ATTRIBUTES, bytes(pointer.flip()));
        put(m, WireDecoderFuzzTest.Codec.MODULE_IMAGE,
                ".version 8.0\n.target sm_90\n.entry gpus_vector_add()\n{ ret; }\n\0".getBytes(StandardCharsets.UTF_8));
        return m;
    }

    private static void put(Map<String, byte[]> m, WireDecoderFuzzTest.Codec codec, byte[] body) {
        put(m, "", codec, body);
    }

    private static void put(Map<String, byte[]> m, String suffix, WireDecoderFuzzTest.Codec codec, byte[] body) {
        m.put("seed-" + codec.name().toLowerCase(java.util.Locale.ROOT).replace('_', '-') + suffix,
                concat(new byte[]{(byte) codec.ordinal()}, body));
    }
}
