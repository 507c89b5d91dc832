package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.transport.SharedWindow;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import io.gpusockets.protocol.api.ParamType;
import java.io.EOFException;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One frontend connection after its handshake: reads frames, hands each to its lane, and when the
 * connection ends, however it ends, stops its lanes, destroys every context the session made (which
 * frees its memory, modules, streams and events on the device) and logs what it released. The parts
 * it owns do the rest: {@link BodyBudget} and {@link DataBufferPool} bound what the reader holds,
 * {@link Lanes} the lanes, {@link SessionWindow} the shared window, {@link SessionCleanup} the release.
 *
 * <p>A resumable session ({@link #resumable}, granted at the handshake) does not end with its connection
 * unless it ended on purpose (GOODBYE, a protocol violation, the idle timeout, the backend's shutdown):
 * its reader waits, detached, up to the grace period for a resuming connection ({@link #attach}), and goes
 * on reading that. Its lanes, their queues and latched errors, and every object it holds stay as they were;
 * replies sent meanwhile are kept by {@link ResumeLog} and sent again after RESUMED. A ring's shared window
 * belongs to its connection: at a resume the old one is retired ({@link SessionWindow#retire}) and the new ring's
 * window, where the frontend asks for it, is the session's from then on ({@link #attach}).
 *
 * <p>With address-stable memory ({@link #stableFor}: the tenant's {@code stable-addresses}, else the backend's
 * {@code --stable-addresses}), the session records what a checkpoint needs ({@link CheckpointRecorder})
 * and can be checkpointed ({@link #checkpoint}: drained, written, then resumed or frozen); a session restored
 * from an image ({@link SessionRestore}) starts detached, without a connection, and waits for its frontend.
 */
public final class Session {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");

    private final long id;
    /** The connection now; replaced when the session resumes on a new one (only by {@link #serve}'s thread). */
    private volatile FrameChannel channel;
    /** Null while attached; set while the session waits for its frontend to resume. */
    private volatile String detachedBecause;
    /** Resume ({@link Handshake#FEATURE_RESUME}): the token, identity, grace and kept replies; null when not granted. */
    private volatile Resume resume;
    /** The connection replies go out on now, or null while detached (one object, not one per reply). */
    private final java.util.function.Supplier<FrameChannel> liveChannel = () -> detachedBecause == null ? channel : null;
    /** Connections offered by resuming frontends ({@link #attach}), with their shared windows, taken by the reader. */
    private final java.util.concurrent.LinkedBlockingQueue<Offer> offered = new java.util.concurrent.LinkedBlockingQueue<>();

    /** A resuming connection and the shared window it brings (null for none). */
    private record Offer(FrameChannel channel, SharedWindow window) {
        void close() {
            channel.close();
            if (window != null) {
                window.release();
            }
        }
    }
    private final DriverHost host;
    private final BackendSettings settings;
    private final SessionLimits limits;
    /** {@link BackendSettings#pipelinedToLane}, read per frame. */
    private final boolean pipelinedToLane;
    /** The peer as its transport describes it; the new connection's once the session resumed. */
    private volatile String peer;
    private final boolean asyncGranted;
    private final SessionHandles handles;
    private final SessionMemory memory = new SessionMemory();
    /** The restored module globals that moved, or null ({@link #translation()}). */
    private volatile GlobalTranslation translation;
    /** Who uses which handle, range and context now, so that destroys wait for them. */
    private final SessionUses uses = new SessionUses(this);
    private final SessionPools pools = new SessionPools();
    private final SessionVmm vmm = new SessionVmm();
    /** What it opened of other sessions' shares (issue 24 item 1). */
    private final SessionShares sharing = new SessionShares();
    /** Its way to the backend's share registry; none until {@link #shares(ShareBroker)}. */
    private volatile ShareBroker shares = ShareBroker.NONE;
    private final SessionWaits waits = new SessionWaits();
    private final PrimaryContexts primary;
    private final HostCallbackGates callbackGates = new HostCallbackGates();
    private final CaptureGuard captureGuard = new CaptureGuard();
    private final CallDispatcher dispatcher;
    private final Lanes lanes;
    private final DataBufferPool dataBuffers;
    private final BodyBudget bodyBudget;
    private final AtomicBoolean ended = new AtomicBoolean();
    /** Host buffers device-to-host copies stage through (pinned where the driver allows). */
    private final StagingPool staging;
    /** The memory shared with the frontend on the current connection, or null; replaced at a resume (reader only). */
    private volatile SessionWindow window;
    /** Every window the session had that is not unmapped yet: the current one and retired ones frames still use. */
    private final java.util.List<SessionWindow> windows = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** Bytes carried by windows no longer in {@link #windows}: all of them, and those of windows attached at resumes. */
    private final java.util.concurrent.atomic.LongAdder pastWindowBytes = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder pastResumedWindowBytes = new java.util.concurrent.atomic.LongAdder();
    private final SessionCleanup cleanup;
    /** Address-stable memory ({@link StableAddresses}), or null when off. */
    private final StableAddresses stable;
    /** Without address-stable memory: the driver that places managed memory in the guest's range, else null. */
    private final ManagedPlacement placement;
    /** The guest's managed range {base, size} ({@link #managedRange}), or null before it is announced. */
    private long[] managedRange;
    /** Graph memory nodes in the address window ({@link StableGraphMemory}, the driver over {@link #stable}), or null when off. */
    private final StableGraphMemory graphMemory;
    /** See {@link #driver()}. */
    private final io.gpusockets.protocol.api.CudaDriver driver;
    private final ContextPool contextPool;
    /** Tells whether the current connection's peer hung up; replaced with the connection. */
    private volatile io.gpusockets.backend.isolation.PeerHangup hangup;
    /** Whose limits this session's holdings count against. */
    private final io.gpusockets.backend.tenant.TenantAccount tenant;
    /** What this session charged to its tenant, and the charge rules. */
    private final SessionQuota quota;
    /** The session's side of the device-time scheduler, or null (set before {@link #serve}). */
    private volatile LaunchShares launchShares;
    /** The hasher of this session's memory ({@link #chunkHasher}), or null until one is asked for; under hasherLock. */
    private ChunkHasher hasher;
    private final Object hasherLock = new Object();
    private volatile String failure;
    private volatile boolean releasePending;
    /** Host memory the session holds in buffers: its threads' scratch and staging, pooled DATA and staging buffers. */
    private final java.util.concurrent.atomic.AtomicLong hostBuffers = new java.util.concurrent.atomic.AtomicLong();
    /** Native bytes the session's calls hold now (large scratch and bulk inputs), for tests and status. */
    private final java.util.concurrent.atomic.AtomicLong callNativeBytes = new java.util.concurrent.atomic.AtomicLong();
    /** {@link System#nanoTime()} when the reader last received a frame. */
    private volatile long lastFrameNanos = System.nanoTime();
    /** Whether the reader is running a call itself (inline) now. */
    private volatile boolean readerInCall;
    /** What this session's peer did wrong, logged rate-limited ({@link RateLimitedLog}). */
    private final RateLimitedLog peerFaults;
    private final SessionStats stats = new SessionStats();
    /** Isolation mode shared: where the tenant's one context per device comes from, else null. */
    private volatile SharedContexts shared;
    /** Checkpoint records ({@link CheckpointRecorder}): kept only with address-stable memory, else null. */
    private final CheckpointRecorder recorder;
    /**
     * A checkpoint's drain ({@link #checkpoint}): while {@link #holding}, new call frames (and every later frame of
     * their lanes) wait in {@link #held}, neither dispatched nor marked received; once {@link #frozen} (checkpoint
     * with stop) every frame read is dropped. Guarded by this lock, as is the reader's dispatch of each frame.
     */
    private final Object drainLock = new Object();
    private boolean holding;
    private boolean frozen;
    private final java.util.ArrayDeque<Inbound> held = new java.util.ArrayDeque<>();
    private final java.util.Set<Integer> heldLanes = new java.util.HashSet<>();
    /** One checkpoint at a time. */
    private final java.util.concurrent.locks.ReentrantLock checkpointing = new java.util.concurrent.locks.ReentrantLock();

    /**
     * {@code window}: the memory shared with the frontend, if the handshake agreed to use it, else null;
     * {@code contextPool}: where the session's primary contexts come from when it has one ready, or null.
     */
    public Session(long id, FrameChannel channel, DriverHost host, BackendSettings settings, String peer, boolean asyncGranted,
                   SharedWindow window, ContextPool contextPool, io.gpusockets.backend.tenant.TenantAccount tenant) {
        this(id, channel, host, settings, peer, asyncGranted, window, contextPool, tenant, stableFor(settings, tenant));
    }

    /**
     * Whether a new session of {@code tenant} gets address-stable memory: the tenant's {@code stable-addresses},
     * else the backend's ({@code --stable-addresses}, else {@value StableAddresses#PROPERTY}).
     */
    public static boolean stableFor(BackendSettings settings, io.gpusockets.backend.tenant.TenantAccount tenant) {
        if (tenant == null) {
            throw new IllegalArgumentException("tenant=null");
        }
        return tenant.limits().stableAddresses().resolve(settings.stableAddresses());
    }

    private Session(long id, FrameChannel channel, DriverHost host, BackendSettings settings, String peer, boolean asyncGranted,
                    SharedWindow window, ContextPool contextPool, io.gpusockets.backend.tenant.TenantAccount tenant,
                    boolean stableAddresses) {
        if (tenant == null) {
            throw new IllegalArgumentException("tenant=null");
        }
        this.tenant = tenant;
        // first: the call handlers made below take the session's driver
        this.stable = stableAddresses ? new StableAddresses(host.driver(), id) : null;
        this.graphMemory = stable == null ? null : new StableGraphMemory(stable, this::graphMemoryReleased);
        this.placement = stable == null ? new ManagedPlacement(host.driver(), id) : null;
        this.driver = graphMemory != null ? graphMemory : placement;
        this.quota = new SessionQuota(id, tenant, host.facts());
        this.recorder = stable != null ? new CheckpointRecorder(CheckpointRecorder.configuredBound()) : null;
        memory.onRemoved(r -> {
            quota.rangeRemoved(r);
            sharing.memoryGone(r.base());
            if (sharing.unexported(ShareRegistry.KIND_MEMORY, r.base())) {
                shares.withdraw(ShareRegistry.KIND_MEMORY, r.base()); // no token keeps memory alive its tenant no longer pays for
            }
            GlobalTranslation t = translation;
            if (recorder != null) {
                recorder.rangeGone(t == null ? r.base() : t.toProgram(r.base())); // recorded as the program knows it
            }
            if (t != null) {
                t.gone(r.base());
            }
        });
        this.contextPool = contextPool;
        this.id = id;
        this.channel = channel;
        this.host = host;
        this.settings = settings;
        this.limits = settings.limits();
        this.pipelinedToLane = settings.pipelinedToLane();
        this.peer = peer;
        this.asyncGranted = asyncGranted;
        this.handles = new SessionHandles(id);
        handles.tracked(recorder != null);
        this.peerFaults = new RateLimitedLog(LOG, "session " + id, "peer faults");
        this.primary = new PrimaryContexts(this);
        this.dispatcher = new CallDispatcher(this);
        this.lanes = new Lanes(this, Math.min(limits.maxLanes(), tenant.limits().lanes()));
        this.dataBuffers = new DataBufferPool(limits.chunkBytes(), hostBuffers);
        this.hangup = channel == null ? null : new io.gpusockets.backend.isolation.PeerHangup(channel.connection());
        this.bodyBudget = new BodyBudget(limits.bodyBudget(), dataBuffers, () -> {
            io.gpusockets.backend.isolation.PeerHangup hu = hangup;
            return ended.get() || hu != null && hu.gone();
        });
        this.staging = new StagingPool(driver, id, outChunkBytes(limits.chunkBytes(),
                channel == null ? FrameChannel.DEFAULT_MAX_BODY : channel.maxBody()), hostBuffers);
        this.cleanup = new SessionCleanup(id, driver, handles, memory, staging, null, pools, vmm, waits);
        cleanup.windows(windows);
        cleanup.sharing(sharing, host.driver());
        cleanup.onHandleDropped(e -> {
            quota.handleDropped(e);
            if (e.kind() == ParamType.EVENT) {
                sharing.eventGone(e.real());
                if (sharing.unexported(ShareRegistry.KIND_EVENT, e.real())) {
                    shares.withdraw(ShareRegistry.KIND_EVENT, e.real());
                }
            }
            if (recorder != null) {
                recorder.handleGone(e.id());
            }
            if (e.kind() == ParamType.ARRAY || e.kind() == ParamType.MIPMAP) {
                for (long freed : vmm.resourceGone(e.real())) {
                    quota.vmmFreed(freed); // its last holder was this array's binding (cuMemMapArrayAsync)
                    vmmGone(freed);
                }
            }
        });
        if (window != null && channel != null) {
            useWindow(window, channel, false);
        }
    }

    /**
     * Makes {@code shared}, the window of {@code ch}, the session's window: frames read on {@code ch} refer to it.
     * A wait for one of its slots ends when the session ends, or, for a session that does not resume, when the
     * frontend is gone; a resumable session's retires it instead when the connection is lost.
     */
    private void useWindow(SharedWindow shared, FrameChannel ch, boolean resumed) {
        SessionWindow w = new SessionWindow(id, shared, driver,
                () -> ended.get() || resume == null && ch.connection().peerClosed(), ch, resumed);
        w.pinQuota(quota);
        windows.add(w);
        window = w;
    }

    /** Retires the current window (its connection is lost) and forgets the windows already unmapped. */
    private void retireWindow() {
        SessionWindow w = window;
        window = null;
        if (w != null) {
            w.retire();
        }
        for (SessionWindow old : windows) {
            if (old.released()) {
                windows.remove(old);
                pastWindowBytes.add(old.bytes());
                if (old.resumed()) {
                    pastResumedWindowBytes.add(old.bytes());
                }
            }
        }
    }

    /**
     * A session restored from a checkpoint ({@link SessionRestore}): no connection yet; it waits, detached, for its
     * frontend to resume once {@link #resumable} and {@link #serve} are called. It has address-stable memory whatever
     * its tenant and the backend say for new sessions: its image's allocations lie in windows.
     */
    static Session detached(long id, DriverHost host, BackendSettings settings, ContextPool contextPool,
                            io.gpusockets.backend.tenant.TenantAccount tenant, int features) {
        boolean async = settings.limits().asyncAllowed() && (features & Handshake.FEATURE_ASYNC) != 0;
        Session s = new Session(id, null, host, settings, "restored from a checkpoint", async, null, contextPool, tenant, true);
        s.detachedBecause = "restored from a checkpoint"; // from the start, not only once serve waits: status says so at once
        return s;
    }

    /** A graph memory node's allocation went back with its graph ({@link StableGraphMemory}): its range and charge go. */
    private void graphMemoryReleased(long base, long size) {
        memory.remove(base); // gone already when the program freed it outside its graph
        quota.releaseGraphMemory(size);
    }

    /**
     * The guest announced its managed range {@code [base, base + size)} ({@link io.gpusockets.protocol.api.ManagedRange},
     * checked by the handshake; set before the session's first call): without address-stable memory, managed allocations
     * lie in it ({@link ManagedPlacement}); with it, the session's windows do ({@link StableAddresses#confine}), so all
     * of its device memory. Null, or why not (another range was set before: a session has one).
     */
    public synchronized String managedRange(long base, long size) {
        if (managedRange != null) {
            return managedRange[0] == base && managedRange[1] == size ? null : String.format(
                    "the session's managed range is 0x%x+0x%x already", managedRange[0], managedRange[1]);
        }
        managedRange = new long[] {base, size};
        if (placement != null) {
            placement.place(base, size);
        } else {
            // one mechanism: the session's windows (all of its device memory, managed memory included) lie in the range;
            // a window whose place there is taken goes to its slot as before (StableAddresses.openWindow)
            stable.confine(base, size, false);
        }
        return null;
    }

    /** The guest's managed range {base, size}, or null before one was announced. */
    synchronized long[] managedRange() {
        return managedRange == null ? null : managedRange.clone();
    }

    /**
     * What places a managed allocation ({@link ManagedCalls}): the session's driver (with address-stable memory: its
     * windows), or without it, once a range was announced, the windows confined to the range ({@link ManagedPlacement}).
     */
    io.gpusockets.protocol.api.CudaDriver managedDriver() {
        StableAddresses p = placement == null ? null : placement.placed();
        return p != null ? p : driver;
    }

    /** Why the last placement in the managed range failed (the windows' {@link StableAddresses#placeFailure}), or null. */
    String managedPlaceFailure() {
        StableAddresses p = stable != null ? stable : placement.placed();
        return p == null ? null : p.placeFailure();
    }

    /** Whether this session has address-stable memory ({@link StableAddresses}). */
    public boolean stableAddresses() {
        return stable != null;
    }

    /** The checkpoint records, or null (address-stable memory off). */
    CheckpointRecorder recorder() {
        return recorder;
    }

    /** Whether a live allocation of the session's address window starts at {@code base}. */
    boolean inWindow(long base) {
        return stable != null && stable.holds(base);
    }

    /** Address-stable memory, or null when off. */
    StableAddresses stable() {
        return stable;
    }

    /** Native bytes the session's calls hold now: per-call scratch beyond the lane's and bulk inputs being received. */
    public long callNativeBytes() {
        return callNativeBytes.get();
    }

    /** Counts native memory a call takes ({@code bytes} > 0) or gives back ({@code bytes} < 0). */
    void callNativeBytes(long bytes) {
        callNativeBytes.addAndGet(bytes);
    }

    /**
     * Host memory the session holds now in buffers: the scratch and staging of its threads, its pooled
     * DATA buffers and its staging buffers (pinned ones included). An idle session drops them.
     */
    public long hostBufferBytes() {
        return hostBuffers.get();
    }

    java.util.concurrent.atomic.AtomicLong hostBuffers() {
        return hostBuffers;
    }

    /**
     * A lane went idle: when nothing of the session is in flight (every frame read has been done with),
     * its pooled DATA buffers and free staging buffers are freed.
     */
    void trimIdle() {
        if (bodyBudget.available() == limits.bodyBudget()) {
            dataBuffers.trim();
            staging.trim();
        }
    }

    BodyBudget bodyBudget() {
        return bodyBudget;
    }

    /** Where lines about this session's peer faults go. */
    public RateLimitedLog peerFaults() {
        return peerFaults;
    }

    /** The tenant this session belongs to. */
    public io.gpusockets.backend.tenant.TenantAccount tenant() {
        return tenant;
    }

    /** Launches of this session are admitted by {@code scheduler} (the tenants' device-time shares); call before {@link #serve}. */
    public void deviceShare(io.gpusockets.backend.tenant.DeviceShare scheduler) {
        this.launchShares = new LaunchShares(id, scheduler, driver, tenant.name());
    }

    /** The session's side of the device-time scheduler, or null. */
    LaunchShares launchShares() {
        return launchShares;
    }

    /**
     * The hasher of this session's device memory (issue 23: what changed since a chunk was sent), made at the first
     * call under a random seed; its kernel, stream and buffers live in the session's contexts, invisible to the
     * program, and go when their context is destroyed or the session ends ({@link ChunkHasher}). Null once the
     * session has ended.
     */
    public ChunkHasher chunkHasher() {
        synchronized (hasherLock) {
            if (ended.get()) {
                return null;
            }
            if (hasher == null) {
                hasher = new ChunkHasher(driver);
            }
            return hasher;
        }
    }

    /** Gives back what the hasher made, if there is one (before the contexts go). */
    private void closeChunkHasher() {
        ChunkHasher h;
        synchronized (hasherLock) {
            h = hasher;
            hasher = null;
        }
        if (h != null) {
            h.close();
        }
    }

    /** What this session has charged to its tenant. */
    SessionQuota quota() {
        return quota;
    }

    /** Device memory this session holds against its tenant's quota now (0 once it has ended). */
    public long quotaCharged() {
        return quota.charged();
    }

    /**
     * Isolation mode shared: this session's primary contexts are its tenant's shared ones from {@code s}.
     * Set before {@link #serve}.
     */
    /**
     * The session's way to the backend's shares of IPC and shareable handles ({@link ShareRegistry}); call before
     * {@link #serve}. Without one every export and import is refused.
     */
    public void shares(ShareBroker broker) {
        this.shares = broker == null ? ShareBroker.NONE : broker;
    }

    ShareBroker shares() {
        return shares;
    }

    SessionShares sharing() {
        return sharing;
    }

    /**
     * Nothing of the session holds the VMM allocation {@code real} any more (the driver freed it, or will once importers
     * let go): it is no longer imported, and its shareable exports go, so that no token keeps memory alive that the
     * tenant is no longer charged for.
     */
    void vmmGone(long real) {
        sharing.vmmGone(real);
        if (sharing.unexported(ShareRegistry.KIND_VMM, real)) {
            shares.withdraw(ShareRegistry.KIND_VMM, real);
        }
    }

    /**
     * Set while the session migrates, or is handed over, with the sessions it shares with ({@link #movingWithGroup}):
     * its migration or hand-over then does not refuse what it opened of theirs (the group's move carries the shares,
     * {@link GroupCheckpoint}).
     */
    private volatile boolean movingWithGroup;

    /**
     * Whether this session migrates or is handed over now with its group (on while a group migration or hand-over
     * runs, off after).
     */
    public void movingWithGroup(boolean on) {
        movingWithGroup = on;
    }

    /** {@link #checkNotSharing} for a migration, unless the session migrates with its group. */
    private void checkMigratable() throws CheckpointRefused {
        checkMovable("migrated");
    }

    /** {@link #checkNotSharing} for a migration or hand-over ({@code what}), unless the session moves with its group. */
    private void checkMovable(String what) throws CheckpointRefused {
        if (!movingWithGroup) {
            checkNotSharing(what);
        }
    }

    /** Refused when the session holds what it opened of another session's shares ({@link SessionShares#refusal}). */
    private void checkNotSharing(String what) throws CheckpointRefused {
        String why = sharing.refusal(id, what);
        if (why != null) {
            throw new CheckpointRefused(why);
        }
    }

    public void shareContexts(SharedContexts s) {
        this.shared = s;
        cleanup.shareContexts(s);
    }

    /** The shared contexts (isolation mode shared), or null. */
    SharedContexts shared() {
        return shared;
    }

    ContextPool contextPool() {
        return contextPool;
    }

    /** The memory shared with the frontend on the current connection, or null. */
    SessionWindow window() {
        return window;
    }

    /** Bulk bytes that went through the shared windows so far, both ways (every window the session had). */
    public long windowBytes() {
        long n = pastWindowBytes.sum();
        for (SessionWindow w : windows) {
            n += w.bytes();
        }
        return n;
    }

    /** Of {@link #windowBytes}, those through windows attached when the session resumed on a new ring. */
    public long resumedWindowBytes() {
        long n = pastResumedWindowBytes.sum();
        for (SessionWindow w : windows) {
            if (w.resumed()) {
                n += w.bytes();
            }
        }
        return n;
    }

    /**
     * The size of the DATA frames a large device-to-host copy is sent in: 4 MiB (fewer frames, fewer
     * driver calls) where the frame limit allows, never less than the receive chunk nor more than the limit.
     */
    static int outChunkBytes(int chunkBytes, int maxBody) {
        return Math.min(Math.max(chunkBytes, 4 << 20), maxBody);
    }

    StagingPool staging() {
        return staging;
    }

    /** Captures in which the backend refused host work (GraphCalls, CopyCalls, PitchedCalls, CallbackCalls). */
    CaptureGuard captureGuard() {
        return captureGuard;
    }

    /** Before {@code real}, a context of this session, is destroyed: its pinned staging buffers go first, and the window's registration in it. */
    void beforeContextDestroy(long real) {
        ChunkHasher h;
        synchronized (hasherLock) {
            h = hasher;
        }
        if (h != null) {
            h.contextGoing(real); // waits for a hash in progress there
        }
        LaunchShares ls = launchShares;
        if (ls != null) {
            ls.contextDestroyed(real);
        }
        cleanup.destroyExecGraphs(handles.idOf(ParamType.CTX, real));
        sharing.contextGoing(real); // its events leave their IPC event shares
        staging.retire(real);
        for (SessionWindow w : windows) {
            w.unpin(real);
        }
    }

    /** After {@code real} was destroyed (or its destruction was attempted). */
    void afterContextDestroy(long real) {
        staging.destroyed(real);
    }

    public long id() {
        return id;
    }

    /** Calls and bytes so far, for status and metrics. */
    public SessionStats stats() {
        return stats;
    }

    /** Memory and streams the session holds now (brief locks of its tables, never the session's lanes). */
    public long memoryBytes() {
        return memory.allocatedBytes();
    }

    public int streamCount() {
        return handles.count(ParamType.STREAM);
    }

    /**
     * The peer, as its transport describes it; while the session is detached (waiting for its frontend to
     * resume) followed by "[detached: why]", which is how {@code gpusockets status} shows such a session.
     */
    public String peer() {
        String d = detachedBecause;
        return d == null ? peer : peer + " [detached: " + d + "]";
    }

    /**
     * The driver this session's calls go to: the host's, or the session's {@link StableGraphMemory} over its
     * {@link StableAddresses} over it when address-stable memory is on.
     */
    io.gpusockets.protocol.api.CudaDriver driver() {
        return driver;
    }

    DriverHost host() {
        return host;
    }

    BackendSettings settings() {
        return settings;
    }

    SessionLimits limits() {
        return limits;
    }

    SessionPools pools() {
        return pools;
    }

    SessionVmm vmm() {
        return vmm;
    }

    SessionWaits waits() {
        return waits;
    }

    SessionHandles handles() {
        return handles;
    }

    SessionMemory memory() {
        return memory;
    }

    /**
     * The module globals a restore found elsewhere than the program knows them ({@link GlobalTranslation}), or null:
     * null for every session that was not restored or whose restore found every global in its place, so that a call's
     * cost of translating is one null check there.
     */
    GlobalTranslation translation() {
        return translation;
    }

    /** Set by a restore: before its replay (an empty one), and to null after it when no global moved. */
    void translation(GlobalTranslation t) {
        translation = t;
    }

    /** The real address of a device pointer from the program ({@link GlobalTranslation#toReal}). */
    long toReal(long address) {
        GlobalTranslation t = translation;
        return t == null ? address : t.toReal(address);
    }

    /**
     * The program's address of a real device address ({@link GlobalTranslation#toProgram}): a restored module global
     * the driver placed elsewhere has its recorded address, anything else its own.
     */
    public long toProgram(long address) {
        GlobalTranslation t = translation;
        return t == null ? address : t.toProgram(address);
    }

    SessionUses uses() {
        return uses;
    }

    PrimaryContexts primary() {
        return primary;
    }

    HostCallbackGates callbackGates() {
        return callbackGates;
    }

    CallDispatcher dispatcher() {
        return dispatcher;
    }

    Lanes lanes() {
        return lanes;
    }

    int chunkBytes() {
        return limits.chunkBytes();
    }

    boolean asyncGranted() {
        return asyncGranted;
    }

    /**
     * What a resumable session keeps: its token (bound to the identity that proved itself at the
     * handshake), how long it waits detached, and {@link ResumeLog}.
     */
    public record Resume(byte[] token, String identity, java.time.Duration grace, int features, ResumeLog log) {
        /** {@code features}: those granted at the first handshake, granted again on every resume. */
        public Resume(byte[] token, String identity, java.time.Duration grace, int features, long retainBytes) {
            this(token, identity, grace, features, new ResumeLog(retainBytes));
        }
    }

    /** Makes the session resumable; call before {@link #serve}. */
    public void resumable(Resume r) {
        this.resume = r;
    }

    /** The resume settings, or null when the session ends with its connection. */
    public Resume resume() {
        return resume;
    }

    /** Why the session is detached (waiting for its frontend to resume), or null while it is connected. */
    public String detached() {
        return detachedBecause;
    }

    /**
     * A resuming frontend's connection, after its WELCOME: the session's reader takes it (closing the old
     * connection first, should the reader not have noticed its loss yet). False when the session has ended.
     */
    public boolean attach(FrameChannel next) {
        return attach(next, null);
    }

    /**
     * {@link #attach(FrameChannel)} with the shared window of the resuming connection ({@code window}, null for none),
     * which becomes the session's window once the reader takes the connection; when the handshake granted it
     * ({@link Handshake#FEATURE_WINDOW} in the WELCOME of the resume). False (the window released) when the session
     * cannot take the connection.
     */
    public boolean attach(FrameChannel next, SharedWindow window) {
        synchronized (drainLock) {
            if (frozen) {
                if (window != null) {
                    window.release();
                }
                return false; // checkpointed with stop: it resumes where it is restored, not here
            }
        }
        if (ended.get() || resume == null) {
            if (window != null) {
                window.release();
            }
            return false;
        }
        offered.add(new Offer(next, window));
        if (ended.get()) {
            for (Offer o; (o = offered.poll()) != null; ) {
                o.close(); // ended meanwhile: its end may have drained the queue before this offer
            }
            return false;
        }
        FrameChannel old = channel;
        if (old != null && old != next) {
            old.close(); // the reader notices and takes the offered one
        }
        return true;
    }

    /**
     * Detached: waits up to the grace period for a resuming connection, then sends RESUMED and the
     * replies kept for the frontend. Returns null once resumed, else why the session ends.
     */
    private String awaitResume(String cause) throws InterruptedException {
        Resume r = resume;
        retireWindow(); // it belongs to the lost connection: frames already read still use it, no new use starts
        detachedBecause = cause;
        if (channel != null) {
            channel.close(); // broken or half-closed: the peer sees the end at once, and a resume brings a new one
        }
        LOG.log(Level.INFO, "session " + id + " detached (" + cause + "); waiting up to " + r.grace().toSeconds()
                + " s for its frontend to resume");
        long deadline = System.nanoTime() + r.grace().toNanos();
        while (true) {
            long left = deadline - System.nanoTime();
            if (ended.get()) {
                return "ended while detached";
            }
            if (failure != null) {
                return failure + " (while detached)"; // expired by the server (idle timeout) meanwhile
            }
            if (left <= 0) {
                return cause + "; not resumed within the grace period of " + r.grace().toSeconds() + " s";
            }
            Offer offer = offered.poll(Math.min(left, 200_000_000L), java.util.concurrent.TimeUnit.NANOSECONDS);
            if (offer == null) {
                continue; // looks at ended (the backend's shutdown) and the deadline again
            }
            if (ended.get()) {
                offer.close();
                return "ended while detached";
            }
            for (Offer newer; (newer = offered.poll()) != null; ) {
                offer.close(); // a later attempt of the same frontend supersedes it
                offer = newer;
            }
            FrameChannel next = offer.channel();
            try {
                next.send(Opcodes.RESUMED, 0, 0, 0, r.log().state().encode());
                channel = next;
                if (offer.window() != null) {
                    useWindow(offer.window(), next, true); // the new ring's: frames read from here on refer to it
                }
                hangup = new io.gpusockets.backend.isolation.PeerHangup(next.connection());
                peer = next.connection().peer().description();
                detachedBecause = null;
                String refused = r.log().resend(next);
                if (refused != null) {
                    next.close();
                    return cause + "; resume refused: " + refused;
                }
                stats.resumed();
                LOG.log(Level.INFO, "session " + id + " resumed, peer " + next.connection().peer().description());
                return null;
            } catch (IOException e) {
                LOG.log(Level.INFO, "session " + id + ": a resuming connection was lost at once (" + e.getMessage()
                        + "); waiting for the next");
                next.close(); // lost again at once: wait for the next attempt
                channel = next;
                if (window != null && window.channel() == next) {
                    retireWindow();
                } else if (offer.window() != null) {
                    offer.window().release(); // never became the session's
                }
                detachedBecause = cause;
            }
        }
    }

    /** A restored session whose frontend did not resume: why it ends. */
    private static final class RestoredNotResumed extends IOException {
        RestoredNotResumed(String why) {
            super(why);
        }
    }

    /**
     * Checkpoints this session to {@code file} (issue 22; see {@link CheckpointImage} for the format): refuses at
     * once, naming each, what cannot be captured ({@link CheckpointRecorder#refusals}, pending host callbacks, graph
     * nodes whose work is the guest's, a stream capture in progress); else drains it (new call frames wait, unread
     * by the lanes and not marked received; the calls in flight finish, their DATA still flowing; then every context
     * is synchronised), checks again, writes the image, and then either lets the waiting frames run in order or,
     * with {@code stop}, freezes the session: the frames that waited and every later one are dropped (the frontend
     * resends them after it resumes where the image is restored), and it cannot resume here. Other sessions are
     * never stalled. A refused or failed checkpoint leaves the session running.
     */
    public CheckpointResult checkpoint(java.nio.file.Path file, boolean stop, CheckpointProgress progress)
            throws CheckpointRefused, IOException, InterruptedException {
        checkNotSharing("checkpointed");
        requireCheckpointable();
        return drained(stop, progress, drainNanos -> {
            try {
                return writeImage(file, progress, drainNanos);
            } catch (IOException | RuntimeException e) {
                java.nio.file.Files.deleteIfExists(file);
                throw e;
            }
        }, stop ? "checkpointed to " + file + " and stopped (frozen: it resumes where the image is restored)"
                : "checkpointed to " + file);
    }

    /** Refused unless the session has address-stable memory and resume, which every checkpoint needs. */
    void requireCheckpointable() throws CheckpointRefused {
        if (recorder == null) {
            throw new CheckpointRefused("session " + id + " cannot be checkpointed: it has no address-stable memory (a"
                    + " checkpoint needs it; it is chosen when a session starts: the tenants file's stable-addresses = on"
                    + " for its tenant, or gpusockets backend --stable-addresses for every tenant that sets none)");
        }
        Resume r = resume;
        if (r == null) {
            throw new CheckpointRefused("session " + id + " cannot be checkpointed: it was not granted resume (its frontend"
                    + " asks for it, and --resume-grace is not 0), and a restored session is reached only by a resume");
        }
    }

    /** What a restore brought of the shares of a group checkpoint, for {@link GroupCheckpoint#reshare}; NONE after. */
    private volatile CheckpointImage.Shares restoredShares = CheckpointImage.Shares.NONE;

    void restoredShares(CheckpointImage.Shares s) {
        restoredShares = s;
    }

    CheckpointImage.Shares restoredShares() {
        return restoredShares;
    }

    /** How long a checkpoint or migration waits for another of the same session to end before it is refused. */
    static final long CHECKPOINT_WAIT_SECONDS = 2;

    /** What runs while the session is drained ({@link #drained}); {@code drainNanos}: how long the drain took. */
    @FunctionalInterface
    public interface DrainedWork<T> {
        T run(long drainNanos) throws CheckpointRefused, IOException;
    }

    /**
     * Drains this session as a checkpoint does (refusing first, naming each, what cannot be captured; new call frames
     * wait, unread by the lanes and not marked received; the calls in flight finish; every context is synchronised;
     * checks again), runs {@code work} on the idle session, and then either lets the waiting frames run in order or,
     * with {@code freeze} and a {@code work} that returned, freezes the session (the frames that waited and every
     * later one are dropped: the frontend resends them where the session resumes). A refused or failed drain or work
     * leaves the session running. One checkpoint or migration at a time: a request waits up to
     * {@link #CHECKPOINT_WAIT_SECONDS} for one in progress to end, then is refused; {@code done} is logged on success.
     */
    public <T> T drained(boolean freeze, CheckpointProgress progress, DrainedWork<T> work, String done)
            throws CheckpointRefused, IOException, InterruptedException {
        // a request that comes as another ends (its frames already let go, its lock not yet) waits for it
        if (!checkpointing.tryLock(CHECKPOINT_WAIT_SECONDS, java.util.concurrent.TimeUnit.SECONDS)) {
            throw new CheckpointRefused("session " + id + ": a checkpoint or migration of it is in progress");
        }
        try {
            synchronized (drainLock) {
                if (frozen || ended.get()) {
                    throw new CheckpointRefused("session " + id + " cannot be checkpointed: it has "
                            + (ended.get() ? "ended" : "been checkpointed with stop (frozen)"));
                }
            }
            refuseUncapturable(false);
            long start = System.nanoTime();
            progress.progress("drain", 0, 1);
            synchronized (drainLock) {
                holding = true;
            }
            boolean frozenNow = false;
            try {
                while (readerInCall || lanes.busy()) {
                    if (ended.get()) {
                        throw new IOException("session " + id + " ended during the checkpoint's drain");
                    }
                    if (callbackGates.openGates() > 0) {
                        refuseUncapturable(false); // a call in flight waits for a host callback that waits for a held frame
                    }
                    Thread.sleep(1);
                }
                synchronizeContexts();
                refuseUncapturable(true);
                long drained = System.nanoTime();
                progress.progress("drain", 1, 1);
                T result = work.run(drained - start);
                if (freeze) {
                    synchronized (drainLock) {
                        frozen = true;
                        holding = false;
                        heldLanes.clear();
                        for (Inbound in; (in = held.poll()) != null; ) {
                            releaseHeld(in);
                        }
                    }
                    frozenNow = true;
                }
                LOG.log(Level.INFO, "session " + id + " " + done);
                return result;
            } finally {
                if (!frozenNow) {
                    unhold();
                }
            }
        } finally {
            checkpointing.unlock();
        }
    }

    /** The contexts of the session's memory: each range's base (allocation, global, VMM mapping) to its real context. */
    private java.util.TreeMap<Long, Long> contextsOf(java.util.List<CheckpointImage.Range> ranges,
                                                    java.util.List<CheckpointRecorder.Record> records) {
        java.util.TreeMap<Long, Long> contextOf = new java.util.TreeMap<>();
        for (CheckpointRecorder.Record rec : records) {
            if (rec.kind == CheckpointRecorder.Kind.ALLOC || rec.kind == CheckpointRecorder.Kind.GLOBAL) {
                ranges.add(new CheckpointImage.Range(rec.base, rec.size));
                long ctx = rec.kind == CheckpointRecorder.Kind.ALLOC ? stable.contextOf(rec.base) : 0;
                if (ctx == 0) {
                    SessionHandles.Entry e = handles.get(rec.context, ParamType.CTX);
                    ctx = e == null ? 0 : e.real();
                }
                contextOf.put(rec.base, ctx);
            }
        }
        for (CheckpointVmm.Piece piece : CheckpointVmm.contents(this)) {
            SessionHandles.Entry e = handles.get(piece.context(), ParamType.CTX);
            ranges.add(new CheckpointImage.Range(piece.address(), piece.size()));
            contextOf.put(piece.address(), e == null ? 0 : e.real());
        }
        return contextOf;
    }

    /**
     * The session's device memory now (allocations, module globals, VMM mappings; not CUDA arrays), cut into chunks
     * of {@code chunkBytes} in the real contexts that hold them: what a migration hashes and copies
     * ({@link PreCopy}). Taken from the checkpoint records, so only with address-stable memory; consistent with the
     * program only while the session is drained, a view of the moment otherwise (a range freed meanwhile is absent at
     * the next call, one made meanwhile new).
     */
    java.util.List<ChunkHasher.Chunk> memoryChunks(long chunkBytes) throws CheckpointRefused {
        checkMigratable();
        if (recorder == null) {
            throw new CheckpointRefused("session " + id + " has no address-stable memory (a migration needs it)");
        }
        java.util.List<CheckpointImage.Range> ranges = new java.util.ArrayList<>();
        java.util.TreeMap<Long, Long> contexts = contextsOf(ranges, recorder.snapshot());
        java.util.List<ChunkHasher.Chunk> out = new java.util.ArrayList<>();
        for (CheckpointImage.Range r : ranges) {
            long ctx = contexts.get(r.base());
            if (ctx != 0 && r.size() > 0) {
                ChunkHasher.split(ctx, toReal(r.base()), r.size(), chunkBytes, out); // hashed and copied where it lies
            }
        }
        return out;
    }

    /**
     * Tells the frontend of this frozen session (checkpointed with stop; restored, or migrated, to another backend)
     * that the session is now at {@code uri} ({@link Opcodes#MOVED}), if it is connected; it then resumes there. The
     * caller ends the session next: a frontend that missed this frame (it was detached, or the connection was reset
     * before it read it) learns where the session went when it asks to resume here, from the backend that remembers
     * it. Throws IllegalArgumentException for a URI a MOVED frame cannot carry, IllegalStateException when the session
     * is not frozen or has no resume (nothing could follow it).
     */
    public void moved(String uri) {
        Handshake.Moved m = new Handshake.Moved(uri);
        synchronized (drainLock) {
            if (!frozen || resume == null || ended.get()) {
                throw new IllegalStateException("session " + id + " cannot be sent elsewhere: it is "
                        + (ended.get() ? "ended" : resume == null ? "not resumable" : "not frozen (checkpointed with stop)"));
            }
        }
        FrameChannel c = liveChannel.get();
        if (c == null) {
            return;
        }
        try {
            c.send(Opcodes.MOVED, 0, 0, 0, m.encode()); // no lane sends meanwhile: the session is frozen
        } catch (IOException e) {
            LOG.log(Level.INFO, "session " + id + ": MOVED not sent (" + e.getMessage() + "); its frontend hears it when"
                    + " it asks to resume");
        }
    }

    /** Whether a checkpoint with stop froze this session. */
    public boolean frozen() {
        synchronized (drainLock) {
            return frozen;
        }
    }

    /** Lets the frames a drain held run, in order (marked received now). */
    private void unhold() {
        ResumeLog log = resume == null ? null : resume.log();
        synchronized (drainLock) {
            holding = false;
            heldLanes.clear();
            for (Inbound in; (in = held.poll()) != null; ) {
                FrameHeader h = in.header();
                try {
                    if (h.opcode() == Opcodes.LANE_END) {
                        lanes.end(h.lane());
                        continue;
                    }
                    if (log != null) {
                        log.received(h);
                    }
                    lanes.lane(h.lane()).enqueue(in);
                } catch (ProtocolException e) {
                    release(in);
                    fail("protocol violation: " + e.getMessage());
                }
            }
        }
    }

    /** Throws, naming each, when something in the session cannot be captured; {@code drained}: the device is idle. */
    private void refuseUncapturable(boolean drained) throws CheckpointRefused {
        java.util.List<String> why = new java.util.ArrayList<>(recorder.refusals(handles, memory, drained));
        why.addAll(CheckpointVmm.refusals(this));
        why.addAll(CheckpointArrays.refusals(driver, handles));
        int managedOutside = dispatcher.managed().liveOutside(stable);
        if (managedOutside > 0) {
            // managed memory in the windows is recorded (its cuMemAllocManaged replays as one); outside them it is not
            why.add(managedOutside + " managed allocation(s) outside the session's address windows");
        }
        int gates = callbackGates.openGates();
        if (gates > 0) {
            why.add(gates + " host callback(s) pending (cuLaunchHostFunc, cuStreamAddCallback)");
        }
        if (callbackGates.graphWorkCount() > 0) {
            why.add("graph nodes whose work is the guest's (host nodes, host-memory copy nodes)");
        }
        if (drained && captureGuard.everCaptured() && capturingStreams() > 0) {
            why.add("a stream capture in progress (cuStreamBeginCapture)");
        }
        if (!why.isEmpty()) {
            throw new CheckpointRefused("session " + id + " cannot be checkpointed: " + String.join("; ", why)
                    + " (the session keeps running)");
        }
    }

    /** Streams of the session capturing now. */
    private int capturingStreams() {
        int n = 0;
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment status = arena.allocate(8);
            for (SessionHandles.Entry e : handles.all(ParamType.STREAM)) {
                SessionHandles.Entry ctx = handles.get(e.context(), ParamType.CTX);
                if (ctx == null || driver.cuCtxPushCurrent(ctx.real()) != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                    continue;
                }
                if (driver.cuStreamIsCapturing(e.real(), status) == io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS
                        && status.get(java.lang.foreign.ValueLayout.JAVA_INT, 0) != 0) {
                    n++;
                }
                driver.cuCtxPopCurrent(status);
            }
        }
        return n;
    }

    /** Waits for the work of every context of the session. */
    private void synchronizeContexts() throws IOException {
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment out = arena.allocate(8);
            for (SessionHandles.Entry c : handles.all(ParamType.CTX)) {
                if (driver.cuCtxPushCurrent(c.real()) != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                    continue;
                }
                int r = driver.cuCtxSynchronize();
                driver.cuCtxPopCurrent(out);
                if (r != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                    throw new IOException("session " + id + ": synchronising a context for the checkpoint failed: "
                            + io.gpusockets.protocol.api.CuResult.name(r));
                }
            }
        }
    }

    /**
     * The image header of this drained session (everything but the contents, {@link CheckpointImage}): resume state,
     * lanes' context stacks, the records with the program's VMM state written in ({@link CheckpointVmm}), the devices'
     * models. {@code verb}: what a failure says the session cannot be ("checkpointed", "migrated").
     */
    private CheckpointImage.Header imageHeader(Resume r, String verb) throws IOException {
        java.util.List<ResumeLog.Kept> kept;
        try {
            kept = r.log().kept();
        } catch (IllegalStateException e) {
            throw new IOException("session " + id + " cannot be " + verb + ": " + e.getMessage());
        }
        java.util.Map<Integer, long[]> stacks = new java.util.TreeMap<>();
        lanes.contextStacks().forEach((lane, reals) -> stacks.put(lane,
                java.util.Arrays.stream(reals).map(c -> handles.idOf(ParamType.CTX, c)).toArray()));
        java.util.List<CheckpointRecorder.Record> records;
        try {
            records = CheckpointVmm.records(this, recorder.snapshot(), handles.nextId());
        } catch (IllegalStateException e) {
            throw new IOException("session " + id + " cannot be " + verb + ": " + e.getMessage());
        }
        CheckpointImage.Header h = new CheckpointImage.Header(id, tenant.name(), stable.windowBases(), handles.nextId(),
                new CheckpointImage.ResumeState(r.token(), r.identity(), r.grace().toSeconds(), r.features(),
                        r.log().receivedCopy(), kept),
                primary.snapshot(), stacks, records, RestoreModels.devices(host));
        return h;
    }

    /** Writes the image of the drained session ({@link CheckpointImage}). */
    private CheckpointResult writeImage(java.nio.file.Path file, CheckpointProgress progress, long drainNanos) throws IOException {
        return writeImage(file, progress, drainNanos, CheckpointImage.Shares.NONE);
    }

    /**
     * Writes the image of the drained session with {@code shares} (a group checkpoint, {@link GroupCheckpoint}: what it
     * shares with the others of its group).
     */
    CheckpointResult writeImage(java.nio.file.Path file, CheckpointProgress progress, long drainNanos,
                                CheckpointImage.Shares shares) throws IOException {
        long start = System.nanoTime();
        int[] counts;
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(file,
                java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.TRUNCATE_EXISTING,
                java.nio.file.StandardOpenOption.WRITE, java.nio.file.StandardOpenOption.READ)) { // READ: to map it
            counts = writeImageTo(ch, range -> true, progress, "checkpointed", null, shares);
        }
        return new CheckpointResult(java.nio.file.Files.size(file), counts[0], counts[1], drainNanos,
                System.nanoTime() - start);
    }

    /**
     * Writes the image of the drained session to {@code ch}: the header, then the contents of the device memory ranges
     * {@code keep} accepts and of every CUDA array, then the end mark. Returns {ranges written, records}; adds the
     * bytes of device memory written to {@code memoryBytes[0]} when given.
     */
    private int[] writeImageTo(java.nio.channels.WritableByteChannel ch,
                               java.util.function.Predicate<CheckpointImage.Range> keep, CheckpointProgress progress,
                               String verb, long[] memoryBytes) throws IOException {
        return writeImageTo(ch, keep, progress, verb, memoryBytes, CheckpointImage.Shares.NONE);
    }

    private int[] writeImageTo(java.nio.channels.WritableByteChannel ch,
                               java.util.function.Predicate<CheckpointImage.Range> keep, CheckpointProgress progress,
                               String verb, long[] memoryBytes, CheckpointImage.Shares shares) throws IOException {
        Resume r = resume;
        CheckpointImage.Header h = imageHeader(r, verb).withShares(shares);
        java.util.List<CheckpointRecorder.Record> records = h.records();
        java.util.List<CheckpointImage.Range> all = new java.util.ArrayList<>();
        java.util.TreeMap<Long, Long> contexts = contextsOf(all, records);
        java.util.List<CheckpointImage.Range> ranges = new java.util.ArrayList<>();
        long total = 0;
        for (CheckpointImage.Range a : all) {
            if (keep.test(a)) {
                ranges.add(a);
                total += a.size();
            }
        }
        if (memoryBytes != null) {
            memoryBytes[0] += total;
        }
        long first = ranges.isEmpty() ? 0 : contexts.get(ranges.getFirst().base());
        for (CheckpointImage.Range a : CheckpointArrays.ranges(driver, handles)) { // CUDA arrays' contents, after memory
            ranges.add(a);
            total += a.size();
        }
        int threads = ch instanceof java.nio.channels.FileChannel ? CheckpointIo.threads() : 1;
        try (CheckpointContents contents = new CheckpointContents(driver, id, first, quota, threads);
             CheckpointContents.DriverDevice memoryDevice = new CheckpointContents.DriverDevice(driver, (address, length) -> {
                 java.util.Map.Entry<Long, Long> e = contexts.floorEntry(address);
                 if (e == null || e.getValue() == 0) {
                     throw new IOException(String.format("checkpoint: no context for 0x%x", address));
                 }
                 return e.getValue();
             }, this::toReal); // the records' addresses are the program's: a moved global is read where it lies
             CheckpointArrays.Device device = new CheckpointArrays.Device(driver, memoryDevice,
                     range -> CheckpointArrays.resolve(driver, handles, range))) {
            java.io.DataOutputStream out = new java.io.DataOutputStream(new java.io.BufferedOutputStream(
                    java.nio.channels.Channels.newOutputStream(ch), 1 << 20));
            CheckpointImage.writeHeader(out, h, ranges);
            out.flush(); // the contents go straight to the channel after it
            progress.progress("records", records.size(), records.size());
            if (ch instanceof java.nio.channels.FileChannel file) { // several threads, each at its chunks' positions
                contents.write(file, ranges, device, progress, total, threads);
            } else {
                contents.write(ch, ranges, device, progress, total);
            }
            CheckpointImage.writeEnd(ch);
        }
        return new int[] {ranges.size(), records.size()};
    }

    /**
     * The physical allocations backing this session's address windows (issue 23, hand-over on one host;
     * {@link StableAddresses#physical}), each exportable as a POSIX descriptor ({@link #exportPosixFd}). Refused for a
     * session without address-stable memory, or whose device cannot export them (the driver's
     * CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED is 0). Consistent only while drained.
     */
    public java.util.List<PhysicalMemory> physicalMemory() throws CheckpointRefused {
        checkMovable("handed over");
        return exportablePhysical();
    }

    /**
     * Refuses (nothing changed) a session that cannot be handed over, as {@link #physicalMemory} and
     * {@link #programMemory} would: no address-stable memory, memory on a device that cannot export it; and, unless
     * {@code withGroup} (it would be handed over with the sessions it shares with), what it opened of others' shares.
     */
    public void checkHandOver(boolean withGroup) throws CheckpointRefused {
        if (!withGroup) {
            checkNotSharing("handed over");
        }
        exportablePhysical();
        programMemory();
    }

    /** {@link #physicalMemory} without the check of what it shares. */
    private java.util.List<PhysicalMemory> exportablePhysical() throws CheckpointRefused {
        if (stable == null || recorder == null) {
            throw new CheckpointRefused("session " + id + " cannot be handed over: it has no address-stable memory");
        }
        java.util.List<PhysicalMemory> all = stable.physical();
        for (PhysicalMemory m : all) {
            if (!stable.exportable(m.device())) {
                throw new CheckpointRefused("session " + id + " cannot be handed over: device " + m.device()
                        + " cannot export its memory as POSIX file descriptors");
            }
        }
        return all;
    }

    /**
     * The physical allocations backing this session's address windows now ({@link StableAddresses#physical}), in
     * address order: the layout a migration's target lands the memory in ({@link MigrationLanding}); empty without
     * address-stable memory. A snapshot: consistent only while drained, a hint while the program runs.
     */
    public java.util.List<PhysicalMemory> windowLayout() {
        return stable == null ? java.util.List.of() : stable.physical();
    }

    /**
     * The program's own VMM allocations (its {@code cuMemCreate}s the driver still holds; not those it imported from
     * another session), in the order a checkpoint image's records make them again ({@link CheckpointVmm#records}: by the driver's handle), each with address 0:
     * a hand-over exports those the program still holds a reference to; for one it released but still maps, or one
     * made for a use other than plain memory ({@link VmmCalls#exportableUsage}), the entry's handle is 0 (its contents
     * go in the image). Refused like {@link #physicalMemory}.
     */
    public java.util.List<PhysicalMemory> programMemory() throws CheckpointRefused {
        java.util.List<PhysicalMemory> out = new java.util.ArrayList<>();
        java.util.Map<Long, Integer> refs = vmm.references();
        for (java.util.Map.Entry<Long, Long> e : new java.util.TreeMap<>(vmm.sizes()).entrySet()) {
            if (sharing.imported(e.getKey())) {
                continue; // another session's allocation: imported again from its export (GroupCheckpoint#reOpen)
            }
            SessionVmm.Made m = vmm.madeOf(e.getKey());
            int device = m == null ? 0 : ByteBuffer.wrap(m.prop()).order(ByteOrder.LITTLE_ENDIAN).getInt(12);
            if (stable == null || !stable.exportable(device)) {
                throw new CheckpointRefused("session " + id + " cannot be handed over: device " + device
                        + " cannot export its memory as POSIX file descriptors");
            }
            boolean exported = refs.getOrDefault(e.getKey(), 0) > 0 && m != null
                    && VmmCalls.exportableUsage(java.lang.foreign.MemorySegment.ofArray(m.prop()));
            out.add(new PhysicalMemory(0, e.getValue(), exported ? e.getKey() : 0, device));
        }
        return out;
    }

    /**
     * A new POSIX descriptor of the physical allocation {@code m} (cuMemExportToShareableHandle), the caller's to close;
     * an IOException names the driver's error.
     */
    public int exportPosixFd(PhysicalMemory m) throws IOException {
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment fd = arena.allocate(8).fill((byte) 0);
            int r = stable.real().cuMemExportToShareableHandle(fd, m.handle(),
                    io.gpusockets.protocol.structs.MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
            if (r != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                throw new IOException(String.format("session %d: exporting the memory at 0x%x (%d bytes) failed: %s", id,
                        m.address(), m.size(), io.gpusockets.protocol.api.CuResult.name(r)));
            }
            return fd.get(java.lang.foreign.ValueLayout.JAVA_INT, 0);
        }
    }

    /**
     * A hand-over's image of this drained session (issue 23, hand-over on one host): the checkpoint image
     * ({@link CheckpointImage}) to {@code ch}, whose device memory ranges lying wholly in {@code handed} (the physical
     * allocations the target maps itself: window memory by address, the program's own by handle, in its mappings)
     * carry no contents; the rest (module globals, the program's own VMM memory,
     * CUDA arrays) carry theirs. Returns the bytes of device memory contents written. Run only on a drained session.
     */
    public long writeHandOverImage(java.nio.channels.WritableByteChannel ch, java.util.List<PhysicalMemory> handed,
                                   CheckpointProgress progress) throws IOException, CheckpointRefused {
        return writeHandOverImage(ch, handed, progress, null);
    }

    /**
     * {@link #writeHandOverImage} of a session handed over with its group ({@link #movingWithGroup}): the image also
     * carries what it shares with the others, as a group checkpoint's does ({@link GroupCheckpoint#shares}), read from
     * {@code registry}; null: nothing shared (a session alone). Its opened ranges of the others' memory are not
     * contents of its image: the target maps them again from the exporter's handed allocations.
     */
    public long writeHandOverImage(java.nio.channels.WritableByteChannel ch, java.util.List<PhysicalMemory> handed,
                                   CheckpointProgress progress, ShareRegistry registry)
            throws IOException, CheckpointRefused {
        checkMovable("handed over");
        if (recorder == null || resume == null) {
            throw new CheckpointRefused("session " + id + " cannot be handed over: it needs address-stable memory and resume");
        }
        java.util.TreeMap<Long, Long> ends = new java.util.TreeMap<>();
        java.util.Set<Long> handles = new java.util.HashSet<>();
        for (PhysicalMemory m : handed) {
            if (m.address() != 0) {
                ends.put(m.address(), m.address() + m.size());
            } else if (m.handle() != 0) {
                handles.add(m.handle());
            }
        }
        for (SessionVmm.Mapping m : vmm.mappings()) {
            if (handles.contains(m.handle())) {
                ends.merge(m.base(), m.base() + m.size(), Math::max); // the program's memory the target maps itself
            }
        }
        long[] bytes = {0};
        writeImageTo(ch, r -> !covered(ends, r.base(), r.size()), progress, "handed over", bytes,
                registry == null ? CheckpointImage.Shares.NONE : GroupCheckpoint.shares(this, registry));
        return bytes[0];
    }

    /** Whether [base, base+size) lies in the union of the ranges {@code ends} holds (start to end). */
    private static boolean covered(java.util.TreeMap<Long, Long> ends, long base, long size) {
        long at = base, end = base + size;
        while (at < end) {
            java.util.Map.Entry<Long, Long> e = ends.floorEntry(at);
            if (e == null || e.getValue() <= at) {
                return false;
            }
            at = e.getValue();
        }
        return true;
    }

    /**
     * A migration's image of this drained session (issue 23 item 1): the checkpoint image's header (everything but
     * the contents, {@link CheckpointImage}) written to {@code header}, and the contents of its CUDA arrays (the
     * ranges after memory, each with its chunks) to {@code arrays}; returns the device memory ranges the header lists
     * first, in order, whose contents the migration's chunks carry (the target writes them between the two). Run only
     * on a drained session ({@link #drained}).
     */
    public java.util.List<long[]> writeMigrationImage(java.nio.channels.WritableByteChannel header,
                                                      java.nio.channels.WritableByteChannel arrays,
                                                      CheckpointProgress progress) throws IOException, CheckpointRefused {
        return writeMigrationImage(header, arrays, progress, null);
    }

    /**
     * {@link #writeMigrationImage} of a session that migrates with its group ({@link #movingWithGroup}): the header also
     * carries what it shares with the others, as a group checkpoint's image does ({@link GroupCheckpoint#shares}), read
     * from {@code registry}; null: nothing shared (a session alone).
     */
    public java.util.List<long[]> writeMigrationImage(java.nio.channels.WritableByteChannel header,
                                                      java.nio.channels.WritableByteChannel arrays,
                                                      CheckpointProgress progress, ShareRegistry registry)
            throws IOException, CheckpointRefused {
        checkMigratable();
        Resume r = resume;
        if (recorder == null || r == null) {
            throw new CheckpointRefused("session " + id + " cannot be migrated: it needs address-stable memory and resume");
        }
        CheckpointImage.Header h = imageHeader(r, "migrated");
        if (registry != null) {
            h = h.withShares(GroupCheckpoint.shares(this, registry));
        }
        java.util.List<CheckpointRecorder.Record> records = h.records();
        java.util.List<CheckpointImage.Range> ranges = new java.util.ArrayList<>();
        contextsOf(ranges, records);
        java.util.List<long[]> memory = new java.util.ArrayList<>();
        for (CheckpointImage.Range m : ranges) {
            memory.add(new long[] {m.base(), m.size()});
        }
        java.util.List<CheckpointImage.Range> arrayRanges = CheckpointArrays.ranges(driver, handles);
        java.util.List<CheckpointImage.Range> all = new java.util.ArrayList<>(ranges);
        all.addAll(arrayRanges);
        java.io.DataOutputStream out = new java.io.DataOutputStream(new java.io.BufferedOutputStream(
                java.nio.channels.Channels.newOutputStream(header), 1 << 16));
        CheckpointImage.writeHeader(out, h, all);
        out.flush();
        progress.progress("records", records.size(), records.size());
        if (!arrayRanges.isEmpty()) {
            long total = 0;
            for (CheckpointImage.Range a : arrayRanges) {
                total += a.size();
            }
            try (CheckpointContents contents = new CheckpointContents(driver, id, 0, quota); // plain host buffers
                 CheckpointContents.DriverDevice memoryDevice = new CheckpointContents.DriverDevice(driver, (address, length) -> {
                     throw new IOException(String.format("migration: device memory 0x%x among the arrays", address));
                 });
                 CheckpointArrays.Device device = new CheckpointArrays.Device(driver, memoryDevice,
                         range -> CheckpointArrays.resolve(driver, handles, range))) {
                contents.write(arrays, arrayRanges, device, progress, total);
            }
        }
        return memory;
    }

    /** Reads frames until the connection ends (waiting to resume where granted), then cleans up. Runs on the session's own thread. */
    public void serve() {
        String reason = "peer closed the connection";
        // This thread's state, fetched once: quick calls run here for every lane of the session.
        ExecutionThread exec = ExecutionThread.current(chunkBytes(), hostBuffers);
        try {
            if (channel == null) {
                // restored from a checkpoint: the frontend resumes here, within the grace period
                String why = awaitResume(detachedBecause != null ? detachedBecause : "restored from a checkpoint");
                if (why != null) {
                    throw new RestoredNotResumed(why);
                }
            }
            while (true) {
                try {
                    reason = readFrames(exec);
                    break;
                } catch (ProtocolException e) {
                    throw e;
                } catch (IOException e) {
                    String cause = failure != null ? failure
                            : e instanceof EOFException ? "peer closed the connection" : "connection lost: " + e.getMessage();
                    if (failure != null || resume == null || ended.get()) {
                        throw e;
                    }
                    String why = awaitResume(cause);
                    if (why != null) {
                        reason = why;
                        break;
                    }
                }
            }
        } catch (RestoredNotResumed e) {
            reason = e.getMessage();
        } catch (EOFException e) {
            reason = failure != null ? failure : "peer closed the connection";
        } catch (ProtocolException e) {
            reason = "protocol violation: " + e.getMessage();
        } catch (IOException e) {
            reason = failure != null ? failure : "connection lost: " + e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            reason = "backend shutting down";
        } catch (RuntimeException | OutOfMemoryError e) {
            reason = "internal error: " + e;
            LOG.log(Level.ERROR, "session " + id + ": internal error", e);
        } finally {
            ExecutionThread.end();
            detachedBecause = null;
            end(failure != null ? failure : reason);
        }
    }

    /** Reads and dispatches frames of the current connection; returns the end reason on GOODBYE. */
    private String readFrames(ExecutionThread exec) throws IOException, InterruptedException {
        FrameChannel channel = this.channel;
        ResumeLog log = resume == null ? null : resume.log();
        {
            while (true) {
                FrameHeader h = channel.readHeader();
                lastFrameNanos = System.nanoTime();
                stats.frameIn(h);
                int op = h.opcode();
                if (op == Opcodes.GOODBYE) {
                    channel.skipBody(h.length());
                    return "clean close";
                }
                if (op == Opcodes.LANE_END) {
                    channel.skipBody(h.length());
                    if (recorder == null || admit(new Inbound(h, null, 0), null)) {
                        lanes.end(h.lane());
                        readerInCall = false;
                    }
                    continue;
                }
                if (Opcodes.isControl(op) && op != Opcodes.DATA) {
                    throw new ProtocolException("unexpected control frame after handshake: " + h);
                }
                if (op != Opcodes.DATA && h.length() > limits.maxCallBody()) {
                    throw new ProtocolException("call body too large: " + h + " max=" + limits.maxCallBody());
                }
                if (op == Opcodes.DATA && h.inWindow()) {
                    Inbound in = windowData(h);
                    if (recorder == null && log != null) {
                        try {
                            log.received(h); // counted like any DATA frame: RESUMED tells the frontend what to resend
                        } catch (ProtocolException e) {
                            release(in);
                            throw e;
                        }
                    }
                    if (recorder == null || admit(in, log)) {
                        try {
                            lanes.lane(h.lane()).enqueue(in);
                        } finally {
                            readerInCall = false;
                        }
                    }
                    continue;
                }
                int charge = bodyBudget.charge(h);
                bodyBudget.acquire(charge);
                ByteBuffer body = dataBuffers.bodyFor(h);
                body.order(ByteOrder.LITTLE_ENDIAN);
                try {
                    channel.readBody(body);
                } catch (IOException e) {
                    dataBuffers.offer(body);
                    bodyBudget.release(charge);
                    throw e;
                }
                body.flip();
                if (recorder != null) {
                    Inbound in = new Inbound(h, body, charge, window);
                    if (admit(in, log)) {
                        dispatch(in, exec);
                    }
                    continue;
                }
                if (log != null) {
                    try {
                        log.received(h);
                    } catch (ProtocolException e) {
                        dataBuffers.offer(body);
                        bodyBudget.release(charge);
                        throw e;
                    }
                }
                dispatch(new Inbound(h, body, charge, window), exec);
            }
        }
    }

    /** Runs a frame read (a call or DATA) here when its lane is idle and it is quick, else queues it on its lane. */
    private void dispatch(Inbound in, ExecutionThread exec) throws IOException, InterruptedException {
        FrameHeader h = in.header();
        int op = h.opcode();
        Lane lane;
        try {
            lane = lanes.lane(h.lane());
        } catch (ProtocolException e) {
            readerInCall = false;
            release(in);
            throw e;
        }
        if (op != Opcodes.DATA && (h.wantsReply() || !pipelinedToLane) && lane.pending.get() == 0
                && dispatcher.runsInline(op)) {
            // The lane is idle, the call is quick and its caller waits: run it here, without waking
            // a thread. A pipelined call (no reply awaited) goes to the lane's thread even when
            // quick, so that this thread reads and queues the next frames while the driver runs it:
            // a burst of launches then costs the driver's time per launch, not the driver's plus ours.
            readerInCall = true;
            try {
                dispatcher.execute(lane, in, exec);
            } finally {
                readerInCall = false;
                release(in);
            }
        } else {
            try {
                lane.enqueue(in);
            } finally {
                readerInCall = false;
            }
        }
    }

    /**
     * A recorded session's frame, before its dispatch: true when it goes on now (then marked received in
     * {@code log}, and {@link #readerInCall} set until it is dispatched, so that a drain waits for it); false when a
     * checkpoint's drain holds it (a call frame, or any later frame of a lane with one held) or a frozen session
     * drops it (the frontend resends it where the session resumes).
     */
    private boolean admit(Inbound in, ResumeLog log) throws ProtocolException {
        FrameHeader h = in.header();
        synchronized (drainLock) {
            if (frozen) {
                releaseHeld(in);
                return false;
            }
            if (holding && (h.opcode() != Opcodes.DATA || heldLanes.contains(h.lane()))) {
                held.add(in);
                heldLanes.add(h.lane());
                return false;
            }
            if (log != null) {
                try {
                    log.received(h);
                } catch (ProtocolException e) {
                    release(in);
                    throw e;
                }
            }
            readerInCall = true;
            return true;
        }
    }

    /** Gives back a held frame that will not run (a LANE_END has no buffer). */
    private void releaseHeld(Inbound in) {
        if (in.header().opcode() != Opcodes.LANE_END) {
            release(in);
        }
    }

    /** A DATA frame whose bytes are in the shared window: its body names them ({@link SessionWindow#data}). */
    private Inbound windowData(FrameHeader h) throws IOException, InterruptedException {
        if (window == null || h.length() != Handshake.WINDOW_REF_BYTES) {
            channel.skipBody(h.length());
            throw new ProtocolException("window DATA frame " + (window == null ? "on a session without a shared window"
                    : "of bad length") + ": " + h);
        }
        return window.data(h, channel.readBody(h.length()), bodyBudget);
    }

    /** A frame is done with: its window slot, pooled buffer and budget go back. */
    void release(Inbound in) {
        if (in.bytesInWindow()) {
            in.window().inputDone(); // a frame of bytes in a window slot, which the frontend may now refill
        } else {
            dataBuffers.offer(in.body());
        }
        bodyBudget.release(in.charge());
    }

    /**
     * How long the session has been idle at {@code now} (a {@link System#nanoTime()} value): since its last
     * frame, when no call is queued or running (no lane is inside a driver call); 0 while one is.
     */
    public long idleNanos(long now) {
        if (readerInCall || lanes.busy()) {
            return 0;
        }
        return Math.max(0, now - lastFrameNanos);
    }

    /**
     * Ends the session from outside (the server's idle timeout): closes its connection, and its reader
     * ends it on its own thread, logging {@code reason}.
     */
    public void expire(String reason) {
        fail(reason);
    }

    /** Ends the session because the peer broke the protocol; the reader sees the closed channel. */
    void fail(String reason) {
        if (failure == null) {
            failure = reason;
        }
        FrameChannel c = channel;
        if (c != null) {
            c.close();
        }
    }

    void send(int opcode, int flags, int lane, long requestId, ByteBuffer... body) throws IOException {
        long bytes = SessionStats.bodyBytes(body); // counted before the send consumes the buffers
        Resume r = resume;
        if (r != null) {
            // kept until acknowledged; a send on a lost connection is not the lane's failure
            r.log().send(liveChannel, opcode, flags, lane, requestId, body);
        } else {
            channel.send(opcode, flags, lane, requestId, body);
        }
        stats.frameOut(bytes);
    }

    /**
     * A call's last DATA frame and its reply: in one write where the session is not resumable (the frontend's reader
     * takes both at once), else as two frames through the resume log, as {@link #send} sends each.
     */
    void sendDataAndReply(ByteBuffer data, int opcode, int lane, long requestId, ByteBuffer... reply) throws IOException {
        if (resume != null) {
            send(Opcodes.DATA, 0, lane, requestId, data);
            send(opcode, FrameHeader.FLAG_REPLY, lane, requestId, reply);
            return;
        }
        long dataBytes = data.remaining(), replyBytes = SessionStats.bodyBytes(reply);
        channel.sendTwo(Opcodes.DATA, 0, new ByteBuffer[] {data}, opcode, FrameHeader.FLAG_REPLY, reply, lane, requestId);
        stats.frameOut(dataBytes);
        stats.frameOut(replyBytes);
    }

    /**
     * Sends a window DATA frame of a call's output: {@code length} bytes at {@code offset} of {@code w}. A resumable
     * session keeps the bytes themselves, as a plain DATA frame (a window belongs to its connection, and a resume
     * brings a new one), and sends the reference only on {@code w}'s own connection, else the bytes.
     */
    void sendWindowData(SessionWindow w, int lane, long requestId, long offset, long length) throws IOException {
        ByteBuffer ref = io.gpusockets.protocol.wire.WindowSlots.ref(offset, length);
        Resume r = resume;
        if (r != null) {
            r.log().sendWindowData(liveChannel, w.channel(), lane, requestId, ref,
                    w.segment().asSlice(offset, length).asByteBuffer());
        } else {
            channel.send(Opcodes.DATA, FrameHeader.FLAG_WINDOW, lane, requestId, ref);
        }
        w.outputSent(length);
        stats.frameOut(Handshake.WINDOW_REF_BYTES);
    }

    /**
     * Stops the lanes, destroys what the session made, logs one line. Idempotent. The connection closes
     * at once; a lane still inside a driver call after the bounded waits of {@link Lanes#endAll} keeps
     * the session's contexts alive, and their release waits for it on a {@link SessionReaper} thread
     * ({@link #releasePending}).
     */
    public void end(String reason) {
        if (!ended.compareAndSet(false, true)) {
            return;
        }
        if (stable != null) {
            stable.ending(); // a restore waiting for its windows waits for the release below (or the reaper's)
        }
        FrameChannel current = channel;
        if (current != null) {
            current.close();
        }
        synchronized (drainLock) {
            frozen = true;
            for (Inbound in; (in = held.poll()) != null; ) {
                releaseHeld(in);
            }
        }
        for (Offer o; (o = offered.poll()) != null; ) {
            o.close();
        }
        callbackGates.close();   // no stream may stay blocked on a guest that is gone
        LaunchShares ls = launchShares;
        if (ls != null) {
            ls.end(); // no lane waits for admission, no event of ours is queried once contexts go
        }
        sharing.leaveAll(); // no other session's recording reaches our events or streams once they go
        boolean stuck = lanes.endAll();
        if (!stuck) {
            release(reason, false);
            return;
        }
        // A stream wait may be what the stuck lane is synchronizing behind: let it go (this destroys nothing).
        cleanup.releaseWaitsFirst();
        releasePending = true;
        LOG.log(Level.WARNING, "session " + id + " ended (" + reason + "), peer " + peer + ": a lane is still inside a"
                + " driver call; its contexts and memory are released when it returns");
        SessionReaper.defer(id, lanes, () -> release(reason, true));
    }

    /** Destroys what the session made and logs its end line; only once no lane is inside the driver. */
    private void release(String reason, boolean stuck) {
        closeChunkHasher(); // its module, stream and buffers, while their contexts exist
        String released = cleanup.releaseAll();
        if (stable != null) {
            stable.close(); // after the contexts: every mapping and address window of the session goes
        }
        if (placement != null) {
            placement.close(); // the managed windows likewise
        }
        callbackGates.releaseGraphWork(); // no context is left that could run a graph node of ours
        dataBuffers.close(); // a buffer still lent (a frame not yet done with) is freed when it comes back
        long missed = quota.close(); // every byte back to the tenant
        if (missed != 0) {
            LOG.log(Level.WARNING, "session " + id + ": " + missed + " bytes were still charged to tenant " + tenant.name()
                    + " after its release (given back now)");
        }
        for (SessionWindow w : windows) {
            w.release(); // every lane has finished: nothing of ours touches it any more
        }
        releasePending = false;
        peerFaults.flush();
        LOG.log(stuck ? Level.WARNING : Level.INFO, SessionCleanup.endLine(id, reason, peer, released, stuck, windowBytes()));
    }

    /**
     * Whether this session has ended but not yet released its contexts and memory, because a lane is
     * still inside a driver call ({@link SessionReaper}).
     */
    public boolean releasePending() {
        return releasePending;
    }

    /** Whether {@link #end} has been called. */
    public boolean ended() {
        return ended.get();
    }

    /** Sessions of this backend that ended but whose release waits for a lane stuck in the driver ("zombies"). */
    public static int releasesPending() {
        return SessionReaper.pending();
    }

    /**
     * Reserves room for handles ({@link SessionHandles#reserve}) within the session's caps, each also
     * bounded by its tenant's; returns null, or the cap that refused ("handles", "streams"), counted
     * as the tenant's rejection.
     */
    String reserveHandles(int n, int streams) {
        String refused = handles.reserve(n, streams, handleCap("handles"), handleCap("streams"));
        if (refused != null) {
            tenant.rejected(refused);
        }
        return refused;
    }

    /** The cap now in force on "handles" or "streams": the session's, or its tenant's when lower. */
    int handleCap(String what) {
        io.gpusockets.backend.tenant.TenantLimits t = tenant.limits();
        return what.equals("streams") ? Math.min(limits.maxStreams(), t.streams()) : Math.min(limits.maxHandles(), t.handles());
    }

    /** Forgets a handle and what it owned ({@link SessionCleanup#dropHandle}). */
    void dropHandle(long handleId) {
        cleanup.dropHandle(handleId);
    }

    /** The handle id of a lane's current context (0 if none). */
    long currentContextId(Lane lane) {
        return handles.idOf(ParamType.CTX, lane.topContext());
    }

    /** A destroyed context leaves every lane's stack. */
    void forgetContext(long real) {
        ExecutionThread.contextDestroyed();
        lanes.forgetContext(real);
    }
}
