package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Exportable physical allocations (issue 23, hand-over on one host): a cuMemCreate asking for POSIX descriptors is
 * exported, imported by a second emulated device instance (the stand-in for another backend process: the two share
 * nothing but the memory file), both see each other's writes, and the pages outlive the exporter's release.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ExportableMemoryTest {
    private static final long MIB2 = 2L << 20;
    private static final int POSIX_FD = MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

    private static MemorySegment prop(Emulated e, int handleTypes) {
        MemorySegment p = e.arena.allocate(MemoryProps.ALLOCATION_PROP_SIZE, 8).fill((byte) 0);
        p.set(ValueLayout.JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
        p.set(ValueLayout.JAVA_INT, 4, handleTypes);
        p.set(ValueLayout.JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
        return p;
    }

    private static long created(Emulated e, long size, int handleTypes) {
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuMemCreate(out, size, prop(e, handleTypes), 0));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    /** Reserves, maps {@code handle} and grants read-write access; returns the address. */
    private static long mapped(Emulated e, long handle, long size) {
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuMemAddressReserve(out, size, 0, 0, 0));
        long va = out.get(ValueLayout.JAVA_LONG, 0);
        e.ok(e.device.cuMemMap(va, size, 0, handle, 0));
        MemorySegment d = e.arena.allocate(MemoryProps.ACCESS_DESC_SIZE, 4);
        d.set(ValueLayout.JAVA_INT, 0, MemoryProps.LOCATION_TYPE_DEVICE);
        d.set(ValueLayout.JAVA_INT, 4, 0);
        d.set(ValueLayout.JAVA_INT, 8, MemoryProps.ACCESS_READWRITE);
        e.ok(e.device.cuMemSetAccess(va, size, d, 1));
        return va;
    }

    private static int exported(Emulated e, long handle) {
        MemorySegment fd = e.arena.allocate(4);
        e.ok(e.device.cuMemExportToShareableHandle(fd, handle, POSIX_FD, 0));
        return fd.get(ValueLayout.JAVA_INT, 0);
    }

    private static int importResult(Emulated e, MemorySegment out, int fd) {
        return e.device.cuMemImportFromShareableHandle(out, MemorySegment.ofAddress(fd), POSIX_FD);
    }

    @Test
    void theDeviceSaysItHasPosixDescriptorHandles() {
        try (Emulated e = new Emulated()) {
            MemorySegment v = e.arena.allocate(4);
            e.ok(e.device.cuDeviceGetAttribute(v, 103, 0));
            assertEquals(1, v.get(ValueLayout.JAVA_INT, 0));
        }
    }

    @Test
    void anExportedAllocationImportedByAnotherInstanceSharesItsPagesAndOutlivesTheExportersRelease() {
        try (Emulated a = new Emulated(); Emulated b = new Emulated()) {
            long size = 2 * MIB2;
            long ha = created(a, size, POSIX_FD);
            long pa = mapped(a, ha, size);
            long module = a.loadShippedModule();
            a.ok(a.launch(a.function(module, "gpus_fill_u32"), 1, 64, 0, 0, pa + MIB2, 0x5EED5EED, 64));
            a.ok(a.device.cuCtxSynchronize());

            int fd = exported(a, ha);
            assertTrue(fd >= 0);
            long bFree = b.freeBytes();
            MemorySegment out = b.arena.allocate(8);
            b.ok(importResult(b, out, fd));
            MemoryFiles.close(fd);   // the importer holds its own descriptor
            long hb = out.get(ValueLayout.JAVA_LONG, 0);
            assertEquals(bFree - size, b.freeBytes(), "the importer's budget carries the allocation");
            MemorySegment props = b.arena.allocate(MemoryProps.ALLOCATION_PROP_SIZE);
            b.ok(b.device.cuMemGetAllocationPropertiesFromHandle(props, hb));
            assertEquals(POSIX_FD, props.get(ValueLayout.JAVA_INT, MemoryProps.HANDLE_TYPES));
            long pb = mapped(b, hb, size);
            int[] seen = b.downloadInts(pb + MIB2, 64);
            for (int v : seen) {
                assertEquals(0x5EED5EED, v, "the importer sees the exporter's kernel's writes");
            }

            // the exporter lets go of everything: the pages stay with the importer
            long aFree = a.freeBytes();
            a.ok(a.device.cuMemUnmap(pa, size));
            a.ok(a.device.cuMemRelease(ha));
            assertEquals(aFree + size, a.freeBytes(), "the exporter's budget no longer carries it");
            b.ok(b.device.cuMemsetD32(pb, 0x12345678, 16));
            int[] after = b.downloadInts(pb, 16);
            for (int v : after) {
                assertEquals(0x12345678, v);
            }
            assertArrayEquals(seen, b.downloadInts(pb + MIB2, 64), "the exporter's release kept the pages");

            // re-export from the importer and import once more: still the same pages
            int again = exported(b, hb);
            MemorySegment out2 = a.arena.allocate(8);
            a.ok(importResult(a, out2, again));
            MemoryFiles.close(again);
            long pa2 = mapped(a, out2.get(ValueLayout.JAVA_LONG, 0), size);
            assertArrayEquals(after, a.downloadInts(pa2, 16));

            b.ok(b.device.cuMemUnmap(pb, size));
            b.ok(b.device.cuMemRelease(hb));
            assertEquals(bFree, b.freeBytes(), "unmapped and released: the importer's budget is back");
        }
    }

    @Test
    void exportAndImportRefuseWhatTheDriverRefuses() throws Exception {
        try (Emulated e = new Emulated()) {
            long plain = created(e, MIB2, MemoryProps.HANDLE_TYPE_NONE);
            MemorySegment fd = e.arena.allocate(4);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemExportToShareableHandle(fd, plain, POSIX_FD, 0),
                    "created without the POSIX handle type");
            long exportable = created(e, MIB2, POSIX_FD);
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuMemExportToShareableHandle(fd, exportable, 2, 0), "win32");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemExportToShareableHandle(fd, exportable, POSIX_FD, 1), "flags");

            MemorySegment out = e.arena.allocate(8);
            assertEquals(CUDA_ERROR_INVALID_VALUE, importResult(e, out, 987654), "no open descriptor");
            int odd = MemoryFiles.create(4096);
            try {
                assertEquals(CUDA_ERROR_INVALID_VALUE, importResult(e, out, odd), "a file of no granularity multiple");
                assertTrue(e.device.lastErrorDetail().contains("4096"), e.device.lastErrorDetail());
            } finally {
                MemoryFiles.close(odd);
            }
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuMemImportFromShareableHandle(out, MemorySegment.ofAddress(0), 2));
            e.ok(e.device.cuMemRelease(plain));
            e.ok(e.device.cuMemRelease(exportable));
        }
    }
}
