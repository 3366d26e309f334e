package dev.scorch.udfs.score;

import dev.scorch.engine.scoring.LogitsMode;
import java.io.Serializable;

/**
 * What the score partition function computes, shipped to executors with it.
 *
 * @param maxBatchTokens token budget of one engine batch
 * @param windowRows     rows read, sorted by length and batched together before their results are emitted
 * @param topK           alternatives per token (0 for none)
 * @param logits         which logits to return
 * @param threads        engine threads per task
 */
public record ScoreOptions(int maxBatchTokens, int windowRows, int topK, LogitsMode logits, int threads) implements Serializable {
  public ScoreOptions {
    if (maxBatchTokens < 1 || windowRows < 1 || topK < 0 || threads < 1) {
      throw new IllegalArgumentException("max batch tokens, window rows and threads must be >= 1, top-k >= 0");
    }
  }
}
