package dev.scorch.engine.sampling;

import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * Chooses the next token of one row from its logits, in the usual order: repetition penalty, presence and
 * frequency penalties, then greedy, or temperature → top-k → softmax → top-p → min-p → a draw. The draw's
 * random number comes from (seed, sample, step) alone, so a row samples the same text in any batch and
 * partition. Probabilities are computed in double, ordered by (probability desc, id asc).
 */
public final class Sampler {
  private Sampler() {}

  /** The uniform number row {@code seed} draws at {@code step} of sample {@code sample}. */
  public static double uniform(long seed, int sample, int step) {
    long key = seed * 0x9E3779B97F4A7C15L + sample * 0xC2B2AE3D27D4EB4FL + step * 0x165667B19E3779F9L;
    return new SplittableRandom(key).nextDouble();
  }

  /**
   * The next token. logits[off .. off + vocab) are not modified; prompt and generated are the row's tokens so
   * far (for the penalties).
   */
  public static int sample(float[] logits, int off, int vocab, SamplingParams p, int[] prompt, int[] generated, int sample, int step) {
    double[] l = new double[vocab];
    for (int i = 0; i < vocab; i++) {
      l[i] = logits[off + i];
    }
    applyPenalties(l, p, prompt, generated);
    if (p.isGreedy()) {
      return argmax(l);
    }
    Integer[] order = new Integer[vocab];
    for (int i = 0; i < vocab; i++) {
      order[i] = i;
      l[i] /= p.temperature();
    }
    Arrays.sort(order, (a, b) -> l[a] != l[b] ? Double.compare(l[b], l[a]) : Integer.compare(a, b));
    int keep = p.topK() > 0 ? Math.min(p.topK(), vocab) : vocab;
    // Softmax over the kept tokens (they are sorted, the largest first).
    double max = l[order[0]];
    double[] prob = new double[keep];
    double sum = 0;
    for (int r = 0; r < keep; r++) {
      prob[r] = Math.exp(l[order[r]] - max);
      sum += prob[r];
    }
    for (int r = 0; r < keep; r++) {
      prob[r] /= sum;
    }
    // top-p: the smallest prefix reaching top_p; min-p: only tokens within min_p of the best.
    int n = 0;
    double cum = 0;
    while (n < keep && (n == 0 || cum < p.topP()) && prob[n] >= p.minP() * prob[0]) {
      cum += prob[n];
      n++;
    }
    double u = uniform(p.seed(), sample, step) * cum;
    double acc = 0;
    for (int r = 0; r < n; r++) {
      acc += prob[r];
      if (u < acc) {
        return order[r];
      }
    }
    return order[n - 1];
  }

  static void applyPenalties(double[] l, SamplingParams p, int[] prompt, int[] generated) {
    if (p.repetitionPenalty() != 1) {
      boolean[] seen = new boolean[l.length];
      for (int[] ids : new int[][] {prompt, generated}) {
        for (int id : ids) {
          if (!seen[id]) {
            seen[id] = true;
            l[id] = l[id] > 0 ? l[id] / p.repetitionPenalty() : l[id] * p.repetitionPenalty();
          }
        }
      }
    }
    if (p.presencePenalty() != 0 || p.frequencyPenalty() != 0) {
      int[] count = new int[l.length];
      for (int id : generated) {
        count[id]++;
      }
      for (int id = 0; id < l.length; id++) {
        if (count[id] > 0) {
          l[id] -= p.presencePenalty() + p.frequencyPenalty() * count[id];
        }
      }
    }
  }

  static int argmax(double[] l) {
    int best = 0;
    for (int i = 1; i < l.length; i++) {
      if (l[i] > l[best]) {
        best = i;
      }
    }
    return best;
  }
}
