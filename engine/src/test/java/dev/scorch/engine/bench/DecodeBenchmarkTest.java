package dev.scorch.engine.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The decode benchmark's own bookkeeping: the experts a step reads, counted per layer. */
class DecodeBenchmarkTest {
  @Test
  void distinctExpertsCountsEachLayersExpertsOnce() {
    boolean[] seen = new boolean[8];
    // Layer 0: experts 1, 2 (1 twice); layer 1: expert 3 (twice) and 1 again, which counts for this layer too.
    int[][] routes = {{1, 2, 1, 2}, {3, 3, 1, 3}};
    assertEquals(4, DecodeBenchmark.distinctExperts(routes, seen));
    // The buffer is reused: the next step starts from nothing seen.
    assertEquals(1, DecodeBenchmark.distinctExperts(new int[][] {{7, 7}}, seen));
  }
}
