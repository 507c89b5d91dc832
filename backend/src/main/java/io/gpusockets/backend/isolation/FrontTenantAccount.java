package io.gpusockets.backend.isolation;

import io.gpusockets.backend.tenant.TenantAccount;
import io.gpusockets.backend.tenant.TenantLimits;
import io.gpusockets.protocol.transport.Connection;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A worker's {@link TenantAccount}: every reserve, release and refusal is asked of, or told to, the front
 * process over the worker's control socket, where the tenant's real {@link io.gpusockets.backend.tenant.Tenant}
 * lives, so that one tenant's limits hold over all its workers. A reserve waits for the front's answer;
 * when the front is gone (or does not answer within {@link #ANSWER_SECONDS}) the reserve is refused.
 * Limits are those of the handshake until the front sends new ones (a config reload: {@link #setLimits}).
 */
final class FrontTenantAccount implements TenantAccount {
    static final long ANSWER_SECONDS = 30;

    private final String name;
    private volatile TenantLimits limits;
    private final Connection control;
    private final AtomicLong nextRequest = new AtomicLong(1);
    private final Map<Long, CompletableFuture<Long>> waiting = new ConcurrentHashMap<>();
    private volatile boolean frontGone;

    FrontTenantAccount(String name, TenantLimits limits, Connection control) {
        this.name = name;
        this.limits = limits;
        this.control = control;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public TenantLimits limits() {
        return limits;
    }

    /** The tenant's limits after a reload of the front's tenants file. */
    void setLimits(TenantLimits limits) {
        this.limits = limits;
    }

    @Override
    public boolean reserveMemory(long bytes) {
        return reserve(ControlMessages.KIND_MEMORY, bytes);
    }

    @Override
    public void releaseMemory(long bytes) {
        release(ControlMessages.KIND_MEMORY, bytes);
    }

    @Override
    public long memoryUsed() {
        long request = nextRequest.getAndIncrement();
        ByteBuffer b = ControlMessages.start(ControlMessages.USED);
        b.putLong(request);
        Long used = ask(request, b);
        return used == null ? 0 : used;
    }

    @Override
    public boolean reservePinned(long bytes) {
        return reserve(ControlMessages.KIND_PINNED, bytes);
    }

    @Override
    public void releasePinned(long bytes) {
        release(ControlMessages.KIND_PINNED, bytes);
    }

    @Override
    public void rejected(String what) {
        ByteBuffer b = ControlMessages.start(ControlMessages.REJECTED);
        ControlMessages.putString(b, what);
        tell(b);
    }

    /** An ANSWER from the front (the control reader's thread). */
    void answered(long request, long value) {
        CompletableFuture<Long> f = waiting.remove(request);
        if (f != null) {
            f.complete(value);
        }
    }

    /** The control socket closed: every waiting and later reserve is refused. */
    void frontGone() {
        frontGone = true;
        waiting.values().forEach(f -> f.complete(null));
        waiting.clear();
    }

    private boolean reserve(byte kind, long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("negative reserve " + bytes);
        }
        long request = nextRequest.getAndIncrement();
        ByteBuffer b = ControlMessages.start(ControlMessages.RESERVE);
        b.putLong(request).put(kind).putLong(bytes);
        Long granted = ask(request, b);
        return granted != null && granted != 0;
    }

    private void release(byte kind, long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("negative release " + bytes);
        }
        ByteBuffer b = ControlMessages.start(ControlMessages.RELEASE);
        b.put(kind).putLong(bytes);
        tell(b);
    }

    /** Sends a question and waits for its answer; null when there is none. */
    private Long ask(long request, ByteBuffer message) {
        CompletableFuture<Long> f = new CompletableFuture<>();
        waiting.put(request, f);
        if (frontGone || !tell(message)) {
            waiting.remove(request);
            return null;
        }
        try {
            return f.get(ANSWER_SECONDS, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } catch (ExecutionException | TimeoutException e) {
            return null;
        } finally {
            waiting.remove(request);
        }
    }

    /** Sends a message that wants no answer (STATS); false when the front is gone. */
    boolean send(ByteBuffer message) {
        return !frontGone && tell(message);
    }

    private boolean tell(ByteBuffer message) {
        try {
            control.write(ControlMessages.finish(message));
            return true;
        } catch (IOException e) {
            frontGone();
            return false;
        }
    }
}
