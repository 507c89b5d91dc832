package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_CONTEXT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.structs.MemoryProps;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * IPC memory and event handles between two processes, as the backend's process isolation uses them: this JVM exports
 * (or opens), a second JVM ({@link IpcPeer}, started from this test's class path) opens (or exports), and both see
 * the same memory and the same event (a stream of one process waits for work recorded in the other). Also what the driver refuses: opening in the exporting process, bytes that are
 * no handle, a handle whose allocation was freed or whose exporter exited, closing more often than opened.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class IpcAcrossProcessesTest {
    private static final int COUNT = 1024;

    /** The second process: one line asked, one line answered. */
    static final class Peer implements AutoCloseable {
        final Process process;
        final PrintStream in;
        final BufferedReader out;
        final long pid;

        Peer() throws IOException {
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            process = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-Xss1m", "-cp",
                    System.getProperty("java.class.path"), IpcPeer.class.getName())
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            in = new PrintStream(process.getOutputStream(), true, StandardCharsets.UTF_8);
            out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
            String ready = out.readLine();
            assertTrue(ready != null && ready.startsWith("ready "), "peer did not start: " + ready);
            pid = Long.parseLong(ready.substring(6));
            assertNotEquals(ProcessHandle.current().pid(), pid);
        }

        /** The answer's words: the CUresult first. */
        String[] ask(String command) throws IOException {
            in.println(command);
            String line = out.readLine();
            assertTrue(line != null, "peer exited on: " + command);
            return line.split(" ");
        }

        int rc(String command) throws IOException {
            return Integer.parseInt(ask(command)[0]);
        }

        /** The value of a successful command. */
        String value(String command) throws IOException {
            String[] a = ask(command);
            assertEquals(CUDA_SUCCESS, Integer.parseInt(a[0]), () -> command + " -> " + String.join(" ", a));
            return a[1];
        }

        int[] ints(long ptr, int count) throws IOException {
            return Arrays.stream(value("ints " + ptr + " " + count).split(",")).mapToInt(s -> Integer.parseUnsignedInt(s, 16)).toArray();
        }

        @Override
        public void close() throws IOException {
            in.println("quit");
            try {
                if (!process.waitFor(30, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                }
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }

    private static String hex(MemorySegment handle) {
        return HexFormat.of().formatHex(handle.toArray(ValueLayout.JAVA_BYTE));
    }

    private static MemorySegment memHandle(Emulated e, long dptr) {
        MemorySegment h = e.arena.allocate(64);
        e.ok(e.device.cuIpcGetMemHandle(h, dptr));
        return h;
    }

    private static int[] filled(int count, int value) {
        int[] v = new int[count];
        Arrays.fill(v, value);
        return v;
    }

    private static void fill(Emulated e, long fill, long ptr, int count, int value) {
        e.ok(e.launch(fill, (count + 63) / 64, 64, 0, 0, ptr, value, count));
        e.ok(e.device.cuCtxSynchronize());
    }

    @Test
    void anotherProcessOpensTheAllocationAndBothSeeEachOthersWritesKernelsIncluded() throws Exception {
        try (Emulated e = new Emulated(); Peer peer = new Peer()) {
            long module = e.loadShippedModule();
            long fill = e.function(module, "gpus_fill_u32");
            long base = e.alloc(4L * COUNT);
            fill(e, fill, base, COUNT, 0x11111111);
            MemorySegment handle = memHandle(e, base + 4 * 100);
            assertArrayEquals(handle.toArray(ValueLayout.JAVA_BYTE), memHandle(e, base).toArray(ValueLayout.JAVA_BYTE),
                    "a pointer inside the allocation names the same allocation; a second call, the same handle");
            long free = e.freeBytes();

            long opened = Long.parseLong(peer.value("open " + hex(handle)));
            assertArrayEquals(filled(COUNT, 0x11111111), peer.ints(opened, COUNT), "the exporter's kernel's writes before the export");
            fill(e, fill, base, 16, 0x44444444);   // after the export, a kernel of the exporter
            e.ok(e.device.cuMemsetD32(base + 4 * 16, 0x55555555, 16));
            int[] seen = peer.ints(opened, 32);
            assertArrayEquals(filled(16, 0x44444444), Arrays.copyOfRange(seen, 0, 16));
            assertArrayEquals(filled(16, 0x55555555), Arrays.copyOfRange(seen, 16, 32));

            assertEquals(CUDA_SUCCESS, peer.rc("fill " + (opened + 4 * 512) + " 512 " + 0x22222222), "the opener's kernel on the mapping");
            int[] mine = e.downloadInts(base, COUNT);
            assertArrayEquals(filled(512, 0x22222222), Arrays.copyOfRange(mine, 512, COUNT), "the exporter sees the opener's kernel's writes");
            assertEquals(0x55555555, mine[16]);
            assertEquals(free, e.freeBytes(), "the opener's mapping takes nothing of the exporter's device");
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("ints " + (opened + 4L * COUNT - 4) + " 2"), "the mapping is the allocation's size");
        }
    }

    @Test
    void openingTwiceCountsAndCloseDropsOneMemFreeRefusesTheMapping() throws Exception {
        try (Emulated e = new Emulated(); Peer peer = new Peer()) {
            long base = e.alloc(4096);
            e.ok(e.device.cuMemsetD32(base, 0x01020304, 1024));
            String h = hex(memHandle(e, base));
            long first = Long.parseLong(peer.value("open " + h));
            assertEquals(first, Long.parseLong(peer.value("open " + h)), "the same context: the same pointer, one more reference");
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("free " + first), "cuMemFree refuses an opened mapping");
            assertEquals(CUDA_SUCCESS, peer.rc("close " + first));
            assertEquals(0x01020304, peer.ints(first, 1)[0], "one reference left: still mapped");
            assertEquals(CUDA_SUCCESS, peer.rc("close " + first));
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("ints " + first + " 1"), "the last reference closed: unmapped");
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("close " + first), "closed more often than opened");
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("close " + (first + 256)), "no pointer cuIpcOpenMemHandle returned");
            long again = Long.parseLong(peer.value("open " + h));
            assertNotEquals(first, again, "opened again: a fresh mapping");
            assertEquals(0x01020304, peer.ints(again, 1)[0]);
        }
    }

    @Test
    void aFreedAllocationsHandleNoLongerOpensNorDoesAForgedOne() throws Exception {
        try (Emulated e = new Emulated(); Peer peer = new Peer()) {
            long base = e.alloc(8192);
            e.ok(e.device.cuMemsetD32(base, 7, 2048));
            MemorySegment handle = memHandle(e, base);
            long opened = Long.parseLong(peer.value("open " + hex(handle)));

            // the same descriptor number, with another nonce: the file it names is not that one
            IpcMemory.Handle h = IpcMemory.Handle.read(handle, IpcMemory.Handle.MEMORY, "handle");
            MemorySegment forged = e.arena.allocate(64);
            new IpcMemory.Handle(h.magic(), h.pid(), h.fd(), h.size(), h.nonce() + 1).write(forged);
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("open " + hex(forged)));
            new IpcMemory.Handle(h.magic(), h.pid(), h.fd(), h.size() * 2, h.nonce()).write(forged);
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("open " + hex(forged)), "another size");

            e.ok(e.device.cuMemFree(base));
            assertEquals(7, peer.ints(opened, 1)[0], "a mapping opened before the free keeps its pages");
            assertEquals(CUDA_SUCCESS, peer.rc("close " + opened));
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("open " + hex(handle)), "the exporter freed the allocation");

            // the exporter's next export may get the same descriptor number: the old handle still names no file
            long other = e.alloc(8192);
            MemorySegment second = memHandle(e, other);
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("open " + hex(handle)), "descriptor "
                    + IpcMemory.Handle.read(second, IpcMemory.Handle.MEMORY, "second").fd() + " after " + h.fd());
            long reopened = Long.parseLong(peer.value("open " + hex(second)));
            assertEquals(0, peer.ints(reopened, 1)[0], "the new allocation (zero-filled), never the freed one's pages");
        }
    }

    @Test
    void aHandleOfAnExitedExporterAndBytesThatAreNoHandleAreInvalidValues() throws Exception {
        try (Emulated e = new Emulated(); Emulated later = new Emulated()) {
            String h;
            try (Peer peer = new Peer()) {
                h = peer.value("export 4096 " + 0x0badf00d);
                MemorySegment handle = e.arena.allocate(64).copyFrom(MemorySegment.ofArray(HexFormat.of().parseHex(h)));
                MemorySegment out = e.arena.allocate(8);
                e.ok(e.device.cuIpcOpenMemHandle(out, handle, 0));
                long opened = out.get(ValueLayout.JAVA_LONG, 0);
                assertArrayEquals(filled(1024, 0x0badf00d), e.downloadInts(opened, 1024), "this process opens the other's export");
                e.ok(e.device.cuIpcCloseMemHandle(opened));
            }
            MemorySegment handle = later.arena.allocate(64).copyFrom(MemorySegment.ofArray(HexFormat.of().parseHex(h)));
            MemorySegment out = later.arena.allocate(8);
            assertEquals(CUDA_ERROR_INVALID_VALUE, later.device.cuIpcOpenMemHandle(out, handle, 0), "the exporter exited");

            MemorySegment garbage = e.arena.allocate(64);
            for (int i = 0; i < 64; i++) {
                garbage.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 37 + 11));
            }
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuIpcOpenMemHandle(out, garbage, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuIpcOpenMemHandle(out, e.arena.allocate(64), 0), "zeros");
            MemorySegment flipped = e.arena.allocate(64).copyFrom(handle);
            flipped.set(ValueLayout.JAVA_BYTE, 17, (byte) (flipped.get(ValueLayout.JAVA_BYTE, 17) ^ 1));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuIpcOpenMemHandle(out, flipped, 0), "one bit changed");
        }
    }

    @Test
    void theExportingProcessCannotOpenItsOwnHandleAndOnlyCuMemAllocMemoryExports() {
        try (Emulated e = new Emulated(); Emulated other = new Emulated()) {
            long base = e.alloc(4096);
            MemorySegment handle = memHandle(e, base);
            MemorySegment out = e.arena.allocate(8);
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, e.device.cuIpcOpenMemHandle(out, handle, 0));
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, other.device.cuIpcOpenMemHandle(out, handle, 0),
                    "another emulated device of the same process is the same process");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuIpcOpenMemHandle(out, handle, 2), "flags");

            MemorySegment h = e.arena.allocate(64);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuIpcGetMemHandle(h, base + 4096), "past its end");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuIpcGetMemHandle(h, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, other.device.cuIpcGetMemHandle(h, base), "another context's memory");
            MemorySegment p = e.arena.allocate(8);
            e.ok(e.device.cuMemAllocAsync(p, 4096, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuIpcGetMemHandle(h, p.get(ValueLayout.JAVA_LONG, 0)), "pool memory");

            long size = 2L << 20;
            MemorySegment prop = e.arena.allocate(MemoryProps.ALLOCATION_PROP_SIZE, 8).fill((byte) 0);
            prop.set(ValueLayout.JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
            prop.set(ValueLayout.JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
            MemorySegment made = e.arena.allocate(8);
            e.ok(e.device.cuMemCreate(made, size, prop, 0));
            e.ok(e.device.cuMemAddressReserve(p, size, 0, 0, 0));
            long va = p.get(ValueLayout.JAVA_LONG, 0);
            e.ok(e.device.cuMemMap(va, size, 0, made.get(ValueLayout.JAVA_LONG, 0), 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuIpcGetMemHandle(h, va), "VMM memory");

            e.ok(e.device.cuMemFree(base));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuIpcGetMemHandle(h, base), "freed");
        }
    }

    private static MemorySegment eventHandle(Emulated e, long event) {
        MemorySegment h = e.arena.allocate(64);
        e.ok(e.device.cuIpcGetEventHandle(h, event));
        return h;
    }

    @Test
    void aStreamOfEachProcessWaitsForWorkTheOtherRecordedOnTheSharedEvent() throws Exception {
        try (Emulated e = new Emulated(); Peer peer = new Peer()) {
            long module = e.loadShippedModule();
            long fill = e.function(module, "gpus_fill_u32");
            long sleep = e.function(module, "gpus_sleep");
            long shared = e.alloc(4L * COUNT);
            long copy = e.alloc(4L * COUNT);
            long opened = Long.parseLong(peer.value("open " + hex(memHandle(e, shared))));
            long event = e.event(EmulatedEvent.INTERPROCESS | EmulatedEvent.DISABLE_TIMING);
            MemorySegment handle = eventHandle(e, event);
            assertArrayEquals(handle.toArray(ValueLayout.JAVA_BYTE), eventHandle(e, event).toArray(ValueLayout.JAVA_BYTE));
            long theirs = Long.parseLong(peer.value("eopen " + hex(handle)));
            assertEquals(CUDA_SUCCESS, peer.rc("equery " + theirs), "never recorded: complete");

            // the peer records after a sleep and a fill; this process's stream waits for it, then copies
            assertEquals(CUDA_SUCCESS, peer.rc("later " + theirs + " " + opened + " " + COUNT + " " + 0x61616161 + " 300"));
            long stream = e.stream(1);
            e.ok(e.device.cuStreamWaitEvent(stream, event, 0));
            e.ok(e.device.cuMemcpyDtoDAsync(copy, shared, 4L * COUNT, stream));
            e.ok(e.device.cuStreamSynchronize(stream));
            assertArrayEquals(filled(COUNT, 0x61616161), e.downloadInts(copy, COUNT), "the copy waited for the other process's fill");
            e.ok(e.device.cuEventQuery(event));
            assertEquals(CUDA_SUCCESS, peer.rc("equery " + theirs));

            // this process records after a sleep and a fill; the peer's stream waits for it, then copies
            long theirCopy = Long.parseLong(peer.value("alloc " + 4 * COUNT));
            e.ok(e.launch(sleep, 1, 1, 0, stream, 300_000_000L));
            e.ok(e.launch(fill, COUNT / 64, 64, 0, stream, shared, 0x62626262, COUNT));
            e.ok(e.device.cuEventRecord(event, stream));
            assertEquals(CUDA_SUCCESS, peer.rc("waitcopy " + theirs + " " + opened + " " + theirCopy + " " + COUNT));
            assertArrayEquals(filled(COUNT, 0x62626262), peer.ints(theirCopy, COUNT), "the peer's copy waited for this process's fill");

            // cuEventSynchronize in the peer waits for this process's recording
            e.ok(e.launch(sleep, 1, 1, 0, stream, 300_000_000L));
            e.ok(e.launch(fill, COUNT / 64, 64, 0, stream, shared, 0x63636363, COUNT));
            e.ok(e.device.cuEventRecord(event, stream));
            assertEquals(CUDA_SUCCESS, peer.rc("esync " + theirs));
            assertArrayEquals(filled(COUNT, 0x63636363), peer.ints(opened, COUNT), "synchronized with this process's fill");
            assertEquals(CUDA_SUCCESS, peer.rc("equery " + theirs));

            // and cuEventSynchronize here waits for the peer's
            assertEquals(CUDA_SUCCESS, peer.rc("later " + theirs + " " + opened + " " + COUNT + " " + 0x64646464 + " 300"));
            e.ok(e.device.cuEventSynchronize(event));
            assertArrayEquals(filled(COUNT, 0x64646464), e.downloadInts(shared, COUNT));

            assertEquals(CUDA_SUCCESS, peer.rc("edestroy " + theirs));
            assertEquals(CUDA_ERROR_INVALID_HANDLE, peer.rc("equery " + theirs), "destroyed");
            e.ok(e.device.cuEventDestroy(event));
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("eopen " + hex(handle)) , "the exporter destroyed it");
        }
    }

    @Test
    void aRecordingPendingAtTheExportCarriesOverAndTheOpenerExportsTheSameHandle() throws Exception {
        try (Emulated e = new Emulated(); Peer peer = new Peer()) {
            long module = e.loadShippedModule();
            long fill = e.function(module, "gpus_fill_u32");
            long sleep = e.function(module, "gpus_sleep");
            long shared = e.alloc(4L * COUNT);
            long opened = Long.parseLong(peer.value("open " + hex(memHandle(e, shared))));
            long event = e.event(EmulatedEvent.INTERPROCESS | EmulatedEvent.DISABLE_TIMING);
            long stream = e.stream(1);
            e.ok(e.launch(sleep, 1, 1, 0, stream, 300_000_000L));
            e.ok(e.launch(fill, COUNT / 64, 64, 0, stream, shared, 0x71717171, COUNT));
            e.ok(e.device.cuEventRecord(event, stream));   // recorded before the event is exported
            MemorySegment handle = eventHandle(e, event);
            long theirs = Long.parseLong(peer.value("eopen " + hex(handle)));
            assertEquals(CUDA_SUCCESS, peer.rc("esync " + theirs));
            assertArrayEquals(filled(COUNT, 0x71717171), peer.ints(opened, COUNT));
            assertEquals(hex(handle), peer.value("eexport " + theirs), "the opened event's handle is the one it was opened from");
        }
    }

    /** Without the rule, the waits below never end: the timeout (on a thread of its own, since waits ignore interrupts) fails it. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void aRecordingWhoseProcessDiedCountsAsReachedSoNoWaitHangs() throws Exception {
        try (Emulated e = new Emulated()) {
            long shared = e.alloc(4L * COUNT);
            long event = e.event(EmulatedEvent.INTERPROCESS | EmulatedEvent.DISABLE_TIMING);
            MemorySegment handle = eventHandle(e, event);
            Peer peer = new Peer();
            try {
                long opened = Long.parseLong(peer.value("open " + hex(memHandle(e, shared))));
                long theirs = Long.parseLong(peer.value("eopen " + hex(handle)));
                assertEquals(CUDA_SUCCESS, peer.rc("later " + theirs + " " + opened + " " + COUNT + " 1 600000"));   // 10 minutes
                assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_READY, e.device.cuEventQuery(event),
                        "the peer's recording is pending");
            } finally {
                peer.process.destroyForcibly().waitFor();
            }
            long stream = e.stream(1);
            e.ok(e.device.cuStreamWaitEvent(stream, event, 0));
            e.ok(e.device.cuStreamSynchronize(stream));
            e.ok(e.device.cuEventSynchronize(event));
            e.ok(e.device.cuEventQuery(event));
        }
    }

    @Test
    void eventHandlesRefuseWhatTheDriverRefuses() throws Exception {
        try (Emulated e = new Emulated(); Peer peer = new Peer()) {
            MemorySegment out = e.arena.allocate(8);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuEventCreate(out, EmulatedEvent.INTERPROCESS), "without DISABLE_TIMING");
            MemorySegment h = e.arena.allocate(64);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuIpcGetEventHandle(h, e.event(EmulatedEvent.DISABLE_TIMING)),
                    "not an interprocess event");
            long event = e.event(EmulatedEvent.INTERPROCESS | EmulatedEvent.DISABLE_TIMING);
            MemorySegment handle = eventHandle(e, event);
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, e.device.cuIpcOpenEventHandle(out, handle), "the exporting process");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuIpcOpenEventHandle(out, e.arena.allocate(64)), "zeros");
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("eopen " + hex(memHandle(e, e.alloc(4096)))), "a memory handle");
            assertEquals(CUDA_ERROR_INVALID_VALUE, peer.rc("open " + hex(handle)), "an event handle as a memory handle");

            MemorySegment deviceAttr = e.arena.allocate(4);
            e.ok(e.device.cuDeviceGetAttribute(deviceAttr, 125, 0));
            assertEquals(1, deviceAttr.get(ValueLayout.JAVA_INT, 0), "CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED");
        }
    }
}
