package dev.scorch.jobs.generate;

import static org.apache.spark.sql.functions.col;

import dev.scorch.engine.model.KvCache;
import dev.scorch.engine.runtime.ProcessMemory;
import dev.scorch.jobs.PartitionedRun;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.udfs.api.GenerateParams;
import dev.scorch.udfs.generate.GenerateSchema;
import dev.scorch.udfs.generate.GenerateSchema.RowParam;
import dev.scorch.udfs.progress.JobMetrics;
import dev.scorch.udfs.score.ScoreSchema;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * The generate job: read the input, {@link dev.scorch.udfs.api.ScorchModel#generate generate} for it, write one output
 * row per input row and sample (with slices and resume: {@link PartitionedRun}). Runs as {@code bin/scorch generate}
 * or, on a cluster, as {@code spark-submit --class dev.scorch.jobs.generate.GenerateJob scorch-jobs.jar ...}.
 */
public final class GenerateJob {
    private GenerateJob() {}

    public static void main(String[] args) {
        System.exit(ScorchCli.run("generate", args));
    }

    public static GenerateSummary run(SparkSession spark, GenerateSpec spec) throws IOException {
        long t0 = System.nanoTime();
        PartitionedRun.checkBackend(spark, spec.backend());
        JobMetrics metrics = JobMetrics.register(spark.sparkContext());
        GenerateParams params = new GenerateParams()
                .setRowOverrides(true)
                .setMaxNewTokens(spec.maxNewTokens())
                .setTemperature(spec.temperature())
                .setTopK(spec.topK())
                .setTopP(spec.topP())
                .setMinP(spec.minP())
                .setRepetitionPenalty(spec.repetitionPenalty())
                .setPresencePenalty(spec.presencePenalty())
                .setFrequencyPenalty(spec.frequencyPenalty())
                .setSeed(spec.seed())
                .setStop(spec.stop())
                .setStopTokenIds(spec.stopTokenIds())
                .setIgnoreEos(spec.ignoreEos())
                .setN(spec.n())
                .setLogprobs(spec.logprobs())
                .setTopLogprobs(spec.topLogprobs())
                .setMaxCacheBytes(spec.maxCacheBytes())
                .setMaxBatchTokens(spec.maxBatchTokens())
                .setMaxBatchSeqs(spec.maxBatchSeqs())
                .setThreads(spec.threads())
                .setBackend(spec.backend())
                .setGpuPrecision(spec.gpuPrecision())
                .setCpuPrecision(spec.cpuPrecision())
                .setInputErrorCol(ScoreSchema.INPUT_ERROR)
                .setRowLabelCol(ScoreSchema.SOURCE)
                .setMetrics(metrics);
        try (PartitionedRun run = PartitionedRun.prepare(
                spark, spec, raw -> extraColumns(raw, spec), (model, input) -> model.generate(input, params))) {
            run.run();
            return new GenerateSummary(
                    metrics.rows().value(),
                    metrics.tokens().value(),
                    metrics.errors().value(),
                    (System.nanoTime() - t0) / 1e9,
                    run.model().label(),
                    run.model().weights(),
                    run.skipped(),
                    ProcessMemory.peakRssBytes(),
                    KvCache.bytesPerToken(run.model().info().config()),
                    spec.maxCacheBytes());
        }
    }

    /** The messages column and the per-row sampling columns the input has, as they are (the API reads their types). */
    static List<Column> extraColumns(Dataset<Row> raw, GenerateSpec spec) {
        List<String> cols = Arrays.asList(raw.columns());
        List<Column> out = new ArrayList<>();
        if (cols.contains(spec.messagesColumn())) {
            out.add(col(spec.messagesColumn()).as(GenerateSchema.MESSAGES));
        }
        for (RowParam p : RowParam.values()) {
            if (cols.contains(p.column)) {
                out.add(col(p.column));
            }
        }
        return out;
    }
}
