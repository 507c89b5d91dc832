package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import io.gpusockets.protocol.structs.BatchMemOp;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * Stream memory operations (cuStreamWriteValue32/64, cuStreamWaitValue32/64, cuStreamBatchMemOp), in
 * stream order. A write is a volatile store when the stream reaches it; a wait holds its stream (and
 * what waits for it) until the condition holds on the value, polling with a short back-off, so a
 * kernel or copy on another stream, or the host through a copy, can release it. A wait ends without
 * effect once its context is being destroyed, so a wait that never completes cannot keep a context
 * (or a backend session) from ending. Addresses must lie in an allocation of the current context and be
 * aligned to the value's size, as CUDA requires. On a capturing stream they become a batch
 * memory-operation node of the capture, as the driver records them, and graphs' batch nodes run the
 * same checked work ({@link #batchOp}).
 */
final class StreamMemOps {
    /** CUstreamWaitValue_flags (cuda.h): the comparison in the low bits, FLUSH as a modifier. */
    static final int WAIT_GEQ = 0x0, WAIT_EQ = 0x1, WAIT_AND = 0x2, WAIT_NOR = 0x3, WAIT_FLUSH = 1 << 30;
    /** CUstreamWriteValue_flags. */
    static final int WRITE_NO_MEMORY_BARRIER = 0x1;

    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final long MAX_PARK_NANOS = 1_000_000;

    private final Contexts contexts;
    private final Streams streams;
    private final EmulatedMemory memory;

    StreamMemOps(Contexts contexts, Streams streams, EmulatedMemory memory) {
        this.contexts = contexts;
        this.streams = streams;
        this.memory = memory;
    }

    /** One checked operation, ready to run on the stream. */
    private interface Op {
        void run(EmulatedContext c);
    }

    private void check(EmulatedContext c, long addr, int width, String what) {
        if (addr % width != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + " addr=0x" + Long.toHexString(addr) + " is not aligned to " + width);
        }
        if (memory.resolve(c, addr, width) == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + " addr=0x" + Long.toHexString(addr)
                    + " is not inside one allocation of the current context");
        }
    }

    private MemorySegment at(EmulatedContext c, long addr, int width) {
        MemorySegment m = memory.resolve(c, addr, width);
        if (m == null) {
            throw KernelFault.illegalAddress(addr, width);
        }
        return m;
    }

    private Op write(EmulatedContext c, long addr, long value, int width, int flags, String what) {
        if ((flags & ~WRITE_NO_MEMORY_BARRIER) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + " flags=0x" + Integer.toHexString(flags));
        }
        check(c, addr, width, what);
        return ctx -> {
            MemorySegment m = at(ctx, addr, width);
            if (width == 4) {
                INT.setVolatile(m, 0L, (int) value);
            } else {
                LONG.setVolatile(m, 0L, value);
            }
        };
    }

    private Op await(EmulatedContext c, long addr, long value, int width, int flags, String what) {
        int condition = flags & ~WAIT_FLUSH;
        if (condition < WAIT_GEQ || condition > WAIT_NOR) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + " flags=0x" + Integer.toHexString(flags));
        }
        check(c, addr, width, what);
        return ctx -> {
            long park = 1_000;
            while (!ctx.destroyed()) {
                MemorySegment m = at(ctx, addr, width);
                long v = width == 4 ? (int) INT.getVolatile(m, 0L) : (long) LONG.getVolatile(m, 0L);
                if (holds(condition, v, value, width)) {
                    return;
                }
                LockSupport.parkNanos(park);
                park = Math.min(park * 2, MAX_PARK_NANOS);
            }
        };
    }

    /** CUDA's conditions: GEQ is cyclic ((intN_t)(*addr - value) >= 0), EQ, AND ((*addr & value) != 0), NOR (~(*addr | value) != 0). */
    static boolean holds(int condition, long v, long value, int width) {
        if (width == 4) {
            v &= 0xffff_ffffL;
            value &= 0xffff_ffffL;
        }
        long mask = width == 4 ? 0xffff_ffffL : -1L;
        return switch (condition) {
            case WAIT_GEQ -> width == 4 ? (int) (v - value) >= 0 : v - value >= 0;
            case WAIT_EQ -> v == value;
            case WAIT_AND -> (v & value) != 0;
            default -> (~(v | value) & mask) != 0;
        };
    }

    /**
     * Queues checked work on the stream; on a capturing stream it becomes a batch memory-operation node
     * of the capture, as the driver records stream memory operations, whose parameters (those of
     * {@code params}, {@code count} operations) cuGraphBatchMemOpNodeGetParams answers.
     */
    private void enqueue(long hStream, EmulatedContext c, Runnable work, MemorySegment params, int count, String what) {
        EmulatedStream s = streams.resolve(hStream, c);
        if (s.capture != null) {
            EmulatedGraph.Node n = c.capture(s, work, what);
            MemorySegment copy = Arena.ofAuto().allocate((long) count * BatchMemOp.SIZE, 8);
            copy.copyFrom(params.reinterpret((long) count * BatchMemOp.SIZE));
            n.params = new Graphs.MemOpParams(c, count, 0, copy);
            return;
        }
        c.enqueue(s, null, work, what);
    }

    /** One operation as a CUstreamBatchMemOpParams, for a capture's node. */
    private static MemorySegment single(int operation, long addr, long value, int flags) {
        MemorySegment op = Arena.ofAuto().allocate(BatchMemOp.SIZE, 8);
        op.set(ValueLayout.JAVA_INT, BatchMemOp.OPERATION, operation);
        op.set(ValueLayout.JAVA_LONG, BatchMemOp.ADDRESS, addr);
        op.set(ValueLayout.JAVA_LONG, BatchMemOp.VALUE, value);
        op.set(ValueLayout.JAVA_INT, BatchMemOp.FLAGS, flags);
        return op;
    }

    private static Runnable run(EmulatedContext c, Op op) {
        return () -> op.run(c);
    }

    void writeValue(long hStream, long addr, long value, int width, int flags) {
        EmulatedContext c = contexts.active();
        String what = "cuStreamWriteValue" + 8 * width;
        Op op = write(c, addr, value, width, flags, what);
        enqueue(hStream, c, run(c, op), single(width == 4 ? BatchMemOp.WRITE_VALUE_32 : BatchMemOp.WRITE_VALUE_64, addr,
                width == 4 ? value & 0xffff_ffffL : value, flags), 1, what);
    }

    void waitValue(long hStream, long addr, long value, int width, int flags) {
        EmulatedContext c = contexts.active();
        String what = "cuStreamWaitValue" + 8 * width;
        Op op = await(c, addr, value, width, flags, what);
        enqueue(hStream, c, run(c, op), single(width == 4 ? BatchMemOp.WAIT_VALUE_32 : BatchMemOp.WAIT_VALUE_64, addr,
                width == 4 ? value & 0xffff_ffffL : value, flags), 1, what);
    }

    /** Every operation is checked before any is queued; barriers and flushes have nothing to order here beyond the stream. */
    void batch(long hStream, int count, MemorySegment paramArray, int flags) {
        EmulatedContext c = contexts.active();
        Runnable ops = batchOp(c, count, paramArray, flags);
        enqueue(hStream, c, ops, paramArray, count, "cuStreamBatchMemOp");
    }

    /**
     * A batch of operations (CUstreamBatchMemOpParams) checked in context {@code c} as cuStreamBatchMemOp
     * checks them, as one piece of work that runs them in order: a stream's batch, or a graph's batch
     * memory-operation node (Graphs), each time a launch reaches it.
     */
    Runnable batchOp(EmulatedContext c, int count, MemorySegment paramArray, int flags) {
        if (count <= 0 || count > BatchMemOp.MAX_BATCH || flags != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "count=" + count + " flags=" + flags);
        }
        MemorySegment params = HostSegments.sized(paramArray, (long) count * BatchMemOp.SIZE, "paramArray");
        List<Op> ops = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            long at = (long) i * BatchMemOp.SIZE;
            int operation = BatchMemOp.operation(params, at);
            String what = "paramArray[" + i + "]";
            long addr = BatchMemOp.address(params, at);
            long value = BatchMemOp.value(params, at);
            int opFlags = BatchMemOp.flags(params, at);
            switch (operation) {
                case BatchMemOp.WRITE_VALUE_32 -> ops.add(write(c, addr, value, 4, opFlags, what));
                case BatchMemOp.WRITE_VALUE_64 -> ops.add(write(c, addr, value, 8, opFlags, what));
                case BatchMemOp.WAIT_VALUE_32 -> ops.add(await(c, addr, value, 4, opFlags, what));
                case BatchMemOp.WAIT_VALUE_64 -> ops.add(await(c, addr, value, 8, opFlags, what));
                case BatchMemOp.FLUSH_REMOTE_WRITES, BatchMemOp.BARRIER -> ops.add(ctx -> VarHandle.fullFence());
                default -> throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + ".operation=" + operation);
            }
        }
        return () -> {
            for (Op op : ops) {
                op.run(c);
            }
        };
    }
}
