package dev.scorch.engine.sampling;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class SamplerTest {
  static final float[] LOGITS = {1f, 3f, 3f, 0f, -1f, 2.5f};
  static final int[] NONE = {};

  static int draw(SamplingParams p, int step) {
    return Sampler.sample(LOGITS, 0, LOGITS.length, p, NONE, NONE, 0, step);
  }

  @Test
  void greedyTakesTheLowestIdAmongTies() {
    assertEquals(1, draw(SamplingParams.greedy(), 0));
    assertEquals(1, draw(new SamplingParams(1.0, 1, 1, 0, 1, 0, 0, 9), 0), "top_k 1 is greedy");
  }

  @Test
  void temperatureSamplingFollowsTheSoftmax() {
    SamplingParams p = SamplingParams.temperature(1.0, 42);
    int[] counts = new int[LOGITS.length];
    int n = 60_000;
    for (int step = 0; step < n; step++) {
      counts[draw(p, step)]++;
    }
    double z = 0;
    for (float v : LOGITS) {
      z += Math.exp(v);
    }
    for (int i = 0; i < LOGITS.length; i++) {
      double expected = Math.exp(LOGITS[i]) / z;
      assertEquals(expected, counts[i] / (double) n, 0.01, "frequency of token " + i);
    }
  }

  @Test
  void aDrawDependsOnlyOnSeedSampleAndStep() {
    SamplingParams p = SamplingParams.temperature(1.5, 7);
    int first = Sampler.sample(LOGITS, 0, LOGITS.length, p, NONE, NONE, 3, 11);
    for (int other = 0; other < 50; other++) {
      draw(SamplingParams.temperature(1.0, other), other); // other rows' draws in between change nothing
    }
    assertEquals(first, Sampler.sample(LOGITS, 0, LOGITS.length, p, NONE, NONE, 3, 11));
    float[] shifted = new float[LOGITS.length + 3];
    System.arraycopy(LOGITS, 0, shifted, 3, LOGITS.length);
    assertEquals(first, Sampler.sample(shifted, 3, LOGITS.length, p, NONE, NONE, 3, 11), "offset into a batch's logits");
  }

  @Test
  void topPAndMinPNarrowTheChoice() {
    // Probabilities: ids 1 and 2 about 0.35 each, 5 about 0.21: top_p 0.5 keeps only {1, 2}.
    for (int step = 0; step < 500; step++) {
      int t = draw(new SamplingParams(1.0, 0, 0.5, 0, 1, 0, 0, 5), step);
      assertTrue(t == 1 || t == 2, "top_p 0.5 drew " + t);
      int m = draw(new SamplingParams(1.0, 0, 1, 0.7, 1, 0, 0, 5), step);
      assertTrue(m == 1 || m == 2, "min_p 0.7 drew " + m);
    }
  }

  @Test
  void penaltiesFollowTheirDefinitions() {
    double[] l = {2, -2, 1, 0.5};
    Sampler.applyPenalties(l, new SamplingParams(1, 0, 1, 0, 2.0, 0, 0, 0), new int[] {0, 1}, new int[] {1});
    assertEquals(1.0, l[0], 0); // positive: divided
    assertEquals(-4.0, l[1], 0); // negative: multiplied, once although seen twice
    assertEquals(1.0, l[2], 0);
    double[] m = {2, 2, 2, 2};
    Sampler.applyPenalties(m, new SamplingParams(1, 0, 1, 0, 1, 0.5, 0.25, 0), new int[] {3}, new int[] {1, 1, 2});
    assertEquals(2.0, m[0], 0);
    assertEquals(2 - 0.5 - 0.5, m[1], 0); // presence once, frequency × 2
    assertEquals(2 - 0.5 - 0.25, m[2], 0);
    assertEquals(2.0, m[3], 0, "prompt tokens are not penalised by presence/frequency");
    // Greedy with a repetition penalty moves off a repeated token.
    assertEquals(2, Sampler.sample(LOGITS, 0, LOGITS.length, new SamplingParams(0, 0, 1, 0, 3.0, 0, 0, 0), NONE, new int[] {1}, 0, 0));
  }

  @Test
  void badParametersAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> new SamplingParams(-1, 0, 1, 0, 1, 0, 0, 0));
    assertThrows(IllegalArgumentException.class, () -> new SamplingParams(1, 0, 0, 0, 1, 0, 0, 0));
  }
}
