package dev.scorch.udfs.ml;

import dev.scorch.udfs.api.ScorchModel;
import org.apache.spark.ml.Transformer;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.param.ParamMap;
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
        maxBatchTokens = new IntParam(this, "maxBatchTokens", "tokens one engine batch takes");
        threads = new IntParam(this, "threads", "engine threads per task on the CPU (0: spark.task.cpus)");
        backend = new Param<>(this, "backend", "auto, cpu or cuda");
        gpuPrecision = new Param<>(this, "gpuPrecision", "GEMM precision of tasks on CUDA");
        setDefault(weights, "");
        setDefault(tokenIdsCol, "token_ids");
        setDefault(textCol, "prompt");
        setDefault(outputPrefix, "");
        setDefault(maxBatchTokens, 4096);
        setDefault(threads, 0);
        setDefault(backend, "auto");
        setDefault(gpuPrecision, dev.scorch.udfs.score.ScoreOptions.DEFAULT_GPU_PRECISION);
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

    /** The shared handle of this stage's checkpoint in this application (loaded and shipped once). */
    ScorchModel model(SparkSession spark) {
        if (!isDefined(modelPath)) {
            throw new IllegalArgumentException(getClass().getSimpleName() + " " + uid + ": set modelPath");
        }
        return ScorchModel.shared(spark, $(modelPath), $(weights).isEmpty() ? null : $(weights));
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
