package io.gpusockets.backend.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.session.PreCopy;
import io.gpusockets.protocol.wire.ProtocolException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link Migration.Result#encode}/{@link Migration.Result#decode}, the form in which a worker process tells the front
 * what its migration did: every field comes back, the largest result fits its bound, and what encode cannot have
 * written (too many rounds, a target too long, a truncated message) is refused.
 */
class MigrationResultTest {
    private static Migration.Result result(int rounds, String target) {
        List<PreCopy.Round> list = new ArrayList<>();
        for (int i = 0; i < rounds; i++) {
            list.add(new PreCopy.Round(i, i == rounds - 1, 10 + i, 1000L * i, 5 + i, 500L * i, 7L * i, 9L * i));
        }
        return new Migration.Result(42, target, List.copyOf(list), 1, 2, 3, 4, 5, 6, 7);
    }

    @Test
    void everyFieldComesBackAndTheLargestResultFitsItsBound() throws Exception {
        Migration.Result r = result(Migration.MAX_ROUNDS + 1, "x".repeat(Migration.Result.MAX_TARGET));
        ByteBuffer b = ByteBuffer.allocate(Migration.Result.ENCODED_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        r.encode(b);
        assertEquals(Migration.Result.ENCODED_BYTES, b.position(), "the bound is exact for the largest result");
        assertEquals(r, Migration.Result.decode(b.flip()));
        Migration.Result small = result(2, "unix:///tmp/b.sock");
        ByteBuffer s = ByteBuffer.allocate(Migration.Result.ENCODED_BYTES);
        small.encode(s);
        assertEquals(small, Migration.Result.decode(s.flip()));
    }

    @Test
    void whatEncodeCannotHaveWrittenIsRefused() {
        ByteBuffer b = ByteBuffer.allocate(Migration.Result.ENCODED_BYTES);
        result(3, "tcp://h:1").encode(b);
        b.flip();
        ByteBuffer truncated = b.duplicate().limit(b.limit() - 1);
        assertThrows(ProtocolException.class, () -> Migration.Result.decode(truncated));
        ByteBuffer rounds = b.duplicate();
        rounds.putInt(8 + 4 + "tcp://h:1".length(), Migration.MAX_ROUNDS + 2);
        ProtocolException e = assertThrows(ProtocolException.class, () -> Migration.Result.decode(rounds));
        assertTrue(e.getMessage().contains("rounds"), e.getMessage());
        ByteBuffer target = b.duplicate();
        target.putInt(8, Migration.Result.MAX_TARGET + 1);
        assertThrows(ProtocolException.class, () -> Migration.Result.decode(target));
        ByteBuffer negative = b.duplicate();
        negative.putInt(8, -1);
        assertThrows(ProtocolException.class, () -> Migration.Result.decode(negative));
    }
}
