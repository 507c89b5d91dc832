package io.gpusockets.frontend;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ManagedRange;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * The guest's half of managed memory (issue 25): one pointer valid on the program's CPU and on the remote GPU, with
 * CUDA's own model for GPUs without concurrent managed access (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0,
 * what CUDA does on Windows and did before Pascal): the CPU may touch managed memory only while no GPU work that
 * could use it runs, and data moves at launch and synchronisation points.
 *
 * <p><b>The address.</b> The backend makes a managed allocation as device memory ({@code ManagedCalls}: zeroed, padded
 * so that two never share a guest page) and answers its address; this class then maps anonymous memory at the same
 * address in this process with {@code MAP_FIXED_NOREPLACE}, covering the allocation's pages. Where something of the
 * process already lies there ({@code EEXIST}: a clash) the allocation is freed on the backend and the program gets
 * CUDA_ERROR_OUT_OF_MEMORY, with one stderr line naming the address; a pointer is never silently different on the two
 * sides. Before the connection's handshake the managed range is reserved ({@link #reserveRange}, {@code ManagedRange},
 * GPUSOCKETS_MANAGED_RANGE) and the HELLO announces it; the backend then places managed allocations inside it (without
 * address-stable memory in windows of their own, with it in the session's windows, which lie there), and those are
 * mapped with {@code MAP_FIXED} over the reservation (reserved again when freed), where no clash can happen in the
 * guest. Outside it (no range, or a window the backend had to put at its slot) the address is the driver's or the
 * window's, mapped with {@code MAP_FIXED_NOREPLACE} as above.
 *
 * <p><b>Pages.</b> Tracked with userfaultfd (Linux 5.11+: for every fault where the process may, else with
 * {@code UFFD_USER_MODE_ONLY}, which needs no privilege, for the program's own accesses), not with
 * {@code mprotect} and a SIGSEGV handler: a fault blocks the faulting thread in the kernel while a thread of this class
 * resolves it, so no signal handler has to be chained with the embedded JVM's (which runs with {@code -Xrs} but still
 * owns SIGSEGV for its own null checks and safepoints), nothing runs in signal context, and a page is installed whole
 * and atomically ({@code UFFDIO_COPY}): no other thread sees it half-fetched. Each page of an allocation is in one
 * state: {@code DEVICE} (absent here, the device's copy is the truth), {@code ZERO} (absent, both sides known zero:
 * fresh memory), {@code CLEAN} (present and write-protected, equal to the device's) or {@code DIRTY} (present and
 * writable, newer than the device's). A read of an absent page fetches a batch of up to
 * {@code GPUSOCKETS_MANAGED_BATCH_PAGES} (default 64) consecutive absent pages of the allocation with one
 * {@code cuMemcpyDtoH} (ZERO pages are filled here, nothing moves), installed write-protected; the first write to a
 * CLEAN page makes it DIRTY (a write-protect fault: the page is unprotected, nothing moves).
 *
 * <p><b>When data moves.</b> Before any call that submits GPU work ({@link #submitsWork}: launches of every kind,
 * graph launches, copies, memsets, prefetches, stream memory operations, host functions), every DIRTY page goes to
 * the device in runs of consecutive pages (one {@code cuMemcpyHtoD} each), and then every page of every managed
 * allocation becomes DEVICE ({@code MADV_DONTNEED}: the device may change any of them), so the first CPU touch after
 * the work fetches what the GPU left. A kernel launch ({@code cuLaunchKernel}, {@code cuLaunchCooperativeKernel},
 * {@code cuLaunchKernelEx}) on stream S does this only for the allocations it may use, by their stream association
 * ({@code cuStreamAttachMemAsync}, or {@code CU_MEM_ATTACH_HOST} at {@code cuMemAllocManaged}; {@link #usedBy}):
 * GLOBAL (the default, and every {@code __managed__} variable) always, HOST never, SINGLE on stream T when S is T or
 * the legacy NULL stream (0 or CU_STREAM_LEGACY, which synchronises with every blocking stream); memory attached to
 * the host or to another stream keeps its present pages (and its unsent writes) through the launch, as the driver
 * lets the CPU use it while such a kernel runs. Other GPU work (copies, memsets, graph launches, host functions,
 * stream memory operations) makes every allocation coherent, whatever it is attached to. Pages are marked device-newer at submission rather than at the following
 * synchronisation, which is the same under the model (the CPU must not touch them in between) and needs no hook on
 * the synchronising calls. Data the frontend itself reads or writes as host memory (a managed pointer passed where
 * the API takes a host buffer) is made present, and for writes DIRTY, on the calling thread before the call, so no
 * JVM thread of the frontend blocks in a fault (one could wait there for a safepoint that waits for it); Java programs
 * call {@link RemoteCudaDriver#prepareManagedAccess} before touching managed memory for the same reason.
 *
 * <p><b>What a program must not do</b> (README, Managed memory): touch managed memory from the CPU between submitting
 * GPU work and synchronising with it. On a GPU of this kind that is a segmentation fault; here a read fetches the
 * device's bytes at some moment (not ordered after the work the program submitted), and a later write sends the page
 * back whole at the next submission: the result is undefined, as CUDA says, but no other memory is touched and the
 * backend checks every range as always. Where only user-mode faults are served, kernel-mode accesses (passing an
 * absent managed page to {@code read(2)} or {@code write(2)}) fail with EFAULT; touch the buffer first.
 *
 * <p><b>Advice and prefetches.</b> {@code cuMemAdvise(_v2)} and {@code cuMemPrefetchAsync(_v2)} are recorded page by
 * page ({@link RangeAdvice}) and {@code cuMemRangeGetAttribute(s)} is answered here from them ({@link #rangeAttribute}).
 * A prefetch is not GPU work in the sense above: it moves its own range at the call ({@link #prefetched}: to the CPU
 * the device-newer pages in batches of up to 16 MiB, to a device the DIRTY pages) and leaves every other page as it is.
 *
 * <p>Counters ({@link #stats}; {@code GPUSOCKETS_MANAGED_STATS=1} prints them on stderr at the program's exit): pages
 * and bytes sent, pages and bytes fetched, pages filled with zeros here, faults.
 *
 * <p>{@code __managed__} variables ({@link #adoptGlobal}): the library's global, as cuLibraryGetGlobal answers it, is
 * mapped the same way, its pages DEVICE (the initializer is the device's); variables whose pages touch share one
 * region, only their own bytes move, and cuLibraryUnload unmaps them.
 *
 * <p><b>Mapped pinned host memory</b> (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP, cudaHostAllocMapped; issue 25
 * item 5) is an allocation of this kind too ({@link #markMappedHost}): the host pointer is the device pointer, as with
 * unified addressing on a GPU, and it is made coherent as managed memory is; only its pointer attributes (those of
 * pinned host memory), its refusals (advice, prefetches, attachment and cuMemFree answer CUDA_ERROR_INVALID_VALUE, as
 * for memory that is not managed) and one check differ: a CPU write to it while GPU work submitted since the last
 * synchronisation may still run ({@link #afterCall}) is said once on stderr, or ends the program with
 * GPUSOCKETS_MAPPED_POLLING=exit ({@link #writeWhileWorkRuns}), since the work would never see the write (a kernel
 * polling a host flag).
 *
 * <p>A transfer that fails (the connection lost) is reported on stderr; a page whose fetch failed is installed with
 * zeros where the device's bytes were to be, so that the faulting thread goes on. Not here yet: advice that changes
 * when data moves ({@code cuMemAdvise} is accepted and changes nothing), guests
 * with pages other than 4 KiB, a fault handler for processes whose kernel lacks userfaultfd (managed memory is then
 * refused with CUDA_ERROR_NOT_SUPPORTED and one stderr line).
 */
final class ManagedMemory implements AutoCloseable {
    /** Page states. */
    private static final byte DEVICE = 0;
    private static final byte ZERO = 1;
    private static final byte CLEAN = 2;
    private static final byte DIRTY = 3;

    private static final long PAGE = 4096;
    /** CUmemAttach_flags. */
    static final int ATTACH_GLOBAL = 1;
    static final int ATTACH_HOST = 2;
    static final int ATTACH_SINGLE = 4;
    /** What a call that is no kernel launch passes as its stream to {@link #beforeCall}. */
    static final long NO_STREAM = Long.MIN_VALUE;
    /** CU_DEVICE_CPU, CU_DEVICE_INVALID and the CUmemLocationType values. */
    static final int DEVICE_CPU = -1;
    static final int DEVICE_INVALID = -2;
    static final int LOCATION_INVALID = 0;
    static final int LOCATION_DEVICE = 1;
    static final int LOCATION_HOST = 2;
    static final int LOCATION_HOST_NUMA = 3;
    static final int LOCATION_HOST_NUMA_CURRENT = 4;
    /** CU_STREAM_LEGACY: the NULL stream, which synchronises with every blocking stream, as 0 does. */
    private static final long STREAM_LEGACY = 1;
    /** The most bytes one flush copy carries (the copy streams in chunks anyway). */
    private static final long MAX_RUN = 64L << 20;

    // Linux ABI (x86_64 and arm64 agree on all but the syscall number)
    private static final int PROT_NONE = 0;
    private static final int PROT_READ_WRITE = 3;
    private static final int MAP_FIXED = 0x10;
    private static final int MAP_PRIVATE = 0x02;
    private static final int MAP_ANONYMOUS = 0x20;
    private static final int MAP_NORESERVE = 0x4000;
    private static final int MAP_FIXED_NOREPLACE = 0x100000;
    private static final int MADV_DONTNEED = 4;
    private static final int O_CLOEXEC = 0x80000;
    private static final int UFFD_USER_MODE_ONLY = 1;
    private static final long UFFD_API = 0xAA;
    private static final long UFFD_FEATURE_PAGEFAULT_FLAG_WP = 1;
    private static final long UFFDIO_API = 0xC018AA3FL;
    private static final long UFFDIO_REGISTER = 0xC020AA00L;
    private static final long UFFDIO_UNREGISTER = 0x8010AA01L;
    private static final long UFFDIO_WAKE = 0x8010AA02L;
    private static final long UFFDIO_COPY = 0xC028AA03L;
    private static final long UFFDIO_WRITEPROTECT = 0xC018AA06L;
    private static final long REGISTER_MODE_MISSING = 1;
    private static final long REGISTER_MODE_WP = 2;
    private static final long COPY_MODE_DONTWAKE = 1;
    private static final long COPY_MODE_WP = 2;
    private static final int EVENT_PAGEFAULT = 0x12;
    private static final long PAGEFAULT_FLAG_WRITE = 1;
    private static final long PAGEFAULT_FLAG_WP = 2;
    private static final int POLLIN = 1;
    private static final int EINTR = 4;
    private static final int EAGAIN = 11;
    private static final int EEXIST = 17;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final MethodHandle SYSCALL = downcall("syscall", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT),
            Linker.Option.firstVariadicArg(1));
    private static final MethodHandle IOCTL = downcall("ioctl", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS),
            Linker.Option.firstVariadicArg(2));
    private static final MethodHandle MMAP = downcall("mmap",
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle MUNMAP = downcall("munmap", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle MADVISE = downcall("madvise", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle READ = downcall("read", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle POLL = downcall("poll", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle CLOSE = downcall("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle GETPAGESIZE = downcall("getpagesize", FunctionDescriptor.of(JAVA_INT));
    private static final MethodHandle EXIT = downcall("_exit", FunctionDescriptor.ofVoid(JAVA_INT));

    /**
     * One guest region of managed memory: the pages [start, start + pages * PAGE), covering the device byte ranges
     * {@code bases[i], sizes[i]} (one cuMemAllocManaged allocation, or the {@code __managed__} variables of one library
     * whose pages touch: {@code library} is then its handle, else 0). Only bytes in the ranges move.
     */
    private static final class Allocation {
        final long start;
        final int pages;
        final long context;
        final long library;
        final long[] bases;
        final long[] sizes;
        final byte[] state;
        /**
         * Its stream association (cuStreamAttachMemAsync, or the flags of cuMemAllocManaged): ATTACH_GLOBAL, _HOST or
         * _SINGLE with {@link #stream}; guarded by the ManagedMemory.
         */
        int attach = ATTACH_GLOBAL;
        long stream;
        /**
         * Mapped pinned host memory (cuMemHostAlloc with DEVICEMAP, {@link #markMappedHost}) rather than managed memory:
         * the same pages and transfers, other pointer attributes, no advice, prefetch or attachment; guarded by the
         * ManagedMemory.
         */
        boolean mappedHost;
        /** What cuMemAdvise and cuMemPrefetchAsync were told, per page; null until the first; guarded by the ManagedMemory. */
        private RangeAdvice advice;

        RangeAdvice advice() {
            if (advice == null) {
                advice = new RangeAdvice(pages);
            }
            return advice;
        }

        Allocation(long start, int pages, long context, long library, long[] bases, long[] sizes, byte[] state) {
            this.start = start;
            this.pages = pages;
            this.context = context;
            this.library = library;
            this.bases = bases;
            this.sizes = sizes;
            this.state = state;
        }

        /** A cuMemAllocManaged allocation's region: fresh pages, ZERO. */
        static Allocation of(long base, long size, long context) {
            long start = base & -PAGE;
            int pages = (int) ((base + size - start + PAGE - 1) / PAGE);
            byte[] state = new byte[pages];
            java.util.Arrays.fill(state, ZERO);
            return new Allocation(start, pages, context, 0, new long[] {base}, new long[] {size}, state);
        }

        long pageAddress(int page) {
            return start + page * PAGE;
        }

        long end() {
            return pageAddress(pages);
        }

        /** Whether this is the cuMemAllocManaged allocation at {@code base}. */
        boolean isAllocation(long base) {
            return library == 0 && bases[0] == base;
        }
    }

    private final CallChannel channel;
    private final RemoteCudaDriver driver;
    private final int batchPages;
    private final boolean printStats;
    /** Live allocations by guest start page address; guarded by this. */
    private final TreeMap<Long, Allocation> allocations = new TreeMap<>();
    /**
     * The managed range this frontend reserved and the backend accepted ({@link #reserveRange}, set at construction):
     * [rangeBase, rangeBase + rangeSize); size 0: none (or given back at {@link #close}). Guarded by this.
     */
    private long rangeBase, rangeSize;
    /** Whether {@link #refusedOnBackend} said its line; guarded by this. */
    private boolean rangeRefusalSaid;
    /** Whether managed memory was ever mapped on this connection (set once, never cleared). */
    private volatile boolean used;
    /** Whether mapped pinned host memory was ever made on this connection (set once, never cleared). */
    private volatile boolean mappedUsed;
    /**
     * Whether GPU work was submitted since the last synchronisation point this connection saw ({@link #afterCall}),
     * kept once mapped host memory exists: a CPU write to mapped host memory meanwhile ends the program
     * ({@link #writeWhileWorkRuns}).
     */
    private volatile boolean workInFlight;
    /** Whether any page of any allocation is present (a submission then has work to do); guarded by this. */
    private boolean anyPresent;
    private final LongAdder pagesSent = new LongAdder();
    private final LongAdder bytesSent = new LongAdder();
    private final LongAdder pagesFetched = new LongAdder();
    private final LongAdder bytesFetched = new LongAdder();
    private final LongAdder pagesZeroFilled = new LongAdder();
    private final LongAdder faults = new LongAdder();
    /** Threads inside this class's own copies (and the fault thread): their calls skip the hooks. */
    private static final ThreadLocal<Boolean> BUSY = ThreadLocal.withInitial(() -> false);
    /** The userfaultfd, opened at the first allocation; -1 before, -2 when it cannot be had. */
    private int uffd = -1;
    private Thread faultThread;
    private volatile boolean closed;
    private final Arena arena = Arena.ofShared();
    /** Staging for fetches and zero fills (the fault thread's and callers', under this object's lock). */
    private MemorySegment staging;
    private MemorySegment zeros;
    /** Whether the userfaultfd serves the kernel's faults too (system calls on absent managed pages), not only the program's. */
    private boolean kernelFaults;
    /** The context the fault thread has current. */
    private long faultThreadContext;

    /**
     * {@code range}: the managed range {base, size} the backend accepted in the handshake ({@link #reserveRange}), whose
     * reservation this object now owns and gives back at {@link #close}; null for none.
     */
    ManagedMemory(CallChannel channel, RemoteCudaDriver driver, long[] range) {
        this.channel = channel;
        this.driver = driver;
        String batch = FrontendConfig.setting("GPUSOCKETS_MANAGED_BATCH_PAGES");
        int b = 64;
        if (batch != null) {
            try {
                b = Math.clamp(Integer.parseInt(batch.trim()), 1, 4096);
            } catch (NumberFormatException e) {
                System.err.println("gpusockets: GPUSOCKETS_MANAGED_BATCH_PAGES=" + batch + " is no number; using 64");
            }
        }
        this.batchPages = b;
        if (range != null) {
            this.rangeBase = range[0];
            this.rangeSize = range[1];
        }
        this.printStats = "1".equals(FrontendConfig.setting("GPUSOCKETS_MANAGED_STATS"));
        this.exitOnPolling = "exit".equals(FrontendConfig.setting("GPUSOCKETS_MAPPED_POLLING"));
    }

    /**
     * Whether {@code f} submits GPU work that may read or write managed memory (the class comment). A prefetch
     * (cuMemPrefetchAsync(_v2)) is not such work: it moves the pages of its range only, after the call
     * ({@link #prefetched}).
     */
    static boolean submitsWork(ApiFunction f) {
        String n = f.name();
        return n.startsWith("cuLaunch") || n.startsWith("cuGraphLaunch") || n.startsWith("cuMemcpy")
                || n.startsWith("cuMemset") || n.startsWith("cuMemPrefetchBatch") || n.startsWith("cuStreamWriteValue")
                || n.startsWith("cuStreamWaitValue") || n.startsWith("cuStreamBatchMemOp") || n.startsWith("cuMemBatchDecompress")
                || n.startsWith("cuMemDiscard") || n.equals("cuStreamAddCallback");
    }

    /**
     * GPUSOCKETS_MANAGED_RANGE: the managed range's size ({@code 256G}, {@code 1T}, bytes, or with a {@code K}, {@code M},
     * {@code G}, {@code T} suffix, optionally followed by {@code iB} or {@code B}; rounded up to 1 GiB), optionally
     * followed by {@code @ADDRESS} (hexadecimal with {@code 0x}, or decimal; a multiple of 1 GiB) for a range at exactly
     * that place instead of one chosen at random (reproducible addresses); {@code 0} or {@code off} for none (the
     * driver's addresses, each mapped with {@code MAP_FIXED_NOREPLACE}); default 256 GiB anywhere. Returns {base (0:
     * anywhere), size}, or null for none.
     *
     * @throws IllegalArgumentException naming the setting, for a value that is none of these
     */
    static long[] rangeSetting(String v) {
        if (v == null || v.isBlank()) {
            return new long[] {0, ManagedRange.DEFAULT_SIZE};
        }
        String t = v.strip().toUpperCase(java.util.Locale.ROOT);
        if (t.equals("OFF") || t.equals("0")) {
            return null;
        }
        try {
            long base = 0;
            int at = t.indexOf('@');
            if (at >= 0) {
                String a = t.substring(at + 1).strip();
                base = a.startsWith("0X") ? Long.parseUnsignedLong(a.substring(2), 16) : Long.parseLong(a);
                t = t.substring(0, at).strip();
            }
            t = t.replace("IB", "").replace("B", "");
            int shift = switch (t.charAt(t.length() - 1)) {
                case 'K' -> 10;
                case 'M' -> 20;
                case 'G' -> 30;
                case 'T' -> 40;
                default -> 0;
            };
            long n = Long.parseLong(shift == 0 ? t : t.substring(0, t.length() - 1));
            if (n <= 0 || n > ((ManagedRange.HINT_HIGH - ManagedRange.HINT_LOW) >>> shift)) {
                throw new NumberFormatException();
            }
            long size = ((n << shift) + ManagedRange.ALIGNMENT - 1) & -ManagedRange.ALIGNMENT;
            String bad = at < 0 ? null : ManagedRange.check(base, size);
            if (bad != null) {
                throw new IllegalArgumentException("GPUSOCKETS_MANAGED_RANGE=" + v + ": " + bad);
            }
            return new long[] {base, size};
        } catch (NumberFormatException | IndexOutOfBoundsException e) {
            throw new IllegalArgumentException("GPUSOCKETS_MANAGED_RANGE=" + v + " is no size: give one such as 256G or 1T"
                    + " (at most 64T), optionally @ADDRESS (0x..., a multiple of 1 GiB), a number of bytes, or off");
        }
    }

    /**
     * Before the connection's handshake ({@link RemoteCudaDriver#connect}): reserves the managed range {@code asked}
     * ({@link #rangeSetting}: {base or 0, size}) in this process ({@code PROT_NONE}, {@code MAP_NORESERVE}): at its base,
     * or at a 1 GiB-aligned place asked for at random from {@link ManagedRange#HINT_LOW} to {@link ManagedRange#HINT_HIGH}
     * (up to 16 places), and registers it ({@link ManagedRange#guest}). The HELLO announces it; where the backend does not
     * accept it, or the connection fails, {@link #releaseRange} gives it back. Returns {base, size}, or null for none
     * asked or no free place found at random (managed memory then keeps the driver's addresses, each mapped with
     * MAP_FIXED_NOREPLACE).
     *
     * @throws IllegalArgumentException when the base asked for is already used in this process
     */
    static long[] reserveRange(long[] asked) {
        if (asked == null) {
            return null;
        }
        long size = asked[1];
        if (asked[0] != 0) {
            if (!reserve(asked[0], size, MAP_FIXED_NOREPLACE)) {
                throw new IllegalArgumentException(String.format("GPUSOCKETS_MANAGED_RANGE: 0x%x+0x%x is already in use in"
                        + " this process (or not mappable): choose another address, or none", asked[0], size));
            }
            ManagedRange.guest(asked[0], size);
            return asked.clone();
        }
        java.util.random.RandomGenerator random = new java.security.SecureRandom();
        long slots = (ManagedRange.HINT_HIGH - ManagedRange.HINT_LOW - size) / ManagedRange.ALIGNMENT + 1;
        for (int i = 0; i < 16; i++) {
            long at = ManagedRange.HINT_LOW + random.nextLong(slots) * ManagedRange.ALIGNMENT;
            if (reserve(at, size, MAP_FIXED_NOREPLACE)) {
                ManagedRange.guest(at, size);
                return new long[] {at, size};
            }
        }
        return null;
    }

    /** Gives back a range {@link #reserveRange} made that no ManagedMemory owns (the backend did not accept it). */
    static void releaseRange(long[] range) {
        if (range == null) {
            return;
        }
        ManagedRange.guestGone(range[0]);
        try (Arena call = Arena.ofConfined()) {
            int ignored = (int) MUNMAP.invokeExact(call.allocate(CALL_STATE), MemorySegment.ofAddress(range[0]), range[1]);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Maps nothing (no access, no memory) at exactly [start, start + length) with {@code how}; false where it cannot. */
    private static boolean reserve(long start, long length, int how) {
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CALL_STATE);
            MemorySegment got = (MemorySegment) MMAP.invokeExact(state, MemorySegment.ofAddress(start), length, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | how, -1, 0L);
            if (got.address() != -1L && got.address() != start) {
                int ignored = (int) MUNMAP.invokeExact(state, got, length);
            }
            return got.address() == start;
        } catch (Throwable t) {
            return false;
        }
    }

    /**
     * The backend answered a cuMemAllocManaged (or the one behind mapped host memory) with CUDA_ERROR_OUT_OF_MEMORY:
     * with a managed range, the first time, one stderr line saying where managed memory must lie and the two causes
     * (the device is full, or the backend process maps something in the range, which its log names).
     */
    void refusedOnBackend(long bytes) {
        long base, size;
        synchronized (this) {
            if (rangeSize == 0 || rangeRefusalSaid) {
                return;
            }
            rangeRefusalSaid = true;
            base = rangeBase;
            size = rangeSize;
        }
        System.err.printf("gpusockets: cuMemAllocManaged of %d bytes refused (CUDA_ERROR_OUT_OF_MEMORY): managed memory"
                + " lies in this session's managed range 0x%x+0x%x (GPUSOCKETS_MANAGED_RANGE); the device's memory may be"
                + " used up, or the backend process maps something there (the backend's log names it: choose another"
                + " range with GPUSOCKETS_MANAGED_RANGE=SIZE@ADDRESS, or off)%n", bytes, base, size);
    }

    /** Whether [start, start + length) lies in the managed range; guarded by this. */
    private boolean inRange(long start, long length) {
        return rangeSize != 0 && start >= rangeBase && length <= rangeBase + rangeSize - start;
    }

    /** The managed range {base, size} this frontend reserved and the backend accepted, or null (tests, status). */
    synchronized long[] range() {
        return rangeSize == 0 ? null : new long[] {rangeBase, rangeSize};
    }

    ManagedMemoryStats stats() {
        return new ManagedMemoryStats(pagesSent.sum(), bytesSent.sum(), pagesFetched.sum(), bytesFetched.sum(), pagesZeroFilled.sum(),
                faults.sum());
    }

    /**
     * A cuMemAllocManaged succeeded on the backend at {@code base}: maps the same address here. Returns
     * CUDA_SUCCESS, or the error the program gets after the backend's allocation was freed again.
     */
    int allocated(long base, long size, int flags) {
        synchronized (this) {
            if (!open()) {
                return refuse(base, "the kernel offers no userfaultfd (Linux 5.11+ with UFFD_USER_MODE_ONLY) to track"
                        + " managed pages", CuResult.CUDA_ERROR_NOT_SUPPORTED);
            }
            if (size > (long) Integer.MAX_VALUE * PAGE / 2) {
                return refuse(base, "larger than the guest pages this frontend tracks", CuResult.CUDA_ERROR_OUT_OF_MEMORY);
            }
            Allocation a = Allocation.of(base, size, currentContext());
            String failed = mapPages(a.start, a.pages * PAGE);
            if (failed != null) {
                return refuse(base, failed, failed.contains("userfaultfd") ? CuResult.CUDA_ERROR_NOT_SUPPORTED
                        : CuResult.CUDA_ERROR_OUT_OF_MEMORY);
            }
            a.attach = flags == ATTACH_HOST ? ATTACH_HOST : ATTACH_GLOBAL;
            allocations.put(a.start, a);
            used = true;
            anyPresent = true; // ZERO pages too: a submission must turn them into DEVICE
            return CuResult.CUDA_SUCCESS;
        }
    }

    /**
     * Maps anonymous memory at exactly [start, start + length) and registers it with the userfaultfd; null, or why not
     * (nothing is left mapped then).
     */
    private String mapPages(long start, long length) {
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CALL_STATE);
            // inside the managed range: over this frontend's own reservation, where nothing else of the process can lie
            int placement = inRange(start, length) ? MAP_FIXED : MAP_FIXED_NOREPLACE;
            MemorySegment got = (MemorySegment) MMAP.invokeExact(state, MemorySegment.ofAddress(start), length,
                    PROT_READ_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | placement, -1, 0L);
            if (got.address() == -1L || got.address() != start) {
                int errno = got.address() == -1L ? (int) ERRNO.get(state, 0L) : EEXIST;
                if (got.address() != -1L) {
                    int ignored = (int) MUNMAP.invokeExact(state, got, length);
                }
                return String.format("guest address range 0x%x+%d is %s", start, length,
                        errno == EEXIST ? "already in use in this process (a clash)" : "not mappable (errno " + errno + ")");
            }
            MemorySegment reg = call.allocate(32);
            reg.set(JAVA_LONG, 0, start);
            reg.set(JAVA_LONG, 8, length);
            reg.set(JAVA_LONG, 16, REGISTER_MODE_MISSING | REGISTER_MODE_WP);
            if ((int) IOCTL.invokeExact(state, uffd, UFFDIO_REGISTER, reg) != 0) {
                int errno = (int) ERRNO.get(state, 0L);
                unreserve(start, length);
                return "userfaultfd cannot track 0x" + Long.toHexString(start) + " (errno " + errno + ")";
            }
            return null;
        } catch (Throwable t) {
            return "mapping it failed: " + t;
        }
    }

    /**
     * A {@code __managed__} variable of {@code library} at [address, address + size) (cuLibraryGetManaged, answered
     * through cuLibraryGetGlobal): maps its pages here, DEVICE (the device holds its initial value). Variables whose
     * pages touch share one region; a page shared with memory of another kind is refused as a clash. Returns
     * CUDA_SUCCESS or the error the program gets.
     */
    int adoptGlobal(long address, long size, long library) {
        synchronized (this) {
            if (size <= 0 || size > (long) Integer.MAX_VALUE * PAGE / 2) {
                return size <= 0 ? CuResult.CUDA_SUCCESS : CuResult.CUDA_ERROR_OUT_OF_MEMORY;
            }
            if (!open()) {
                System.err.println("gpusockets: __managed__ variables need userfaultfd (Linux 5.11+ with UFFD_USER_MODE_ONLY):"
                        + " CUDA_ERROR_NOT_SUPPORTED");
                return CuResult.CUDA_ERROR_NOT_SUPPORTED;
            }
            long start = address & -PAGE;
            long end = (address + size + PAGE - 1) & -PAGE;
            List<Allocation> touching = new java.util.ArrayList<>();
            for (Allocation a : allocations.values()) {
                if (a.start < end && a.end() > start) {
                    touching.add(a);
                }
            }
            if (touching.size() > 1 || touching.size() == 1 && touching.getFirst().library != library) {
                System.err.println(String.format("gpusockets: __managed__ variable at 0x%x+%d shares guest pages with other"
                        + " managed memory (a clash): CUDA_ERROR_OUT_OF_MEMORY", address, size));
                return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
            }
            if (touching.isEmpty()) {
                String failed = mapPages(start, end - start);
                if (failed != null) {
                    System.err.println("gpusockets: __managed__ variable at 0x" + Long.toHexString(address) + ": " + failed);
                    return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
                }
                byte[] state = new byte[(int) ((end - start) / PAGE)];
                java.util.Arrays.fill(state, DEVICE);
                allocations.put(start, new Allocation(start, state.length, currentContext(), library,
                        new long[] {address}, new long[] {size}, state));
                used = true;
                return CuResult.CUDA_SUCCESS;
            }
            Allocation r = touching.getFirst();
            for (int i = 0; i < r.bases.length; i++) {
                if (r.bases[i] == address) {
                    return CuResult.CUDA_SUCCESS; // asked again
                }
            }
            long newStart = Math.min(start, r.start), newEnd = Math.max(end, r.end());
            String failed = newStart < r.start ? mapPages(newStart, r.start - newStart) : null;
            if (failed == null && newEnd > r.end()) {
                failed = mapPages(r.end(), newEnd - r.end());
                if (failed != null && newStart < r.start) {
                    unmapPages(newStart, r.start - newStart);
                }
            }
            if (failed != null) {
                System.err.println("gpusockets: __managed__ variable at 0x" + Long.toHexString(address) + ": " + failed);
                return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
            }
            // the shared pages hold zeros where the new variable lies: send what was written there, then fetch anew
            boolean was = BUSY.get();
            BUSY.set(true);
            try {
                for (int p = (int) ((Math.max(start, r.start) - r.start) / PAGE); p < r.pages && r.pageAddress(p) < end; p++) {
                    if (r.state[p] == DIRTY) {
                        send(r, p, 1);
                    }
                    if (r.state[p] != DEVICE) {
                        madvise(r.pageAddress(p), PAGE);
                        r.state[p] = DEVICE;
                    }
                }
            } finally {
                BUSY.set(was);
            }
            byte[] state = new byte[(int) ((newEnd - newStart) / PAGE)];
            java.util.Arrays.fill(state, DEVICE);
            System.arraycopy(r.state, 0, state, (int) ((r.start - newStart) / PAGE), r.pages);
            long[] bases = java.util.Arrays.copyOf(r.bases, r.bases.length + 1);
            long[] sizes = java.util.Arrays.copyOf(r.sizes, r.sizes.length + 1);
            bases[r.bases.length] = address;
            sizes[r.sizes.length] = size;
            allocations.remove(r.start);
            allocations.put(newStart, new Allocation(newStart, state.length, r.context, library, bases, sizes, state));
            return CuResult.CUDA_SUCCESS;
        }
    }

    /** cuLibraryUnload of {@code library} succeeded: its {@code __managed__} variables' pages go. */
    synchronized void libraryUnloaded(long library) {
        allocations.values().removeIf(a -> {
            if (a.library == library && library != 0) {
                unmap(a);
                return true;
            }
            return false;
        });
    }

    private int refuse(long base, String why, int result) {
        System.err.println("gpusockets: cuMemAllocManaged at 0x" + Long.toHexString(base) + " refused ("
                + CuResult.name(result) + "): " + why);
        BUSY.set(true);
        try {
            driver.cuMemFree(base);
        } finally {
            BUSY.set(false);
        }
        return result;
    }

    /** Whether {@code p} lies in a {@code __managed__} variable ({@link #adoptGlobal}). */
    synchronized boolean isManagedVariable(long p) {
        Allocation a = find(p);
        if (a == null || a.library == 0) {
            return false;
        }
        for (int i = 0; i < a.bases.length; i++) {
            if (p >= a.bases[i] && p - a.bases[i] < a.sizes[i]) {
                return true;
            }
        }
        return false;
    }

    /** Whether {@code base} is a managed allocation's base. */
    synchronized boolean isManaged(long base) {
        Allocation a = find(base);
        return a != null && a.isAllocation(base) && !a.mappedHost;
    }

    /**
     * The managed allocation just made at {@code base} ({@link #allocated}) is mapped pinned host memory
     * (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP): the same pages and transfers, the pointer attributes of host
     * memory ({@link #isMappedHost}), refused to advice, prefetches, attachment and cuMemFree, and from now on a CPU
     * write to it while GPU work may run is said once, or ends the program ({@link #writeWhileWorkRuns}).
     */
    synchronized void markMappedHost(long base, boolean mapped) {
        Allocation a = find(base);
        if (a != null && a.isAllocation(base)) {
            a.mappedHost = mapped;
            if (mapped) {
                mappedUsed = true;
            }
        }
    }

    /** Whether {@code p} lies in mapped pinned host memory ({@link #markMappedHost}). */
    boolean isMappedHost(long p) {
        if (!mappedUsed) {
            return false; // the per-call path of a program without mapped memory: one volatile read
        }
        synchronized (this) {
            Allocation a = find(p);
            return a != null && a.mappedHost && p >= a.bases[0] && p - a.bases[0] < a.sizes[0];
        }
    }

    /** The base of the mapped host allocation {@code p} lies in; 0 if none. */
    synchronized long mappedHostBase(long p) {
        Allocation a = find(p);
        return a != null && a.mappedHost && p >= a.bases[0] && p - a.bases[0] < a.sizes[0] ? a.bases[0] : 0;
    }

    /**
     * Called with every reply ({@link CallChannel}) once mapped host memory exists: a synchronisation point that
     * succeeded (cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize, a cuStreamQuery or cuEventQuery that says
     * done, a synchronous copy) ends {@link #workInFlight}. It errs towards "done" (a synchronised stream says nothing
     * of another's work), so that a program that synchronises is never stopped; what it misses is a write it cannot see.
     */
    void afterCall(ApiFunction f, int result) {
        if (!mappedUsed || result != CuResult.CUDA_SUCCESS || BUSY.get()) {
            return;
        }
        String n = f.name();
        if (n.startsWith("cuCtxSynchronize") || n.startsWith("cuStreamSynchronize") || n.startsWith("cuEventSynchronize")
                || n.startsWith("cuStreamQuery") || n.startsWith("cuEventQuery")
                || n.startsWith("cuMemcpy") && !n.contains("Async")) {
            workInFlight = false;
        }
    }

    /**
     * The CPU writes mapped host memory while GPU work submitted since the last synchronisation may still run: on a
     * GPU that is how a kernel polls a host flag, and here the kernel would never see the write (it goes to the device
     * before the next GPU work). By default one stderr line says so and the program goes on (such writes are legal where
     * no running kernel reads the memory, and PyTorch makes them); with GPUSOCKETS_MAPPED_POLLING=exit the program ends
     * here with a line naming the cause rather than hang or compute with stale data (README, Mapped pinned host memory).
     */
    /** GPUSOCKETS_MAPPED_POLLING=exit: {@link #writeWhileWorkRuns} ends the program; otherwise it warns once. */
    private final boolean exitOnPolling;
    private boolean pollingWarned;

    private void writeWhileWorkRuns(long page) {
        if (!exitOnPolling) {
            // the default: most such writes are legal ones no running kernel reads (PyTorch's do); one line, then on
            if (!pollingWarned) {
                pollingWarned = true;
                System.err.println(String.format("gpusockets: the CPU wrote mapped pinned host memory (cudaHostAllocMapped)"
                        + " at 0x%x while GPU work submitted since the last synchronisation may still run: a remote GPU sees"
                        + " such writes only at the next launch or copy, so a kernel polling host memory would not see it"
                        + " (GPUSOCKETS_MAPPED_POLLING=exit ends the program at such a write; said once)", page));
            }
            return;
        }
        System.err.println(String.format("gpusockets: the CPU wrote mapped pinned host memory (cudaHostAllocMapped) at 0x%x"
                + " while GPU work submitted since the last synchronisation may still run: a remote GPU sees such writes"
                + " only at the next launch or copy, so a kernel polling host memory cannot work here; ending the program"
                + " (exit 1)", page));
        System.err.flush();
        try (Arena call = Arena.ofConfined()) {
            EXIT.invokeExact(call.allocate(CALL_STATE), 1);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** A cuMemFree of {@code base} succeeded: the guest mapping goes too. */
    synchronized void freed(long base) {
        Allocation a = find(base);
        if (a == null || !a.isAllocation(base)) {
            return;
        }
        allocations.remove(a.start);
        unmap(a);
    }

    private void unmap(Allocation a) {
        unmapPages(a.start, a.pages * PAGE);
    }

    private void unmapPages(long start, long length) {
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CALL_STATE);
            MemorySegment range = call.allocate(16);
            range.set(JAVA_LONG, 0, start);
            range.set(JAVA_LONG, 8, length);
            int ignored = (int) IOCTL.invokeExact(state, uffd, UFFDIO_UNREGISTER, range);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
        unreserve(start, length);
    }

    /** Unmaps [start, start + length); inside the managed range it is reserved again instead (no access, no memory). */
    private void unreserve(long start, long length) {
        if (inRange(start, length) && reserve(start, length, MAP_FIXED)) {
            return;
        }
        try (Arena call = Arena.ofConfined()) {
            int ignored = (int) MUNMAP.invokeExact(call.allocate(CALL_STATE), MemorySegment.ofAddress(start), length);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private Allocation find(long address) {
        Map.Entry<Long, Allocation> e = allocations.floorEntry(address);
        if (e == null) {
            return null;
        }
        Allocation a = e.getValue();
        return address < a.start + a.pages * PAGE ? a : null;
    }

    /**
     * Called for every request before it is sent ({@link CallChannel#exchange}): makes host buffers that lie in managed
     * memory present (and DIRTY where the call writes them), then, for a call that submits GPU work, sends the DIRTY
     * pages and marks every page device-newer.
     */
    void beforeCall(ApiFunction f, List<MemorySegment> bulk, List<MemorySegment> outBytes, long launchStream) {
        if (!used || BUSY.get()) {
            return; // every call passes here: a program without managed memory pays one volatile read
        }
        synchronized (this) {
            if (allocations.isEmpty()) {
                return;
            }
            BUSY.set(true);
            try {
                boolean work = submitsWork(f);
                if (work) {
                    flushAndInvalidate(launchStream);
                    if (mappedUsed) {
                        workInFlight = true;
                    }
                }
                for (MemorySegment s : bulk) {
                    if (s.isNative()) {
                        present(s.address(), s.byteSize(), false);
                    }
                }
                for (MemorySegment s : outBytes) {
                    if (s.isNative()) {
                        present(s.address(), s.byteSize(), true);
                    }
                }
            } finally {
                BUSY.set(false);
            }
        }
    }

    /** The most pages a prefetch to the CPU fetches with one copy (16 MiB). */
    private static final int PREFETCH_BATCH = 4096;

    /**
     * A cuMemPrefetchAsync(_v2) of {@code [address, address + length)} on {@code stream} succeeded (the backend checked
     * that the range lies in one managed allocation): the pages move now, and the range's last prefetch location is
     * {@code location} ({@link #location} form). To the CPU ({@code toHost}): the stream's earlier work is waited for
     * (it may still be writing the range), then the range's device-newer pages are fetched, up to
     * {@value #PREFETCH_BATCH} consecutive pages with one copy, and installed CLEAN. To a device: the range's DIRTY pages
     * are sent in runs, and its present pages dropped (DEVICE), as the driver migrates them; pages elsewhere, and the
     * range's fresh (ZERO) pages, are left as they are. Counted as any transfer ({@link #stats}).
     */
    void prefetched(long address, long length, long location, boolean toHost, long stream) {
        if (length <= 0) {
            return;
        }
        boolean was = BUSY.get();
        BUSY.set(true);
        try {
            // waited for without the lock: a host function on the stream may touch managed memory, whose fault needs it
            int r = toHost ? driver.cuStreamSynchronize(stream) : CuResult.CUDA_SUCCESS;
            synchronized (this) {
                prefetchedLocked(address, length, location, toHost, r);
            }
        } finally {
            BUSY.set(was);
        }
    }

    private void prefetchedLocked(long address, long length, long location, boolean toHost, int synced) {
        Allocation a = find(address);
        if (a == null) {
            return;
        }
        int first = (int) ((address - a.start) / PAGE);
        int last = (int) Math.min(a.pages - 1, (address + length - 1 - a.start) / PAGE);
        a.advice().fillLastPrefetch(first, last, location);
        if (toHost) {
            if (synced != CuResult.CUDA_SUCCESS) {
                System.err.println("gpusockets: prefetching managed memory to the CPU: cuStreamSynchronize failed: "
                        + CuResult.name(synced) + " (the pages are fetched at the CPU's touch instead)");
                return;
            }
            for (int p = first; p <= last; ) {
                if (a.state[p] == DEVICE) {
                    p += install(a, p, last - p + 1, false, PREFETCH_BATCH);
                } else {
                    p++;
                }
            }
            return;
        }
        for (int p = first; p <= last; ) {
            if (a.state[p] != DIRTY) {
                p++;
                continue;
            }
            int q = p;
            while (q <= last && a.state[q] == DIRTY && (q - p + 1) * PAGE <= MAX_RUN) {
                q++;
            }
            send(a, p, q - p);
            p = q;
        }
        for (int p = first; p <= last; ) {
            if (a.state[p] != CLEAN && a.state[p] != DIRTY) {
                p++;
                continue;
            }
            int q = p;
            while (q <= last && (a.state[q] == CLEAN || a.state[q] == DIRTY)) {
                a.state[q++] = DEVICE;
            }
            madvise(a.pageAddress(p), (q - p) * PAGE);
            p = q;
        }
    }

    /**
     * A cuMemAdvise(_v2) of {@code [address, address + length)} succeeded: recorded per page for
     * {@link #rangeAttribute} (it does not change when data moves). {@code location} in {@link #location} form.
     */
    synchronized void advised(long address, long length, int advice, long location) {
        Allocation a = find(address);
        if (a == null || length <= 0) {
            return;
        }
        int first = (int) ((address - a.start) / PAGE);
        int last = (int) Math.min(a.pages - 1, (address + length - 1 - a.start) / PAGE);
        a.advice().apply(first, last, advice, location);
    }

    /**
     * cuMemRangeGetAttribute, answered here from what {@link #advised} and {@link #prefetched} recorded, as the driver
     * answers it: the range must lie in one managed allocation or {@code __managed__} variable of this connection
     * (count &gt; 0), {@code data} not NULL, {@code dataSize} 4 for every attribute but ACCESSED_BY (a non-zero multiple
     * of 4); else CUDA_ERROR_INVALID_VALUE, which is what the driver answers for memory that is not managed.
     * READ_MOSTLY: 1 when every page of the range is read-mostly. PREFERRED_LOCATION, LAST_PREFETCH_LOCATION: the device
     * all pages share, CU_DEVICE_CPU for the host (or a host NUMA node), else CU_DEVICE_INVALID. ACCESSED_BY: the devices
     * advised for every page, in order, then CU_DEVICE_CPU, CU_DEVICE_INVALID in the slots left. The _TYPE variants: the
     * CUmemLocationType all pages share (HOST_NUMA_CURRENT as HOST_NUMA), else INVALID; the _ID variants: its id where
     * it is a device or host NUMA node, else CU_DEVICE_INVALID.
     */
    synchronized int rangeAttribute(MemorySegment data, long dataSize, int attribute, long devPtr, long count) {
        int r = checkAttribute(data, dataSize, attribute);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        Allocation a = managedRange(devPtr, count);
        if (a == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        answer(a, devPtr, count, attribute, data.address(), dataSize);
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * cuMemRangeGetAttributes: {@code numAttributes} attributes of one range at once, each checked and answered as
     * {@link #rangeAttribute} does ({@code data} an array of pointers, {@code dataSizes} of sizes, {@code attributes} of
     * CUmem_range_attribute); nothing is written unless all are valid.
     */
    synchronized int rangeAttributes(MemorySegment data, MemorySegment dataSizes, MemorySegment attributes, long numAttributes,
                                     long devPtr, long count) {
        if (data.address() == 0 || dataSizes.address() == 0 || attributes.address() == 0 || numAttributes <= 0
                || numAttributes > 1 << 20) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        boolean was = BUSY.get();
        BUSY.set(true);
        try {
            present(data.address(), numAttributes * 8, false);
            present(dataSizes.address(), numAttributes * 8, false);
            present(attributes.address(), numAttributes * 4, false);
            MemorySegment ptrs = MemorySegment.ofAddress(data.address()).reinterpret(numAttributes * 8);
            MemorySegment sizes = MemorySegment.ofAddress(dataSizes.address()).reinterpret(numAttributes * 8);
            MemorySegment attrs = MemorySegment.ofAddress(attributes.address()).reinterpret(numAttributes * 4);
            for (long i = 0; i < numAttributes; i++) {
                int r = checkAttribute(MemorySegment.ofAddress(ptrs.getAtIndex(JAVA_LONG, i)), sizes.getAtIndex(JAVA_LONG, i),
                        attrs.getAtIndex(JAVA_INT, i));
                if (r != CuResult.CUDA_SUCCESS) {
                    return r;
                }
            }
            Allocation a = managedRange(devPtr, count);
            if (a == null) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            for (long i = 0; i < numAttributes; i++) {
                answer(a, devPtr, count, attrs.getAtIndex(JAVA_INT, i), ptrs.getAtIndex(JAVA_LONG, i), sizes.getAtIndex(JAVA_LONG, i));
            }
            return CuResult.CUDA_SUCCESS;
        } finally {
            BUSY.set(was);
        }
    }

    /** The driver's dataSize rules (see {@link #rangeAttribute}). */
    private static int checkAttribute(MemorySegment data, long dataSize, int attribute) {
        if (data.address() == 0 || attribute < 1 || attribute > 8) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        boolean ok = attribute == 3 ? dataSize > 0 && dataSize % 4 == 0 && dataSize <= 1L << 30 : dataSize == 4;
        return ok ? CuResult.CUDA_SUCCESS : CuResult.CUDA_ERROR_INVALID_VALUE;
    }

    /** The allocation [devPtr, devPtr + count) lies in, within one of its device ranges; null if none. */
    private Allocation managedRange(long devPtr, long count) {
        if (count <= 0 || devPtr + count < devPtr) {
            return null;
        }
        Allocation a = find(devPtr);
        if (a == null || a.mappedHost) {
            return null;
        }
        for (int i = 0; i < a.bases.length; i++) {
            if (devPtr >= a.bases[i] && devPtr + count <= a.bases[i] + a.sizes[i]) {
                return a;
            }
        }
        return null;
    }

    /** Writes one attribute of [devPtr, devPtr + count) of {@code a} into the program's {@code dataSize} bytes at {@code out}. */
    private void answer(Allocation a, long devPtr, long count, int attribute, long out, long dataSize) {
        int first = (int) ((devPtr - a.start) / PAGE);
        int last = (int) ((devPtr + count - 1 - a.start) / PAGE);
        boolean was = BUSY.get();
        BUSY.set(true);
        try {
            present(out, dataSize, true); // the program's buffer may be managed memory too
        } finally {
            BUSY.set(was);
        }
        MemorySegment data = MemorySegment.ofAddress(out).reinterpret(dataSize);
        RangeAdvice advice = a.advice;
        switch (attribute) {
            case 1 -> data.set(JAVA_INT_UNALIGNED, 0, RangeAdvice.readMostly(advice, first, last) ? 1 : 0);
            case 2, 4 -> data.set(JAVA_INT_UNALIGNED, 0, legacyDevice(attribute == 2
                    ? RangeAdvice.preferred(advice, first, last) : RangeAdvice.lastPrefetch(advice, first, last)));
            case 5, 7 -> {
                long l = attribute == 5 ? RangeAdvice.preferred(advice, first, last) : RangeAdvice.lastPrefetch(advice, first, last);
                int type = (int) (l >>> 32);
                data.set(JAVA_INT_UNALIGNED, 0, type == LOCATION_HOST_NUMA_CURRENT ? LOCATION_HOST_NUMA : type);
            }
            case 6, 8 -> {
                long l = attribute == 6 ? RangeAdvice.preferred(advice, first, last) : RangeAdvice.lastPrefetch(advice, first, last);
                int type = (int) (l >>> 32);
                data.set(JAVA_INT_UNALIGNED, 0, type == LOCATION_DEVICE || type == LOCATION_HOST_NUMA ? (int) l
                        : type == LOCATION_HOST_NUMA_CURRENT ? 0 : DEVICE_INVALID);
            }
            default -> { // 3: ACCESSED_BY
                long bits = RangeAdvice.accessedBy(advice, first, last);
                long slots = dataSize / 4, i = 0;
                for (int d = 0; d < 63 && i < slots; d++) {
                    if ((bits & 1L << (d + 1)) != 0) {
                        data.setAtIndex(JAVA_INT_UNALIGNED, i++, d);
                    }
                }
                if ((bits & 1) != 0 && i < slots) {
                    data.setAtIndex(JAVA_INT_UNALIGNED, i++, DEVICE_CPU);
                }
                while (i < slots) {
                    data.setAtIndex(JAVA_INT_UNALIGNED, i++, DEVICE_INVALID);
                }
            }
        }
    }

    /** A location as the classic attributes give it: a device ordinal, CU_DEVICE_CPU, or CU_DEVICE_INVALID. */
    private static int legacyDevice(long location) {
        int type = (int) (location >>> 32);
        return type == LOCATION_DEVICE ? (int) location : isHost(location) ? DEVICE_CPU : DEVICE_INVALID;
    }

    /** A CUmemLocation as recorded: its type in the high 32 bits, its id in the low; 0: none. */
    static long location(int type, int id) {
        return (long) type << 32 | id & 0xffffffffL;
    }

    /** A CUmemLocation as cuMemAdvise_v2 and cuMemPrefetchAsync_v2 pass it by value (type, then id, little-endian). */
    static long locationOfWire(long wire) {
        return location((int) wire, (int) (wire >>> 32));
    }

    /** The location of a CUdevice as cuMemAdvise and cuMemPrefetchAsync take it (CU_DEVICE_CPU: the host). */
    static long locationOfDevice(int device) {
        return device == DEVICE_CPU ? location(LOCATION_HOST, 0) : location(LOCATION_DEVICE, device);
    }

    /** Whether a location is the CPU's (host, or a host NUMA node). */
    static boolean isHost(long location) {
        int type = (int) (location >>> 32);
        return type == LOCATION_HOST || type == LOCATION_HOST_NUMA || type == LOCATION_HOST_NUMA_CURRENT;
    }

    /**
     * Makes the managed pages of {@code [address, address + length)} present on the calling thread, and writable when
     * {@code write} (they then go to the device before the next GPU work); other addresses are left alone.
     */
    synchronized void hostAccess(long address, long length, boolean write) {
        if (allocations.isEmpty()) {
            return;
        }
        boolean was = BUSY.get();
        BUSY.set(true);
        try {
            present(address, length, write);
        } finally {
            BUSY.set(was);
        }
    }

    /**
     * Whether a kernel launch on {@code stream} may use {@code a} (a call that is no kernel launch, {@link #NO_STREAM},
     * may use every allocation): memory attached to the host is used by no launch, memory attached to one stream by
     * launches on that stream and on the legacy NULL stream (which synchronises with every blocking stream), the rest
     * by every launch.
     */
    private static boolean usedBy(Allocation a, long stream) {
        if (stream == NO_STREAM || a.attach == ATTACH_GLOBAL) {
            return true;
        }
        if (a.attach == ATTACH_HOST) {
            return false;
        }
        return stream == a.stream || stream == 0 || stream == STREAM_LEGACY;
    }

    /**
     * cuStreamAttachMemAsync({@code stream}, {@code base}, 0 or the whole size, {@code flags}) succeeded: the allocation
     * at {@code base} is from now on used by the launches {@link #usedBy} says (the driver applies it when the stream's
     * earlier work is done; under the model the CPU does not touch the memory before then, so taking it at the call is
     * the same).
     */
    synchronized void attached(long stream, long base, int flags) {
        Allocation a = find(base);
        if (a == null || !a.isAllocation(base)) {
            return;
        }
        a.attach = flags;
        a.stream = flags == ATTACH_SINGLE ? stream : 0;
    }

    /** The stream association of the managed allocation at {@code base}: {attach flags, stream}, or null. */
    synchronized long[] attachment(long base) {
        Allocation a = find(base);
        return a == null || !a.isAllocation(base) ? null : new long[] {a.attach, a.stream};
    }

    private void flushAndInvalidate(long stream) {
        if (!anyPresent) {
            return;
        }
        boolean keptPresent = false;
        for (Allocation a : allocations.values()) {
            if (!usedBy(a, stream)) {
                keptPresent = true; // not looked at: it may hold present pages
                continue;
            }
            int p = 0;
            while (p < a.pages) {
                if (a.state[p] != DIRTY) {
                    p++;
                    continue;
                }
                int q = p;
                while (q < a.pages && a.state[q] == DIRTY && (q - p + 1) * PAGE <= MAX_RUN) {
                    q++;
                }
                send(a, p, q - p);
                p = q;
            }
            boolean present = false;
            for (int i = 0; i < a.pages; i++) {
                present |= a.state[i] == CLEAN || a.state[i] == DIRTY;
                a.state[i] = DEVICE;
            }
            if (present) {
                madvise(a.start, a.pages * PAGE);
            }
        }
        anyPresent = keptPresent;
    }

    /** Sends pages [page, page + n) of {@code a} to the device: the bytes of them that lie in its device ranges. */
    private void send(Allocation a, int page, int n) {
        long lo = a.pageAddress(page), hi = a.pageAddress(page + n);
        long total = 0;
        for (int i = 0; i < a.bases.length; i++) {
            long from = Math.max(lo, a.bases[i]), to = Math.min(hi, a.bases[i] + a.sizes[i]);
            if (to <= from) {
                continue;
            }
            ByteBuffer req = ByteBuffer.allocate(32).order(ByteOrder.LITTLE_ENDIAN);
            req.putLong(from).putLong(to - from).putLong(to - from).flip();
            CallChannel.Reply r = channel.exchange(ApiEntries.cuMemcpyHtoD, req,
                    List.of(MemorySegment.ofAddress(from).reinterpret(to - from)), List.of(), false);
            if (r.result() != CuResult.CUDA_SUCCESS) {
                System.err.println("gpusockets: sending managed pages at 0x" + Long.toHexString(from) + " failed: "
                        + CuResult.name(r.result()));
                return;
            }
            total += to - from;
        }
        pagesSent.add(n);
        bytesSent.add(total);
    }

    /** Makes the pages of [address, address + length) that lie in managed allocations present; DIRTY when {@code write}. */
    private void present(long address, long length, boolean write) {
        if (length <= 0) {
            return;
        }
        long end = address + length;
        for (long at = address & -PAGE; at < end; ) {
            Allocation a = find(at);
            if (a == null) {
                Map.Entry<Long, Allocation> next = allocations.higherEntry(at);
                if (next == null || next.getKey() >= end) {
                    return;
                }
                at = next.getKey();
                continue;
            }
            int first = (int) ((at - a.start) / PAGE);
            int last = (int) Math.min(a.pages - 1, (end - 1 - a.start) / PAGE);
            for (int p = first; p <= last; ) {
                if (a.state[p] == DEVICE || a.state[p] == ZERO) {
                    p += install(a, p, last - p + 1, false);
                } else {
                    p++;
                }
            }
            if (write) {
                for (int p = first; p <= last; p++) {
                    if (a.state[p] == CLEAN) {
                        unprotect(a, p);
                    }
                }
            }
            at = a.pageAddress(last + 1);
        }
    }

    /**
     * Installs up to {@code limit} consecutive absent pages of one kind (DEVICE: fetched; ZERO: zeros) from {@code page}
     * on, write-protected (CLEAN); {@code wake}: the faulting thread is woken by the copy. Returns the pages installed
     * (at least 1).
     */
    private int install(Allocation a, int page, int limit, boolean wake) {
        return install(a, page, limit, wake, batchPages);
    }

    /** As {@link #install(Allocation, int, int, boolean)}, up to {@code batch} pages with one copy. */
    private int install(Allocation a, int page, int limit, boolean wake, int batch) {
        byte kind = a.state[page];
        int n = 1;
        while (n < limit && n < batch && page + n < a.pages && a.state[page + n] == kind) {
            n++;
        }
        long bytes = n * PAGE;
        MemorySegment src;
        if (kind == DEVICE) {
            src = staging(bytes);
            src.asSlice(0, bytes).fill((byte) 0);
            long lo = a.pageAddress(page), hi = a.pageAddress(page + n);
            long total = 0;
            for (int i = 0; i < a.bases.length; i++) {
                long from = Math.max(lo, a.bases[i]), to = Math.min(hi, a.bases[i] + a.sizes[i]);
                if (to > from) {
                    fetch(a, from, src.asSlice(from - lo, to - from)); // a failure is reported; those bytes read zero
                }
                total += Math.max(0, to - from);
            }
            pagesFetched.add(n);
            bytesFetched.add(total);
        } else {
            src = zeros(bytes);
            pagesZeroFilled.add(n);
        }
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CALL_STATE);
            MemorySegment copy = call.allocate(40);
            copy.set(JAVA_LONG, 0, a.pageAddress(page));
            copy.set(JAVA_LONG, 8, src.address());
            copy.set(JAVA_LONG, 16, bytes);
            copy.set(JAVA_LONG, 24, COPY_MODE_WP | (wake ? 0 : COPY_MODE_DONTWAKE));
            if ((int) IOCTL.invokeExact(state, uffd, UFFDIO_COPY, copy) != 0) {
                int errno = (int) ERRNO.get(state, 0L);
                if (errno != EEXIST) {
                    System.err.println("gpusockets: installing managed pages at 0x" + Long.toHexString(a.pageAddress(page))
                            + " failed (errno " + errno + ")");
                }
                wake(a.pageAddress(page), bytes);
            }
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
        for (int i = 0; i < n; i++) {
            a.state[page + i] = CLEAN;
        }
        anyPresent = true;
        return n;
    }

    private boolean fetch(Allocation a, long from, MemorySegment into) {
        if (Thread.currentThread() == faultThread && faultThreadContext != a.context) {
            int r = driver.cuCtxSetCurrent(a.context);
            if (r != CuResult.CUDA_SUCCESS) {
                System.err.println("gpusockets: fetching managed pages: cuCtxSetCurrent failed: " + CuResult.name(r));
                return false;
            }
            faultThreadContext = a.context;
        }
        ByteBuffer req = ByteBuffer.allocate(32).order(ByteOrder.LITTLE_ENDIAN);
        req.putLong(from).putLong(into.byteSize()).flip();
        CallChannel.Reply r = channel.exchange(ApiEntries.cuMemcpyDtoH, req, List.of(), List.of(into), false);
        if (r.result() != CuResult.CUDA_SUCCESS) {
            System.err.println("gpusockets: fetching managed pages at 0x" + Long.toHexString(from) + " failed: "
                    + CuResult.name(r.result()) + " (the page reads zeros)");
            return false;
        }
        return true;
    }

    /** Makes a CLEAN page writable (DIRTY) and wakes whoever waits on it. */
    private void unprotect(Allocation a, int page) {
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CALL_STATE);
            MemorySegment wp = call.allocate(24);
            wp.set(JAVA_LONG, 0, a.pageAddress(page));
            wp.set(JAVA_LONG, 8, PAGE);
            wp.set(JAVA_LONG, 16, 0L);
            int ignored = (int) IOCTL.invokeExact(state, uffd, UFFDIO_WRITEPROTECT, wp);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
        a.state[page] = DIRTY;
    }

    private void wake(long address, long length) {
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CALL_STATE);
            MemorySegment range = call.allocate(16);
            range.set(JAVA_LONG, 0, address);
            range.set(JAVA_LONG, 8, length);
            int ignored = (int) IOCTL.invokeExact(state, uffd, UFFDIO_WAKE, range);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private void madvise(long address, long length) {
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CALL_STATE);
            int ignored = (int) MADVISE.invokeExact(state, MemorySegment.ofAddress(address), length, MADV_DONTNEED);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private MemorySegment staging(long bytes) {
        if (staging == null || staging.byteSize() < bytes) {
            staging = arena.allocate(Math.max(bytes, 64 * PAGE), PAGE);
        }
        return staging;
    }

    private MemorySegment zeros(long bytes) {
        if (zeros == null || zeros.byteSize() < bytes) {
            zeros = arena.allocate(Math.max(bytes, 64 * PAGE), PAGE);
        }
        return zeros;
    }

    private long currentContext() {
        BUSY.set(true);
        try (Arena call = Arena.ofConfined()) {
            MemorySegment ctx = call.allocate(8);
            return driver.cuCtxGetCurrent(ctx) == CuResult.CUDA_SUCCESS ? ctx.get(JAVA_LONG, 0) : 0;
        } finally {
            BUSY.set(false);
        }
    }

    /** Opens the userfaultfd and starts the fault thread, once; false when the kernel has none for us. */
    private boolean open() {
        if (uffd >= 0) {
            return true;
        }
        if (uffd == -2) {
            return false;
        }
        uffd = -2;
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CALL_STATE);
            int pageSize = (int) GETPAGESIZE.invokeExact(state);
            if (pageSize != PAGE) {
                System.err.println("gpusockets: managed memory needs 4 KiB pages; this kernel's are " + pageSize + " bytes");
                return false;
            }
            // Kernel-mode faults too where allowed (privileged, or vm.unprivileged_userfaultfd=1): then read(2) into and
            // write(2) from managed memory work as for any memory; else user-mode faults only.
            int fd = (int) (long) SYSCALL.invokeExact(state, userfaultfdSyscall(), O_CLOEXEC);
            kernelFaults = fd >= 0;
            if (fd < 0) {
                fd = (int) (long) SYSCALL.invokeExact(state, userfaultfdSyscall(), O_CLOEXEC | UFFD_USER_MODE_ONLY);
            }
            if (fd < 0) {
                return false;
            }
            MemorySegment api = call.allocate(24);
            api.set(JAVA_LONG, 0, UFFD_API);
            api.set(JAVA_LONG, 8, UFFD_FEATURE_PAGEFAULT_FLAG_WP);
            if ((int) IOCTL.invokeExact(state, fd, UFFDIO_API, api) != 0) {
                int ignored = (int) CLOSE.invokeExact(state, fd);
                return false;
            }
            uffd = fd;
        } catch (Throwable t) {
            return false;
        }
        faultThread = Thread.ofPlatform().daemon().name("gpusockets-managed-faults").unstarted(this::serveFaults);
        faultThread.start();
        return true;
    }

    private static long userfaultfdSyscall() {
        return switch (System.getProperty("os.arch")) {
            case "aarch64" -> 282;
            default -> 323; // x86_64
        };
    }

    /** The fault thread: resolves each fault of the program's threads (missing page: install; write-protected: DIRTY). */
    private void serveFaults() {
        BUSY.set(true);
        try (Arena mine = Arena.ofConfined()) {
            MemorySegment state = mine.allocate(CALL_STATE);
            MemorySegment msg = mine.allocate(32, 8);
            MemorySegment pfd = mine.allocate(8, 4);
            while (!closed) {
                pfd.set(JAVA_INT, 0, uffd);
                pfd.set(JAVA_INT, 4, POLLIN);
                int ready = (int) POLL.invokeExact(state, pfd, 1L, 200);
                if (ready <= 0) {
                    continue;
                }
                long n = (long) READ.invokeExact(state, uffd, msg, 32L);
                if (n != 32) {
                    int errno = (int) ERRNO.get(state, 0L);
                    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
                        continue;
                    }
                    if (!closed) {
                        System.err.println("gpusockets: reading managed-memory faults failed (errno " + errno + ")");
                    }
                    return;
                }
                if ((msg.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0) & 0xff) != EVENT_PAGEFAULT) {
                    continue;
                }
                long flags = msg.get(JAVA_LONG, 8);
                long address = msg.get(JAVA_LONG, 16);
                faults.increment();
                resolve(address & -PAGE, flags);
            }
        } catch (Throwable t) {
            System.err.println("gpusockets: the managed-memory fault thread stopped: " + t);
        }
    }

    private synchronized void resolve(long page, long flags) {
        Allocation a = find(page);
        if (a == null) {
            wake(page, PAGE); // freed meanwhile: the access faults for real
            return;
        }
        int p = (int) ((page - a.start) / PAGE);
        if (a.mappedHost && workInFlight && (flags & (PAGEFAULT_FLAG_WP | PAGEFAULT_FLAG_WRITE)) != 0) {
            writeWhileWorkRuns(page);
        }
        if ((flags & PAGEFAULT_FLAG_WP) != 0) {
            if (a.state[p] == CLEAN || a.state[p] == DIRTY) {
                unprotect(a, p);
            } else {
                wake(page, PAGE);
            }
            return;
        }
        if (a.state[p] == CLEAN || a.state[p] == DIRTY) {
            wake(page, PAGE); // another fault installed it first
            return;
        }
        boolean write = (flags & PAGEFAULT_FLAG_WRITE) != 0;
        install(a, p, a.pages - p, !write);
        if (write) {
            unprotect(a, p); // wakes the writer, which finds the page writable
        }
    }

    /** The program is exiting: prints the counters when GPUSOCKETS_MANAGED_STATS=1. */
    void programExiting() {
        if (printStats) {
            System.err.println("gpusockets: managed memory: " + stats() + (uffd >= 0 && !kernelFaults ? " (user-mode faults only)" : ""));
        }
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (Allocation a : allocations.values()) {
            unmap(a);
        }
        allocations.clear();
        if (rangeSize != 0) {
            long base = rangeBase, size = rangeSize;
            rangeSize = 0;
            unreserve(base, size);
            ManagedRange.guestGone(base);
        }
        if (uffd >= 0) {
            try {
                if (faultThread != null) {
                    faultThread.join(1000);
                }
                try (Arena call = Arena.ofConfined()) {
                    int ignored = (int) CLOSE.invokeExact(call.allocate(CALL_STATE), uffd);
                }
            } catch (Throwable ignored) {
                // closing anyway
            }
        }
    }

    private static MethodHandle downcall(String name, FunctionDescriptor fd, Linker.Option... extra) {
        Linker.Option[] options = new Linker.Option[extra.length + 1];
        options[0] = Linker.Option.captureCallState("errno");
        System.arraycopy(extra, 0, options, 1, extra.length);
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(
                () -> new UnsatisfiedLinkError("the C library has no " + name)), fd, options);
    }
}
