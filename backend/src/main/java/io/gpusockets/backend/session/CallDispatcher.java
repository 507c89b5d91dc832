package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiInvoker;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.ContextRule;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import io.gpusockets.protocol.wire.WireValues;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;

/**
 * Serves calls on their lanes. Every entry of the API table goes through the generic path unless the
 * table marks it custom=backend: then its area's handler ({@link BackendHandlers}) runs, with the
 * inputs decoded and checked by the same generic code. Before the driver or a handler sees anything,
 * handles are translated through the session's table and device ranges are checked against its
 * allocations. What a call does to contexts follows its table rule ({@link ContextRule}).
 */
final class CallDispatcher {
    private static final System.Logger LOG = System.getLogger("gpusockets.dispatch");

    private final Session session;
    private final ApiTable table = ApiTable.get();
    /** By table index: the hand-written handler of a custom=backend entry, else null. */
    private final BackendHandlers.Handler[] handlers;

    /** By table index: whether the reader thread may run the call itself when its lane is idle. */
    private final boolean[] inline;

    /** By table index: the indexes of the handle parameters a call destroys and of the device pointers it frees, or null. */
    private final int[][] destroyed, freed;

    /**
     * By table index: the handles (and of them streams) a call may add to the session's table, as its
     * handle outputs say; room for them is reserved before the driver call. A context output adds
     * one only where the call creates a context (the others name the lane's contexts).
     */
    private final int[] newHandles, newStreams;

    /** The session's managed-memory calls. */
    ManagedCalls managed() {
        return managed;
    }

    /** Table indexes of the event calls IPC event shares follow ({@link IpcEventShare}; isolation context). */
    private final int eventCreate, eventRecord, eventRecordWithFlags, eventDestroy;
    /** CU_EVENT_INTERPROCESS. */
    static final int EVENT_INTERPROCESS = 4;

    /** The managed-memory calls, for what a checkpoint must know of them ({@link ManagedCalls#live}). */
    private final ManagedCalls managed;

    CallDispatcher(Session session) {
        this.session = session;
        ManagedCalls managed = new ManagedCalls(session);
        this.managed = managed;
        this.handlers = BackendHandlers.bind(new ContextCalls(session), new PointerCalls(session, managed), new CopyCalls(session),
                new LaunchCalls(session), new CallbackCalls(session), new PitchedCalls(session), new TextureCalls(session),
                new TensorMapCalls(session), new LibraryCalls(session), new PoolCalls(session), new VmmCalls(session),
                managed, new MemopsCalls(session), new GraphCalls(session), new LinkCalls(session),
                new IpcCalls(session));
        this.inline = new boolean[table.functions().size()];
        this.destroyed = new int[table.functions().size()][];
        this.freed = new int[table.functions().size()][];
        this.newHandles = new int[table.functions().size()];
        this.newStreams = new int[table.functions().size()];
        this.eventCreate = table.byName("cuEventCreate").index();
        this.eventRecord = table.byName("cuEventRecord").index();
        this.eventRecordWithFlags = table.byName("cuEventRecordWithFlags").index();
        this.eventDestroy = table.byName("cuEventDestroy").index();
        for (ApiFunction f : table.functions()) {
            inline[f.index()] = f.quick() && !f.local();
            int[] d = f.params().stream().filter(p -> !p.out() && p.type().isHandle() && p.destroy()).mapToInt(ApiParam::index).toArray();
            int[] fr = f.params().stream().filter(p -> !p.out() && p.type() == ParamType.DPTR && p.free()).mapToInt(ApiParam::index).toArray();
            if (d.length + fr.length > 0) {
                destroyed[f.index()] = d;
                freed[f.index()] = fr;
            }
            for (ApiParam p : f.params()) {
                if (p.out() && p.type().isHandle() && (p.type() != ParamType.CTX || f.context() == ContextRule.CREATE)) {
                    newHandles[f.index()]++;
                    newStreams[f.index()] += p.type() == ParamType.STREAM ? 1 : 0;
                }
            }
        }
    }

