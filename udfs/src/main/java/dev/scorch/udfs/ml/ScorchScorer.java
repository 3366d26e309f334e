package dev.scorch.udfs.ml;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.udfs.api.Bounds;
import dev.scorch.udfs.api.ScorchModel;
import dev.scorch.udfs.api.ScoreParams;
import java.util.Locale;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.util.DefaultParamsReader;
import org.apache.spark.ml.util.Identifiable$;
import org.apache.spark.ml.util.MLReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructType;

/**
 * {@link ScorchModel#score} as a Spark ML {@link org.apache.spark.ml.Transformer}, for pipelines: the same columns and
 * results, set through {@code Param}s. Saved with its pipeline as parameters only (the checkpoint by path); loading
 * it back ships nothing until it transforms, and then once per application.
 */
public final class ScorchScorer extends ScorchStage {
    private final Param<String> continuationCol;
    private final IntParam topK;
    private final Param<String> logits;
    private final IntParam windowRows;

    public ScorchScorer() {
        this(Identifiable$.MODULE$.randomUID("scorchScorer"));
    }

    public ScorchScorer(String uid) {
        super(uid);
        continuationCol = new Param<>(
                this, "continuationCol", "column of a continuation of the text: only its tokens are scored");
        topK = intParam(
                "topK", "alternatives per scored token in top_logprobs (0: no such column)", Bounds.TOP_LOGPROBS);
        logits = new Param<>(this, "logits", "full logits of none, the last or all positions");
        windowRows = intParam("windowRows", "rows a task sorts by length and batches together", Bounds.WINDOW_ROWS);
        setDefault(continuationCol, "continuation");
        setDefault(topK, 0);
        setDefault(logits, "none");
        setDefault(windowRows, 256);
    }

    public static MLReader<ScorchScorer> read() {
        return new DefaultParamsReader<>();
    }

    public static ScorchScorer load(String path) {
        return read().load(path);
    }

    public Param<String> continuationCol() {
        return continuationCol;
    }

    public IntParam topK() {
        return topK;
    }

    public Param<String> logits() {
        return logits;
    }

    public IntParam windowRows() {
        return windowRows;
    }

    public ScorchScorer setModelPath(String v) {
        set(modelPath(), v);
        return this;
    }

    public ScorchScorer setWeights(String v) {
        set(weights(), v);
        return this;
    }

    public ScorchScorer setTokenIdsCol(String v) {
        set(tokenIdsCol(), v);
        return this;
    }

    public ScorchScorer setTextCol(String v) {
        set(textCol(), v);
        return this;
    }

    public ScorchScorer setContinuationCol(String v) {
        set(continuationCol, v);
        return this;
    }

    public ScorchScorer setOutputPrefix(String v) {
        set(outputPrefix(), v);
        return this;
    }

    public ScorchScorer setTopK(int v) {
        set(topK, v);
        return this;
    }

    public ScorchScorer setLogits(String v) {
        set(logits, v);
        return this;
    }

    public ScorchScorer setMaxBatchTokens(int v) {
        set(maxBatchTokens(), v);
        return this;
    }

    public ScorchScorer setWindowRows(int v) {
        set(windowRows, v);
        return this;
    }

    public ScorchScorer setThreads(int v) {
        set(threads(), v);
        return this;
    }

    public ScorchScorer setBackend(String v) {
        set(backend(), v);
        return this;
    }

    public ScorchScorer setGpuPrecision(String v) {
        set(gpuPrecision(), v);
        return this;
    }

    public ScorchScorer setCpuPrecision(String v) {
        set(cpuPrecision(), v);
        return this;
    }

    /** The API's parameters these Params give. */
    public ScoreParams scoreParams() {
        checkBounds();
        String l = $(logits).toUpperCase(Locale.ROOT);
        LogitsMode mode;
        try {
            mode = LogitsMode.valueOf(l);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("logits '" + $(logits) + "': expected none, last or all");
        }
        return new ScoreParams()
                .setTokenIdsCol($(tokenIdsCol()))
                .setTextCol($(textCol()))
                .setContinuationCol($(continuationCol))
                .setOutputPrefix($(outputPrefix()))
                .setTopK($int(topK))
                .setLogits(mode)
                .setMaxBatchTokens($int(maxBatchTokens()))
                .setWindowRows($int(windowRows))
                .setThreads($int(threads()))
                .setBackend(BackendMode.parse($(backend())))
                .setGpuPrecision(GemmPrecision.parse($(gpuPrecision())))
                .setCpuPrecision(dev.scorch.engine.kernels.CpuPrecision.option($(cpuPrecision())));
    }

    @Override
    public Dataset<Row> transform(Dataset<?> dataset) {
        ScoreParams p = scoreParams();
        return model(dataset.sparkSession()).score(dataset.toDF(), p);
    }

    @Override
    public StructType transformSchema(StructType schema) {
        return ScorchModel.scoreSchema(schema, scoreParams());
    }
}
