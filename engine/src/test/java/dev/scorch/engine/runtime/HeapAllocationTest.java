package dev.scorch.engine.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.Test;

class HeapAllocationTest {
    static volatile Object sink;

    @Test
    void anIntervalThatAllocatesNothingReadsZeroAndAnArrayReadsItsBytes() {
        assumeTrue(HeapAllocation.allocatedBytes() >= 0, "this JVM does not count allocations");
        long nothing = Long.MAX_VALUE;
        for (int i = 0; i < 5 && nothing != 0; i++) { // another thread of the test JVM may allocate meanwhile
            nothing = HeapAllocation.since(HeapAllocation.allocatedBytes());
        }
        assertEquals(0, nothing, "the counters' own reading is not counted");
        long start = HeapAllocation.allocatedBytes();
        sink = new byte[1 << 20];
        long oneMiB = HeapAllocation.since(start);
        assertTrue(oneMiB >= 1 << 20 && oneMiB < 2 << 20, "1 MiB array read as " + oneMiB + " bytes");
    }

    /** The median run: a one-off in one run of five leaves it at the steady runs' cost; a cost every run pays moves it. */
    @Test
    void medianRunIgnoresAOneOffButNotAPerRunCost() {
        org.junit.jupiter.api.Assertions.assertEquals(0.0, HeapAllocation.medianRun(new long[] {0, 384, 0, 0, 0}));
        org.junit.jupiter.api.Assertions.assertEquals(
                4096.0, HeapAllocation.medianRun(new long[] {4096, 4480, 4096, 4096, 4096}));
        org.junit.jupiter.api.Assertions.assertEquals(150.0, HeapAllocation.medianRun(new long[] {200, 100, 0, 300}));
    }
}
