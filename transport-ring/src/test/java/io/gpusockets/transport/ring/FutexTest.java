package io.gpusockets.transport.ring;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class FutexTest {
    @BeforeEach
    void linux() {
        assumeTrue(Futex.available(), "futex through syscall(3) on this platform");
    }

    @Test
    void waitOnAChangedWordReturnsAtOnceWithEagain() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment word = arena.allocate(JAVA_INT);
            word.set(JAVA_INT, 0, 5);
            assertEquals(Futex.EAGAIN, Futex.await(word.address(), 4, TimeUnit.SECONDS.toNanos(5)));
        }
    }

    @Test
    void waitTimesOut() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment word = arena.allocate(JAVA_INT);
            long start = System.nanoTime();
            assertEquals(Futex.ETIMEDOUT, Futex.await(word.address(), 0, TimeUnit.MILLISECONDS.toNanos(30)));
            assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(25));
        }
    }

    @Test
    void wakeEndsAWait() throws Exception {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment word = arena.allocate(JAVA_INT);
            CompletableFuture<Integer> waiting = CompletableFuture.supplyAsync(
                    () -> Futex.await(word.address(), 0, TimeUnit.SECONDS.toNanos(10)), Thread.ofPlatform()::start);
            Thread.sleep(100);
            long start = System.nanoTime();
            Futex.wakeAll(word.address());
            int rc = waiting.get(5, TimeUnit.SECONDS);
            assertTrue(rc == 0 || rc == Futex.EINTR, "rc=" + rc);
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(2));
        }
    }
}
