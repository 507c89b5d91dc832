package io.gpusockets.backend.isolation;

import io.gpusockets.backend.session.ShareBroker;
import io.gpusockets.backend.session.ShareRegistry;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.transport.vsock.DescriptorPassing;
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
 * A worker's {@link ShareBroker} (isolation mode {@code process}): exports and lookups go to the front's
 * {@link ShareRegistry} over the control socket (SHARE and LOOKUP, answered by SHARED, {@link ControlMessages}; RESHARE:
 * a group restore's exports under their old tokens, {@link #restoreShare}); a VMM
 * export's descriptor goes with its SHARE (SCM_RIGHTS) and is closed here, a VMM lookup's comes with its SHARED. The
 * front speaks for the worker's session and tenant: nothing here names them. Refused when the front is gone or does
 * not answer within {@link FrontTenantAccount#ANSWER_SECONDS}.
 */
final class WorkerShares implements ShareBroker {
    /** The front's answer: the message after its request id, and the descriptor that came with it (-1: none). */
    private record Answer(ByteBuffer message, int fd) {
    }

    private final Connection control;
    private final AtomicLong nextRequest = new AtomicLong(1);
    private final Map<Long, CompletableFuture<Answer>> waiting = new ConcurrentHashMap<>();
    private volatile boolean frontGone;

    WorkerShares(Connection control) {
        this.control = control;
    }

    @Override
    public byte[] share(byte kind, byte[] driverBytes, long size, int fd, long object) throws ShareRegistry.Refused {
        try {
            long request = nextRequest.getAndIncrement();
            ByteBuffer m = ControlMessages.start(ControlMessages.SHARE);
            m.putLong(request).put(kind).putLong(size).putLong(object);
            byte[] b = driverBytes == null ? new byte[0] : driverBytes;
            m.putInt(b.length).put(b);
            Answer a = ask(request, m, fd);
            return done(a).bytes;
        } finally {
            if (fd >= 0) {
                DescriptorPassing.close(fd); // the front holds its own copy now, or none
            }
        }
    }

    @Override
    public void withdraw(byte kind, long object) {
        if (frontGone) {
            return;
        }
        ByteBuffer m = ControlMessages.start(ControlMessages.UNSHARE);
        m.put(kind).putLong(object);
        try {
            control.write(ControlMessages.finish(m));
        } catch (IOException e) {
            frontGone();
        }
    }

    @Override
    public ShareRegistry.Found lookup(byte kind, byte[] token) throws ShareRegistry.Refused {
        long request = nextRequest.getAndIncrement();
        ByteBuffer m = ControlMessages.start(ControlMessages.LOOKUP);
        m.putLong(request).put(kind).put(token, 0, ShareRegistry.TOKEN_BYTES);
        Answer a = ask(request, m, -1);
        Done d;
        try {
            d = done(a);
        } catch (ShareRegistry.Refused | RuntimeException e) {
            if (a.fd() >= 0) {
                DescriptorPassing.close(a.fd());
            }
            throw e;
        }
        if ((kind == ShareRegistry.KIND_VMM) != (a.fd() >= 0)) {
            if (a.fd() >= 0) {
                DescriptorPassing.close(a.fd());
            }
            throw new ShareRegistry.Refused(CuResult.CUDA_ERROR_UNKNOWN, "the front answered a lookup of kind " + kind
                    + (a.fd() >= 0 ? " with" : " without") + " a descriptor");
        }
        return new ShareRegistry.Found(d.exporter, d.bytes.length == 0 ? null : d.bytes, d.size, a.fd());
    }

    @Override
    public void restoreShare(byte kind, long id, byte[] secret, byte[] driverBytes, long object) throws ShareRegistry.Refused {
        if (secret.length != 16 || driverBytes.length > ControlMessages.MAX_SHARE_BYTES) {
            throw new ShareRegistry.Refused(CuResult.CUDA_ERROR_INVALID_VALUE, "a restored share's secret or handle of"
                    + " the wrong size");
        }
        long request = nextRequest.getAndIncrement();
        ByteBuffer m = ControlMessages.start(ControlMessages.RESHARE);
        m.putLong(request).put(kind).putLong(id).put(secret).putLong(object);
        m.putInt(driverBytes.length).put(driverBytes);
        done(ask(request, m, -1));
    }

    @Override
    public boolean sameProcess() {
        return false;
    }

    private record Done(long exporter, long size, byte[] bytes) {
    }

    private static Done done(Answer a) throws ShareRegistry.Refused {
        ByteBuffer m = a.message();
        try {
            byte outcome = m.get();
            if (outcome != ControlMessages.OUTCOME_DONE) {
                int result = m.getInt();
                throw new ShareRegistry.Refused(result, ControlMessages.getString(m));
            }
            long exporter = m.getLong();
            long size = m.getLong();
            return new Done(exporter, size, ControlMessages.getShareBytes(m));
        } catch (IOException | java.nio.BufferUnderflowException e) {
            throw new ShareRegistry.Refused(CuResult.CUDA_ERROR_UNKNOWN, "a broken answer from the backend's front: " + e);
        }
    }

    private Answer ask(long request, ByteBuffer m, int fd) throws ShareRegistry.Refused {
        CompletableFuture<Answer> f = new CompletableFuture<>();
        waiting.put(request, f);
        boolean taken = false;
        try {
            if (frontGone) {
                throw gone();
            }
            try {
                if (fd >= 0) {
                    DescriptorPassing.send(control, ControlMessages.finish(m), fd);
                } else {
                    control.write(ControlMessages.finish(m));
                }
            } catch (IOException e) {
                throw gone();
            }
            Answer a = f.get(FrontTenantAccount.ANSWER_SECONDS, TimeUnit.SECONDS);
            taken = true;
            if (a == null) {
                throw gone();
            }
            return a;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw gone();
        } catch (ExecutionException | TimeoutException e) {
            throw new ShareRegistry.Refused(CuResult.CUDA_ERROR_UNKNOWN, "the backend's front did not answer a share");
        } finally {
            waiting.remove(request);
            if (!taken) { // an answer that comes after we stopped waiting: its descriptor is nobody's
                f.thenAccept(late -> {
                    if (late != null && late.fd() >= 0) {
                        DescriptorPassing.close(late.fd());
                    }
                });
            }
        }
    }

    private static ShareRegistry.Refused gone() {
        return new ShareRegistry.Refused(CuResult.CUDA_ERROR_UNKNOWN, "the backend's front process is gone");
    }

    /** A SHARED message (the control reader's thread) with the descriptor that came with it, or -1. */
    void answered(ByteBuffer m, int fd) throws IOException {
        long request = m.getLong();
        CompletableFuture<Answer> f = waiting.remove(request);
        if (f == null || !f.complete(new Answer(m, fd))) {
            if (fd >= 0) {
                DescriptorPassing.close(fd);
            }
        }
    }

    /** The control socket closed: every waiting and later share is refused. */
    void frontGone() {
        frontGone = true;
        waiting.values().forEach(f -> f.complete(null));
        waiting.clear();
    }
}
