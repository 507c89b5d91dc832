package io.gpusockets.backend.isolation;

import io.gpusockets.backend.session.ShareBroker;
import io.gpusockets.backend.session.ShareRegistry;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.transport.vsock.DescriptorPassing;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
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
 * export's descriptor goes with its SHARE (SCM_RIGHTS) and is closed here, a VMM lookup's comes with its SHARED. IPC
 * memory of the session's address window ({@link #shareWindow}: the physical allocations that back a cuMemAlloc
 * allocation of an address-stable session, {@link ShareRegistry.Window}) goes the same way with every piece's
 * descriptor in the one SHARE (at most {@link ControlMessages#MAX_PIECES}; more is refused here), and a lookup of it
 * gets a new descriptor of each piece with its SHARED, which {@code IpcCalls} maps into the session and closes. The
 * front speaks for the worker's session and tenant: nothing here names them. Refused when the front is gone or does
 * not answer within {@link FrontTenantAccount#ANSWER_SECONDS}.
 */
final class WorkerShares implements ShareBroker {
    /** The front's answer: the message after its request id, and the descriptors that came with it. */
    private record Answer(ByteBuffer message, List<Integer> fds) {
        void close() {
            fds.forEach(DescriptorPassing::close);
            fds.clear();
        }
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
            ControlMessages.putWindow(m, null);
            return answerOfShare(ask(request, m, fd >= 0 ? new int[] {fd} : new int[0]));
        } finally {
            if (fd >= 0) {
                DescriptorPassing.close(fd); // the front holds its own copy now, or none
            }
        }
    }

    /**
     * Registers IPC memory of the session's address window: every piece's descriptor goes with the one SHARE (closed
     * here whatever the outcome; the front keeps its own copies). Refused (CUDA_ERROR_NOT_SUPPORTED) past
     * {@link ControlMessages#MAX_PIECES} pieces.
     */
    @Override
    public byte[] shareWindow(long size, ShareRegistry.Window window, long object) throws ShareRegistry.Refused {
        try {
            if (window.pieces().isEmpty() || window.pieces().size() > ControlMessages.MAX_PIECES) {
                throw new ShareRegistry.Refused(CuResult.CUDA_ERROR_NOT_SUPPORTED, "the allocation is backed by "
                        + window.pieces().size() + " physical allocations; IPC memory of an address window crosses"
                        + " between worker processes as at most " + ControlMessages.MAX_PIECES);
            }
            long request = nextRequest.getAndIncrement();
            ByteBuffer m = ControlMessages.start(ControlMessages.SHARE);
            m.putLong(request).put(ShareRegistry.KIND_MEMORY).putLong(size).putLong(object).putInt(0);
            int[] fds = ControlMessages.putWindow(m, window);
            return answerOfShare(ask(request, m, fds));
        } finally {
            ShareRegistry.closeAll(window);
        }
    }

    private static byte[] answerOfShare(Answer a) throws ShareRegistry.Refused {
        try {
            if (!a.fds().isEmpty()) {
                throw new ShareRegistry.Refused(CuResult.CUDA_ERROR_UNKNOWN, "the front answered a share with descriptors");
            }
            return done(a).bytes;
        } finally {
            a.close();
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
        Answer a = ask(request, m, new int[0]);
        try {
            Done d = done(a);
            ShareRegistry.Window window;
            try {
                window = ControlMessages.getWindow(a.message(), a.fds()); // takes the pieces' descriptors
            } catch (IOException | java.nio.BufferUnderflowException e) {
                throw new ShareRegistry.Refused(CuResult.CUDA_ERROR_UNKNOWN, "a broken answer from the backend's front: " + e);
            }
            if (window != null) {
                String problem = kind == ShareRegistry.KIND_MEMORY && d.bytes.length == 0
                        ? ShareRegistry.windowProblem(window, d.size) : "window memory for a lookup of kind " + kind;
                if (problem != null) {
                    ShareRegistry.closeAll(window);
                    throw new ShareRegistry.Refused(CuResult.CUDA_ERROR_UNKNOWN, "the front answered a lookup with " + problem);
                }
                return new ShareRegistry.Found(d.exporter, null, d.size, -1, window, null);
            }
            if ((kind == ShareRegistry.KIND_VMM) != (a.fds().size() == 1) || a.fds().size() > 1) {
                throw new ShareRegistry.Refused(CuResult.CUDA_ERROR_UNKNOWN, "the front answered a lookup of kind " + kind
                        + " with " + a.fds().size() + " descriptor(s)");
            }
            int fd = a.fds().isEmpty() ? -1 : a.fds().remove(0);
            return new ShareRegistry.Found(d.exporter, d.bytes.length == 0 ? null : d.bytes, d.size, fd);
        } finally {
            a.close(); // what was not handed on
        }
    }

    @Override
    public void restoreShare(byte kind, long id, byte[] secret, byte[] driverBytes, long object) throws ShareRegistry.Refused {
        if (secret.length != 16 || driverBytes.length > ControlMessages.MAX_SHARE_BYTES) {
            throw new ShareRegistry.Refused(CuResult.CUDA_ERROR_INVALID_VALUE, "a restored share's secret or handle of"
                    + " the wrong size");
        }
        long request = nextRequest.getAndIncrement();
        ByteBuffer m = ControlMessages.start(ControlMessages.RESHARE);
        m.putLong(request).put(kind).putLong(id).put(secret).putLong(object).putLong(0);
        m.putInt(driverBytes.length).put(driverBytes);
        ControlMessages.putWindow(m, null);
        answerOfShare(ask(request, m, new int[0]));
    }

    /** {@link #restoreShare} of window memory: every piece's descriptor goes with the one RESHARE, as with SHARE. */
    @Override
    public void restoreWindow(long id, byte[] secret, long size, ShareRegistry.Window window, long object)
            throws ShareRegistry.Refused {
        try {
            if (secret.length != 16 || window.pieces().isEmpty() || window.pieces().size() > ControlMessages.MAX_PIECES) {
                throw new ShareRegistry.Refused(CuResult.CUDA_ERROR_NOT_SUPPORTED, "a restored share's secret or its "
                        + window.pieces().size() + " physical allocations (at most " + ControlMessages.MAX_PIECES + ")");
            }
            long request = nextRequest.getAndIncrement();
            ByteBuffer m = ControlMessages.start(ControlMessages.RESHARE);
            m.putLong(request).put(ShareRegistry.KIND_MEMORY).putLong(id).put(secret).putLong(object).putLong(size).putInt(0);
            int[] fds = ControlMessages.putWindow(m, window);
            answerOfShare(ask(request, m, fds));
        } finally {
            ShareRegistry.closeAll(window);
        }
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

    private Answer ask(long request, ByteBuffer m, int[] fds) throws ShareRegistry.Refused {
        CompletableFuture<Answer> f = new CompletableFuture<>();
        waiting.put(request, f);
        boolean taken = false;
        try {
            if (frontGone) {
                throw gone();
            }
            try {
                if (fds.length > 0) {
                    DescriptorPassing.send(control, ControlMessages.finish(m), fds);
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
                    if (late != null) {
                        late.close();
                    }
                });
            }
        }
    }

    private static ShareRegistry.Refused gone() {
        return new ShareRegistry.Refused(CuResult.CUDA_ERROR_UNKNOWN, "the backend's front process is gone");
    }

    /** A SHARED message (the control reader's thread) with the descriptors that came with it (this broker's now). */
    void answered(ByteBuffer m, List<Integer> fds) throws IOException {
        Answer a = new Answer(m, new ArrayList<>(fds));
        long request;
        try {
            request = m.getLong();
        } catch (java.nio.BufferUnderflowException e) {
            a.close();
            throw new IOException("a SHARED message without its request", e);
        }
        CompletableFuture<Answer> f = waiting.remove(request);
        if (f == null || !f.complete(a)) {
            a.close();
        }
    }

    /** The control socket closed: every waiting and later share is refused. */
    void frontGone() {
        frontGone = true;
        waiting.values().forEach(f -> f.complete(null));
        waiting.clear();
    }
}
