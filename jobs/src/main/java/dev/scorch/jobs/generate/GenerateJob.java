package dev.scorch.jobs.generate;

import static org.apache.spark.sql.functions.array;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.from_json;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.struct;
import static org.apache.spark.sql.functions.transform;
import static org.apache.spark.sql.functions.when;

import dev.scorch.engine.config.GenerationConfig;
import dev.scorch.engine.runtime.KvCache;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.jobs.PartitionedRun;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.udfs.generate.GenerateOptions;
import dev.scorch.udfs.generate.GeneratePartition;
import dev.scorch.udfs.generate.GenerateSchema;
import dev.scorch.udfs.generate.GenerateSchema.RowParam;
import dev.scorch.udfs.progress.JobMetrics;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The generate job: the score job's conventions (validation on the driver, weights shipped once per executor,
 * slices, resume, one result per input row and sample, errors in a column) around the engine's continuous
 * batching. Runs as {@code bin/scorch generate} or, on a cluster, as
 * {@code spark-submit --class dev.scorch.jobs.generate.GenerateJob scorch-jobs.jar ...}.
 */
public final class GenerateJob {
    private GenerateJob() {}

    public static void main(String[] args) {
        System.exit(ScorchCli.run("generate", args));
    }

    public static GenerateSummary run(SparkSession spark, GenerateSpec spec) throws IOException {
        long t0 = System.nanoTime();
        PartitionedRun.checkBackend(spark, spec.backend());
        // 1-4. Checkpoint, output folder, input (id, token_ids, prompt, messages, per-row sampling, _source), weights.
        try (PartitionedRun run = PartitionedRun.prepare(spark, spec, raw -> extraColumns(raw, spec))) {
            // 5. Generate in every partition, rows streaming through continuous batching.
            GenerateOptions options = options(
                    spec, GenerationConfig.forModel(spec.model(), run.info().config()));
            StructType outSchema = GenerateSchema.output(run.idType(), options);
            JobMetrics metrics = JobMetrics.register(spark.sparkContext());
            run.run(
                    new GeneratePartition(
                            run.source(), options, run.input().schema(), outSchema, run.modelLabel(), metrics),
                    outSchema);
            return new GenerateSummary(
                    metrics.rows().value(),
                    metrics.tokens().value(),
                    metrics.errors().value(),
                    (System.nanoTime() - t0) / 1e9,
                    run.modelLabel(),
                    run.source().mode(),
                    run.skipped(),
                    dev.scorch.engine.runtime.ProcessMemory.peakRssBytes(),
                    KvCache.bytesPerToken(run.info().config()),
                    spec.maxCacheBytes());
        }
    }

    /**
     * The job's settings: what the command line gives, else the checkpoint's generation_config.json (its sampling
     * values only when do_sample is true, as Hugging Face reads them; else greedy), else max_new_tokens 256.
     * Stop ids are its EOS ids (unless ignoreEos) and any given.
     */
    static GenerateOptions options(GenerateSpec spec, GenerationConfig gc) {
        boolean sample = gc.doSample();
        SamplingParams sampling = new SamplingParams(
                spec.temperature() != null ? spec.temperature() : sample ? orElse(gc.temperature(), 1.0) : 0,
                spec.topK() != null ? spec.topK() : sample ? orElse(gc.topK(), 0) : 0,
                spec.topP() != null ? spec.topP() : sample ? orElse(gc.topP(), 1.0) : 1,
                spec.minP(),
                spec.repetitionPenalty(),
                spec.presencePenalty(),
                spec.frequencyPenalty(),
                spec.seed());
        Set<Integer> stopIds = new LinkedHashSet<>(spec.ignoreEos() ? List.of() : gc.eosTokenIds());
        stopIds.addAll(spec.stopTokenIds());
        int maxNew = spec.maxNewTokens() != null ? spec.maxNewTokens() : orElse(gc.maxNewTokens(), 256);
        return new GenerateOptions(
                sampling,
                maxNew,
                spec.stop(),
                new ArrayList<>(stopIds),
                spec.n(),
                spec.logprobs(),
                spec.topLogprobs(),
                new GenerateOptions.Limits(spec.maxCacheBytes(), spec.maxBatchTokens(), spec.maxBatchSeqs()),
                spec.threads(),
                spec.backend(),
                spec.gpuPrecision());
    }

    private static <T> T orElse(T v, T dflt) {
        return v != null ? v : dflt;
    }

    /** messages as array&lt;struct&lt;role, content&gt;&gt;, then each per-row sampling column in its type (null where absent). */
    static List<Column> extraColumns(Dataset<Row> raw, GenerateSpec spec) {
        List<String> cols = Arrays.asList(raw.columns());
        List<Column> out = new ArrayList<>();
        ArrayType messagesType = new ArrayType(GenerateSchema.MESSAGE, true);
        Column messages = lit(null).cast(messagesType);
        if (cols.contains(spec.messagesColumn())) {
            DataType t = raw.schema().apply(spec.messagesColumn()).dataType();
            if (t.equals(DataTypes.StringType)) {
                messages = from_json(col(spec.messagesColumn()), messagesType); // CSV: a JSON array string
            } else if (t instanceof ArrayType a
                    && a.elementType() instanceof StructType s
                    && Arrays.asList(s.fieldNames()).contains("role")
                    && Arrays.asList(s.fieldNames()).contains("content")) {
                // By name: JSON readers order struct fields alphabetically, and a cast would match them by position.
                messages = transform(
                        col(spec.messagesColumn()),
                        m -> struct(
                                m.getField("role").cast(DataTypes.StringType).as("role"),
                                m.getField("content").cast(DataTypes.StringType).as("content")));
            } else {
                throw new IllegalArgumentException(
                        "--input column '" + spec.messagesColumn() + "' has type " + t.simpleString()
                                + "; expected array<struct<role: string, content: string>> (or a JSON array string in CSV)");
            }
        }
        out.add(messages.as(GenerateSchema.MESSAGES));
        for (RowParam p : RowParam.values()) {
            Column c = lit(null).cast(p.type);
            if (cols.contains(p.column)) {
                DataType t = raw.schema().apply(p.column).dataType();
                c = p == RowParam.STOP && t.equals(DataTypes.StringType)
                        ? when(col(p.column).isNotNull(), array(col(p.column)))
                        : col(p.column).cast(p.type);
            }
            out.add(c.as(p.column));
        }
        return out;
    }
}
