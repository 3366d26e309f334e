package dev.scorch.engine.scoring;

import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Log-prob scoring of a batch of sequences in one packed prefill. Logits are computed only for the rows
 * that need them, a chunk of rows at a time, so a [tokens × vocab] tensor never exists for the batch.
 */
public final class Scorer {
  /**
   * Logits computed at once are at most this many floats (64 MiB): enough rows per lm_head GEMM that packing
   * the [vocab, hidden] weight is paid over many rows (512 rows at vocab 32768, 102 at Kimi's 163840).
   */
  static final int LOGITS_CHUNK_FLOATS = 16 << 20;

  private final DeepseekV3Model model;
  private final Ops ops;

  public Scorer(DeepseekV3Model model, Ops ops) {
    this.model = model;
    this.ops = ops;
  }

  public List<SequenceScore> score(List<ScoreRequest> requests) {
    return score(requests, null);
  }

  /** As {@link #score(List)}; routes ([moe layer][T * top_k]) receives the experts of every packed token when not null. */
  public List<SequenceScore> score(List<ScoreRequest> requests, int[][] routes) {
    List<int[]> seqs = new ArrayList<>(requests.size());
    for (ScoreRequest r : requests) {
      seqs.add(r.tokens());
    }
    PackedBatch batch = PackedBatch.of(seqs);
    float[] hidden = model.forward(batch, ops, routes); // [T, hidden]
    int vocab = model.vocabSize();
    int hiddenSize = model.config().hiddenSize();

    List<Builder> out = new ArrayList<>(requests.size());
    // Rows whose logits are needed: (sequence, position) pairs, in packed order.
    List<int[]> needed = new ArrayList<>();
    for (int s = 0; s < requests.size(); s++) {
      ScoreRequest r = requests.get(s);
      out.add(new Builder(r, vocab));
      int n = r.tokens().length;
      for (int i = 0; i < n; i++) {
        boolean predictsScored = i + 1 < n && i + 1 >= r.scoreFrom();
        boolean keepLogits = r.logits() == LogitsMode.ALL || (r.logits() == LogitsMode.LAST && i == n - 1);
        if (predictsScored || keepLogits) {
          needed.add(new int[] {s, i});
        }
      }
    }
    int chunk = Math.max(1, Math.min(needed.size(), LOGITS_CHUNK_FLOATS / vocab));
    float[] x = new float[chunk * hiddenSize];
    float[] logits = new float[chunk * vocab];
    for (int c0 = 0; c0 < needed.size(); c0 += chunk) {
      int rows = Math.min(chunk, needed.size() - c0);
      for (int j = 0; j < rows; j++) {
        int[] si = needed.get(c0 + j);
        System.arraycopy(hidden, (batch.seqStart()[si[0]] + si[1]) * hiddenSize, x, j * hiddenSize, hiddenSize);
      }
      model.logits(x, rows, ops, logits);
      for (int j = 0; j < rows; j++) {
        int[] si = needed.get(c0 + j);
        out.get(si[0]).accept(si[1], logits, j * vocab);
      }
    }
    List<SequenceScore> scores = new ArrayList<>(out.size());
    for (Builder b : out) {
      scores.add(b.build());
    }
    return scores;
  }

  /** Collects one sequence's results position by position. */
  private static final class Builder {
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

    Builder(ScoreRequest r, int vocab) {
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

    /** Position i's logits are row[off .. off + vocab). */
    void accept(int i, float[] row, int off) {
      argmax[i] = LogSoftmax.argmax(row, off, vocab);
      if (r.logits() == LogitsMode.ALL) {
        logits[i] = Arrays.copyOfRange(row, off, off + vocab);
      } else if (r.logits() == LogitsMode.LAST && i == n - 1) {
        logits[0] = Arrays.copyOfRange(row, off, off + vocab);
      }
      if (i + 1 < n && i + 1 >= r.scoreFrom()) {
        double lse = LogSoftmax.logSumExp(row, off, vocab);
        double lp = row[off + r.tokens()[i + 1]] - lse;
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

    SequenceScore build() {
      return new SequenceScore(tokenLogprobs, topIds, topLogprobs, sum, scored, logits, argmax);
    }
  }
}
