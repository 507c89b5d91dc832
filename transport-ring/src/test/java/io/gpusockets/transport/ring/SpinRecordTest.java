package io.gpusockets.transport.ring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** {@link CpuPressure.SpinRecord}: what recent spins met decides whether a wait spins where the runnable count says no. */
class SpinRecordTest {
    @Test
    void withNoRecordOneWaitInEightProbes() {
        CpuPressure.SpinRecord r = new CpuPressure.SpinRecord();
        int spun = 0;
        for (int i = 1; i <= 64; i++) {
            boolean spin = r.spinAnyway();
            assertEquals(i % CpuPressure.SpinRecord.PROBE_EVERY == 0, spin, "wait " + i);
            spun += spin ? 1 : 0;
        }
        assertEquals(8, spun);
    }

    @Test
    void spinsThatPaySpinOnAndTwoWastedForOnePaidStopThem() {
        CpuPressure.SpinRecord r = new CpuPressure.SpinRecord();
        r.paid();
        assertTrue(r.spinAnyway(), "a spin paid: the next wait spins");
        r.wasted();
        assertEquals(-1, r.score());
        assertFalse(r.spinAnyway(), "one paid, one wasted: back to probing");
        r.paid();
        r.paid();
        r.wasted();
        assertEquals(-1, r.score(), "one in three wasted is too many");
        r.paid();
        r.paid();
        r.paid();
        r.paid();
        r.wasted();
        assertEquals(1, r.score(), "four paid and one wasted: spinning pays");
        assertTrue(r.spinAnyway());
    }

    @Test
    void theScoreIsBoundedSoThatAChangeOfLoadIsSeenSoon() {
        CpuPressure.SpinRecord r = new CpuPressure.SpinRecord();
        for (int i = 0; i < 1000; i++) {
            r.paid();
        }
        assertEquals(CpuPressure.SpinRecord.BOUND, r.score());
        for (int i = 0; i < CpuPressure.SpinRecord.BOUND / 2; i++) {
            r.wasted();
        }
        assertEquals(0, r.score(), "eight wasted spins undo the longest run of paid ones");
        for (int i = 0; i < 1000; i++) {
            r.wasted();
        }
        assertEquals(-CpuPressure.SpinRecord.BOUND, r.score());
    }
}