    /** Whether a call with this opcode is quick enough to run on the session's reader thread. */
    boolean runsInline(int opcode) {
        ApiFunction f = table.byOpcode(opcode);
        return f != null && inline[f.index()];
    }

    /** Runs one call frame of {@code lane} on the calling thread, whose state is {@code exec}. */
    void execute(Lane lane, Inbound in, ExecutionThread exec) throws IOException, InterruptedException {
        FrameHeader h = in.header();
        if (h.opcode() == Opcodes.DATA) {
            return; // data of a call that was refused before it read it: dropped
        }
        ApiFunction f = table.byOpcode(h.opcode());
        Call call = new Call(session, lane, h, in.body(), f, exec);
        call.window = in.window();
        // checkpoint recording (address-stable sessions only): the request as it came, the ids the call issues
        CheckpointRecorder rec = session.recorder();
        boolean watch = rec != null && f != null && rec.watches(f.index());
        ByteBuffer request = null;
        long contextId = 0;
        CheckpointRecorder.Issued issued = null;
        boolean ownIssued = false;
        if (watch && rec.records(f.index())) {
            request = in.body().duplicate();
            contextId = session.currentContextId(lane);
            issued = CheckpointRecorder.ISSUED.get();
            if (issued == null) {
                issued = new CheckpointRecorder.Issued(null);
                CheckpointRecorder.ISSUED.set(issued);
                ownIssued = true;
            }
            call.captureData();
        }
        int result = CuResult.CUDA_ERROR_UNKNOWN;
        try {
            if (f == null || f.local()) {
                session.peerFaults().log(Level.WARNING, () -> "unknown opcode " + Opcodes.name(h.opcode()));
                result = CuResult.CUDA_ERROR_NOT_SUPPORTED;
            } else if (!h.wantsReply() && !(f.async() && session.asyncGranted())) {
                throw new ProtocolException(f.name() + " sent without awaiting a reply but it is not asynchronous");
            } else if (f.guest()) {
                throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "served in the guest by the frontend, never here");
            } else {
                // The lane's current context becomes this thread's (a no-op when it already is), in use by
                // this call until it ends: no other lane destroys it meanwhile.
                call.exec.apply(session.driver(), call.useContext(lane.topContext()));
                result = f.customBackend() ? handwritten(call) : generic(call);
            }
        } catch (CallRejected e) {
            result = e.result;
            LOG.log(Level.DEBUG, () -> "session " + session.id() + ": " + call.name() + " refused: " + e.getMessage());
        } catch (BufferUnderflowException e) {
            throw new ProtocolException(call.name() + ": truncated request body");
        } catch (RuntimeException e) {
            // a fault of the backend, but one a peer may be able to repeat at will: rate-limited too
            session.peerFaults().log(Level.ERROR, () -> call.name() + " failed inside the backend", e);
            result = CuResult.CUDA_ERROR_UNKNOWN;
        } finally {
            call.close();
            if (ownIssued) {
                CheckpointRecorder.ISSUED.remove();
            }
        }
        if (watch && result == CuResult.CUDA_SUCCESS) {
            byte[] body = null;
            if (request != null) {
                body = new byte[request.remaining()];
                request.get(body);
            }
            rec.succeeded(f, body, call.capturedData(), ByteBuffer.wrap(call.outs.array(), 0, call.outs.position()),
                    issued == null ? new long[0] : issued.ids(), contextId, session::inWindow);
        }
        call.drainBulk();
        finish(lane, call, result);
    }

    private void finish(Lane lane, Call call, int result) throws IOException {
        FrameHeader h = call.header;
        ByteBuffer data = call.withReply;
        call.withReply = null;
        if (lane.replay) {
            lane.replayResult = result; // a restore's replay: nothing goes to any frontend
            return;
        }
        if (result != CuResult.CUDA_SUCCESS) {
            session.host().health().sawResult(result, session.id(), call.name());
        }
        if (!h.wantsReply()) {
            if (result != CuResult.CUDA_SUCCESS && lane.latchedError == CuResult.CUDA_SUCCESS) {
                lane.latchedError = result;
            }
            return;
        }
        boolean withOuts = result == CuResult.CUDA_SUCCESS;
        if (call.function != null && call.function.sync() && lane.latchedError != CuResult.CUDA_SUCCESS) {
            if (result == CuResult.CUDA_SUCCESS) {
                result = lane.latchedError;
                withOuts = false;
            }
            lane.latchedError = CuResult.CUDA_SUCCESS;
        }
        ByteBuffer head = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(result).flip();
        ByteBuffer outs = withOuts ? call.outs.flip() : ByteBuffer.allocate(0);
        if (data != null) {
            session.sendDataAndReply(data, h.opcode(), h.lane(), h.requestId(), head, outs);
        } else {
            session.send(h.opcode(), FrameHeader.FLAG_REPLY, h.lane(), h.requestId(), head, outs);
        }
    }

    /** A custom=backend entry: its handler, given the decoded inputs unless its request has a codec of its own. */
    private int handwritten(Call c) throws ProtocolException, CallRejected, InterruptedException, IOException {
        ApiFunction f = c.function;
        Object[] args = null;
        long[] values = null;
        if (f.decodedForHandler()) {
            args = new Object[f.params().size()];
            values = new long[args.length];
            decodeInputs(c, args, values, true);
        }
        c.reserveHandles(newHandles[f.index()], newStreams[f.index()]);
        if (values == null || destroyed[f.index()] == null) {
            return handlers[f.index()].handle(c, args);
        }
        try (SessionUses.Retirement retiring = retire(c, values)) {
            int r = handlers[f.index()].handle(c, args);
            if (r == CuResult.CUDA_SUCCESS) {
                retiring.commit();
            }
            return r;
        }
    }

    /**
     * Reads the inputs off the request in C order into {@code args} (the driver's arguments) and
     * {@code values} (their integer values), then checks and translates them: devices in range,
     * handles issued to this session (replaced by the driver's values), device ranges inside its
     * allocations. Bulk inputs (bytes, image) are announced: their length goes to {@code values}, and
     * to {@code args} when {@code forHandler} (a handler takes the data itself).
     */
    private void decodeInputs(Call c, Object[] args, long[] values, boolean forHandler)
            throws ProtocolException, CallRejected {
        ApiFunction f = c.function;
        List<ApiParam> params = f.params();
        int n = params.size();
        for (int i = 0; i < n; i++) {
            ApiParam p = params.get(i);
            if (p.out()) {
                continue;
            }
            switch (p.type()) {
                case NULL -> args[i] = MemorySegment.NULL;
                case ZERO -> args[i] = 0;
                case CSTR -> args[i] = c.readCString();
                case BYTES, IMAGE -> {
                    values[i] = c.readLong();
                    c.expectBulk(values[i]);
                    if (forHandler) {
                        args[i] = values[i];
                    }
                }
                // Pointers into the guest (cuModuleLoadDataEx's JIT options): the frontend serves such calls
                // itself and never sends them; a peer that does gets NOT_SUPPORTED.
                case PTR, HOSTPTR -> throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED,
                        p.name() + " is a pointer into the guest, which the backend does not take");
                default -> {
                    Object v = WireValues.getScalar(c.body, p.type());
                    args[i] = v;
                    values[i] = ((Number) v).longValue();
                }
            }
        }
        c.expectEnd();
        GlobalTranslation translation = session.translation();
        for (int i = 0; i < n; i++) {
            ApiParam p = params.get(i);
            if (p.out()) {
                continue;
            }
            ParamType t = p.type();
            if (t == ParamType.DEV) {
                c.device((int) values[i]);
            } else if (t.isHandle()) {
                args[i] = c.handle(t, values[i], p.nullable());
                if (t == ParamType.GRAPH && p.destroy()) {
                    SessionHandles.Entry owned = session.handles().get(values[i], ParamType.GRAPH);
                    if (owned != null && owned.owner() != 0) {
                        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE,
                                "a conditional node's body graph belongs to its node: it goes with the node");
                    }
                }
                if (t == ParamType.CTX && p.destroy() && session.shared() != null
                        && session.shared().isShared(((Number) args[i]).longValue())) {
                    throw new CallRejected(CuResult.CUDA_ERROR_NOT_PERMITTED,
                            "the tenant's shared context (isolation mode shared) is not the session's to destroy");
                }
            } else if (t == ParamType.DPTR) {
                if (translation != null && !p.free()) {
                    // a restored module global the driver placed elsewhere: the program's address becomes the real one
                    long real = translation.toReal(values[i]);
                    if (real != values[i]) {
                        values[i] = real;
                        args[i] = real;
                    }
                }
                if (p.free()) {
                    // freeing NULL is a no-op the driver answers with success (cudart's cudaFree(0) does it)
                    if (values[i] != 0 && session.memory().allocationAt(values[i]) == null) {
                        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "not an allocation of this session");
                    }
                } else if (p.range() != null) {
                    c.deviceRange(values[i], p.deviceSpan(k -> values[k]));
                } else {
                    c.deviceRange(values[i], 1);
                }
            }
        }
    }

    private int generic(Call c) throws ProtocolException, CallRejected, InterruptedException, IOException {
        ApiFunction f = c.function;
        List<ApiParam> params = f.params();
        int n = params.size();
        Object[] args = new Object[n];
        long[] values = new long[n];
        decodeInputs(c, args, values, false);
        c.reserveHandles(newHandles[f.index()], newStreams[f.index()]);

        // bulk inputs (module images) off their DATA frames
        for (int i = 0; i < n; i++) {
            ApiParam p = params.get(i);
            if (!p.out() && p.type().isBulk()) {
                args[i] = bulkInput(c, p, values);
            }
        }

        // room for outputs
        for (int i = 0; i < n; i++) {
            ApiParam p = params.get(i);
            if (!p.out()) {
                continue;
            }
            long size = p.type().outBytes();
            if (p.type() == ParamType.BYTES) {
                size = p.length().evaluate(k -> values[k]);
                if (size < 0 || size > session.limits().maxOutBytes()) {
                    throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "output size out of range: " + size);
                }
            }
            // a bytes output goes back as exactly its length (scratch rounds small ones up to 8)
            args[i] = p.type() == ParamType.BYTES ? c.scratch(size).asSlice(0, size) : c.scratch(size);
        }

        SessionQuota.Pending charge = session.quota().before(session.driver(), c, f, args, values); // tenant quota: reserved before the driver
        ContextRule rule = f.context();
        // What the call destroys or frees: no other call uses it from here on, nor while the driver destroys it.
        SessionUses.Retirement retiring = destroyed[f.index()] == null ? null : retire(c, values);
        if (rule == ContextRule.DESTROY) {
            session.beforeContextDestroy((Long) args[0]);
        }
        if (f.index() == eventDestroy) {
            session.sharing().eventGoing(((Number) args[0]).longValue()); // leaves its IPC event share first
        }
        int r = CuResult.CUDA_ERROR_UNKNOWN;
        try {
            r = ApiInvoker.invoke(session.driver(), f.index(), args);
            if (r == CuResult.CUDA_SUCCESS && retiring != null) {
                retiring.commit();
            }
        } finally {
            if (rule == ContextRule.DESTROY) {
                session.afterContextDestroy((Long) args[0]);
            }
            if (retiring != null) {
                retiring.close();   // revives them unless committed above
            }
            if (r == CuResult.CUDA_SUCCESS) {
                r = session.quota().succeeded(session.driver(), f, args, values, charge);
            } else {
                session.quota().failed(charge);
            }
        }
        if (rule == ContextRule.CREATE || rule == ContextRule.DESTROY) {
            // Both change this thread's driver stack behind ExecutionThread.apply.
            c.exec.invalidate();
        }
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        if (rule == ContextRule.CREATE) {
            c.lane.pushContext(((MemorySegment) args[outContext(f).index()]).get(ValueLayout.JAVA_LONG, 0));
        } else if (rule == ContextRule.DESTROY) {
            session.forgetContext((Long) args[0]);
        }
        int index = f.index();
        if (index == eventRecord || index == eventRecordWithFlags) {
            IpcEventShare.Member m = session.sharing().memberOf(((Number) args[0]).longValue());
            if (m != null && !capturing(c, ((Number) args[1]).longValue())) {
                m.share().recorded(m); // the other members' events follow this recording
            }
        } else if (index == eventCreate && (values[1] & EVENT_INTERPROCESS) != 0) {
            session.sharing().interprocessEvent(((MemorySegment) args[0]).get(ValueLayout.JAVA_LONG, 0));
        }
        afterSuccess(c, args, values);
        return r;
    }

    /** Whether {@code stream} (a driver value) is capturing: a recording there is a graph's node, not propagated. */
    private boolean capturing(Call c, long stream) {
        MemorySegment out = c.scratch(8);
        out.set(ValueLayout.JAVA_INT, 0, 0);
        return session.driver().cuStreamIsCapturing(stream, out) != CuResult.CUDA_SUCCESS
                || out.get(ValueLayout.JAVA_INT, 0) != 0;
    }

    /** Retires the handles and allocations of a destroying or freeing call ({@link Call#retire}). */
    private SessionUses.Retirement retire(Call c, long[] values) throws CallRejected, InterruptedException {
        int[] d = destroyed[c.function.index()], fr = freed[c.function.index()];
        long[] ids = new long[d.length], bases = new long[fr.length];
        for (int i = 0; i < d.length; i++) {
            ids[i] = values[d[i]];
        }
        for (int i = 0; i < fr.length; i++) {
            bases[i] = values[fr[i]];
        }
        return c.retire(ids, bases);
    }

    /** The context output of a context=create entry (the table checks there is one). */
    private static ApiParam outContext(ApiFunction f) {
        for (ApiParam p : f.params()) {
            if (p.out() && p.type() == ParamType.CTX) {
                return p;
            }
        }
        throw new IllegalStateException(f.name() + ": context=create without a ctx output");
    }

    /**
     * A bulk input off its DATA frames. A bytes input must have the length its expression gives (the
     * driver reads that many), or 0 for NULL where the table allows it.
     */
    private static MemorySegment bulkInput(Call c, ApiParam p, long[] values)
            throws ProtocolException, InterruptedException, CallRejected {
        long n = values[p.index()];
        if (p.type() == ParamType.BYTES) {
            if (n == 0 && p.nullable()) {
                return MemorySegment.NULL;
            }
            long expected = p.length().evaluate(k -> values[k]);
            if (n != expected) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, p.name() + ": " + n + " bytes, expected " + expected);
            }
        }
        MemorySegment data = c.receiveBulk(n);
        if (p.type() == ParamType.IMAGE) {
            checkImage(p, data);
        }
        return data;
    }

    /**
     * A module image goes to the driver as a bare pointer, and the driver reads it as far as its content says
     * (PTX to its NUL, a fatbin or cubin as its header gives): one whose end, so read, is not within the bytes
     * received would be read past its buffer. Refused as the driver refuses a bad image.
     */
    private static void checkImage(ApiParam p, MemorySegment data) throws CallRejected {
        // very short native segments count as bare pointers to ModuleImageKind: look at a heap copy of those
        MemorySegment view = data.byteSize() < 64 ? MemorySegment.ofArray(data.toArray(ValueLayout.JAVA_BYTE)) : data;
        if (data.byteSize() == 0 || io.gpusockets.protocol.calls.ModuleImageKind.length(view) < 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_IMAGE, p.name() + ": an image of " + data.byteSize()
                    + " bytes whose content ends past them (" + io.gpusockets.protocol.calls.ModuleImageKind.of(view) + ")");
        }
    }

    /**
     * Records what the call created or destroyed and writes its outputs. A device address goes back as the program
     * knows it ({@link GlobalTranslation}): a module global the driver placed elsewhere after a restore, at its
     * recorded address.
     */
    private void afterSuccess(Call c, Object[] args, long[] values) throws IOException, CallRejected {
        ApiFunction f = c.function;
        List<ApiParam> params = f.params();
        long context = -1;
        for (int i = 0; i < params.size(); i++) {
            ApiParam p = params.get(i);
            if (p.out() && p.type() != ParamType.BYTES) {
                MemorySegment s = (MemorySegment) args[i];
                values[i] = p.type().outBytes() == 4 ? s.get(ValueLayout.JAVA_INT, 0) : s.get(ValueLayout.JAVA_LONG, 0);
            }
        }
        for (int i = 0; i < params.size(); i++) {
            ApiParam p = params.get(i);
            ParamType t = p.type();
            if (p.out() && t.isHandle()) {
                long owner = p.owner() >= 0 ? values[p.owner()] : 0;
                // Graphs and their nodes belong to no context: cuCtxDestroy leaves them (SessionCleanup destroys them).
                // Libraries and their kernels are context-independent too (the driver loads them into every
                // context, and cudart keeps them across a primary context's reset), and so are link states
                // (their image is a cubin; SessionCleanup destroys them).
                boolean contextless = t == ParamType.CTX || t == ParamType.GRAPH || t == ParamType.GNODE
                        || t == ParamType.LIB || t == ParamType.KERNEL || t == ParamType.LINK;
                if (!contextless && context < 0) {
                    context = session.currentContextId(c.lane);
                }
                values[i] = session.handles().intern(t, values[i], owner, contextless ? 0 : context);
            } else if (p.out() && t == ParamType.DPTR && p.registersRange()) {
                boolean alloc = p.alloc() != null;
                long size = p.rangeSize().evaluate(k -> values[k]);
                long owner;
                if (alloc) {
                    if (context < 0) {
                        context = session.currentContextId(c.lane);
                    }
                    owner = context;
                } else {
                    owner = moduleParamValue(f, values);
                }
                GlobalTranslation translation = session.translation();
                if (!alloc && translation != null) {
                    long program = translation.placed(values[i], size);
                    ((MemorySegment) args[i]).set(ValueLayout.JAVA_LONG, 0, program); // the reply's
                }
                session.memory().add(new SessionMemory.Range(values[i], size, owner, alloc));
            } else if (p.out() && t == ParamType.DPTR && session.translation() != null) {
                // cuMemGetAddressRange's base
                ((MemorySegment) args[i]).set(ValueLayout.JAVA_LONG, 0, session.toProgram(values[i]));
            } else if (!p.out() && t == ParamType.DPTR && p.free()) {
                session.memory().remove(values[i]);
            } else if (!p.out() && t.isHandle() && p.destroy()) {
                session.dropHandle(values[i]);
            }
        }
        for (int i = 0; i < params.size(); i++) {
            ApiParam p = params.get(i);
            if (!p.out()) {
                continue;
            }
            if (p.type() == ParamType.BYTES) {
                c.sendData((MemorySegment) args[i]);
            } else if (p.type().isHandle()) {
                c.outs.putLong(values[i]);
            } else {
                WireValues.putOut(c.outs, p.type(), (MemorySegment) args[i]);
            }
        }
    }

    /** The module's (or library's) id a global= range belongs to: it goes when they are unloaded. */
    private static long moduleParamValue(ApiFunction f, long[] values) {
        for (int i = 0; i < f.params().size(); i++) {
            ApiParam p = f.params().get(i);
            if (!p.out() && (p.type() == ParamType.MOD || p.type() == ParamType.LIB)) {
                return values[i];
            }
        }
        return 0;
    }
}
