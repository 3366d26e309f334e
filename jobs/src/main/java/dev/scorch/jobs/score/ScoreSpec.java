package dev.scorch.jobs.score;

import dev.scorch.engine.scoring.LogitsMode;
import java.nio.file.Path;

/** Everything one score run needs, resolved from the command line and the job config. */
public record ScoreSpec(
    Path model,
    String input,
    String inputFormat,
    String output,
    String outputFormat,
    int partitions,
    int maxBatchTokens,
    int windowRows,
    long arrowMemoryBytes,
    int topK,
    LogitsMode logits,
    String idColumn,
    String tokenIdsColumn,
    String textColumn,
    String continuationColumn,
    String weights,
    int threads,
    int slices,
    boolean overwrite,
    boolean resume) {

  /** The input's format: the explicit --input-format, else from the path's extension. */
  public String resolvedInputFormat() {
    if (inputFormat != null) {
      return normalise(inputFormat);
    }
    String p = input.toLowerCase(java.util.Locale.ROOT).replaceAll("/+$", "");
    if (p.endsWith(".parquet")) {
      return "parquet";
    }
    if (p.endsWith(".jsonl") || p.endsWith(".json") || p.endsWith(".ndjson")) {
      return "json";
    }
    if (p.endsWith(".csv")) {
      return "csv";
    }
    throw new IllegalArgumentException("--input " + input + ": cannot tell the format from the extension; give --input-format parquet|jsonl|csv");
  }

  static String normalise(String f) {
    return switch (f.toLowerCase(java.util.Locale.ROOT)) {
      case "parquet" -> "parquet";
      case "json", "jsonl", "ndjson" -> "json";
      case "csv" -> "csv";
      default -> throw new IllegalArgumentException("--input-format " + f + ": expected parquet, jsonl or csv");
    };
  }
}
