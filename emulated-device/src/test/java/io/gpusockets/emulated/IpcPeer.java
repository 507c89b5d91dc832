package io.gpusockets.emulated;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.StringJoiner;

/**
 * The other process of {@link IpcAcrossProcessesTest}: a JVM of its own with one emulated device and a context, that
 * runs the commands it reads on stdin, one a line, and answers each with one line on stdout: the CUresult, then any
 * value. Numbers are decimal or {@code 0x} hex; handles are 128 hex digits.
 *
 * <pre>
 * open HANDLE                       cuIpcOpenMemHandle              -> rc ptr
 * close PTR | free PTR              cuIpcCloseMemHandle | cuMemFree -> rc
 * ints PTR COUNT                    cuMemcpyDtoH                    -> rc v,v,...
 * fill PTR COUNT VALUE              gpus_fill_u32, cuCtxSynchronize -> rc
 * export BYTES VALUE                cuMemAlloc, fill, cuIpcGetMemHandle -> rc HANDLE
 * eopen HANDLE                      cuIpcOpenEventHandle            -> rc event
 * ecreate                           cuEventCreate(INTERPROCESS|DISABLE_TIMING), cuIpcGetEventHandle -> rc event HANDLE
 * later EV PTR COUNT VALUE MILLIS   on a new stream: gpus_sleep, gpus_fill_u32, cuEventRecord(EV); returns at once -> rc
 * waitcopy EV SRC DST COUNT         on a new stream: cuStreamWaitEvent(EV), cuMemcpyDtoDAsync, cuStreamSynchronize -> rc
 * eexport EV                        cuIpcGetEventHandle             -> rc HANDLE
 * equery EV | esync EV | edestroy EV                                -> rc
 * alloc BYTES                       cuMemAlloc                      -> rc ptr
 * quit
 * </pre>
 */
public final class IpcPeer {
    private IpcPeer() {
    }

    static long number(String s) {
        return s.startsWith("0x") ? Long.parseUnsignedLong(s.substring(2), 16) : Long.parseLong(s);
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        try (Emulated e = new Emulated()) {
            long module = e.loadShippedModule();
            long fill = e.function(module, "gpus_fill_u32");
            long sleep = e.function(module, "gpus_sleep");
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            out.println("ready " + ProcessHandle.current().pid());
            for (String line; (line = in.readLine()) != null;) {
                String[] a = line.trim().split(" ");
                String answer = switch (a[0]) {
                    case "quit" -> null;
                    case "open" -> {
                        MemorySegment p = e.arena.allocate(8);
                        int rc = e.device.cuIpcOpenMemHandle(p, handle(e, a[1]), 0);
                        yield rc + " " + p.get(ValueLayout.JAVA_LONG, 0);
                    }
                    case "close" -> String.valueOf(e.device.cuIpcCloseMemHandle(number(a[1])));
                    case "free" -> String.valueOf(e.device.cuMemFree(number(a[1])));
                    case "ints" -> {
                        int n = (int) number(a[2]);
                        MemorySegment host = e.arena.allocate(4L * n);
                        int rc = e.device.cuMemcpyDtoH(host, number(a[1]), 4L * n);
                        StringJoiner j = new StringJoiner(",");
                        for (int v : host.toArray(ValueLayout.JAVA_INT)) {
                            j.add(Integer.toHexString(v));
                        }
                        yield rc + " " + j;
                    }
                    case "fill" -> {
                        int rc = e.launch(fill, 64, 64, 0, 0, number(a[1]), (int) number(a[3]), (int) number(a[2]));
                        yield String.valueOf(rc != 0 ? rc : e.device.cuCtxSynchronize());
                    }
                    case "alloc" -> {
                        MemorySegment p = e.arena.allocate(8);
                        int rc = e.device.cuMemAlloc(p, number(a[1]));
                        yield rc + " " + p.get(ValueLayout.JAVA_LONG, 0);
                    }
                    case "export" -> {
                        long ptr = e.alloc(number(a[1]));
                        e.ok(e.device.cuMemsetD32(ptr, (int) number(a[2]), number(a[1]) / 4));
                        MemorySegment h = e.arena.allocate(64);
                        int rc = e.device.cuIpcGetMemHandle(h, ptr);
                        yield rc + " " + HexFormat.of().formatHex(h.toArray(ValueLayout.JAVA_BYTE));
                    }
                    case "eopen" -> {
                        MemorySegment p = e.arena.allocate(8);
                        int rc = e.device.cuIpcOpenEventHandle(p, handle(e, a[1]));
                        yield rc + " " + p.get(ValueLayout.JAVA_LONG, 0);
                    }
                    case "ecreate" -> {
                        long ev = e.event(EmulatedEvent.INTERPROCESS | EmulatedEvent.DISABLE_TIMING);
                        MemorySegment h = e.arena.allocate(64);
                        int rc = e.device.cuIpcGetEventHandle(h, ev);
                        yield rc + " " + ev + " " + HexFormat.of().formatHex(h.toArray(ValueLayout.JAVA_BYTE));
                    }
                    case "eexport" -> {
                        MemorySegment h = e.arena.allocate(64);
                        int rc = e.device.cuIpcGetEventHandle(h, number(a[1]));
                        yield rc + " " + HexFormat.of().formatHex(h.toArray(ValueLayout.JAVA_BYTE));
                    }
                    case "later" -> {
                        long stream = e.stream(1);
                        e.ok(e.launch(sleep, 1, 1, 0, stream, number(a[5]) * 1_000_000L));
                        e.ok(e.launch(fill, 64, 64, 0, stream, number(a[2]), (int) number(a[4]), (int) number(a[3])));
                        yield String.valueOf(e.device.cuEventRecord(number(a[1]), stream));
                    }
                    case "waitcopy" -> {
                        long stream = e.stream(1);
                        int rc = e.device.cuStreamWaitEvent(stream, number(a[1]), 0);
                        if (rc == 0) {
                            rc = e.device.cuMemcpyDtoDAsync(number(a[3]), number(a[2]), 4 * number(a[4]), stream);
                        }
                        yield String.valueOf(rc != 0 ? rc : e.device.cuStreamSynchronize(stream));
                    }
                    case "equery" -> String.valueOf(e.device.cuEventQuery(number(a[1])));
                    case "esync" -> String.valueOf(e.device.cuEventSynchronize(number(a[1])));
                    case "edestroy" -> String.valueOf(e.device.cuEventDestroy(number(a[1])));
                    default -> "unknown command " + line;
                };
                if (answer == null) {
                    break;
                }
                out.println(answer);
            }
        }
    }

    private static MemorySegment handle(Emulated e, String hex) {
        return e.arena.allocate(64).copyFrom(MemorySegment.ofArray(HexFormat.of().parseHex(hex)));
    }
}
