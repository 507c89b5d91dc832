package io.gpusockets.transport.vchan;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.List;

/**
 * libxenvchan (Debian: libxenmisc4.17) bound through FFM. Loaded on first use: the class itself loads
 * on machines without Xen libraries, and {@link #load()} then says why vchan is unavailable.
 *
 * <p>libxenvchan is not thread-safe: callers serialize every call on one {@code struct libxenvchan}.
 * Used non-blocking only ({@link #clearBlocking}); waiting is poll(2) on {@link #fdForSelect}'s
 * event-channel descriptor followed by {@link #await}, which consumes the pending event.
 */
final class Libxenvchan {
    /** The names tried, in order: Debian's versioned soname, then the development symlink. */
    static final List<String> LIBRARY_NAMES = List.of("libxenvchan.so.4.17", "libxenvchan.so");
    /** Every symbol this binding uses; a test checks that the installed library has them all. */
    static final List<String> SYMBOLS = List.of("libxenvchan_server_init", "libxenvchan_client_init",
            "libxenvchan_read", "libxenvchan_write", "libxenvchan_recv", "libxenvchan_send",
            "libxenvchan_data_ready", "libxenvchan_buffer_space", "libxenvchan_fd_for_select",
            "libxenvchan_wait", "libxenvchan_is_open", "libxenvchan_close");

    /**
     * The int holding struct libxenvchan's bit-fields (is_server:1, server_persist:1, blocking:1) follows
     * three pointers and a uint32_t event_port: byte offset 28 on LP64; GCC allocates bit-fields from the
     * least significant bit on x86_64 and aarch64.
     */
    static final long FLAGS_OFFSET = 3 * 8 + 4;
    static final int BLOCKING_BIT = 1 << 2;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(PathElement.groupElement("errno"));

    private static volatile Object loaded; // a Libxenvchan, or the IOException that explains its absence

    final String libraryName;
    private final MethodHandle serverInit;
    private final MethodHandle clientInit;
    private final MethodHandle read;
    private final MethodHandle write;
    private final MethodHandle recv;
    private final MethodHandle send;
    private final MethodHandle dataReady;
    private final MethodHandle bufferSpace;
    private final MethodHandle fdForSelect;
    private final MethodHandle await;
    private final MethodHandle isOpen;
    private final MethodHandle close;

