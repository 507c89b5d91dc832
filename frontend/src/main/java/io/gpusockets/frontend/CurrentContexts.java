package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ContextRule;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Each thread's current context as far as this connection knows it, so that cuCtxGetCurrent, which
 * cudart calls before nearly every runtime call, needs no round trip.
 *
 * <p>A lane's current context changes only through the calls of its own thread, each with a context
 * rule in the API table: {@code get}, {@code set} (to a context), {@code push} and {@code create}
 * make it known (the caller records it), {@code pop}, {@code destroy}, {@code release} and
 * {@code reset} make it unknown, whether they succeed or not, and so does a failed set or push.
 * Every call with a rule other than {@code get} forgets first, in {@link CallChannel}, whichever
 * path it takes. A context can also leave a lane from another thread: the backend drops a
 * destroyed context (cuCtxDestroy, a primary context's last release or its reset) from every lane
 * of the session. Those calls bump a generation counter once they have returned, and an answer
 * recorded under an older generation is not used. The generation a recorded answer carries is read
 * before its call was sent, so a get racing with another thread's destroy is asked again.
 */
final class CurrentContexts {
    private static final long UNKNOWN = -1;

    private final AtomicLong generation = new AtomicLong();
    private final ThreadLocal<long[]> known = ThreadLocal.withInitial(() -> new long[] {UNKNOWN, 0});

    /** The generation to record an answer under: read before the call that learns it is sent. */
    long generation() {
        return generation.get();
    }

    /** This thread's current context (a handle, 0 for none), or -1 when it must be asked. */
    long current() {
        long[] k = known.get();
        return k[0] == generation.get() ? k[1] : UNKNOWN;
    }

    /** This thread's current context is {@code ctx}, as learnt by a call sent under {@code generation}. */
    void learnt(long ctx, long generation) {
        long[] k = known.get();
        k[0] = generation;
        k[1] = ctx;
    }

    /** Before a call goes to the backend: one that changes this thread's contexts makes the answer unknown. */
    void beforeCall(ApiFunction f) {
        if (f.context() != ContextRule.NONE && f.context() != ContextRule.GET) {
            known.get()[0] = UNKNOWN;
        }
    }

    /** After its reply: a call that may have dropped a context from other threads' lanes outdates their answers. */
    void afterCall(ApiFunction f) {
        switch (f.context()) {
            case DESTROY, RELEASE, RESET -> generation.incrementAndGet();
            default -> {
            }
        }
    }
}
