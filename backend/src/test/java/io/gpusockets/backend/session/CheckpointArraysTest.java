package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gpusockets.protocol.structs.Array3DDescriptor;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** How an array's contents are cut into chunks ({@link CheckpointArrays.Geometry}): the same cuts on both sides. */
class CheckpointArraysTest {
    /** Every chunk of {@code g}, in order, as the writer takes them. */
    private static List<CheckpointArrays.Piece> cuts(CheckpointArrays.Geometry g) throws IOException {
        List<CheckpointArrays.Piece> out = new ArrayList<>();
        for (long off = 0; off < g.bytes(); ) {
            CheckpointArrays.Piece p = g.at(off);
            out.add(p);
            off += p.bytes();
        }
        return out;
    }

    @Test
    void slicesThatFitAChunkTogetherTravelTogether() throws IOException {
        // slices of 4 x 5 = 20 bytes, chunks of 50: two slices per chunk, the last one alone
        assertEquals(List.of(new CheckpointArrays.Piece(0, 0, 0, 4, 5, 2), new CheckpointArrays.Piece(0, 0, 2, 4, 5, 2),
                new CheckpointArrays.Piece(0, 0, 4, 4, 5, 1)), cuts(new CheckpointArrays.Geometry(4, 5, 5, 50)));
    }

    @Test
    void slicesLargerThanAChunkTravelInWholeRowsOfOneSlice() throws IOException {
        // rows of 10, 7 per slice, 2 slices, chunks of 35: three rows, three, one, per slice
        assertEquals(List.of(new CheckpointArrays.Piece(0, 0, 0, 10, 3, 1), new CheckpointArrays.Piece(0, 3, 0, 10, 3, 1),
                new CheckpointArrays.Piece(0, 6, 0, 10, 1, 1), new CheckpointArrays.Piece(0, 0, 1, 10, 3, 1),
                new CheckpointArrays.Piece(0, 3, 1, 10, 3, 1), new CheckpointArrays.Piece(0, 6, 1, 10, 1, 1)),
                cuts(new CheckpointArrays.Geometry(10, 7, 2, 35)));
    }

    @Test
    void rowsLargerThanAChunkTravelInParts() throws IOException {
        // rows of 25, two rows, chunks of 10: 10, 10, 5 per row
        assertEquals(List.of(new CheckpointArrays.Piece(0, 0, 0, 10, 1, 1), new CheckpointArrays.Piece(10, 0, 0, 10, 1, 1),
                new CheckpointArrays.Piece(20, 0, 0, 5, 1, 1), new CheckpointArrays.Piece(0, 1, 0, 10, 1, 1),
                new CheckpointArrays.Piece(10, 1, 0, 10, 1, 1), new CheckpointArrays.Piece(20, 1, 0, 5, 1, 1)),
                cuts(new CheckpointArrays.Geometry(25, 2, 1, 10)));
    }

    @Test
    void anOffsetWhereNoChunkStartsOrOutsideTheArrayIsRefused() {
        CheckpointArrays.Geometry g = new CheckpointArrays.Geometry(10, 7, 2, 35);
        assertThrows(IOException.class, () -> g.at(10));
        assertThrows(IOException.class, () -> g.at(-1));
        assertThrows(IOException.class, () -> g.at(g.bytes()));
        assertThrows(IllegalArgumentException.class, () -> new CheckpointArrays.Geometry(0, 1, 1, 10));
    }

    @Test
    void theGeometryFollowsTheDescriptorsShapeAndRefusesUnknownFormats() {
        // a 1D layered array: one row per layer; a cubemap: six faces; float2 elements of 8 bytes
        assertEquals(new CheckpointArrays.Geometry(64 * 8, 1, 5, 100),
                CheckpointArrays.Geometry.of(new Array3DDescriptor(64, 0, 5, 0x20, 2, Array3DDescriptor.LAYERED), 100));
        assertEquals(new CheckpointArrays.Geometry(8 * 4, 8, 6, 100),
                CheckpointArrays.Geometry.of(new Array3DDescriptor(8, 8, 6, 0x20, 1, Array3DDescriptor.CUBEMAP), 100));
        assertNull(CheckpointArrays.Geometry.of(new Array3DDescriptor(8, 8, 0, 0x91, 4, 0), 100), "BC1: block-compressed");
    }
}
