package io.gpusockets.backend.fuzz;

import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.calls.LaunchRequest;
import io.gpusockets.protocol.fuzz.WireSeeds;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The seed corpora of {@link HandshakeFuzzTest} and {@link DispatcherFuzzTest}: handshakes a frontend
 * sends (and near misses), and call scripts of a small CUDA program (context, allocation, copies, a
 * module and a launch, streams, pipelined calls on several lanes) ending cleanly, abruptly or with a
 * protocol violation. {@link BackendSeedCorpusTest} keeps the committed files equal to these.
 */
final class BackendSeeds {
    private BackendSeeds() {
    }

    static final String PTX = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry gpus_mixed12()\n{\n ret;\n}\n\0";

    private static byte[] hello(int version, int features, String identity) {
        return WireSeeds.frame(Opcodes.HELLO, 0, 0, 0,
                WireSeeds.bytes(new Handshake.Hello(version, features, identity, new byte[0]).encode()));
    }

    static Map<String, byte[]> handshakes() {
        Map<String, byte[]> m = new LinkedHashMap<>();
        m.put("seed-hello", hello(Handshake.PROTOCOL_VERSION, 0, "guest"));
        m.put("seed-hello-async-window", hello(Handshake.PROTOCOL_VERSION,
                Handshake.FEATURE_ASYNC | Handshake.FEATURE_WINDOW, "tenant-a"));
        m.put("seed-hello-wrong-version", hello(Handshake.PROTOCOL_VERSION + 1, 0, "future"));
        int op = ApiTable.get().byName("cuDriverGetVersion").opcode();
        m.put("seed-hello-then-call", WireSeeds.concat(hello(Handshake.PROTOCOL_VERSION, 0, "guest"),
                WireSeeds.frame(op, 0, 0, 1, new byte[0]), WireSeeds.frame(Opcodes.GOODBYE, 0, 0, 0, new byte[0])));
        byte[] full = hello(Handshake.PROTOCOL_VERSION, 0, "cut-short");
        m.put("seed-hello-truncated", java.util.Arrays.copyOf(full, full.length - 5));
        m.put("seed-data-before-hello", WireSeeds.frame(Opcodes.DATA, 0, 0, 0, new byte[16]));
        // a resume with a token no session has: refused (unknown token), the backend stays up
        byte[] token = new byte[Handshake.TOKEN_BYTES];
        java.util.Arrays.fill(token, (byte) 0x5a);
        m.put("seed-hello-resume-unknown-token", WireSeeds.frame(Opcodes.HELLO, 0, 0, 0, WireSeeds.bytes(
                new Handshake.Hello(Handshake.PROTOCOL_VERSION, Handshake.FEATURE_RESUME, "guest", new byte[0], token).encode())));
        return m;
    }

    private static CallScript.Body body() {
        return new CallScript.Body();
    }

    /** cuInit, the primary context made current: outputs 0 = the context. */
    private static CallScript.Writer context() {
        return new CallScript.Writer()
                .call("cuInit", 0, 0, body().u32(0))
                .call("cuDevicePrimaryCtxRetain", 0, 0, body().u32(0))
                .await()
                .call("cuCtxSetCurrent", 0, 0, body().out(0));
    }

    static Map<String, byte[]> scripts() {
        Map<String, byte[]> m = new LinkedHashMap<>();
        byte[] data = new byte[256];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) i;
        }
        m.put("seed-alloc-copy-free", context()
                .call("cuMemAlloc", 0, 0, body().u64(256)).await()
                .call("cuMemcpyHtoD", 0, 0, body().out(1).u64(256).u64(256)).data(0, data)
                .call("cuMemcpyDtoH", 0, 0, body().out(1).u64(256)).await()
                .call("cuMemsetD8", 0, 0, body().out(1).u32(7).u64(128))
                .call("cuMemFree", 0, 0, body().out(1)).await()
                .goodbye().bytes());
        ByteBuffer launch = ByteBuffer.allocate(LaunchRequest.HEADER_BYTES + 8 + 4 + 8).order(ByteOrder.LITTLE_ENDIAN);
        LaunchRequest.putHeader(launch, 0, 1, 1, 1, 32, 1, 1, 0, 0);
        launch.putInt(LaunchRequest.MODE_KERNEL_PARAMS).putInt(1).putInt(8).putLong(0);
        byte[] launchBody = WireSeeds.bytes(launch.flip());
        // the launch's function is output 3 (context, allocation, module, function): patched in by reference
        ByteBuffer.wrap(launchBody).order(ByteOrder.LITTLE_ENDIAN).putLong(0, CallScript.OUT_REF + 3);
        byte[] ptx = PTX.getBytes(StandardCharsets.UTF_8);
        m.put("seed-module-launch-leak", context()
                .call("cuMemAlloc", 0, 0, body().u64(4096)).await()
                .call("cuModuleLoadData", 0, 0, body().u64(ptx.length)).data(0, ptx).await()
                .call("cuModuleGetFunction", 0, 0, body().out(2).cstr("gpus_mixed12")).await()
                .call("cuLaunchKernel", 0, 0, new RawBody(launchBody))
                .call("cuStreamCreate", 0, 0, body().u32(0))
                .call("cuEventCreate", 0, 0, body().u32(0)).await()
                .laneEnd(8)
                .bytes()); // ends without GOODBYE (an even last byte): the peer vanishes holding all of it
        m.put("seed-lanes-pipelined", context()
                .call("cuMemAlloc", FrameHeader.FLAG_NO_REPLY, 1, body().u64(64))
                .call("cuCtxSetCurrent", 0, 2, body().out(0))
                .call("cuMemAlloc", 0, 2, body().u64(64))
                .call("cuCtxSynchronize", 1, 1, body())
                .laneEnd(1)
                .data(3, 1, 16)
                .await().goodbye().bytes());
        m.put("seed-violations", context()
                .call("cuMemcpyHtoD", 0, 0, body().u64(0).u64(1 << 20).u64(1 << 20))
                .data(0, 2, 0)
                .raw(Opcodes.HELLO, 0, 0, new byte[8])
                .bytes());
        // reproducers of the findings in DispatcherFuzzTest.KNOWN_FINDINGS (they guard the fixes once made)
        m.put("finding-moduleloaddataex-options", context()
                .call("cuModuleLoadDataEx", 0, 0, body().u64(ptx.length).u32(0)).data(0, ptx)
                .await().goodbye().bytes());
        byte[] unterminated = new byte[2048];
        java.util.Arrays.fill(unterminated, (byte) 'A');
        m.put("finding-ptx-without-nul", context()
                .call("cuModuleLoadData", 0, 0, body().u64(unterminated.length)).data(0, unterminated)
                .await().goodbye().bytes());
        return m;
    }

    /** A prepared body for {@link CallScript.Writer#call}. */
    private static final class RawBody extends CallScript.Body {
        private final byte[] bytes;

        RawBody(byte[] bytes) {
            this.bytes = bytes;
        }

        @Override
        byte[] bytes() {
            return bytes;
        }
    }
}
