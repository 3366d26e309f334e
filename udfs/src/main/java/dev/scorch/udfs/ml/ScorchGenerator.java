package dev.scorch.udfs.ml;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.udfs.api.Bounds;
import dev.scorch.udfs.api.GenerateParams;
import dev.scorch.udfs.api.ScorchModel;
import java.util.Arrays;
import org.apache.spark.ml.param.BooleanParam;
import org.apache.spark.ml.param.DoubleParam;
import org.apache.spark.ml.param.IntArrayParam;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.LongParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.param.StringArrayParam;
import org.apache.spark.ml.util.DefaultParamsReader;
import org.apache.spark.ml.util.Identifiable$;
import org.apache.spark.ml.util.MLReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructType;

/**
 * {@link ScorchModel#generate} as a Spark ML {@link org.apache.spark.ml.Transformer}: n rows per input row, the same
 * results, set through {@code Param}s. maxNewTokens, temperature, topK and topP left unset come from the checkpoint's
 * generation_config.json. Saved with its pipeline as parameters only (the checkpoint by path).
 */
public final class ScorchGenerator extends ScorchStage {
    private final Param<String> messagesCol;
    private final BooleanParam rowOverrides;
    private final IntParam maxNewTokens;
    private final DoubleParam temperature;
    private final IntParam topK;
    private final DoubleParam topP;
    private final DoubleParam minP;
    private final DoubleParam repetitionPenalty;
    private final DoubleParam presencePenalty;
    private final DoubleParam frequencyPenalty;
    private final LongParam seed;
    private final StringArrayParam stop;
    private final IntArrayParam stopTokenIds;
    private final BooleanParam ignoreEos;
    private final IntParam n;
    private final BooleanParam logprobs;
    private final IntParam topLogprobs;
    private final IntParam maxCacheMb;
    private final IntParam maxBatchSeqs;

    public ScorchGenerator() {
        this(Identifiable$.MODULE$.randomUID("scorchGenerator"));
    }

    public ScorchGenerator(String uid) {
        super(uid);
        messagesCol = new Param<>(this, "messagesCol", "column of chat messages, for rows without token ids");
        rowOverrides = new BooleanParam(
                this, "rowOverrides", "read per-row sampling columns (max_new_tokens, temperature, ..., stop)");
        maxNewTokens = intParam(
                "maxNewTokens", "tokens generated at most (unset: the checkpoint's, else 256)", Bounds.MAX_NEW_TOKENS);
        temperature = doubleParam("temperature", "0 is greedy (unset: the checkpoint's)", Bounds.TEMPERATURE);
        topK = intParam(
                "topK",
                "sample among the k most likely tokens, 0 for all (unset: the checkpoint's)",
                Bounds.SAMPLING_TOP_K);
        topP = doubleParam("topP", "nucleus sampling, 1 for all (unset: the checkpoint's)", Bounds.TOP_P);
        minP = doubleParam("minP", "drop tokens less likely than minP times the most likely", Bounds.MIN_P);
        repetitionPenalty =
                doubleParam("repetitionPenalty", "Hugging Face style, 1 for none", Bounds.REPETITION_PENALTY);
        presencePenalty = doubleParam("presencePenalty", "OpenAI style, 0 for none", Bounds.OPENAI_PENALTY);
        frequencyPenalty = doubleParam("frequencyPenalty", "OpenAI style, 0 for none", Bounds.OPENAI_PENALTY);
        seed = new LongParam(this, "seed", "seed of the rows' random streams");
        stop = new StringArrayParam(this, "stop", "stop strings");
        stopTokenIds = new IntArrayParam(this, "stopTokenIds", "extra ids that end a completion, like EOS");
        ignoreEos = new BooleanParam(this, "ignoreEos", "do not stop at the checkpoint's EOS ids");
        n = intParam("n", "completions per row", Bounds.SAMPLES);
        logprobs = new BooleanParam(this, "logprobs", "add token_logprobs");
        topLogprobs = intParam("topLogprobs", "alternatives per generated token in top_logprobs", Bounds.TOP_LOGPROBS);
        maxCacheMb = intParam("maxCacheMb", "KV cache MiB one task may hold", Bounds.MEMORY_MB);
        maxBatchSeqs = intParam("maxBatchSeqs", "sequences decoded together", Bounds.BATCH_SEQUENCES);
        setDefault(messagesCol, "messages");
        setDefault(rowOverrides, false);
        setDefault(minP, 0.0);
        setDefault(repetitionPenalty, 1.0);
        setDefault(presencePenalty, 0.0);
        setDefault(frequencyPenalty, 0.0);
        setDefault(seed, 0L);
        setDefault(stop, new String[0]);
        setDefault(stopTokenIds, new int[0]);
        setDefault(ignoreEos, false);
        setDefault(n, 1);
        setDefault(logprobs, false);
        setDefault(topLogprobs, 0);
        setDefault(maxCacheMb, 2048);
        setDefault(maxBatchSeqs, 32);
    }

