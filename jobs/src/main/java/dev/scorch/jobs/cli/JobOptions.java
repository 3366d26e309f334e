package dev.scorch.jobs.cli;

import dev.scorch.jobs.DemoModel;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * The options the score and generate commands share (a picocli mixin): model, input and output, slices and
 * overwrite/resume, with {@link SparkOptions}' Spark settings, partitions, weight shipping and threads.
 */
public final class JobOptions extends SparkOptions {
  @Option(names = "--model", required = true, description = "Checkpoint folder, or 'demo' for the built-in demo model (random weights).")
  String model;

  @Option(names = "--input", required = true, description = "Input path (file or folder; any Hadoop FileSystem URI).")
  String input;

  @Option(names = "--input-format", description = "parquet, jsonl or csv. Default: from the extension.")
  String inputFormat;

  @Option(names = "--output", required = true, description = "Output folder.")
  String output;

  @Option(names = "--output-format", description = "parquet or jsonl. Default: parquet.")
  String outputFormat;

  @Option(names = "--id-column", defaultValue = "id", description = "Id column; absent: a stable id file:row. Default: ${DEFAULT-VALUE}.")
  String idColumn;

  @Option(names = "--token-ids-column", defaultValue = "token_ids", description = "Token ids column. Default: ${DEFAULT-VALUE}.")
  String tokenIdsColumn;

  @Option(names = "--text-column", defaultValue = "prompt", description = "Text column. Default: ${DEFAULT-VALUE}.")
  String textColumn;

  @Option(names = "--slices", description = "Jobs the run is cut into, each committed on its own (what --resume can skip). Default: 1.")
  Integer slices;

  @Option(names = "--overwrite", description = "Replace an existing output folder.")
  boolean overwrite;

  @Option(names = "--resume", description = "Finish an interrupted run: only rows not yet in the output.")
  boolean resume;

  Path modelDir() {
    return DemoModel.resolve(model);
  }

  String outputFormat() {
    return choice("output-format", outputFormat, "parquet", "parquet", "jsonl");
  }

  int slices() {
    return positive("slices", slices, 1);
  }
}
