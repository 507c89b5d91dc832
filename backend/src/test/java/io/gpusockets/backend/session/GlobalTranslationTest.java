package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.CuResult;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@link GlobalTranslation}: the program's ranges to the real ones and back, as a restore's replay sets them up. */
class GlobalTranslationTest {
    static final long A = 0x7e80_0000_0000L, B = 0x7e80_0010_0000L;

    @Test
    void aMovedGlobalIsTranslatedByteForByteAndNothingElseIs() throws Exception {
        GlobalTranslation t = new GlobalTranslation();
        t.expect(A);
        assertEquals(A, t.placed(B, 256), "the program keeps its address");
        assertEquals(Map.of(A, B), t.snapshot());
        assertEquals(B, t.toReal(A));
        assertEquals(B + 255, t.toReal(A + 255));
        assertEquals(A + 256, t.toReal(A + 256), "past the range: untouched");
        assertEquals(A - 1, t.toReal(A - 1), "before it: untouched");
        assertEquals(A + 17, t.toProgram(B + 17));
        assertEquals(B + 256, t.toProgram(B + 256));
        assertEquals(A, t.placed(B, 256), "asked again after the restore: the program's address");
        t.gone(B);
        assertTrue(t.isEmpty());
        assertEquals(A, t.toReal(A), "its module unloaded: nothing translated any more");
    }

    @Test
    void aGlobalInItsPlaceIsNotTranslated() throws Exception {
        GlobalTranslation t = new GlobalTranslation();
        t.expect(A);
        assertEquals(A, t.placed(A, 8));
        assertTrue(t.isEmpty());
    }

    @Test
    void aNewGlobalOverARestoredOnesProgramRangeIsRefused() throws Exception {
        GlobalTranslation t = new GlobalTranslation();
        t.expect(A);
        t.placed(B, 256);
        // after the replay (nothing expected): a global of a module loaded since
        CallRejected e = assertThrows(CallRejected.class, () -> t.placed(A + 128, 8));
        assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, e.result);
        assertEquals(A + 256, t.placed(A + 256, 8), "beside it: its own address");
        assertEquals(A - 8, t.placed(A - 8, 8));
    }
}
