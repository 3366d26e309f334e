package dev.scorch.jobs.score;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.lit;

import dev.scorch.jobs.PartitionedRun;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.udfs.progress.JobMetrics;
import dev.scorch.udfs.score.ScoreOptions;
import dev.scorch.udfs.score.ScorePartition;
import dev.scorch.udfs.score.ScoreSchema;
import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The score job: validate the checkpoint and the input on the driver, ship the weights, score every row in
 * mapPartitions, and write one output row per input row. Runs as {@code bin/scorch score} or, on a
 * cluster, as {@code spark-submit --class dev.scorch.jobs.score.ScoreJob scorch-jobs.jar ...}.
 */
public final class ScoreJob {
    private ScoreJob() {}

    public static void main(String[] args) {
        System.exit(ScorchCli.run("score", args));
    }

    public static ScoreSummary run(SparkSession spark, ScoreSpec spec) throws IOException {
        long t0 = System.nanoTime();
        PartitionedRun.checkBackend(spark, spec.backend());
        // 1-4. Checkpoint, output folder, input (id, token_ids, prompt, continuation, _source), weights shipped.
        try (PartitionedRun run = PartitionedRun.prepare(
                spark,
                spec,
                raw -> List.of((Arrays.asList(raw.columns()).contains(spec.continuationColumn())
                                ? col(spec.continuationColumn()).cast(DataTypes.StringType)
                                : lit(null).cast(DataTypes.StringType))
                        .as(ScoreSchema.CONTINUATION)))) {
            // 5. Score every partition into Arrow-built output rows.
            ScoreOptions options = new ScoreOptions(
                    spec.maxBatchTokens(),
                    spec.windowRows(),
                    spec.topK(),
                    spec.logits(),
                    spec.threads(),
                    spec.backend(),
                    spec.gpuPrecision());
            StructType outSchema = ScoreSchema.output(run.idType(), options);
            JobMetrics metrics = JobMetrics.register(spark.sparkContext());
            run.run(
                    new ScorePartition(
                            run.source(),
                            options,
                            run.input().schema(),
                            outSchema,
                            run.modelLabel(),
                            metrics,
                            spec.arrowMemoryBytes()),
                    outSchema);
            double secs = (System.nanoTime() - t0) / 1e9;
            return new ScoreSummary(
                    metrics.rows().value(),
                    metrics.tokens().value(),
                    metrics.errors().value(),
                    metrics.batches().value(),
                    secs,
                    metrics.engineSeconds(),
                    metrics.paddingRatio(),
                    run.modelLabel(),
                    run.source().mode(),
                    run.skipped(),
                    dev.scorch.engine.runtime.ProcessMemory.peakRssBytes());
        }
    }
}
