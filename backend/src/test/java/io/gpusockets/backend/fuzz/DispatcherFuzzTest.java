package io.gpusockets.backend.fuzz;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.Session;
import io.gpusockets.backend.tenant.Tenant;
import io.gpusockets.backend.tenant.TenantLimits;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.transport.PipeConnection;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * Coverage-guided fuzzing (Jazzer) of the call dispatcher: each input is a {@link CallScript} (calls
 * with opcodes from the API table, random lanes and bodies, DATA frames of random lengths, lane ends,
 * raw frames) that a peer sends to a {@link Session} after its handshake, over an in-memory connection,
 * on a {@link CappedGpu}. Then the peer goes. The properties: the session answers with CUDA results or
 * ends (a protocol violation closes it), never with CUDA_ERROR_UNKNOWN from an exception inside the
 * backend, and logs no internal error; it ends within seconds once its peer is gone; afterwards no lane
 * thread is left and everything the driver made for it (allocations, retained contexts, modules) is
 * released; and a legitimate session on the same driver still works (every {@value #LEGIT_EVERY}
 * inputs and at the end).
 */
class DispatcherFuzzTest {
    static final int LEGIT_EVERY = 64;
    static final long SESSION_END_MILLIS = 10_000;
    /** DATA bytes one input may send (more only slows the run; the body budget is 8 MiB or more). */
    static final int MAX_DATA_BYTES = 16 << 20;

    /**
     * Internal errors found by this fuzzer and reported, not yet fixed (the areas that own them are
     * elsewhere): an input that hits one is counted, not failed, so the bounded run stays a check of
     * everything else. Remove an entry once its defect is fixed; its seed under DispatcherFuzzTestInputs
     * then guards the fix.
     */
    static final List<String> KNOWN_FINDINGS = List.of();
    static final AtomicLong KNOWN_HITS = new AtomicLong();

    static final AtomicLong INPUTS = new AtomicLong();
    static final AtomicLong FRAMES = new AtomicLong();
    static final AtomicLong REPLIES = new AtomicLong();
    static final AtomicLong CUDA_SUCCESSES = new AtomicLong();

    static CappedGpu gpu;
    static DriverHost host;
    static BackendSettings settings;
    static BackendLogs logs;
    static ScheduledExecutorService watchdog;

    @BeforeAll
    static void start() throws Exception {
        logs = BackendLogs.capture();
        gpu = new CappedGpu();
        host = new DriverHost(gpu, "fuzz", 1, 13000);
        settings = BackendSettings.fromProperties(new Properties(), 2);
        watchdog = Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().daemon().name("fuzz-watchdog").factory());
        legitimateSessionWorks();
    }

    @AfterAll
    static void stop() throws Exception {
        try {
            legitimateSessionWorks();
        } finally {
            System.out.println("fuzz DispatcherFuzzTest: " + INPUTS.get() + " inputs, " + FRAMES.get() + " frames sent, "
                    + REPLIES.get() + " replies (" + CUDA_SUCCESSES.get() + " CUDA_SUCCESS), " + KNOWN_HITS.get()
                    + " inputs hit a known finding");
            watchdog.shutdownNow();
            logs.close();
        }
    }

    /** What came back on one connection. */
    static final class Replies {
        final List<Long> outputs = new CopyOnWriteArrayList<>();
        final List<String> unknown = new CopyOnWriteArrayList<>();
        final AtomicInteger count = new AtomicInteger();
        private boolean closed;

        void drain(FrameChannel c) {
            try {
                while (true) {
                    FrameHeader h = c.readHeader();
                    ByteBuffer body = c.readBody(h.length());
                    if (h.opcode() == Opcodes.DATA || !h.isReply()) {
                        continue;
                    }
                    REPLIES.incrementAndGet();
                    int result = body.remaining() >= 4 ? body.getInt() : Integer.MIN_VALUE;
                    if (result == CuResult.CUDA_SUCCESS) {
                        CUDA_SUCCESSES.incrementAndGet();
                        if (body.remaining() >= 8) {
                            outputs.add(body.getLong());
                        }
                    } else if (result == CuResult.CUDA_ERROR_UNKNOWN) {
                        unknown.add(h.toString());
                    }
                    synchronized (this) {
                        count.incrementAndGet();
                        notifyAll();
                    }
                }
            } catch (IOException e) {
                // the session closed the connection, or we did
            }
            synchronized (this) {
                closed = true;
                notifyAll();
            }
        }

        synchronized void await(int n, long millis) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
            while (count.get() < n && !closed) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return;
                }
                TimeUnit.NANOSECONDS.timedWait(this, left);
            }
        }
    }

    @FuzzTest(maxDuration = "30s")
    void dispatch(byte[] input) throws Exception {
        long n = INPUTS.incrementAndGet();
        PipeConnection.Pair pipe = PipeConnection.pair();
        Session session = new Session(1, new FrameChannel(pipe.right()), host, settings, "fuzz-peer", true, null, null,
                new Tenant("fuzz", TenantLimits.UNLIMITED));
        Thread serving = Thread.ofPlatform().name("fuzz-session").start(session::serve);
        FrameChannel client = new FrameChannel(pipe.left());
        Replies replies = new Replies();
        Thread reading = Thread.ofPlatform().name("fuzz-replies").start(() -> replies.drain(client));
        // a peer whose writes block (the session stopped reading) gives up and goes, as a real one would
        ScheduledFuture<?> dog = watchdog.schedule(pipe.left()::close, SESSION_END_MILLIS, TimeUnit.MILLISECONDS);
        try {
            play(new CallScript.Reader(input), client, replies);
            if (input.length > 0 && (input[input.length - 1] & 1) != 0) {
                // a clean end: the session answers what it has run, ends and closes (the replies are read meanwhile)
                client.send(Opcodes.GOODBYE, 0, 0, 0);
                reading.join(SESSION_END_MILLIS);
            }
        } catch (IOException e) {
            // the session closed the connection (a protocol violation): allowed
        } finally {
            dog.cancel(false);
            pipe.left().close(); // otherwise the peer just goes
        }
        serving.join(SESSION_END_MILLIS);
        assertFalse(serving.isAlive(), "the session did not end within " + SESSION_END_MILLIS + " ms of its peer going");
        reading.join(SESSION_END_MILLIS);
        List<String> errors = new java.util.ArrayList<>(logs.takeErrors());
        errors.addAll(gpu.unboundedImages);
        gpu.unboundedImages.clear();
        List<String> unknownErrors = errors.stream().filter(e -> KNOWN_FINDINGS.stream().noneMatch(e::contains)).toList();
        if (unknownErrors.size() < errors.size()) {
            KNOWN_HITS.incrementAndGet();
        } else {
            assertEquals(List.of(), replies.unknown, "calls answered CUDA_ERROR_UNKNOWN (an exception inside the backend)");
        }
        assertEquals(List.of(), unknownErrors, "internal errors logged by the backend");
        assertNothingLeft("s1");
        if (n % LEGIT_EVERY == 0) {
            legitimateSessionWorks();
        }
    }

    private static void play(CallScript.Reader r, FrameChannel c, Replies replies) throws IOException, InterruptedException {
        long requestId = 0;
        int awaited = 0;
        int waitedFor = 0;
        long dataBytes = 0;
        while (r.more()) {
            int op = r.u8() % CallScript.OPS;
            switch (op) {
                case CallScript.CALL -> {
                    ApiFunction f = CallScript.FUNCTIONS.get(r.u16() % CallScript.FUNCTIONS.size());
                    int flags = (r.u8() & 1) != 0 ? FrameHeader.FLAG_NO_REPLY : 0;
                    int lane = r.u8();
                    byte[] body = r.bytes(r.u16());
                    substitute(body, replies.outputs);
                    if (flags == 0) {
                        awaited++;
                    }
                    c.send(f.opcode(), flags, lane, ++requestId, ByteBuffer.wrap(body));
                }
                case CallScript.DATA -> {
                    int lane = r.u8();
                    int flags = r.u8();
                    int length = (flags & 2) != 0 ? settings.limits().chunkBytes() : r.u16();
                    dataBytes += length;
                    if (dataBytes > MAX_DATA_BYTES) {
                        continue;
                    }
                    ByteBuffer body = (flags & 4) != 0 ? ByteBuffer.wrap(r.bytes(length)) : ByteBuffer.allocate(length);
                    c.send(Opcodes.DATA, (flags & 1) != 0 ? FrameHeader.FLAG_WINDOW : 0, lane, requestId, body);
                }
                case CallScript.LANE_END -> c.send(Opcodes.LANE_END, 0, r.u8(), 0);
                case CallScript.RAW -> {
                    int opcode = r.u32(), flags = r.u32(), lane = r.u32();
                    c.send(opcode, flags, lane, ++requestId, ByteBuffer.wrap(r.bytes(r.u16())));
                }
                case CallScript.GOODBYE -> c.send(Opcodes.GOODBYE, 0, 0, 0);
                default -> {
                    if (awaited != waitedFor) { // a reply that did not come in a second will not come for waiting again
                        replies.await(awaited, 1000);
                        waitedFor = awaited;
                    }
                }
            }
            FRAMES.incrementAndGet();
        }
    }

    /** Replaces output references in a call body (see {@link CallScript}). */
    private static void substitute(byte[] body, List<Long> outputs) {
        if (outputs.isEmpty()) {
            return;
        }
        ByteBuffer b = ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN);
        for (int at = 0; at + 8 <= body.length; at += 4) {
            long v = b.getLong(at);
            if ((v & ~0xFFL) == CallScript.OUT_REF) {
                b.putLong(at, outputs.get((int) (v & 0xFF) % outputs.size()));
            }
        }
    }

    /** No lane thread of session {@code s<id>} is alive and the driver holds nothing (waits up to 10 s for both). */
    static void assertNothingLeft(String sessionTag) throws InterruptedException {
        String prefix = "gpusockets-" + sessionTag + "-lane";
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        List<String> lanes;
        while (!(lanes = laneThreads(prefix)).isEmpty() || gpu.held() != null) {
            if (System.nanoTime() > deadline) {
                break;
            }
            Thread.sleep(1);
        }
        assertEquals(List.of(), lanes, "lane threads left after the session ended");
        assertNull(gpu.held(), "device resources held after the session ended");
    }

    private static List<String> laneThreads(String prefix) {
        return Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .filter(name -> name.startsWith(prefix)).toList();
    }

    /** cuInit, a primary context, an allocation written and read back, freed, GOODBYE: all succeed, nothing left. */
    static void legitimateSessionWorks() throws Exception {
        PipeConnection.Pair pipe = PipeConnection.pair();
        Session session = new Session(2, new FrameChannel(pipe.right()), host, settings, "legitimate-peer", true, null,
                null, new Tenant("legitimate", TenantLimits.UNLIMITED));
        Thread serving = Thread.ofPlatform().name("legitimate-session").start(session::serve);
        FrameChannel c = new FrameChannel(pipe.left());
        try {
            assertEquals(CuResult.CUDA_SUCCESS, call(c, "cuInit", new CallScript.Body().u32(0)).getInt());
            ByteBuffer r = call(c, "cuDevicePrimaryCtxRetain", new CallScript.Body().u32(0));
            assertEquals(CuResult.CUDA_SUCCESS, r.getInt());
            long ctx = r.getLong();
            assertEquals(CuResult.CUDA_SUCCESS, call(c, "cuCtxSetCurrent", new CallScript.Body().u64(ctx)).getInt());
            r = call(c, "cuMemAlloc", new CallScript.Body().u64(256));
            assertEquals(CuResult.CUDA_SUCCESS, r.getInt());
            long dptr = r.getLong();
            byte[] data = new byte[256];
            for (int i = 0; i < data.length; i++) {
                data[i] = (byte) (i * 7);
            }
            ApiFunction htod = ApiTable.get().byName("cuMemcpyHtoD");
            c.send(htod.opcode(), 0, 0, 100, ByteBuffer.wrap(new CallScript.Body().u64(dptr).u64(256).u64(256).bytes()));
            c.send(Opcodes.DATA, 0, 0, 100, ByteBuffer.wrap(data));
            FrameHeader h = c.readHeader();
            assertEquals(CuResult.CUDA_SUCCESS, c.readBody(h.length()).getInt(), "cuMemcpyHtoD");
            ApiFunction dtoh = ApiTable.get().byName("cuMemcpyDtoH");
            c.send(dtoh.opcode(), 0, 0, 101, ByteBuffer.wrap(new CallScript.Body().u64(dptr).u64(256).bytes()));
            h = c.readHeader();
            assertEquals(Opcodes.DATA, h.opcode(), "cuMemcpyDtoH's data");
            byte[] back = new byte[h.length()];
            c.readBody(h.length()).get(back);
            assertArrayEquals(data, back);
            h = c.readHeader();
            assertEquals(CuResult.CUDA_SUCCESS, c.readBody(h.length()).getInt(), "cuMemcpyDtoH");
            assertEquals(CuResult.CUDA_SUCCESS, call(c, "cuMemFree", new CallScript.Body().u64(dptr)).getInt());
            c.send(Opcodes.GOODBYE, 0, 0, 0);
        } finally {
            pipe.left().close();
        }
        serving.join(SESSION_END_MILLIS);
        assertFalse(serving.isAlive(), "a legitimate session did not end");
        assertNothingLeft("s2");
    }

    private static ByteBuffer call(FrameChannel c, String function, CallScript.Body body) throws IOException {
        ApiFunction f = ApiTable.get().byName(function);
        c.send(f.opcode(), 0, 0, 1, ByteBuffer.wrap(body.bytes()));
        FrameHeader h = c.readHeader();
        assertEquals(f.opcode(), h.opcode(), function + " reply");
        return c.readBody(h.length());
    }
}
