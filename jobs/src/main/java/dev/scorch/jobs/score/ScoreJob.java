package dev.scorch.jobs.score;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.lit;

import dev.scorch.engine.runtime.ProcessMemory;
import dev.scorch.jobs.PartitionedRun;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.udfs.api.ScoreParams;
import dev.scorch.udfs.progress.JobMetrics;
import dev.scorch.udfs.score.ScoreSchema;
import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;

/**
 * The score job: read the input, {@link dev.scorch.udfs.api.ScorchModel#score score} it, write one output row per
 * input row (with slices and resume: {@link PartitionedRun}). Runs as {@code bin/scorch score} or, on a cluster, as
 * {@code spark-submit --class dev.scorch.jobs.score.ScoreJob scorch-jobs.jar ...}.
 */
public final class ScoreJob {
    private ScoreJob() {}

    public static void main(String[] args) {
        System.exit(ScorchCli.run("score", args));
    }

    public static ScoreSummary run(SparkSession spark, ScoreSpec spec) throws IOException {
        long t0 = System.nanoTime();
        PartitionedRun.checkBackend(spark, spec.backend());
        JobMetrics metrics = JobMetrics.register(spark.sparkContext());
        ScoreParams params = new ScoreParams()
                .setMaxBatchTokens(spec.maxBatchTokens())
                .setWindowRows(spec.windowRows())
                .setArrowMemoryBytes(spec.arrowMemoryBytes())
                .setTopK(spec.topK())
                .setLogits(spec.logits())
                .setThreads(spec.threads())
                .setBackend(spec.backend())
                .setGpuPrecision(spec.gpuPrecision())
                .setCpuPrecision(spec.cpuPrecision())
                .setGpuBatchTokens(spec.gpuBatchTokens())
                .setPipelineNodes(spec.pipelineNodes())
                .setInputErrorCol(ScoreSchema.INPUT_ERROR)
                .setRowLabelCol(ScoreSchema.SOURCE)
                .setMetrics(metrics);
        try (PartitionedRun run = PartitionedRun.prepare(
                spark,
                spec,
                raw -> List.of((Arrays.asList(raw.columns()).contains(spec.continuationColumn())
                                ? col(spec.continuationColumn()).cast(DataTypes.StringType)
                                : lit(null).cast(DataTypes.StringType))
                        .as(ScoreSchema.CONTINUATION)),
                (model, input) -> model.score(input, params))) {
            run.run();
            return new ScoreSummary(
                    metrics.rows().value(),
                    metrics.tokens().value(),
                    metrics.errors().value(),
                    metrics.batches().value(),
                    (System.nanoTime() - t0) / 1e9,
                    metrics.engineSeconds(),
                    metrics.partitionSeconds(),
                    metrics.paddingRatio(),
                    run.model().label(),
                    run.model().weights(),
                    run.skipped(),
                    ProcessMemory.peakRssBytes());
        }
    }
}
