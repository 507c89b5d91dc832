package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The backend never trusts a frontend: each kind of bad input gets a CUDA error or a closed
 * session, and afterwards the backend is up and other sessions are untouched.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BadInputTest extends EmulatedBackendTest {

    @AfterEach
    void backendStillServes() throws Exception {
        assertTrue(backend.alive(), "backend process died");
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            assertEquals(1, new Cuda(d).deviceCount());
        }
    }

    @Test
    void garbageInsteadOfAHelloClosesThatConnection() throws Exception {
        try (RawClient c = new RawClient(backend.tcp())) {
            byte[] junk = new byte[200];
            new Random(7).nextBytes(junk);
            c.writeRaw(junk);
            assertTrue(c.closedByPeerWithin(5000));
        }
    }

    @Test
    void aWrongProtocolVersionIsRefusedWithItsReason() throws Exception {
        try (RawClient c = new RawClient(backend.unix())) {
            RawClient.Frame f = c.hello(99);
            assertEquals(Opcodes.REFUSE, f.header().opcode());
            String reason = Handshake.readString(f.body().order(ByteOrder.LITTLE_ENDIAN));
            assertTrue(reason.contains("unsupported protocol version 99"), reason);
            assertTrue(c.closedByPeerWithin(5000));
        }
    }

    @Test
    void aTruncatedFrameEndsOnlyThatSession() throws Exception {
        try (RawClient c = RawClient.session(backend.tcp())) {
            c.writeRaw(new byte[] {8, 0, 0, 0, 1, 2});
        }
        backend.awaitLog("ended (peer closed the connection)", 5000);
    }

    @Test
    void anOversizedFrameLengthClosesTheSession() throws Exception {
        try (RawClient c = RawClient.session(backend.tcp())) {
            ByteBuffer h = ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN);
            h.putInt(0x7fffffff).putInt(RawClient.opcode("cuInit")).putInt(0).putInt(1).putLong(1);
            c.writeRaw(h.array());
            assertTrue(c.closedByPeerWithin(5000));
        }
        backend.awaitLog("frame length out of range", 5000);
    }

    @Test
    void anUnknownOpcodeGetsNotSupportedAndTheSessionGoesOn() throws Exception {
        try (RawClient c = RawClient.session(backend.tcp())) {
            RawClient.Frame f = c.call(0x7eadbeef, RawClient.body(8).putLong(42));
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, f.body().order(ByteOrder.LITTLE_ENDIAN).getInt());
            RawClient.Frame count = c.call(RawClient.opcode("cuDeviceGetCount"), RawClient.body(0));
            ByteBuffer b = count.body().order(ByteOrder.LITTLE_ENDIAN);
            assertEquals(CuResult.CUDA_SUCCESS, b.getInt());
            assertEquals(1, b.getInt());
        }
    }

    @Test
    void aTruncatedRequestBodyClosesTheSession() throws Exception {
        try (RawClient c = RawClient.session(backend.tcp())) {
            c.channel.send(RawClient.opcode("cuDeviceGetName"), 0, 1, 1, ByteBuffer.wrap(new byte[] {1, 0}));
            assertTrue(c.closedByPeerWithin(5000));
        }
        backend.awaitLog("truncated request body", 5000);
    }

    @Test
    void handlesOfAnotherSessionAreUnknown() throws Exception {
        try (RemoteCudaDriver a = RemoteCudaDriver.connect(backend.tcp());
             RemoteCudaDriver b = RemoteCudaDriver.connect(backend.unix())) {
            Cuda ca = new Cuda(a), cb = new Cuda(b);
            long ctxA = ca.primaryContext();
            long streamA = ca.stream();
            cb.primaryContext();
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuStreamSynchronize(streamA));
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuStreamDestroy(streamA));
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, b.cuCtxSetCurrent(ctxA));
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, b.cuCtxDestroy(ctxA));
            assertEquals(CuResult.CUDA_SUCCESS, a.cuStreamSynchronize(streamA), "A's stream is untouched");
        }
    }

    @Test
    void pointerRangesOutsideTheSessionsAllocationsAreRefused() throws Exception {
        try (RemoteCudaDriver a = RemoteCudaDriver.connect(backend.tcp());
             RemoteCudaDriver b = RemoteCudaDriver.connect(backend.tcp())) {
            Cuda ca = new Cuda(a), cb = new Cuda(b);
            ca.primaryContext();
            cb.primaryContext();
            long pa = ca.alloc(4096);
            byte[] secret = new byte[4096];
            new Random(3).nextBytes(secret);
            ca.put(pa, secret);
            long pb = cb.alloc(4096);
            MemorySegment buf = cb.arena.allocate(8192);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemcpyDtoH(buf, pa, 16), "read another session's memory");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemcpyHtoD(pa, buf, 16), "write another session's memory");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemcpyDtoH(buf, pb, 4097), "read past the end");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemcpyDtoD(pb, pa, 16), "copy from another session");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemsetD8(pa, (byte) 0, 16), "set another session's memory");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemFree(pa), "free another session's memory");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemFree(pb + 8), "free inside an allocation");
            Cuda.ok(b.cuMemFree(pb), "free");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuMemcpyDtoH(buf, pb, 16), "use after free");
            assertArrayEquals(secret, ca.get(pa, 4096), "A's memory is intact");
        }
    }

    @Test
    void fuzzedFramesNeverBringTheBackendDown() throws Exception {
        Random r = new Random(2026);
        List<ApiFunction> functions = ApiTable.get().functions();
        for (int round = 0; round < 10; round++) {
            try (RawClient c = RawClient.session(round % 2 == 0 ? backend.tcp() : backend.unix())) {
                for (int i = 0; i < 30; i++) {
                    int op = r.nextInt(4) == 0 ? r.nextInt() : functions.get(r.nextInt(functions.size())).opcode();
                    byte[] body = new byte[r.nextInt(64)];
                    r.nextBytes(body);
                    // Keep bulk lengths small so the fuzzer does not just park a lane waiting for data.
                    c.channel.send(op, r.nextInt(3) == 0 ? 2 : 0, 1 + r.nextInt(3), i, ByteBuffer.wrap(body));
                }
            } catch (java.io.IOException expected) {
                // the backend may close a session that broke the protocol
            }
        }
        assertTrue(backend.alive());
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long p = cu.alloc(64);
            cu.put(p, new byte[64]);
            MemorySegment v = cu.cell();
            Cuda.ok(d.cuMemGetAddressRange(v, cu.cell(), p + 10), "range");
            assertEquals(p, v.get(JAVA_LONG, 0));
        }
    }
}
