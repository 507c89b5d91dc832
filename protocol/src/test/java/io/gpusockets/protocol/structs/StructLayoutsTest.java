package io.gpusockets.protocol.structs;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.structs.Memcpy3D.Side;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/** Offsets here were checked with offsetof() against cuda.h 13.0 on x86-64. */
class StructLayoutsTest {
    private static Side side(int type, long base) {
        return new Side(type, base + 1, base + 2, base + 3, base + 4, base + 5, base + 6, base + 7, base + 8, base + 9, 0);
    }

    @Test
    void memcpy2DFieldsSitWhereCudaHPutsThem() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(Memcpy3D.SIZE_2D, 8);
            new Memcpy3D(side(Memcpy3D.HOST, 100), side(Memcpy3D.ARRAY, 200), 300, 400, 1).write2D(s);
            assertEquals(101, s.get(JAVA_LONG, 0));     // srcXInBytes
            assertEquals(102, s.get(JAVA_LONG, 8));     // srcY
            assertEquals(Memcpy3D.HOST, s.get(JAVA_INT, 16));
            assertEquals(105, s.get(JAVA_LONG, 24));    // srcHost
            assertEquals(106, s.get(JAVA_LONG, 32));    // srcDevice
            assertEquals(107, s.get(JAVA_LONG, 40));    // srcArray
            assertEquals(108, s.get(JAVA_LONG, 48));    // srcPitch
            assertEquals(201, s.get(JAVA_LONG, 56));    // dstXInBytes
            assertEquals(Memcpy3D.ARRAY, s.get(JAVA_INT, 72));
            assertEquals(208, s.get(JAVA_LONG, 104));   // dstPitch
            assertEquals(300, s.get(JAVA_LONG, 112));   // WidthInBytes
            assertEquals(400, s.get(JAVA_LONG, 120));   // Height
            Memcpy3D back = Memcpy3D.read2D(s);
            assertEquals(0, back.src().z());
            assertEquals(1, back.depth());
            assertEquals(106, back.src().device());
        }
    }

    @Test
    void memcpy3DFieldsSitWhereCudaHPutsThem() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(Memcpy3D.SIZE_3D, 8);
            Memcpy3D m = new Memcpy3D(side(Memcpy3D.DEVICE, 100), side(Memcpy3D.UNIFIED, 200), 300, 400, 500);
            m.write3D(s);
            assertEquals(103, s.get(JAVA_LONG, 16));    // srcZ
            assertEquals(104, s.get(JAVA_LONG, 24));    // srcLOD
            assertEquals(Memcpy3D.DEVICE, s.get(JAVA_INT, 32));
            assertEquals(0, s.get(JAVA_LONG, 64));      // reserved0
            assertEquals(109, s.get(JAVA_LONG, 80));    // srcHeight
            assertEquals(201, s.get(JAVA_LONG, 88));    // dstXInBytes
            assertEquals(Memcpy3D.UNIFIED, s.get(JAVA_INT, 120));
            assertEquals(209, s.get(JAVA_LONG, 168));   // dstHeight
            assertEquals(500, s.get(JAVA_LONG, 192));   // Depth
            assertEquals(m, Memcpy3D.read3D(s));
        }
    }

    @Test
    void wireFormLeavesHostAddressesOut() {
        Memcpy3D m = new Memcpy3D(side(Memcpy3D.HOST, 100), side(Memcpy3D.DEVICE, 200), 3, 4, 5);
        ByteBuffer b = ByteBuffer.allocate(Memcpy3D.WIRE_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        m.encode(b);
        assertFalse(b.hasRemaining());
        Memcpy3D back = Memcpy3D.decode(b.flip());
        assertEquals(0, back.src().host());
        assertEquals(0, back.dst().host());
        assertEquals(m.dst().device(), back.dst().device());
        assertEquals(m.dst().z(), back.dst().z());
        assertEquals(m.src().pitch(), back.src().pitch());
    }

    @Test
    void extentsCoverExactlyTheTouchedBytes() {
        Side s = new Side(Memcpy3D.DEVICE, 5, 2, 1, 0, 0, 0, 0, 100, 10, 0);
        Memcpy3D m = new Memcpy3D(s, s, 30, 4, 3);
        assertEquals(5 + 2 * 100 + 1 * 100 * 10, Memcpy3D.startOffset(s));
        assertEquals(2 * 1000 + 3 * 100 + 30, m.extent(s));
        assertEquals(1000 + 300, m.rowOffset(s, 7));  // slice 1, row 3
        assertEquals(0, m.withExtent(0, 4, 3).extent(s));
        assertEquals(-1, m.withExtent(-1, 1, 1).totalBytes());
        assertEquals(-1, m.withExtent(1L << 40, 1L << 30, 1).totalBytes());
        assertTrue(m.withExtent(100, 10, 2).contiguous(s));
        assertFalse(m.contiguous(s));
    }

    @Test
    void arrayDescriptorAndResourceSpans() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(ArrayDescriptor.SIZE, 8);
            new ArrayDescriptor(7, 9, 0x20, 4).write(s);
            assertEquals(0x20, s.get(JAVA_INT, 16));
            assertEquals(4, s.get(JAVA_INT, 20));
            assertEquals(16, ArrayDescriptor.elementBytes(0x20, 4));
            assertEquals(-1, ArrayDescriptor.elementBytes(0x91, 4));

            MemorySegment r = a.allocate(ResourceDesc.SIZE, 8);
            r.set(JAVA_INT, ResourceDesc.FORMAT, 0x02);
            r.set(JAVA_INT, ResourceDesc.NUM_CHANNELS, 2);
            r.set(JAVA_LONG, ResourceDesc.PITCH2D_WIDTH, 10);
            r.set(JAVA_LONG, ResourceDesc.PITCH2D_HEIGHT, 3);
            r.set(JAVA_LONG, ResourceDesc.PITCH2D_PITCH, 64);
            assertEquals(2 * 64 + 10 * 4, ResourceDesc.pitch2DSpan(r));
            r.set(JAVA_INT, ResourceDesc.FORMAT, 0x91);
            assertEquals(3 * 64, ResourceDesc.pitch2DSpan(r), "unknown element size: whole rows");
        }
    }
}
