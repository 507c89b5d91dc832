package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;

/**
 * The module globals of a restored (or migrated-in) session that the driver placed elsewhere than the program was
 * told: each one's range as the program knows it (the recorded address, its "program" range) and where it lies now
 * (its "real" range). Module memory is the driver's, not the session's address window: a new process (a restore's,
 * a migration target's) places a module's {@code __device__} and {@code __constant__} variables wherever it likes, and
 * no VMM handle lets the backend map them back. So the session keeps the program's view instead: the dispatcher
 * translates every device pointer from the wire that falls in a program range into the real range ({@link #toReal})
 * before it checks it against {@link SessionMemory} (which holds real ranges) and gives it to the driver, and every
 * device address it answers with back into the program's ({@link #toProgram}): the program only ever sees the
 * addresses it was given before the checkpoint.
 *
 * <p>Where pointers are translated (the places a device pointer comes from the wire): every DPTR parameter of the
 * API table (copies, memset, pointer queries and attributes, cuMemGetAddressRange), a tensor map's global address,
 * the device addresses inside memops, pitched and 3D copies (graph copy nodes too), graph memset nodes, texture and
 * surface resources, decompression batches and launch attributes (the range checks of {@link Call#deviceRange}), and kernel parameters:
 * every 8-byte aligned word of the parameters (a pointer-sized parameter, or a pointer inside a struct parameter)
 * whose value lies in a program range (cuLaunchKernel, cuLaunchCooperativeKernel, cuLaunchKernelEx, both parameter
 * modes; graph kernel nodes as they are added or set). Answers translated back: cuModuleGetGlobal's and
 * cuLibraryGetGlobal's address, cuMemGetAddressRange's base, cuPointerGetAttribute(s)' device pointer and range
 * start. What cannot be translated: a global's address that the program stored in device memory (a kernel that
 * takes the address of a global and writes it to memory, or a host copy of the address into device memory: the
 * bytes are the program's, and dereferencing them on the device after the restore reaches the old address, which is
 * nobody's there: an illegal address), a global's address a kernel computes itself from another global's (the new
 * layout need not keep the offsets between globals), and graph node parameters read back (cuGraph*NodeGetParams
 * answer with the real addresses).
 *
 * <p>A checkpoint of a session with translations records the program's addresses (the recorder sees the answers as
 * the program does) and reads the contents at the real ones, so a chain of restores carries the program's view on.
 * A global that the program obtains after the restore and that the driver placed over a range the program knows as
 * another global's is refused (CUDA_ERROR_OUT_OF_MEMORY, the module stays loaded): its address would be ambiguous.
 *
 * <p>Bounded by the session's globals (one entry per recorded global that moved). Reads are lock-free (a per-call
 * lookup only for sessions that have one: a session without translations holds none, {@link Session#translation});
 * changes are synchronised.
 */
final class GlobalTranslation {
    /** Program base to {real base, size}. */
    private final ConcurrentSkipListMap<Long, long[]> byProgram = new ConcurrentSkipListMap<>();
    /** Real base to {program base, size}. */
    private final ConcurrentSkipListMap<Long, long[]> byReal = new ConcurrentSkipListMap<>();
    /** The program base the replayed call now running places its global at (the restore's thread only), or 0. */
    private long expected;

    /** Whether no global is translated. */
    boolean isEmpty() {
        return byProgram.isEmpty();
    }

    /** The real address of {@code address} as the program knows it: translated where it lies in a program range. */
    long toReal(long address) {
        Map.Entry<Long, long[]> e = byProgram.floorEntry(address);
        if (e == null) {
            return address;
        }
        long off = address - e.getKey();
        return off >= 0 && off < e.getValue()[1] ? e.getValue()[0] + off : address;
    }

    /** The program's address of the real {@code address}: translated back where it lies in a real range. */
    long toProgram(long address) {
        Map.Entry<Long, long[]> e = byReal.floorEntry(address);
        if (e == null) {
            return address;
        }
        long off = address - e.getKey();
        return off >= 0 && off < e.getValue()[1] ? e.getValue()[0] + off : address;
    }

    /** The next global a replayed call obtains is the program's at {@code programBase} (the restore's replay). */
    void expect(long programBase) {
        expected = programBase;
    }

    /**
     * A global the driver gave at real {@code base} ({@code size} bytes): returns the address the program is given.
     * One already translated keeps its program address; during a restore's replay ({@link #expect}) a global that
     * moved is translated from here on; any other keeps its real address, unless that lies over a program range
     * (CallRejected: it would be ambiguous).
     */
    synchronized long placed(long base, long size) throws CallRejected {
        long[] known = byReal.get(base);
        if (known != null) {
            return known[0];
        }
        long program = expected;
        expected = 0;
        if (program != 0) {
            if (program != base) {
                byProgram.put(program, new long[] {base, size});
                byReal.put(base, new long[] {program, size});
            }
            return program;
        }
        Map.Entry<Long, long[]> below = byProgram.floorEntry(base + size - 1);
        if (below != null && below.getKey() + below.getValue()[1] > base) {
            throw new CallRejected(CuResult.CUDA_ERROR_OUT_OF_MEMORY, String.format("the driver placed this global at"
                    + " 0x%x+%d, where the program knows the restored global at 0x%x", base, size, below.getKey()));
        }
        return base;
    }

    /** The global at real {@code base} is gone (its module unloaded, its context destroyed): its translation goes. */
    synchronized void gone(long base) {
        long[] p = byReal.remove(base);
        if (p != null) {
            byProgram.remove(p[0]);
        }
    }

    /** Program base to real base, for logs and tests. */
    synchronized Map<Long, Long> snapshot() {
        Map<Long, Long> out = new java.util.TreeMap<>();
        byProgram.forEach((k, v) -> out.put(k, v[0]));
        return out;
    }
}
