package dev.scorch.engine.scoring;

import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.ArrayList;
import java.util.List;

/**
 * Log-prob scoring of a batch of sequences in one packed prefill. Logits are computed only for the rows
 * that need them, a chunk of rows at a time, so a [tokens × vocab] tensor never exists for the batch.
 */
public final class Scorer implements BatchScorer {
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

  @Override
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

    List<ScoreCollector> out = new ArrayList<>(requests.size());
    for (ScoreRequest r : requests) {
      out.add(new ScoreCollector(r, vocab));
    }
    // Rows whose logits are needed: (sequence, position) pairs, in packed order.
    List<int[]> needed = ScoreCollector.neededRows(requests);
    int chunk = Math.max(1, Math.min(needed.size(), LOGITS_CHUNK_FLOATS / vocab));
    float[] x = new float[chunk * hiddenSize];
    float[] logits = new float[chunk * vocab];
    double[] lse = new double[chunk];
    int[] best = new int[chunk];
    for (int c0 = 0; c0 < needed.size(); c0 += chunk) {
      int rows = Math.min(chunk, needed.size() - c0);
      for (int j = 0; j < rows; j++) {
        int[] si = needed.get(c0 + j);
        System.arraycopy(hidden, (batch.seqStart()[si[0]] + si[1]) * hiddenSize, x, j * hiddenSize, hiddenSize);
      }
      model.logits(x, rows, ops, logits);
      // Each row's log-sum-exp and argmax, rows spread over the engine's threads.
      ops.forEachRow(rows, j -> {
        lse[j] = ops.logSumExp(logits, j * vocab, vocab);
        best[j] = LogSoftmax.argmax(logits, j * vocab, vocab);
      });
      for (int j = 0; j < rows; j++) {
        int[] si = needed.get(c0 + j);
        ScoreCollector c = out.get(si[0]);
        int target = c.target(si[1]);
        c.accept(si[1], lse[j], best[j], target >= 0 ? logits[j * vocab + target] : 0f, logits, j * vocab);
      }
    }
    List<SequenceScore> scores = new ArrayList<>(out.size());
    for (ScoreCollector b : out) {
      scores.add(b.build());
    }
    return scores;
  }
}
