package dev.scorch.jobs.cli;

import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.jobs.score.ScoreJob;
import dev.scorch.jobs.score.ScoreSpec;
import dev.scorch.jobs.score.ScoreSummary;
import dev.scorch.udfs.api.Bounds;
import dev.scorch.udfs.score.ScoreOptions;
import java.util.Locale;
import java.util.concurrent.Callable;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
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
            "      --master spark://head:7077 --conf conf/standalone.conf --partitions 512 --top-k 5",
            "  bin/scorch score --model demo --input in.csv --output out.jsonl --output-format jsonl --logits last --resume",
            "",
            "On a cluster: spark-submit --class dev.scorch.jobs.score.ScoreJob jobs/target/scorch-jobs.jar <same options>"
        })
public final class ScoreCommand implements Callable<Integer> {
    @Mixin
    JobOptions job;

    @Option(names = "--max-batch-tokens", description = "Token budget of one engine batch. Default: 4096.")
    Integer maxBatchTokens;

    @Option(
            names = "--gpu-batch-tokens",
            description = "Tokens a CUDA task packs into one forward at least (above --max-batch-tokens), where the"
                    + " GPU's memory holds them. Default: 16384.")
    Integer gpuBatchTokens;

    @Option(names = "--window-rows", description = "Rows sorted by length together before batching. Default: 256.")
    Integer windowRows;

    @Option(names = "--arrow-memory-mb", description = "Off-heap Arrow memory cap per task, in MiB. Default: 1024.")
    Integer arrowMemoryMb;

    @Option(names = "--top-k", description = "Top-k alternatives per token (0 = none). Default: 0.")
    Integer topK;

    @Option(names = "--logits", description = "none, last or all. Default: none.")
    String logits;

    @Option(
            names = "--pipeline-nodes",
            description = {
                "Split the model's layers over N tasks that run at once, one per node (a Spark barrier stage needing N",
                "free task slots), each handing hidden states to the next over TCP: for a model no one node holds.",
                "Default: 0 (every task holds the whole model). See docs/multi-gpu.md."
            })
    Integer pipelineNodes;

    @Option(
            names = "--continuation-column",
            defaultValue = "continuation",
            description = "Continuation text column. Default: ${DEFAULT-VALUE}.")
    String continuationColumn;

    @Override
    public Integer call() throws Exception {
        // Every numeric option is checked before Spark starts: a bad one fails at once (exit 2) naming it.
        job.check();
        int batchTokens = job.bounded("max-batch-tokens", maxBatchTokens, 4096, Bounds.BATCH_TOKENS);
        int window = job.bounded("window-rows", windowRows, 256, Bounds.WINDOW_ROWS);
        long arrowBytes = (long) job.bounded("arrow-memory-mb", arrowMemoryMb, 1024, Bounds.MEMORY_MB) << 20;
        int k = job.bounded("top-k", topK, 0, Bounds.TOP_LOGPROBS);
        int gpuBatch = job.bounded(
                "gpu-batch-tokens", gpuBatchTokens, ScoreOptions.DEFAULT_GPU_BATCH_TOKENS, Bounds.BATCH_TOKENS);
        int nodes = job.bounded("pipeline-nodes", pipelineNodes, 0, Bounds.PIPELINE_NODES);
        SparkSession spark = job.session("scorch score");
        try {
            ScoreSpec spec = new ScoreSpec(
                    job.modelLocation(),
                    job.input,
                    job.inputFormat,
                    job.output,
                    job.outputFormat(),
                    job.partitions(spark),
                    batchTokens,
                    window,
                    arrowBytes,
                    k,
                    LogitsMode.valueOf(job.choice("logits", logits, "none", "none", "last", "all")
                            .toUpperCase(Locale.ROOT)),
                    job.idColumn,
                    job.tokenIdsColumn,
                    job.textColumn,
                    continuationColumn,
                    job.weights(spark),
                    job.threads(spark),
                    job.slices(),
                    job.write(),
                    job.backend(),
                    job.gpuPrecision(),
                    gpuBatch,
                    nodes,
                    job.cpuPrecision());
            ScoreSummary s = ScoreJob.run(spark, spec);
            System.out.println(s.line());
            return 0;
        } finally {
            job.stop(spark);
        }
    }
}
