package dev.scorch.udfs.score;

import java.io.Serializable;
import org.apache.spark.SparkContext;
import org.apache.spark.util.LongAccumulator;

/**
 * The score job's Spark accumulators (named, so the Spark UI shows them per stage): rows, scored tokens,
 * engine batches, error rows, and padding tokens computed (zero by design: batches are packed varlen).
 */
public record ScoreMetrics(LongAccumulator rows, LongAccumulator tokens, LongAccumulator batches, LongAccumulator errors,
    LongAccumulator paddingTokens) implements Serializable {

  public static ScoreMetrics register(SparkContext sc) {
    return new ScoreMetrics(sc.longAccumulator("scorch.rows"), sc.longAccumulator("scorch.tokens"),
        sc.longAccumulator("scorch.batches"), sc.longAccumulator("scorch.errors"), sc.longAccumulator("scorch.padding_tokens"));
  }

  /** Padding tokens over all tokens the engine computed. */
  public double paddingRatio() {
    long all = tokens.value() + paddingTokens.value();
    return all == 0 ? 0 : (double) paddingTokens.value() / all;
  }
}
