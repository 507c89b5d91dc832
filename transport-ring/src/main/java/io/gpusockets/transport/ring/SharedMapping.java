package io.gpusockets.transport.ring;

import static io.gpusockets.transport.ring.RingDescriptor.CAPACITY_OFFSET;
import static io.gpusockets.transport.ring.RingDescriptor.MAGIC;
import static io.gpusockets.transport.ring.RingDescriptor.MAGIC_OFFSET;
import static io.gpusockets.transport.ring.RingDescriptor.VERSION;
import static io.gpusockets.transport.ring.RingDescriptor.VERSION_OFFSET;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import java.nio.channels.FileChannel.MapMode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HexFormat;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The file behind one connection's rings, mapped into this process. The server creates it (mode 0600,
 * in /dev/shm where that is a writable directory, else java.io.tmpdir), the client opens it by the path
 * the server sent, and the server unlinks it once the client acknowledged its mapping: from then on
 * only the two mappings (and the server's descriptor of the file) keep the memory alive, and nothing is
 * left behind when both processes die. The server keeps that one descriptor open so that it can pass the
 * file to another process that takes its end of the connection over ({@link RingHandOff}), which maps it
 * through {@code /proc/self/fd} ({@link #adopt}).
 */
final class SharedMapping implements AutoCloseable {
    private static final VarHandle INT = JAVA_INT.varHandle();
    private static final Path SHM = Path.of("/dev/shm");

    private final Arena arena;
    private final MemorySegment segment;
    private final long capacity;
    /** The shared window's own mapping (null when there is none), unmapped apart from the rings. */
    private final Arena windowArena;
    private final MemorySegment window;
    private final Path path;
    /** The server's descriptor of the file (for a hand-over), or -1. */
    private int descriptor = -1;

    private SharedMapping(Arena arena, MemorySegment segment, long capacity, Arena windowArena, MemorySegment window, Path path) {
        this.arena = arena;
        this.segment = segment;
        this.capacity = capacity;
        this.windowArena = windowArena;
        this.window = window;
        this.path = path;
    }

    /** Creates, sizes and maps a new file for rings of {@code capacity} bytes and a window, and writes the header. */
    static SharedMapping create(String name, long capacity, long window) throws IOException {
        long size = RingDescriptor.mappingBytes(capacity, window);
        Path dir = Files.isDirectory(SHM) && Files.isWritable(SHM) ? SHM : Path.of(System.getProperty("java.io.tmpdir"));
        Path path = dir.resolve("gpusockets-ring-" + name + "-" + HexFormat.of().toHexDigits(ThreadLocalRandom.current().nextLong()));
        Files.createFile(path, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        try {
            SharedMapping mapping = map(path, capacity, window);
            MemorySegment s = mapping.segment;
            s.set(JAVA_LONG, CAPACITY_OFFSET, capacity);
            s.set(JAVA_LONG, RingDescriptor.WINDOW_OFFSET, window);
            s.set(JAVA_INT, VERSION_OFFSET, VERSION);
            VarHandle.releaseFence();
            s.set(JAVA_LONG, MAGIC_OFFSET, MAGIC);
            try {
                mapping.descriptor = Descriptors.open(path);
            } catch (IOException | RuntimeException e) {
                mapping.close();
                mapping.closeWindow();
                throw e;
            }
            return mapping;
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(path);
            throw e;
        }
    }

    /**
     * Maps the file of a connection another process set up, from a descriptor it passed (SCM_RIGHTS): opened
     * again through {@code /proc/self/fd} (the file is unlinked by now), its header checked as in {@link #open}.
     * The descriptor is closed either way: the mapping keeps the memory alive.
     */
    static SharedMapping adopt(int fd, long capacity, long window) throws IOException {
        try {
            return open(Path.of("/proc/self/fd/" + fd), capacity, window);
        } finally {
            Descriptors.close(fd);
        }
    }

    /** Maps a file the server created and checks its header against what the server announced. */
    static SharedMapping open(Path path, long capacity, long window) throws IOException {
        long size = RingDescriptor.mappingBytes(capacity, window);
        if (!Files.isRegularFile(path) || Files.size(path) != size) {
            throw new IOException("shared ring file is not a regular file of " + size + " bytes: path=" + path);
        }
        SharedMapping mapping = map(path, capacity, window);
        MemorySegment s = mapping.segment;
        long magic = s.get(JAVA_LONG, MAGIC_OFFSET);
        VarHandle.acquireFence();
        if (magic != MAGIC || s.get(JAVA_INT, VERSION_OFFSET) != VERSION || s.get(JAVA_LONG, CAPACITY_OFFSET) != capacity
                || s.get(JAVA_LONG, RingDescriptor.WINDOW_OFFSET) != window) {
            mapping.close();
            mapping.closeWindow();
            throw new IOException("shared ring file has a bad header (magic, version " + VERSION + ", capacity "
                    + capacity + " or window " + window + "): path=" + path);
        }
        return mapping;
    }

    private static SharedMapping map(Path path, long capacity, long window) throws IOException {
        long rings = RingDescriptor.windowOffset(capacity);
        Arena arena = Arena.ofShared();
        Arena windowArena = window > 0 ? Arena.ofShared() : null;
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            // The window first: mapping past the end sizes the file to the whole layout.
            MemorySegment windowSegment = window > 0 ? channel.map(MapMode.READ_WRITE, rings, window, windowArena) : null;
            MemorySegment segment = channel.map(MapMode.READ_WRITE, 0, rings, arena);
            return new SharedMapping(arena, segment, capacity, windowArena, windowSegment, path);
        } catch (IOException | RuntimeException e) {
            arena.close();
            if (windowArena != null) {
                windowArena.close();
            }
            throw e;
        }
    }

    Path path() {
        return path;
    }

    /** The server's descriptor of the file, or -1 (a client's mapping, an adopted one, or closed). */
    synchronized int descriptor() {
        return descriptor;
    }

    long capacity() {
        return capacity;
    }

    long windowBytes() {
        return window == null ? 0 : window.byteSize();
    }

    /** The shared window's mapping, or null. */
    MemorySegment window() {
        return window;
    }

    /** Unmaps the shared window (not the rings). Callers make sure nothing of theirs still touches it. Idempotent. */
    void closeWindow() {
        if (windowArena != null && windowArena.scope().isAlive()) {
            windowArena.close();
        }
    }

    /** The ring for direction {@code ring} ({@link RingDescriptor#CLIENT_TO_SERVER} or the other). */
    ByteRing ring(int ring) {
        return new ByteRing(segment, ring, segment.asSlice(RingDescriptor.ringDataOffset(ring, capacity), capacity));
    }

    boolean closedFlag(long offset) {
        return (int) INT.getAcquire(segment, offset) != 0;
    }

    void setClosedFlag(long offset) {
        INT.setRelease(segment, offset, 1);
    }

    /** Removes the file; the mappings stay valid. */
    void unlink() {
        try {
            Files.deleteIfExists(path);
        } catch (IOException ignored) {
            // the directory may have gone; nothing else to do
        }
    }

    /** Unmaps and closes the file's descriptor. Callers make sure no thread of theirs still touches the rings. */
    @Override
    public void close() {
        closeDescriptor();
        arena.close();
    }

    /** Closes the server's descriptor of the file, if it has one; the mappings stay. Idempotent. */
    synchronized void closeDescriptor() {
        if (descriptor >= 0) {
            Descriptors.close(descriptor);
            descriptor = -1;
        }
    }
}