    private Libxenvchan(String libraryName, SymbolLookup lib) {
        this.libraryName = libraryName;
        Linker.Option errno = Linker.Option.captureCallState("errno");
        serverInit = LINKER.downcallHandle(find(lib, "libxenvchan_server_init"),
                FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG), errno);
        clientInit = LINKER.downcallHandle(find(lib, "libxenvchan_client_init"),
                FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT, ADDRESS), errno);
        FunctionDescriptor io = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG);
        read = LINKER.downcallHandle(find(lib, "libxenvchan_read"), io);
        write = LINKER.downcallHandle(find(lib, "libxenvchan_write"), io);
        recv = LINKER.downcallHandle(find(lib, "libxenvchan_recv"), io);
        send = LINKER.downcallHandle(find(lib, "libxenvchan_send"), io);
        FunctionDescriptor query = FunctionDescriptor.of(JAVA_INT, ADDRESS);
        dataReady = LINKER.downcallHandle(find(lib, "libxenvchan_data_ready"), query);
        bufferSpace = LINKER.downcallHandle(find(lib, "libxenvchan_buffer_space"), query);
        fdForSelect = LINKER.downcallHandle(find(lib, "libxenvchan_fd_for_select"), query);
        await = LINKER.downcallHandle(find(lib, "libxenvchan_wait"), query);
        isOpen = LINKER.downcallHandle(find(lib, "libxenvchan_is_open"), query);
        close = LINKER.downcallHandle(find(lib, "libxenvchan_close"), FunctionDescriptor.ofVoid(ADDRESS));
    }

    private static MemorySegment find(SymbolLookup lib, String name) {
        return lib.find(name).orElseThrow(() -> new UnsatisfiedLinkError("libxenvchan has no symbol " + name));
    }

    /** The bound library, or an IOException naming the libraries tried and how to install them. */
    static Libxenvchan load() throws IOException {
        Object l = loaded;
        if (l == null) {
            synchronized (Libxenvchan.class) {
                l = loaded;
                if (l == null) {
                    loaded = l = tryLoad();
                }
            }
        }
        if (l instanceof IOException e) {
            throw new IOException(e.getMessage(), e);
        }
        return (Libxenvchan) l;
    }

    private static Object tryLoad() {
        StringBuilder why = new StringBuilder();
        for (String name : LIBRARY_NAMES) {
            SymbolLookup lib;
            try {
                lib = SymbolLookup.libraryLookup(name, Arena.global());
            } catch (IllegalArgumentException e) {
                why.append(why.isEmpty() ? "" : "; ").append(name).append(": ").append(e.getMessage());
                continue;
            }
            try {
                return new Libxenvchan(name, lib);
            } catch (UnsatisfiedLinkError e) {
                return new IOException(name + " lacks a symbol vchan needs: " + e.getMessage());
            }
        }
        return new IOException("libxenvchan not found (" + why
                + "); on Debian install libxenmisc4.17 (apt-get install libxenmisc4.17)");
    }

    static MemorySegment newCallState(Arena arena) {
        return arena.allocate(CALL_STATE);
    }

    static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    /** struct libxenvchan*, or NULL with errno in {@code state}. */
    MemorySegment serverInit(MemorySegment state, int domain, MemorySegment xsPath, long readMin, long writeMin) {
        try {
            return (MemorySegment) serverInit.invokeExact(state, MemorySegment.NULL, domain, xsPath, readMin, writeMin);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    MemorySegment clientInit(MemorySegment state, int domain, MemorySegment xsPath) {
        try {
            return (MemorySegment) clientInit.invokeExact(state, MemorySegment.NULL, domain, xsPath);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** Makes read/write return 0 instead of blocking, whatever the library's default. */
    static void clearBlocking(MemorySegment ctrl) {
        MemorySegment c = ctrl.reinterpret(FLAGS_OFFSET + 4);
        c.set(JAVA_INT, FLAGS_OFFSET, c.get(JAVA_INT, FLAGS_OFFSET) & ~BLOCKING_BIT);
    }

    int read(MemorySegment ctrl, MemorySegment buf, long size) {
        return io(read, ctrl, buf, size);
    }

    int write(MemorySegment ctrl, MemorySegment buf, long size) {
        return io(write, ctrl, buf, size);
    }

    int recv(MemorySegment ctrl, MemorySegment buf, long size) {
        return io(recv, ctrl, buf, size);
    }

    int send(MemorySegment ctrl, MemorySegment buf, long size) {
        return io(send, ctrl, buf, size);
    }

    int dataReady(MemorySegment ctrl) {
        return query(dataReady, ctrl);
    }

    int bufferSpace(MemorySegment ctrl) {
        return query(bufferSpace, ctrl);
    }

    int fdForSelect(MemorySegment ctrl) {
        return query(fdForSelect, ctrl);
    }

    /** libxenvchan_wait: blocks until an event is pending, then consumes it. Call only when poll says the fd is readable. */
    int await(MemorySegment ctrl) {
        return query(await, ctrl);
    }

    /** 0 closed, 1 open, 2 (server only) waiting for the client. */
    int isOpen(MemorySegment ctrl) {
        return query(isOpen, ctrl);
    }

    void close(MemorySegment ctrl) {
        try {
            close.invokeExact(ctrl);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    private static int io(MethodHandle h, MemorySegment ctrl, MemorySegment buf, long size) {
        try {
            return (int) h.invokeExact(ctrl, buf, size);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    private static int query(MethodHandle h, MemorySegment ctrl) {
        try {
            return (int) h.invokeExact(ctrl);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    private static AssertionError unexpected(Throwable t) {
        return new AssertionError("libxenvchan call failed unexpectedly", t);
    }
}
