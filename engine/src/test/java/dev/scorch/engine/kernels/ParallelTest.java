package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.jupiter.api.Test;

class ParallelTest {

    /** Every item of every call runs exactly once, over many back-to-back calls of varied sizes. */
    @Test
    void eachItemRunsExactlyOnce() {
        try (Parallel p = new Parallel(3)) {
            for (int call = 0; call < 2000; call++) {
                int n = call % 17;
                AtomicIntegerArray hits = new AtomicIntegerArray(Math.max(1, n));
                p.forEach(n, hits::incrementAndGet);
                for (int i = 0; i < n; i++) {
                    assertEquals(1, hits.get(i), "call " + call + ", item " + i);
                }
            }
        }
    }

    /** A failing item fails the call with its own exception, after the other items ran; the pool keeps working. */
    @Test
    void aFailureIsRethrownAndThePoolStaysUsable() {
        try (Parallel p = new Parallel(2)) {
            IllegalStateException e = assertThrows(
                    IllegalStateException.class,
                    () -> p.forEach(64, i -> {
                        if (i == 5) {
                            throw new IllegalStateException("item 5");
                        }
                    }));
            assertEquals("item 5", e.getMessage());
            AtomicIntegerArray hits = new AtomicIntegerArray(32);
            p.forEach(32, hits::incrementAndGet);
            for (int i = 0; i < 32; i++) {
                assertEquals(1, hits.get(i));
            }
        }
    }

    /** Calls from two threads at once (two tasks sharing one pool) and calls nested in an item both complete. */
    @Test
    void concurrentAndNestedCallsComplete() throws InterruptedException {
        try (Parallel p = new Parallel(2)) {
            long[] sums = new long[2];
            Thread[] callers = new Thread[2];
            for (int c = 0; c < 2; c++) {
                int id = c;
                callers[c] = new Thread(() -> {
                    for (int call = 0; call < 500; call++) {
                        AtomicIntegerArray hits = new AtomicIntegerArray(8 * 8);
                        p.forEach(8, i -> p.forEach(8, j -> hits.incrementAndGet(i * 8 + j)));
                        for (int k = 0; k < 64; k++) {
                            sums[id] += hits.get(k);
                        }
                    }
                });
                callers[c].start();
            }
            for (Thread t : callers) {
                t.join(60_000);
            }
            assertEquals(500L * 64, sums[0]);
            assertEquals(500L * 64, sums[1]);
        }
    }

    @Test
    void afterCloseCallsRunOnTheCaller() {
        Parallel p = new Parallel(2);
        p.close();
        AtomicIntegerArray hits = new AtomicIntegerArray(4);
        p.forEach(4, hits::incrementAndGet);
        assertEquals(1, hits.get(3));
    }
}
