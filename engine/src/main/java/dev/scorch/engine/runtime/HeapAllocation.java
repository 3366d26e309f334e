package dev.scorch.engine.runtime;

import java.lang.management.ManagementFactory;

/**
 * Java heap bytes allocated so far by all live threads (the JVM's per-thread allocation counters, as JFR's
 * allocation figures), for benchmarks that report what a token costs the garbage collector.
 */
public final class HeapAllocation {
    private HeapAllocation() {}

    /**
     * Bytes allocated since start (an {@link #allocatedBytes()} reading), less what reading the counters itself
     * allocates (its thread-id and count arrays), so that a loop that allocates nothing reads 0; -1 where the JVM
     * does not count allocations.
     */
    public static long since(long start) {
        long now = allocatedBytes();
        return start < 0 || now < 0 ? -1 : Math.max(0, now - start - readingCost());
    }

    /** What one {@link #allocatedBytes()} call allocates: the least of a few back-to-back readings. */
    private static long readingCost() {
        long cost = Long.MAX_VALUE;
        for (int i = 0; i < 3; i++) {
            long a = allocatedBytes();
            cost = Math.min(cost, allocatedBytes() - a);
        }
        return cost;
    }

    /** The sum over live threads, or -1 where the JVM does not count allocations. */
    public static long allocatedBytes() {
        if (!(ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean mx)
                || !mx.isThreadAllocatedMemoryEnabled()) {
            return -1;
        }
        long sum = 0;
        for (long b : mx.getThreadAllocatedBytes(mx.getAllThreadIds())) {
            sum += Math.max(0, b);
        }
        return sum;
    }

    /**
     * The median of runs' allocated bytes: what a warmed-up run costs. A one-off allocation that lands in one run of
     * several (a method recompiled mid-run and running interpreted for a few calls) does not move it; a per-token one does.
     */
    public static double medianRun(long[] runBytes) {
        long[] sorted = runBytes.clone();
        java.util.Arrays.sort(sorted);
        int n = sorted.length;
        return n == 0 ? 0 : n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
    }
}