    public static MLReader<ScorchGenerator> read() {
        return new DefaultParamsReader<>();
    }

    public static ScorchGenerator load(String path) {
        return read().load(path);
    }

    public Param<String> messagesCol() {
        return messagesCol;
    }

    public BooleanParam rowOverrides() {
        return rowOverrides;
    }

    public IntParam maxNewTokens() {
        return maxNewTokens;
    }

    public DoubleParam temperature() {
        return temperature;
    }

    public IntParam topK() {
        return topK;
    }

    public DoubleParam topP() {
        return topP;
    }

    public DoubleParam minP() {
        return minP;
    }

    public DoubleParam repetitionPenalty() {
        return repetitionPenalty;
    }

    public DoubleParam presencePenalty() {
        return presencePenalty;
    }

    public DoubleParam frequencyPenalty() {
        return frequencyPenalty;
    }

    public LongParam seed() {
        return seed;
    }

    public StringArrayParam stop() {
        return stop;
    }

    public IntArrayParam stopTokenIds() {
        return stopTokenIds;
    }

    public BooleanParam ignoreEos() {
        return ignoreEos;
    }

    public IntParam n() {
        return n;
    }

    public BooleanParam logprobs() {
        return logprobs;
    }

    public IntParam topLogprobs() {
        return topLogprobs;
    }

    public IntParam maxCacheMb() {
        return maxCacheMb;
    }

    public IntParam maxBatchSeqs() {
        return maxBatchSeqs;
    }

    public ScorchGenerator setModelPath(String v) {
        set(modelPath(), v);
        return this;
    }

    public ScorchGenerator setWeights(String v) {
        set(weights(), v);
        return this;
    }

    public ScorchGenerator setTokenIdsCol(String v) {
        set(tokenIdsCol(), v);
        return this;
    }

    public ScorchGenerator setTextCol(String v) {
        set(textCol(), v);
        return this;
    }

    public ScorchGenerator setMessagesCol(String v) {
        set(messagesCol, v);
        return this;
    }

    public ScorchGenerator setOutputPrefix(String v) {
        set(outputPrefix(), v);
        return this;
    }

    public ScorchGenerator setRowOverrides(boolean v) {
        set(rowOverrides, v);
        return this;
    }

    public ScorchGenerator setMaxNewTokens(int v) {
        set(maxNewTokens, v);
        return this;
    }

    public ScorchGenerator setTemperature(double v) {
        set(temperature, v);
        return this;
    }

    public ScorchGenerator setTopK(int v) {
        set(topK, v);
        return this;
    }

    public ScorchGenerator setTopP(double v) {
        set(topP, v);
        return this;
    }

    public ScorchGenerator setMinP(double v) {
        set(minP, v);
        return this;
    }

    public ScorchGenerator setRepetitionPenalty(double v) {
        set(repetitionPenalty, v);
        return this;
    }

    public ScorchGenerator setPresencePenalty(double v) {
        set(presencePenalty, v);
        return this;
    }

