package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The backend's answers to the API table's {@code known} entries (device count, names, UUIDs, total
 * memory, every attribute of every device, ...), asked once per connection in a few batches and
 * replayed from then on: cudart's start asks well over a hundred of them, each a round trip otherwise.
 *
 * <p>The answers are the backend's own replies to the very requests a program would send (the
 * request body is the key), so a replayed answer equals a direct call's, errors included (an
 * attribute id the driver rejects is answered with its error). A request not asked in advance (an
 * ordinal or a value outside the entry's {@code known=} lists) goes to the backend as before.
 *
 * <p>Bounded whatever the backend says: devices beyond {@link #MAX_DEVICES} are not asked in
 * advance, each reply keeps only the outputs its entry declares, and bulk outputs only the bytes
 * asked for (at most {@link #MAX_BULK} each).
 */
final class KnownAnswers {
    /** A backend reporting more devices than this is asked about none of them in advance. */
    static final int MAX_DEVICES = 64;
    /** Requests per batch: requests (~36 bytes) and replies (~36 bytes, a few hundred with a name) fit any transport buffer. */
    static final int BATCH = 256;
    /** Bulk outputs of known entries are small strings and ids; a longer length is not asked in advance. */
    static final int MAX_BULK = 4096;

    /** No answers: every call goes to the backend. */
    static final KnownAnswers NONE = new KnownAnswers(Map.of());

    /** One reply: the CUresult, the scalar outputs as the reply body carries them, the bulk outputs' bytes. */
    record Answer(int result, byte[] outs, byte[][] data) {
    }

    private final Map<ByteBuffer, Answer> answers;

    private KnownAnswers(Map<ByteBuffer, Answer> answers) {
        this.answers = answers;
    }

    int size() {
        return answers.size();
    }

    /** Asks the backend every known request for {@code devices} devices, in batches; NONE when the connection fails. */
    static KnownAnswers fetch(CallChannel channel, int devices) {
        List<CallChannel.BatchCall> calls = new ArrayList<>();
        List<ByteBuffer> keys = new ArrayList<>();
        for (ApiFunction f : ApiTable.get().functions()) {
            if (f.known()) {
                requests(f, devices > MAX_DEVICES ? 0 : Math.max(devices, 0), calls, keys);
            }
        }
        Map<ByteBuffer, Answer> answers = new HashMap<>();
        for (int from = 0; from < calls.size(); from += BATCH) {
            List<CallChannel.BatchCall> batch = calls.subList(from, Math.min(calls.size(), from + BATCH));
            List<CallChannel.Reply> replies = channel.batch(batch);
            if (replies == null) {
                return NONE;
            }
            for (int i = 0; i < batch.size(); i++) {
                Answer a = answer(batch.get(i), replies.get(i));
                if (a != null) {
                    answers.put(keys.get(from + i), a);
                }
            }
        }
        return new KnownAnswers(Map.copyOf(answers));
    }

    /** Every request of {@code f} over its inputs' values: each dev 0..devices-1, each other input its known= list. */
    private static void requests(ApiFunction f, int devices, List<CallChannel.BatchCall> calls, List<ByteBuffer> keys) {
        List<ApiParam> params = f.params();
        List<List<Integer>> domains = new ArrayList<>();
        for (ApiParam p : params) {
            if (p.out()) {
                domains.add(List.of(0));
            } else if (p.type() == ParamType.DEV) {
                List<Integer> all = new ArrayList<>();
                for (int d = 0; d < devices; d++) {
                    all.add(d);
                }
                domains.add(all);
            } else {
                domains.add(p.known());
            }
        }
        int[] at = new int[params.size()];
        long[] values = new long[params.size()];
        while (true) {
            for (List<Integer> d : domains) {
                if (d.isEmpty()) {
                    return;
                }
            }
            ByteBuffer request = ByteBuffer.allocate(4 * params.size()).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < params.size(); i++) {
                values[i] = domains.get(i).get(at[i]);
                if (!params.get(i).out()) {
                    WireValues.putScalar(request, params.get(i).type(), domains.get(i).get(at[i]));
                }
            }
            request.flip();
            List<MemorySegment> out = new ArrayList<>(1);
            boolean asked = true;
            for (ApiParam p : params) {
                if (p.out() && p.type() == ParamType.BYTES) {
                    long n = p.length().evaluate(k -> values[k]);
                    if (n < 0 || n > MAX_BULK) {
                        asked = false;
                    } else if (n > 0) {
                        out.add(MemorySegment.ofArray(new byte[(int) n]));
                    }
                }
            }
            if (asked) {
                calls.add(new CallChannel.BatchCall(f, request, out));
                keys.add(key(f, request.duplicate()));
            }
            int i = params.size() - 1;
            while (i >= 0 && ++at[i] == domains.get(i).size()) {
                at[i] = 0;
                i--;
            }
            if (i < 0) {
                return;
            }
        }
    }

    /** What a reply says, kept to the outputs its entry declares; null when it is too short to be one. */
    private static Answer answer(CallChannel.BatchCall call, CallChannel.Reply reply) {
        if (reply.result() != CuResult.CUDA_SUCCESS) {
            return new Answer(reply.result(), new byte[0], new byte[0][]);
        }
        int outBytes = 0;
        for (ApiParam p : call.f().params()) {
            if (p.out() && p.type() != ParamType.BYTES) {
                outBytes += WireValues.outWireBytes(p.type());
            }
        }
        ByteBuffer body = reply.body();
        if (body.remaining() < outBytes) {
            return null;
        }
        byte[] outs = new byte[outBytes];
        body.get(outs);
        byte[][] data = new byte[call.outBytes().size()][];
        for (int i = 0; i < data.length; i++) {
            data[i] = call.outBytes().get(i).toArray(ValueLayout.JAVA_BYTE);
        }
        return new Answer(CuResult.CUDA_SUCCESS, outs, data);
    }

    private static ByteBuffer key(ApiFunction f, ByteBuffer request) {
        return ByteBuffer.allocate(4 + request.remaining()).putInt(f.index()).put(request).flip();
    }

    /** The recorded answer to {@code request} (positioned at its start) of {@code f}, or null when it was not asked. */
    Answer lookup(ApiFunction f, ByteBuffer request) {
        if (answers.isEmpty()) {
            return null;
        }
        return answers.get(key(f, request.duplicate()));
    }

    /**
     * Plays an answer back as if it had come over the wire: bulk outputs into {@code outBytes} (on
     * success, as DATA frames would have filled them) and a reply body positioned at the outputs.
     */
    static CallChannel.Reply replay(Answer a, List<MemorySegment> outBytes) {
        if (a.result() == CuResult.CUDA_SUCCESS) {
            for (int i = 0; i < a.data().length && i < outBytes.size(); i++) {
                MemorySegment.copy(MemorySegment.ofArray(a.data()[i]), 0, outBytes.get(i), 0,
                        Math.min(a.data()[i].length, outBytes.get(i).byteSize()));
            }
        }
        return new CallChannel.Reply(a.result(), ByteBuffer.wrap(a.outs()).order(ByteOrder.LITTLE_ENDIAN));
    }
}
