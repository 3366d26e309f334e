package dev.scorch.jobs.cli;

import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.jobs.DemoModel;
import dev.scorch.jobs.JobConfig;
import dev.scorch.jobs.score.ScoreJob;
import dev.scorch.jobs.score.ScoreSpec;
import dev.scorch.jobs.score.ScoreSummary;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

@Command(
    name = "score",
    mixinStandardHelpOptions = true,
    description = {
        "Scores a dataset of token sequences with the model on Spark: per-token log-probs, sum, mean,",
        "perplexity, optional top-k alternatives and logits; one output row per input row, errors in",
        "an 'error' column. Input: Parquet, JSONL or CSV with an id and token_ids (or text, once a",
        "tokenizer is available)."
    },
    footer = {
        "",
        "Examples:",
        "  bin/scorch score --model demo --input conf/examples/prompts.jsonl --output out/scores",
        "  bin/scorch score --model /data/Kimi-K2 --input s3a://bucket/prompts.parquet --output s3a://bucket/scores \\",
        "      --master yarn --conf conf/gpu-cluster.conf --partitions 512 --top-k 5",
        "  bin/scorch score --model demo --input in.csv --output out.jsonl --output-format jsonl --logits last --resume",
        "",
        "On a cluster: spark-submit --class dev.scorch.jobs.score.ScoreJob jobs/target/scorch-jobs.jar <same options>"
    })
public final class ScoreCommand implements Callable<Integer> {
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

  @Option(names = "--master", description = "Spark master. Default: spark-submit's, else local[*].")
  String master;

  @Option(names = "--conf", description = "Job config file (e.g. conf/local.conf): spark.* settings and scorch.* option defaults.")
  Path conf;

  @Option(names = "--spark-conf", description = "A Spark setting k=v (repeatable); wins over --conf.")
  List<String> sparkConf = new ArrayList<>();

  @Option(names = "--partitions", description = "Partitions to score in. Default: Spark's default parallelism.")
  Integer partitions;

  @Option(names = "--max-batch-tokens", description = "Token budget of one engine batch. Default: 4096.")
  Integer maxBatchTokens;

  @Option(names = "--window-rows", description = "Rows sorted by length together before batching. Default: 256.")
  Integer windowRows;

  @Option(names = "--arrow-memory-mb", description = "Off-heap Arrow memory cap per task, in MiB. Default: 1024.")
  Integer arrowMemoryMb;

  @Option(names = "--top-k", description = "Top-k alternatives per token (0 = none). Default: 0.")
  Integer topK;

  @Option(names = "--logits", description = "none, last or all. Default: none.")
  String logits;

  @Option(names = "--id-column", defaultValue = "id", description = "Id column; absent: a stable id file:row. Default: ${DEFAULT-VALUE}.")
  String idColumn;

  @Option(names = "--token-ids-column", defaultValue = "token_ids", description = "Token ids column. Default: ${DEFAULT-VALUE}.")
  String tokenIdsColumn;

  @Option(names = "--text-column", defaultValue = "prompt", description = "Text column. Default: ${DEFAULT-VALUE}.")
  String textColumn;

  @Option(names = "--continuation-column", defaultValue = "continuation", description = "Continuation text column. Default: ${DEFAULT-VALUE}.")
  String continuationColumn;

  @Option(names = "--weights", description = "broadcast (driver ships the shards as broadcast blocks), shared-path (executors read --model's path:"
      + " local/NFS, hdfs://, s3a://) or files (SparkContext.addFile). Default: shared-path on local masters, broadcast elsewhere.")
  String weights;

  @Option(names = "--threads", description = "Engine threads per task. Default: spark.task.cpus (1).")
  Integer threads;

  @Option(names = "--slices", description = "Jobs the run is cut into, each committed on its own (what --resume can skip). Default: 1.")
  Integer slices;

  @Option(names = "--overwrite", description = "Replace an existing output folder.")
  boolean overwrite;

  @Option(names = "--resume", description = "Finish an interrupted run: score only rows not yet in the output.")
  boolean resume;

  @Override
  public Integer call() throws Exception {
    JobConfig cfg = conf == null ? JobConfig.empty() : JobConfig.read(conf);
    SparkConf sc = new SparkConf();
    cfg.spark().forEach(sc::set);
    for (String kv : sparkConf) {
      int eq = kv.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("--spark-conf " + kv + ": expected key=value");
      }
      sc.set(kv.substring(0, eq), kv.substring(eq + 1));
    }
    if (master != null) {
      sc.setMaster(master);
    } else if (!sc.contains("spark.master")) {
      sc.setMaster("local[*]");
    }
    sc.setIfMissing("spark.app.name", "scorch score");
    sc.setIfMissing("spark.ui.showConsoleProgress", "false");
    Path modelDir = DemoModel.resolve(model);
    SparkSession spark = SparkSession.builder().config(sc).getOrCreate();
    try {
      boolean localMaster = spark.sparkContext().master().startsWith("local");
      ScoreSpec spec = new ScoreSpec(
          modelDir, input, inputFormat, output,
          choice("output-format", outputFormat, cfg, "parquet", "parquet", "jsonl"),
          intOption("partitions", partitions, cfg, spark.sparkContext().defaultParallelism()),
          intOption("max-batch-tokens", maxBatchTokens, cfg, 4096),
          intOption("window-rows", windowRows, cfg, 256),
          (long) intOption("arrow-memory-mb", arrowMemoryMb, cfg, 1024) << 20,
          intOption("top-k", topK, cfg, 0),
          LogitsMode.valueOf(choice("logits", logits, cfg, "none", "none", "last", "all").toUpperCase(Locale.ROOT)),
          idColumn, tokenIdsColumn, textColumn, continuationColumn,
          choice("weights", weights, cfg, localMaster ? "shared-path" : "broadcast", "broadcast", "shared-path", "files"),
          intOption("threads", threads, cfg, Integer.parseInt(sc.get("spark.task.cpus", "1"))),
          intOption("slices", slices, cfg, 1),
          overwrite, resume);
      ScoreSummary s = ScoreJob.run(spark, spec);
      System.out.println(s.line());
      return 0;
    } finally {
      spark.stop();
    }
  }

  static int intOption(String name, Integer given, JobConfig cfg, int dflt) {
    int v = given != null ? given : Integer.parseInt(cfg.option(name, String.valueOf(dflt)));
    if (v < 0 || (v == 0 && !name.equals("top-k"))) {
      throw new IllegalArgumentException("--" + name + " must be positive, got " + v);
    }
    return v;
  }

  static String choice(String name, String given, JobConfig cfg, String dflt, String... allowed) {
    String v = given != null ? given : cfg.option(name, dflt);
    for (String a : allowed) {
      if (a.equals(v)) {
        return v;
      }
    }
    throw new IllegalArgumentException("--" + name + " " + v + ": expected one of " + String.join(", ", allowed));
  }

}