    public ScorchGenerator setFrequencyPenalty(double v) {
        set(frequencyPenalty, v);
        return this;
    }

    public ScorchGenerator setSeed(long v) {
        set(seed, v);
        return this;
    }

    public ScorchGenerator setStop(String... v) {
        set(stop, v);
        return this;
    }

    public ScorchGenerator setStopTokenIds(int... v) {
        set(stopTokenIds, v);
        return this;
    }

    public ScorchGenerator setIgnoreEos(boolean v) {
        set(ignoreEos, v);
        return this;
    }

    public ScorchGenerator setN(int v) {
        set(n, v);
        return this;
    }

    public ScorchGenerator setLogprobs(boolean v) {
        set(logprobs, v);
        return this;
    }

    public ScorchGenerator setTopLogprobs(int v) {
        set(topLogprobs, v);
        return this;
    }

    public ScorchGenerator setMaxCacheMb(int v) {
        set(maxCacheMb, v);
        return this;
    }

    public ScorchGenerator setMaxBatchTokens(int v) {
        set(maxBatchTokens(), v);
        return this;
    }

    public ScorchGenerator setMaxBatchSeqs(int v) {
        set(maxBatchSeqs, v);
        return this;
    }

    public ScorchGenerator setThreads(int v) {
        set(threads(), v);
        return this;
    }

    public ScorchGenerator setBackend(String v) {
        set(backend(), v);
        return this;
    }

    public ScorchGenerator setGpuPrecision(String v) {
        set(gpuPrecision(), v);
        return this;
    }

    public ScorchGenerator setCpuPrecision(String v) {
        set(cpuPrecision(), v);
        return this;
    }

    /** The API's parameters these Params give (unset sampling values left to the checkpoint). */
    public GenerateParams generateParams() {
        checkBounds();
        GenerateParams p = new GenerateParams()
                .setTokenIdsCol($(tokenIdsCol()))
                .setTextCol($(textCol()))
                .setMessagesCol($(messagesCol))
                .setOutputPrefix($(outputPrefix()))
                .setRowOverrides((Boolean) getOrDefault(rowOverrides))
                .setMinP((Double) getOrDefault(minP))
                .setRepetitionPenalty((Double) getOrDefault(repetitionPenalty))
                .setPresencePenalty((Double) getOrDefault(presencePenalty))
                .setFrequencyPenalty((Double) getOrDefault(frequencyPenalty))
                .setSeed((Long) getOrDefault(seed))
                .setStop(Arrays.asList($(stop)))
                .setStopTokenIds(Arrays.stream($(stopTokenIds)).boxed().toList())
                .setIgnoreEos((Boolean) getOrDefault(ignoreEos))
                .setN($int(n))
                .setLogprobs((Boolean) getOrDefault(logprobs))
                .setTopLogprobs($int(topLogprobs))
                .setMaxCacheBytes((long) $int(maxCacheMb) << 20)
                .setMaxBatchTokens($int(maxBatchTokens()))
                .setMaxBatchSeqs($int(maxBatchSeqs))
                .setThreads($int(threads()))
                .setBackend(BackendMode.parse($(backend())))
                .setGpuPrecision(GemmPrecision.parse($(gpuPrecision())))
                .setCpuPrecision(dev.scorch.engine.kernels.CpuPrecision.option($(cpuPrecision())));
        if (isDefined(maxNewTokens)) {
            p.setMaxNewTokens($int(maxNewTokens));
        }
        if (isDefined(temperature)) {
            p.setTemperature((Double) getOrDefault(temperature));
        }
        if (isDefined(topK)) {
            p.setTopK($int(topK));
        }
        if (isDefined(topP)) {
            p.setTopP((Double) getOrDefault(topP));
        }
        return p;
    }

    @Override
    public Dataset<Row> transform(Dataset<?> dataset) {
        GenerateParams p = generateParams();
        return model(dataset.sparkSession()).generate(dataset.toDF(), p);
    }

    @Override
    public StructType transformSchema(StructType schema) {
        return ScorchModel.generateSchema(schema, generateParams());
    }
}
