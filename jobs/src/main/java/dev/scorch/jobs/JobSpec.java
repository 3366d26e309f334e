package dev.scorch.jobs;

import dev.scorch.jobs.output.WriteMode;
import java.util.Locale;

/** What every row-per-row job (score, generate) takes: the model, the input and its columns, the output, how to run. */
public interface JobSpec {
    /** The checkpoint folder: a local path, or a Hadoop file system URI (hdfs://, s3a://). */
    String model();

    String input();

    /** parquet, jsonl or csv; null: from the input's extension. */
    String inputFormat();

    String output();

    /** parquet or jsonl. */
    String outputFormat();

    int partitions();

    String idColumn();

    String tokenIdsColumn();

    String textColumn();

    /** A column of chat messages that can stand in for token_ids and text (null: none). */
    default String messagesColumn() {
        return null;
    }

    /** broadcast, shared-path or files. */
    String weights();

    int threads();

    int slices();

    /** What the run may do with an existing output (--overwrite, --force-overwrite, --resume). */
    WriteMode write();

    /** The job's name, recorded in the output's marker: score or generate. */
    String job();

    /**
     * Every option that changes a result row, by its option name, as the run's identity records it: a --resume with
     * any of them changed is refused. What changes no bits (threads, batching, partitions, slices, the weights' delivery)
     * is left out.
     */
    java.util.Map<String, String> resultOptions();

    /**
     * The CPU precision a run records: the one its --cpu-precision asked, else this JVM's -Dscorch.cpu.precision (what its
     * executors default to when launched alike), else "default".
     */
    static String cpuPrecision(dev.scorch.engine.kernels.CpuPrecision asked) {
        return asked != null
                ? asked.id()
                : System.getProperty(dev.scorch.engine.kernels.CpuPrecision.PROPERTY, "default");
    }

    /** The input's Spark format: the explicit input format, else from the path's extension. */
    default String resolvedInputFormat() {
        if (inputFormat() != null) {
            return switch (inputFormat().toLowerCase(Locale.ROOT)) {
                case "parquet" -> "parquet";
                case "json", "jsonl", "ndjson" -> "json";
                case "csv" -> "csv";
                default ->
                    throw new IllegalArgumentException(
                            "--input-format " + inputFormat() + ": expected parquet, jsonl or csv");
            };
        }
        String p = input().toLowerCase(Locale.ROOT).replaceAll("/+$", "");
        if (p.endsWith(".parquet")) {
            return "parquet";
        }
        if (p.endsWith(".jsonl") || p.endsWith(".json") || p.endsWith(".ndjson")) {
            return "json";
        }
        if (p.endsWith(".csv")) {
            return "csv";
        }
        throw new IllegalArgumentException("--input " + input()
                + ": cannot tell the format from the extension; give --input-format parquet|jsonl|csv");
    }
}
