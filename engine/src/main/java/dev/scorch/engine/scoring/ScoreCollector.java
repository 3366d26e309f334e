package dev.scorch.engine.scoring;

import java.util.Arrays;
import java.util.List;

/**
 * Collects one sequence's scores position by position from its logits rows, on whichever backend computed
 * them; also says which positions need logits at all.
 */
public final class ScoreCollector {
  private final ScoreRequest r;
  private final int vocab;
  private final int n;
  private final float[] tokenLogprobs;
  private final int[][] topIds;
  private final float[][] topLogprobs;
  private final float[][] logits;
  private final int[] argmax;
  private double sum;
  private int scored;

  public ScoreCollector(ScoreRequest r, int vocab) {
    this.r = r;
    this.vocab = vocab;
    this.n = r.tokens().length;
    tokenLogprobs = new float[n];
    Arrays.fill(tokenLogprobs, Float.NaN);
    topIds = r.topK() > 0 ? new int[n][] : null;
    topLogprobs = r.topK() > 0 ? new float[n][] : null;
    logits = switch (r.logits()) {
      case NONE -> null;
      case LAST -> new float[1][];
      case ALL -> new float[n][];
    };
    argmax = new int[n];
    Arrays.fill(argmax, -1);
  }

  /**
   * The positions of requests whose logits are needed, in packed order: row j is position pos[j] of sequence
   * seq[j]. Both arrays hold at least every token of the requests; returns the number of rows.
   */
  public static int neededRows(List<ScoreRequest> requests, int[] seq, int[] pos) {
    int needed = 0;
    for (int s = 0; s < requests.size(); s++) {
      ScoreRequest r = requests.get(s);
      for (int i = 0; i < r.tokens().length; i++) {
        if (needs(r, i)) {
          seq[needed] = s;
          pos[needed++] = i;
        }
      }
    }
    return needed;
  }

  static boolean needs(ScoreRequest r, int i) {
    int n = r.tokens().length;
    boolean predictsScored = i + 1 < n && i + 1 >= r.scoreFrom();
    boolean keepLogits = r.logits() == LogitsMode.ALL || (r.logits() == LogitsMode.LAST && i == n - 1);
    return predictsScored || keepLogits;
  }

  /** The token position i predicts when its log-prob is scored, else -1. */
  public int target(int i) {
    return i + 1 < n && i + 1 >= r.scoreFrom() ? r.tokens()[i + 1] : -1;
  }

  /** Whether accepting position i needs its whole logits row (top-k or logits asked for), not just its stats. */
  public boolean needsRow(int i) {
    return r.topK() > 0 || r.logits() == LogitsMode.ALL || (r.logits() == LogitsMode.LAST && i == n - 1);
  }

  /**
   * Position i from its log-sum-exp, argmax and the logit of its target ({@link #target}); row (from off) is
   * its logits, needed only where {@link #needsRow} says so (else null).
   */
  public void accept(int i, double lse, int best, float targetLogit, float[] row, int off) {
    argmax[i] = best;
    if (r.logits() == LogitsMode.ALL) {
      logits[i] = Arrays.copyOfRange(row, off, off + vocab);
    } else if (r.logits() == LogitsMode.LAST && i == n - 1) {
      logits[0] = Arrays.copyOfRange(row, off, off + vocab);
    }
    if (target(i) >= 0) {
      double lp = targetLogit - lse;
      tokenLogprobs[i + 1] = (float) lp;
      sum += lp;
      scored++;
      if (r.topK() > 0) {
        int[] ids = LogSoftmax.topK(row, off, vocab, r.topK());
        float[] lps = new float[ids.length];
        for (int k = 0; k < ids.length; k++) {
          lps[k] = (float) (row[off + ids[k]] - lse);
        }
        topIds[i + 1] = ids;
        topLogprobs[i + 1] = lps;
      }
    }
  }

  public SequenceScore build() {
    return new SequenceScore(tokenLogprobs, topIds, topLogprobs, sum, scored, logits, argmax);
  }
}
