package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Runs calls through a session's dispatcher as its lanes would, on the test's own threads (one per
 * lane), and reads their replies: the checks, handlers and driver calls of the real path, without a
 * frontend or a transport.
 */
final class DispatchKit {
    /** A reply: the call's result and, when it succeeded, its outputs. */
    record Reply(int result, ByteBuffer outs) {
        long handle() {
            return outs.getLong(0);
        }
    }

    final Session session;
    private final Map<Long, Reply> replies = new ConcurrentHashMap<>();
    private final AtomicLong requests = new AtomicLong(1);

    DispatchKit(CudaDriver driver) {
        this(driver, SessionTestKit.settings());
    }

    DispatchKit(CudaDriver driver, BackendSettings settings) {
        this(driver, settings, new io.gpusockets.backend.tenant.Tenant("test", io.gpusockets.backend.tenant.TenantLimits.UNLIMITED));
    }

    DispatchKit(CudaDriver driver, BackendSettings settings, io.gpusockets.backend.tenant.TenantAccount tenant) {
        this.session = new Session(1, new FrameChannel(new ReplyConnection()), new DriverHost(driver, "test", 1, 13000), settings,
                "test-peer", true, null, null, tenant);
    }

    /**
     * Runs {@code name} on lane {@code lane} with these inputs in C order (Integer: 4 bytes, Long: 8) and
     * returns its reply.
     */
    Reply call(int lane, String name, Object... inputs) throws Exception {
        ApiFunction f = ApiTable.get().byName(name);
        if (f == null) {
            throw new IllegalArgumentException("no such entry: " + name);
        }
        ByteBuffer body = ByteBuffer.allocate(256).order(ByteOrder.LITTLE_ENDIAN);
        for (Object in : inputs) {
            if (in instanceof Integer i) {
                body.putInt(i);
            } else {
                body.putLong((Long) in);
            }
        }
        body.flip();
        long request = requests.getAndIncrement();
        FrameHeader h = new FrameHeader(body.remaining(), f.opcode(), 0, lane, request);
        session.dispatcher().execute(session.lanes().lane(lane), new Inbound(h, body, 0), ExecutionThread.current(session.chunkBytes(), session.hostBuffers()));
        Reply r = replies.remove(request);
        if (r == null) {
            throw new IllegalStateException(name + ": no reply");
        }
        return r;
    }

    /** Runs a call and returns its result only. */
    int result(int lane, String name, Object... inputs) throws Exception {
        return call(lane, name, inputs).result();
    }

    /** Keeps each reply by request id. */
    private final class ReplyConnection extends SessionTestKit.QuietConnection {
        @Override
        public void write(ByteBuffer... srcs) {
            int n = 0;
            for (ByteBuffer b : srcs) {
                n += b.remaining();
            }
            ByteBuffer all = ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
            for (ByteBuffer b : srcs) {
                all.put(b);
            }
            all.flip();
            all.getInt();   // length
            all.getInt();   // opcode
            int flags = all.getInt();
            all.getInt();   // lane
            long request = all.getLong();
            if ((flags & FrameHeader.FLAG_REPLY) != 0) {
                int result = all.getInt();
                replies.put(request, new Reply(result, all.slice().order(ByteOrder.LITTLE_ENDIAN)));
            }
        }
    }
}
