package dev.scorch.jobs.cli;

import dev.scorch.jobs.DemoModel;
import dev.scorch.jobs.eval.EvalJob;
import dev.scorch.jobs.eval.EvalReport;
import dev.scorch.jobs.eval.EvalSpec;
import dev.scorch.udfs.api.Bounds;
import java.nio.file.Path;
import java.time.Instant;
import java.util.concurrent.Callable;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
        name = "eval",
        mixinStandardHelpOptions = true,
        description = {
            "Runs an evaluation suite (YAML, see conf/evals/) against a checkpoint on Spark: multiple_choice",
            "(acc, acc_norm), perplexity (token perplexity, bits per byte; long documents in strided windows) and",
            "generate_match (exact and normalised match of a greedy completion). Writes per-example rows under",
            "OUTPUT/runs/RUN_ID/TASK/ and one summary row per task and metric, with its standard error, to the history",
            "table OUTPUT/history/ (Parquet, partitioned by run_id; a rerun of a run id replaces only that run).",
            "With --compare-to it prints the deltas against an earlier run and exits 3 when a metric dropped by more",
            "than the suite's tolerance, so a scheduler can gate on it (2: the run failed)."
        },
        footer = {
            "",
            "Examples:",
            "  bin/scorch eval --model demo --suite conf/evals/demo-suite.yaml --output out/evals",
            "  bin/scorch eval --model /data/ckpt-0412 --suite conf/evals/demo-suite.yaml --output hdfs:///evals/demo \\",
            "      --run-id ckpt-0412 --compare-to ckpt-0405 --master spark://head:7077 --conf conf/standalone.conf",
            "",
            "On a cluster: spark-submit --class dev.scorch.jobs.eval.EvalJob jobs/target/scorch-jobs.jar <same options>",
            "Nightly: conf/eval-nightly.sh (a cron line is in its header)."
        })
public final class EvalCommand implements Callable<Integer> {
    @Mixin
    SparkOptions spark;

    @Option(
            names = "--model",
            required = true,
            description = "Checkpoint folder, or 'demo' for the built-in demo model (random weights).")
    String model;

    @Option(names = "--suite", required = true, description = "Suite file (YAML).")
    Path suite;

    @Option(
            names = "--output",
            required = true,
            description = "Eval output folder: runs/ and history/ (any Hadoop FileSystem URI).")
    String output;

    @Option(names = "--run-id", description = "This run's id. Default: the start time, e.g. 20261129T223000Z.")
    String runId;

    @Option(names = "--compare-to", description = "An earlier run id in the same history to compare with.")
    String compareTo;

    @Option(names = "--max-batch-tokens", description = "Token budget of one engine batch. Default: 4096.")
    Integer maxBatchTokens;

    @Override
    public Integer call() throws Exception {
        String id = runId != null ? runId : EvalJob.defaultRunId(Instant.now());
        spark.check();
        int batchTokens = spark.bounded("max-batch-tokens", maxBatchTokens, 4096, Bounds.BATCH_TOKENS);
        SparkSession session = spark.session("scorch eval");
        try {
            EvalSpec spec = new EvalSpec(
                    DemoModel.resolve(model),
                    suite,
                    output,
                    id,
                    compareTo,
                    spark.partitions(session),
                    spark.threads(session),
                    spark.weights(session),
                    batchTokens);
            EvalReport report = EvalJob.run(session, spec);
            report.print(System.out);
            return report.exitCode();
        } finally {
            spark.stop(session);
        }
    }
}
