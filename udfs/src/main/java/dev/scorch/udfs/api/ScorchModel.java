package dev.scorch.udfs.api;

import dev.scorch.engine.backend.BackendChoice;
import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.cuda.Cuda;
import dev.scorch.engine.model.ModelInfo;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.udfs.generate.GenerateOptions;
import dev.scorch.udfs.generate.GeneratePartition;
import dev.scorch.udfs.generate.GenerateSchema;
import dev.scorch.udfs.generate.GenerateSchema.RowParam;
import dev.scorch.udfs.model.BroadcastSource;
import dev.scorch.udfs.model.ModelSource;
import dev.scorch.udfs.model.RemoteCheckpoint;
import dev.scorch.udfs.model.SharedPathSource;
import dev.scorch.udfs.model.SparkFilesSource;
import dev.scorch.udfs.model.WeightsDelivery;
import dev.scorch.udfs.pipeline.PipelinePartition;
import dev.scorch.udfs.progress.JobMetrics;
import dev.scorch.udfs.score.ScoreOptions;
import dev.scorch.udfs.score.ScorePartition;
import dev.scorch.udfs.score.ScoreSchema;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A checkpoint loaded for use in a Spark application's own DataFrames: {@link #load} validates the folder on the driver,
 * makes its manifest and ships the weights once; {@link #score} and {@link #generate} then add result columns to any
 * DataFrame, as many times as wanted, without shipping again. Executors load the model once per JVM and checkpoint
 * (content hash), whichever query asks first, and share it between tasks.
 *
 * <p>The transforms are lazy: they return a DataFrame whose plan scores or generates when an action (a write, a
 * collect, a count) runs, not before. Every input column is kept as it is; the result columns follow them. A row that
 * cannot run (no prompt, token ids outside the vocabulary, too long, text the tokenizer rejects, non-finite scores)
 * gets its reason in the {@code error} column and nulls in the others, never a failed query. Results are
 * bit-identical whatever a row's batch mates, its partition or the thread count, and equal to the score and generate
 * jobs' (which run on this class).
 *
 * <pre>{@code
 * try (ScorchModel model = ScorchModel.load(spark, "/models/Kimi-K2-Instruct")) {
 *     model.score(prompts).where("perplexity < 20").write().parquet("out/kept");
 * }
 * }</pre>
 */
public final class ScorchModel implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ScorchModel.class);
    /** Handles {@link #shared} keeps, by application, folder and shipping mode. */
    private static final Map<List<String>, ScorchModel> SHARED = new HashMap<>();

    private final SparkSession spark;
    private final CheckedModel checked;
    private final ModelSource source;
    private volatile boolean closed;

    private ScorchModel(SparkSession spark, CheckedModel checked, ModelSource source) {
        this.spark = spark;
        this.checked = checked;
        this.source = source;
    }

    /** {@link #load(SparkSession, String, Map)} with the default options. */
    public static ScorchModel load(SparkSession spark, String path) {
        return load(spark, path, Map.of());
    }

    /**
     * Validates the checkpoint folder at {@code path} (a local path the driver reads; with weights shared-path, every
     * executor must see it at the same path), makes its manifest and ships its weights.
     *
     * @param options {@code weights}: broadcast (the driver sends the files as broadcast blocks; each executor host
     *     keeps one copy in its model cache; refused past spark.scorch.weights.broadcastMaxSize), files
     *     (SparkContext.addFile), shared-path (executors read the folder where it is) or auto (the default: shared-path
     *     on a local master; elsewhere broadcast up to the broadcast limit, shared-path past it)
     * @throws dev.scorch.engine.checkpoint.CheckpointException naming the folder's first problem
     */
    public static ScorchModel load(SparkSession spark, String path, Map<String, String> options) {
        String weights = null;
        for (Map.Entry<String, String> e : options.entrySet()) {
            if (!e.getKey().equals("weights")) {
                throw new IllegalArgumentException("load option '" + e.getKey() + "': unknown; expected weights");
            }
            weights = e.getValue();
        }
        return ship(spark, CheckedModel.of(path, spark.sparkContext().hadoopConfiguration()), weights);
    }

    /**
     * Ships a checked checkpoint's weights by {@code weights} (broadcast, files or shared-path; null, empty or auto:
     * {@link WeightsDelivery#defaultMode}, by the master and the checkpoint's size).
     */
    public static ScorchModel ship(SparkSession spark, CheckedModel checked, String weights) {
        String mode = weights;
        boolean auto = mode == null || mode.isEmpty() || mode.equals(WeightsDelivery.AUTO);
        if (!auto && checked.remote() && (mode.equals("broadcast") || mode.equals("files"))) {
            throw new IllegalArgumentException("weights '" + mode + "' reads the model folder on the driver, but "
                    + checked.location() + " is on another file system: use shared-path (or auto), and each"
                    + " executor host copies it once into its model cache");
        }
        if (checked.remote() && auto) {
            LOG.info(
                    "scorch weights: shared-path for model {} (its folder {} is on another file system: each executor"
                            + " host copies it once)",
                    checked.label(),
                    checked.location());
            mode = "shared-path";
        } else if (auto) {
            boolean local = spark.sparkContext().isLocal();
            long bytes = checked.manifest().totalBytes();
            long max = WeightsDelivery.broadcastMax(spark.sparkContext().getConf());
            mode = WeightsDelivery.defaultMode(local, bytes, max);
            LOG.info(
                    "scorch weights: {} for model {} ({})",
                    mode,
                    checked.label(),
                    WeightsDelivery.defaultReason(local, bytes, max));
        }
        ModelSource source = switch (mode) {
            case "broadcast" ->
                BroadcastSource.ship(
                        JavaSparkContext.fromSparkContext(spark.sparkContext()), checked.dir(), checked.manifest());
            case "files" -> SparkFilesSource.ship(spark.sparkContext(), checked.dir(), checked.manifest());
            case "shared-path" -> new SharedPathSource(checked.location(), checked.manifest());
            default ->
                throw new IllegalArgumentException(
                        "weights '" + mode + "': expected one of auto, broadcast, shared-path, files");
        };
        return new ScorchModel(spark, checked, source);
    }

    /**
     * One handle per application, folder and shipping mode in this driver JVM, loaded on first use: what Spark ML
     * stages use, so that a pipeline run twice ships the weights once. It is never closed; executors still check every
     * file against the manifest made at its load, so a checkpoint changed since fails its tasks rather than mixing.
     */
    public static ScorchModel shared(SparkSession spark, String path, String weights) {
        List<String> key = List.of(
                spark.sparkContext().applicationId(),
                RemoteCheckpoint.isRemote(path)
                        ? path
                        : RemoteCheckpoint.localPath(path)
                                .toAbsolutePath()
                                .normalize()
                                .toString(),
                String.valueOf(weights));
        synchronized (SHARED) {
            ScorchModel m = SHARED.get(key);
            if (m == null || m.closed || m.spark.sparkContext().isStopped()) {
                m = weights == null || weights.isEmpty()
                        ? load(spark, path)
                        : load(spark, path, Map.of("weights", weights));
                SHARED.put(key, m);
            }
            return m;
        }
    }

    /**
     * With backend cuda on a local master, whose tasks run in this JVM, a missing CUDA fails here, naming why. (On a
     * cluster each task decides on its executor.)
     */
    public static void requireBackend(SparkSession spark, BackendMode backend) {
        if (backend == BackendMode.CUDA && spark.sparkContext().isLocal()) {
            BackendChoice.choose(BackendMode.CUDA, List.of(), Cuda::probe);
        }
    }

    /** {@link #score(Dataset, ScoreParams)} with the default parameters. */
    public Dataset<Row> score(Dataset<Row> df) {
        return score(df, new ScoreParams());
    }

    /**
     * Scores every row: its token ids, or its text (tokenised with the model's tokenizer, BOS first) and, where given,
     * a continuation whose tokens alone are scored. Adds, after the input's columns: num_tokens, scored_token_ids (the
     * tokens scored, the first as context only), token_logprobs (null for the first token and a prompt's), sum_logprob,
     * mean_logprob, perplexity, [top_logprobs], [logits], error, model; each name after the parameters' prefix.
     */
    public Dataset<Row> score(Dataset<Row> df, ScoreParams p) {
        requireOpen(df);
        ScoreOptions options = p.options(spark);
        requireBackend(spark, options.backend());
        Staging in = new Staging(df);
        in.requireOne(p.tokenIdsCol(), p.textCol());
        List<Column> engine = List.of(
                in.tokenIds(p.tokenIdsCol()),
                in.text(p.textCol()),
                in.text(p.continuationCol()),
                in.given(p.inputErrorCol(), "input error column"),
                in.given(p.rowLabelCol(), "row label column"),
                in.integer(p.scoreFromCol(), "score-from column"),
                in.integer(p.sharedPrefixCol(), "shared-prefix column"));
        StructType engineIn = ScoreSchema.input(DataTypes.LongType);
        StructType engineOut =
                Staging.nullable(ScoreSchema.output(DataTypes.LongType, options), ScoreSchema.SOURCE_ROW);
        ScorePartition fn = new ScorePartition(
                source, options, engineIn, engineOut, label(), metrics(p.metrics()), p.arrowMemoryBytes());
        if (p.pipelineNodes() > 0) {
            PipelinePartition.layers(info().config().numHiddenLayers(), p.pipelineNodes(), 0); // fails on too many
            return transform(
                    df,
                    engine,
                    engineOut,
                    new PipelinePartition(source, options, fn),
                    1,
                    p.outputPrefix(),
                    "ScoreParams.setOutputPrefix",
                    p.pipelineNodes());
        }
        return transform(df, engine, engineOut, fn, 1, p.outputPrefix(), "ScoreParams.setOutputPrefix");
    }

    /** {@link #generate(Dataset, GenerateParams)} with these sampling settings and the other parameters' defaults. */
    public Dataset<Row> generate(Dataset<Row> df, SamplingParams sampling) {
        return generate(df, new GenerateParams().setSampling(sampling));
    }

    /** {@link #generate(Dataset, GenerateParams)} with the default parameters (the checkpoint's sampling settings). */
    public Dataset<Row> generate(Dataset<Row> df) {
        return generate(df, new GenerateParams());
    }

    /**
     * Generates n completions per row from its token ids, else its chat messages (through the chat template), else
     * its text. Each input row becomes n rows (its columns repeated), with: sample, completion, completion_token_ids,
     * finish_reason (stop, length, eos or error), num_prompt_tokens, num_completion_tokens, [token_logprobs],
     * [top_logprobs], error, model; each name after the parameters' prefix.
     */
    public Dataset<Row> generate(Dataset<Row> df, GenerateParams p) {
        requireOpen(df);
        GenerateOptions options = p.options(spark, checked.generationConfig());
        requireBackend(spark, options.backend());
        Staging in = new Staging(df);
        in.requireOne(p.tokenIdsCol(), p.textCol(), p.messagesCol());
        List<Column> engine = new ArrayList<>();
        engine.add(in.tokenIds(p.tokenIdsCol()));
        engine.add(in.text(p.textCol()));
        engine.add(in.messages(p.messagesCol()));
        StructType engineIn = new StructType()
                .add(ScoreSchema.ID, DataTypes.LongType, false)
                .add(ScoreSchema.TOKEN_IDS, new org.apache.spark.sql.types.ArrayType(DataTypes.LongType, true), true)
                .add(ScoreSchema.PROMPT, DataTypes.StringType, true)
                .add(GenerateSchema.MESSAGES, new org.apache.spark.sql.types.ArrayType(GenerateSchema.MESSAGE, true));
        for (RowParam rp : RowParam.values()) {
            engine.add(in.rowParam(rp, p.rowOverrides()));
            engineIn = engineIn.add(rp.column, rp.type, true);
        }
        engine.add(in.given(p.inputErrorCol(), "input error column"));
        engine.add(in.given(p.rowLabelCol(), "row label column"));
        engineIn = engineIn.add(ScoreSchema.INPUT_ERROR, DataTypes.StringType, true)
                .add(ScoreSchema.SOURCE, DataTypes.StringType, true);
        StructType engineOut =
                Staging.nullable(GenerateSchema.output(DataTypes.LongType, options), ScoreSchema.SOURCE_ROW);
        GeneratePartition fn =
                new GeneratePartition(source, options, engineIn, engineOut, label(), metrics(p.metrics()));
        return transform(df, engine, engineOut, fn, options.n(), p.outputPrefix(), "GenerateParams.setOutputPrefix");
    }

    /**
     * The input's columns then the engine's output columns between its key (first) and its row label (last), under
     * prefix: a plan over an RDD made when an action first runs.
     */
    private Dataset<Row> transform(
            Dataset<Row> df,
            List<Column> engineColumns,
            StructType engineOut,
            FlatMapFunction<Iterator<InternalRow>, InternalRow> fn,
            int perRow,
            String prefix,
            String prefixSetter) {
        return transform(df, engineColumns, engineOut, fn, perRow, prefix, prefixSetter, 0);
    }

    /**
     * As above; with pipelineNodes &gt; 0, the staged rows all go to the last of that many partitions and fn runs as a
     * barrier stage over them ({@link PipelinePartition}).
     */
    private Dataset<Row> transform(
            Dataset<Row> df,
            List<Column> engineColumns,
            StructType engineOut,
            FlatMapFunction<Iterator<InternalRow>, InternalRow> fn,
            int perRow,
            String prefix,
            String prefixSetter,
            int pipelineNodes) {
        List<Column> select = new ArrayList<>();
        select.add(functions.col("*"));
        for (int j = 0; j < engineColumns.size(); j++) {
            select.add(engineColumns.get(j).as("__scorch_" + j));
        }
        Dataset<Row> staged = df.select(select.toArray(new Column[0]));
        StructType out = outputSchema(df.schema(), engineOut, prefix, prefixSetter);
        int userFields = df.schema().size();
        int[] results = new int[engineOut.size() - 2];
        for (int k = 0; k < results.length; k++) {
            results[k] = k + 1;
        }
        PassThrough pass = new PassThrough(fn, staged.schema(), userFields, engineOut, results, perRow);
        var classic = (org.apache.spark.sql.classic.SparkSession) spark;
        DeferredRDD rdd = new DeferredRDD(
                spark.sparkContext(),
                pipelineNodes > 0
                        ? () -> PipelineRows.barrier(
                                staged.queryExecution().toRdd(), staged.schema(), out, pipelineNodes, pass)
                        : () -> staged.queryExecution()
                                .toRdd()
                                .toJavaRDD()
                                .mapPartitions(pass)
                                .rdd());
        return classic.internalCreateDataFrame(rdd, out, false);
    }

    /**
     * The schema {@link #score} gives a DataFrame of this schema: its fields, then the result columns the parameters
     * ask for. Fails as score does when a result would take an input column's name. Needs no model.
     */
    public static StructType scoreSchema(StructType input, ScoreParams p) {
        ScoreOptions o = new ScoreOptions(1, 1, p.topK(), p.logits(), 1);
        StructType engineOut = ScoreSchema.output(DataTypes.LongType, o);
        return outputSchema(input, engineOut, p.outputPrefix(), "ScoreParams.setOutputPrefix");
    }

    /** The schema {@link #generate} gives a DataFrame of this schema (see {@link #scoreSchema}). */
    public static StructType generateSchema(StructType input, GenerateParams p) {
        GenerateOptions o = new GenerateOptions(
                SamplingParams.greedy(),
                1,
                List.of(),
                List.of(),
                p.n(),
                p.logprobs(),
                p.topLogprobs(),
                new GenerateOptions.Limits(2048L << 20, 4096, 32),
                1,
                BackendMode.AUTO,
                ScoreOptions.defaultGpuPrecision(),
                null);
        StructType engineOut = GenerateSchema.output(DataTypes.LongType, o);
        return outputSchema(input, engineOut, p.outputPrefix(), "GenerateParams.setOutputPrefix");
    }

    /** The input's fields, then the engine's output fields between its key (first) and row label (last), prefixed. */
    private static StructType outputSchema(StructType input, StructType engineOut, String prefix, String setter) {
        StructType out = input;
        List<String> names = new ArrayList<>();
        for (int k = 1; k < engineOut.size() - 1; k++) {
            StructField f = engineOut.fields()[k];
            String name = prefix + (f.name().equals(ScoreSchema.TOKEN_IDS) ? "scored_token_ids" : f.name());
            names.add(name);
            out = out.add(new StructField(name, f.dataType(), f.nullable(), f.metadata()));
        }
        Staging.requireFree(List.of(input.fieldNames()), names, setter);
        return out;
    }

    private JobMetrics metrics(JobMetrics given) {
        return given != null ? given : JobMetrics.register(spark.sparkContext());
    }

    private void requireOpen(Dataset<Row> df) {
        if (closed) {
            throw new IllegalStateException("ScorchModel " + label() + " is closed");
        }
        if (df.isStreaming()) {
            throw new IllegalArgumentException(
                    "streaming DataFrames are not supported; score each micro-batch" + " (foreachBatch) instead");
        }
    }

    /** name@hash of the checkpoint, written in every result row's model column. */
    public String label() {
        return checked.label();
    }

    /** The folder as loaded. */
    public Path path() {
        return checked.dir();
    }

    /** How the weights were shipped: broadcast, files or shared-path. */
    public String weights() {
        return source.mode();
    }

    /** The checkpoint's config, storage and validation. */
    public ModelInfo info() {
        return checked.info();
    }

    /** What executors load the model from. */
    public ModelSource source() {
        return source;
    }

    /**
     * Frees shipped broadcast blocks on the driver and executors; DataFrames made by this handle fail once run after
     * it. (Files added to the SparkContext stay for the application's life; executors' loaded models stay until their
     * JVM exits, shared with later handles of the same checkpoint.)
     */
    @Override
    public void close() {
        if (!closed) {
            closed = true;
            if (source instanceof BroadcastSource b) {
                b.destroy();
            }
        }
    }
}
