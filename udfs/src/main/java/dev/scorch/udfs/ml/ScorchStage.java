package dev.scorch.udfs.ml;

import dev.scorch.udfs.api.Bounds;
import dev.scorch.udfs.api.ScorchModel;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.ml.Transformer;
import org.apache.spark.ml.param.DoubleParam;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.param.ParamMap;
import org.apache.spark.ml.param.ParamValidators;
import org.apache.spark.ml.util.DefaultParamsWritable;
import org.apache.spark.sql.SparkSession;

/**
 * What {@link ScorchScorer} and {@link ScorchGenerator} share: the checkpoint (by path: a saved pipeline holds the
 * path, never the weights), how its weights are shipped, the prompt columns, the result columns' prefix, and where
 * tasks run. Public only because Spark ML finds parameters through public methods.
 */
public abstract class ScorchStage extends Transformer implements DefaultParamsWritable {
    private final String uid;
    private final Param<String> modelPath;
    private final Param<String> weights;
    private final Param<String> tokenIdsCol;
    private final Param<String> textCol;
    private final Param<String> outputPrefix;
    private final IntParam maxBatchTokens;
    private final IntParam threads;
    private final Param<String> backend;
    private final Param<String> gpuPrecision;
    private final Param<String> cpuPrecision;
    /** Each numeric Param's range ({@link Bounds.Ints} or {@link Bounds.Decimals}), checked again before a transform. */
    private final Map<Param<?>, Object> bounds = new LinkedHashMap<>();

    ScorchStage(String uid) {
        // The parameters are made here, after uid: each names its parent by uid.
        this.uid = uid;
        modelPath = new Param<>(
                this,
                "modelPath",
                "checkpoint folder, read on the driver (with weights shared-path, every executor reads it at this path)");
        weights = new Param<>(
                this,
                "weights",
                "how the weights reach executors: broadcast, files or shared-path ('' or auto: shared-path on a local"
                        + " master, else broadcast up to spark.scorch.weights.broadcastMaxSize and shared-path past it)");
        tokenIdsCol = new Param<>(this, "tokenIdsCol", "column of token ids (array of int or bigint)");
        textCol = new Param<>(this, "textCol", "column of text, for rows without token ids");
        outputPrefix = new Param<>(this, "outputPrefix", "put before every result column's name");
        maxBatchTokens = intParam("maxBatchTokens", "tokens one engine batch takes", Bounds.BATCH_TOKENS);
        threads = intParam(
                "threads", "engine threads per task on the CPU (0: spark.task.cpus)", Bounds.THREADS_OR_DEFAULT);
        backend = new Param<>(this, "backend", "auto, cpu or cuda");
        gpuPrecision = new Param<>(this, "gpuPrecision", "GEMM precision of tasks on CUDA");
        cpuPrecision = new Param<>(
                this,
                "cpuPrecision",
                "prefill GEMM precision of tasks on the CPU: fp32, bf16x3, bf16x2, bf16 or default (the executor's)");
        setDefault(weights, "");
        setDefault(tokenIdsCol, "token_ids");
        setDefault(textCol, "prompt");
        setDefault(outputPrefix, "");
        setDefault(maxBatchTokens, 4096);
        setDefault(threads, 0);
        setDefault(backend, "auto");
        setDefault(gpuPrecision, dev.scorch.udfs.score.ScoreOptions.DEFAULT_GPU_PRECISION);
        setDefault(cpuPrecision, "default");
    }

    @Override
    public String uid() {
        return uid;
    }

    public Param<String> modelPath() {
        return modelPath;
    }

    public Param<String> weights() {
        return weights;
    }

    public Param<String> tokenIdsCol() {
        return tokenIdsCol;
    }

    public Param<String> textCol() {
        return textCol;
    }

    public Param<String> outputPrefix() {
        return outputPrefix;
    }

    public IntParam maxBatchTokens() {
        return maxBatchTokens;
    }

    public IntParam threads() {
        return threads;
    }

    public Param<String> backend() {
        return backend;
    }

    public Param<String> gpuPrecision() {
        return gpuPrecision;
    }

    public Param<String> cpuPrecision() {
        return cpuPrecision;
    }

    /** The shared handle of this stage's checkpoint in this application (loaded and shipped once). */
    ScorchModel model(SparkSession spark) {
        if (!isDefined(modelPath)) {
            throw new IllegalArgumentException(getClass().getSimpleName() + " " + uid + ": set modelPath");
        }
        return ScorchModel.shared(spark, $(modelPath), $(weights).isEmpty() ? null : $(weights));
    }

    /** An int Param that {@code set} refuses outside bound (its doc says the range), checked again by {@link #checkBounds}. */
    final IntParam intParam(String name, String doc, Bounds.Ints bound) {
        IntParam p = new IntParam(
                this,
                name,
                doc + " (" + bound.range() + ")",
                ParamValidators.<Object>inRange(bound.min(), bound.max(), true, true));
        bounds.put(p, bound);
        return p;
    }

    /** A double Param that {@code set} refuses outside bound, NaN and infinities too, checked again by {@link #checkBounds}. */
    final DoubleParam doubleParam(String name, String doc, Bounds.Decimals bound) {
        DoubleParam p = new DoubleParam(
                this,
                name,
                doc + " (" + bound.range() + ")",
                ParamValidators.<Object>inRange(bound.min(), bound.max(), !bound.minOpen(), true));
        bounds.put(p, bound);
        return p;
    }

    /**
     * Every numeric Param's value (set or default) against its range, on the driver before any task starts: a stage
     * read back from a saved pipeline, or given its values some way that skipped {@code set}'s check, fails here naming
     * the Param ("ScorchScorer threads 100000: expected 0 to 1024") instead of starting tasks with it.
     */
    final void checkBounds() {
        for (Map.Entry<Param<?>, Object> e : bounds.entrySet()) {
            Param<?> p = e.getKey();
            if (!isDefined(p)) {
                continue;
            }
            String name = getClass().getSimpleName() + " " + p.name();
            Object v = getOrDefault(p);
            if (e.getValue() instanceof Bounds.Ints b) {
                b.checkLong(name, ((Number) v).longValue());
            } else {
                ((Bounds.Decimals) e.getValue()).check(name, ((Number) v).doubleValue());
            }
        }
    }

    /** An int parameter's value (set, else its default); {@code $} gives the others'. */
    int $int(IntParam p) {
        return (Integer) getOrDefault(p);
    }

    @Override
    public ScorchStage copy(ParamMap extra) {
        return defaultCopy(extra);
    }
}
