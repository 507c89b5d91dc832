package io.gpusockets.backend.isolation;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.session.ShareRegistry;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The window section of SHARE and SHARED: written and read back, and the counts a broken peer sends refused. */
class ControlMessagesTest {
    private static ByteBuffer written(ShareRegistry.Window w, int[] fdsOut) {
        ByteBuffer b = ControlMessages.start(ControlMessages.SHARED);
        int[] fds = ControlMessages.putWindow(b, w);
        System.arraycopy(fds, 0, fdsOut, 0, fds.length);
        ControlMessages.finish(b);
        b.position(5); // after the length and the type
        return b;
    }

    @Test
    void aWindowsPiecesComeBackWithTheDescriptorsInTheirOrder() throws Exception {
        ShareRegistry.Window w = new ShareRegistry.Window(64, List.of(new ShareRegistry.Piece(0, 4096, 40),
                new ShareRegistry.Piece(4096, 8192, 41)));
        int[] sent = new int[2];
        ByteBuffer b = written(w, sent);
        assertEquals(List.of(40, 41), List.of(sent[0], sent[1]));
        List<Integer> fds = new ArrayList<>(List.of(50, 51)); // as they arrived here
        ShareRegistry.Window back = ControlMessages.getWindow(b, fds);
        assertEquals(new ShareRegistry.Window(64, List.of(new ShareRegistry.Piece(0, 4096, 50),
                new ShareRegistry.Piece(4096, 8192, 51))), back);
        assertTrue(fds.isEmpty(), "the window took its descriptors");
        assertTrue(!b.hasRemaining());
    }

    @Test
    void noWindowIsNoneAndAMessageEndingBeforeItToo() throws Exception {
        ByteBuffer b = written(null, new int[0]);
        assertNull(ControlMessages.getWindow(b, new ArrayList<>()));
        assertNull(ControlMessages.getWindow(ByteBuffer.allocate(0), new ArrayList<>()), "an earlier build's message");
    }

    @Test
    void moreThanTheMostPiecesOrDescriptorsThatAreNotOneAPieceAreABrokenPeer() {
        ByteBuffer many = ByteBuffer.allocate(64).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        many.putInt(ControlMessages.MAX_PIECES + 1).flip();
        assertThrows(IOException.class, () -> ControlMessages.getWindow(many, new ArrayList<>()));
        ByteBuffer negative = ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(-1).flip();
        assertThrows(IOException.class, () -> ControlMessages.getWindow(negative, new ArrayList<>()));

        ShareRegistry.Window two = new ShareRegistry.Window(0, List.of(new ShareRegistry.Piece(0, 4096, 40),
                new ShareRegistry.Piece(4096, 4096, 41)));
        List<Integer> one = new ArrayList<>(List.of(50));
        assertThrows(IOException.class, () -> ControlMessages.getWindow(written(two, new int[2]), one));
        assertEquals(List.of(50), one, "the descriptors stay the caller's to close");
        ByteBuffer cut = written(two, new int[2]);
        cut.limit(cut.limit() - 8);
        assertThrows(IOException.class, () -> ControlMessages.getWindow(cut, new ArrayList<>(List.of(50, 51))),
                "a message cut short");
        assertThrows(IllegalArgumentException.class, () -> ControlMessages.putWindow(ControlMessages.start(
                ControlMessages.SHARE), new ShareRegistry.Window(0, List.of())), "no window of no pieces is written");
    }
}
