package dev.scorch.engine.runtime;

import java.lang.management.ManagementFactory;

/**
 * Java heap bytes allocated so far by all live threads (the JVM's per-thread allocation counters, as JFR's
 * allocation figures), for benchmarks that report what a token costs the garbage collector.
 */
public final class HeapAllocation {
  private HeapAllocation() {}

  /** The sum over live threads, or -1 where the JVM does not count allocations. */
  public static long allocatedBytes() {
    if (!(ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean mx) || !mx.isThreadAllocatedMemoryEnabled()) {
      return -1;
    }
    long sum = 0;
    for (long b : mx.getThreadAllocatedBytes(mx.getAllThreadIds())) {
      sum += Math.max(0, b);
    }
    return sum;
  }
}
