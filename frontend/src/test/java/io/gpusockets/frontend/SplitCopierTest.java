package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

class SplitCopierTest {

    @Test
    void splitCopiesEqualOneThreadCopiesAtEveryEdge() {
        SplitCopier c = new SplitCopier();
        Random r = new Random(17);
        MemorySegment src = Arena.ofAuto().allocate(3 << 20);
        for (long i = 0; i < src.byteSize(); i++) {
            src.set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
        }
        long[] sizes = {0, 1, 4095, 4096, 4097, 8191, SplitCopier.MIN_SPLIT_BYTES - 1, SplitCopier.MIN_SPLIT_BYTES,
                (1 << 20) + 3, 2 << 20};
        for (long n : sizes) {
            for (long at : new long[] {0, 1, 7, 4095}) {
                MemorySegment expected = Arena.ofAuto().allocate((2 << 20) + 8192).fill((byte) 0x5A);
                MemorySegment got = Arena.ofAuto().allocate((2 << 20) + 8192).fill((byte) 0x5A);
                MemorySegment.copy(src, at + 13, expected, at, n);
                c.split(src, at + 13, got, at, n);
                assertArrayEquals(expected.toArray(ValueLayout.JAVA_BYTE), got.toArray(ValueLayout.JAVA_BYTE),
                        "size " + n + " at " + at);
            }
        }
    }

    @Test
    void outOfBoundsFailsOnTheCallerAndConfinedMemoryStaysOnIt() {
        SplitCopier c = new SplitCopier();
        MemorySegment small = Arena.ofAuto().allocate(1 << 20);
        MemorySegment big = Arena.ofAuto().allocate(2 << 20);
        assertThrows(IndexOutOfBoundsException.class, () -> c.split(big, 0, small, 0, 2 << 20));
        try (Arena confined = Arena.ofConfined()) {
            MemorySegment mine = confined.allocate(1 << 20).fill((byte) 9);
            c.split(mine, 0, big, 0, 1 << 20); // the helper may not touch it: copied here
            assertArrayEquals(mine.toArray(ValueLayout.JAVA_BYTE), big.asSlice(0, 1 << 20).toArray(ValueLayout.JAVA_BYTE));
        }
    }

    @Test
    void concurrentCallersEachGetTheirOwnBytes() throws Exception {
        SplitCopier c = new SplitCopier();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            Future<?>[] f = new Future<?>[4];
            for (int t = 0; t < f.length; t++) {
                byte fill = (byte) (t + 1);
                f[t] = pool.submit(() -> {
                    MemorySegment src = Arena.ofAuto().allocate(1 << 20).fill(fill);
                    MemorySegment dst = Arena.ofAuto().allocate(1 << 20);
                    for (int i = 0; i < 50; i++) {
                        dst.fill((byte) 0);
                        c.split(src, 0, dst, 0, 1 << 20);
                        assertArrayEquals(src.toArray(ValueLayout.JAVA_BYTE), dst.toArray(ValueLayout.JAVA_BYTE));
                    }
                    return null;
                });
            }
            for (Future<?> x : f) {
                x.get();
            }
        } finally {
            pool.shutdownNow();
        }
    }
}
