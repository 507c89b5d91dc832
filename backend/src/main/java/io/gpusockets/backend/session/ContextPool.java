package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * Contexts made ahead of need, so that a session's first primary-context retain does not wait for the
 * driver to make a context. Measured on the H200 it helps the first session after the backend starts
 * (device_query 341 against 394 ms) and no later one, so it is off unless asked for. Each context
 * is handed to one session, which owns it from then on and destroys it when it ends, as it would one
 * it made itself: nothing is carried from one tenant to the next. Contexts are made with flags 0, what
 * a primary retain uses unless cuDevicePrimaryCtxSetFlags said otherwise, on one background thread,
 * which makes a new one whenever one is taken.
 */
public final class ContextPool implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");

    private final CudaDriver driver;
    private final int perDevice;
    private final List<ArrayDeque<Long>> ready = new ArrayList<>();
    private final ExecutorService maker = Executors.newSingleThreadExecutor(
            r -> Thread.ofPlatform().daemon().name("gpusockets-context-pool").unstarted(r));
    private boolean closed;
    private boolean failed;

    /** Keeps {@code perDevice} contexts ready on each of the host's devices. */
    public ContextPool(DriverHost host, int perDevice) {
        this.driver = host.driver();
        this.perDevice = perDevice;
        for (int dev = 0; dev < host.deviceCount(); dev++) {
            ready.add(new ArrayDeque<>());
            for (int i = 0; i < perDevice; i++) {
                refill(dev);
            }
        }
    }

    /** A ready context of device {@code dev} (flags 0, current nowhere), now the caller's; 0 when none is ready. */
    synchronized long take(int dev) {
        if (dev < 0 || dev >= ready.size()) {
            return 0;
        }
        Long ctx = ready.get(dev).poll();
        if (ctx == null) {
            return 0;
        }
        refill(dev);
        return ctx;
    }

    /** Contexts ready now, over all devices. */
    public synchronized int readyCount() {
        return ready.stream().mapToInt(ArrayDeque::size).sum();
    }

    private void refill(int dev) {
        if (!closed) {
            maker.execute(() -> make(dev));
        }
    }

    private void make(int dev) {
        synchronized (this) {
            if (closed || failed || ready.get(dev).size() >= perDevice) {
                return;
            }
        }
        long ctx;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment cell = a.allocate(ValueLayout.ADDRESS);
            int r = driver.cuCtxCreate(cell, MemorySegment.NULL, 0, dev);
            if (r != CuResult.CUDA_SUCCESS) {
                synchronized (this) {
                    failed = true; // sessions make their own, as without a pool
                }
                LOG.log(Level.WARNING, "context pool: cuCtxCreate on device " + dev + " failed: " + CuResult.name(r)
                        + "; sessions make their own contexts");
                return;
            }
            ctx = cell.get(ValueLayout.JAVA_LONG, 0);
            driver.cuCtxPopCurrent(cell); // current nowhere: the session's lane makes it current
        }
        synchronized (this) {
            if (!closed) {
                ready.get(dev).add(ctx);
                return;
            }
        }
        driver.cuCtxDestroy(ctx);
    }

    /** Destroys the contexts not handed out. */
    @Override
    public void close() {
        synchronized (this) {
            closed = true;
        }
        maker.shutdown();
        try {
            maker.awaitTermination(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        List<Long> left = new ArrayList<>();
        synchronized (this) {
            ready.forEach(left::addAll);
            ready.forEach(ArrayDeque::clear);
        }
        for (long ctx : left) {
            driver.cuCtxDestroy(ctx);
            ExecutionThread.contextDestroyed();
        }
    }
}
