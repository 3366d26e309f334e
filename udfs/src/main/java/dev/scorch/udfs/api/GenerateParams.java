package dev.scorch.udfs.api;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.config.GenerationConfig;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.udfs.generate.GenerateOptions;
import dev.scorch.udfs.progress.JobMetrics;
import dev.scorch.udfs.score.ScoreOptions;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.SparkSession;

/**
 * What {@link ScorchModel#generate} reads and how it samples: the prompt columns (token ids, else chat messages through
 * the chat template, else text), the result columns' prefix, the sampling settings, stops, samples per row, and the
 * tasks' limits. Setters return this; the defaults are the generate job's. Sampling values left unset come from the
 * checkpoint's generation_config.json (its temperature, top_k and top_p only when do_sample is true, as Hugging Face
 * reads them; else greedy), max_new_tokens from there too, else 256.
 */
public final class GenerateParams {
    private String tokenIdsCol = "token_ids";
    private String textCol = "prompt";
    private String messagesCol = "messages";
    private String inputErrorCol;
    private String rowLabelCol;
    private String outputPrefix = "";
    private boolean rowOverrides;
    private Integer maxNewTokens;
    private Double temperature;
    private Integer topK;
    private Double topP;
    private double minP;
    private double repetitionPenalty = 1;
    private double presencePenalty;
    private double frequencyPenalty;
    private long seed;
    private List<String> stop = List.of();
    private List<Integer> stopTokenIds = List.of();
    private boolean ignoreEos;
    private int n = 1;
    private boolean logprobs;
    private int topLogprobs;
    private long maxCacheBytes = 2048L << 20;
    private int maxBatchTokens = 4096;
    private int maxBatchSeqs = 32;
    private int threads;
    private BackendMode backend = BackendMode.AUTO;
    private GemmPrecision gpuPrecision = ScoreOptions.defaultGpuPrecision();
    private CpuPrecision cpuPrecision; // null: the executor's default
    private JobMetrics metrics;

    /**
     * The settings a map names, by the CLI's option names with '_' for '-' (as the Python module passes them):
     * token_ids_col, text_col, messages_col, output_prefix, row_overrides, max_new_tokens, temperature, top_k, top_p,
     * min_p, repetition_penalty, presence_penalty, frequency_penalty, seed, stop, stop_token_ids, ignore_eos, n,
     * logprobs, top_logprobs, max_cache_mb, max_batch_tokens, max_batch_seqs, threads, backend, gpu_precision, cpu_precision.
     */
    public static GenerateParams fromMap(Map<String, ?> m) {
        GenerateParams p = new GenerateParams();
        for (Map.Entry<String, ?> e : m.entrySet()) {
            String k = e.getKey();
            Object v = e.getValue();
            switch (k) {
                case "token_ids_col" -> p.setTokenIdsCol(Values.string(k, v));
                case "text_col" -> p.setTextCol(Values.string(k, v));
                case "messages_col" -> p.setMessagesCol(Values.string(k, v));
                case "output_prefix" -> p.setOutputPrefix(Values.string(k, v));
                case "row_overrides" -> p.setRowOverrides(Values.bool(k, v));
                case "max_new_tokens" -> p.setMaxNewTokens(Values.integer(k, v));
                case "temperature" -> p.setTemperature(Values.decimal(k, v));
                case "top_k" -> p.setTopK(Values.integer(k, v));
                case "top_p" -> p.setTopP(Values.decimal(k, v));
                case "min_p" -> p.setMinP(Values.decimal(k, v));
                case "repetition_penalty" -> p.setRepetitionPenalty(Values.decimal(k, v));
                case "presence_penalty" -> p.setPresencePenalty(Values.decimal(k, v));
                case "frequency_penalty" -> p.setFrequencyPenalty(Values.decimal(k, v));
                case "seed" -> p.setSeed(Values.longValue(k, v));
                case "stop" -> p.setStop(Values.strings(k, v));
                case "stop_token_ids" -> p.setStopTokenIds(Values.integers(k, v));
                case "ignore_eos" -> p.setIgnoreEos(Values.bool(k, v));
                case "n" -> p.setN(Values.integer(k, v));
                case "logprobs" -> p.setLogprobs(Values.bool(k, v));
                case "top_logprobs" -> p.setTopLogprobs(Values.integer(k, v));
                case "max_cache_mb" -> p.setMaxCacheBytes((long) Bounds.MEMORY_MB.check(k, Values.integer(k, v)) << 20);
                case "max_batch_tokens" -> p.setMaxBatchTokens(Values.integer(k, v));
                case "max_batch_seqs" -> p.setMaxBatchSeqs(Values.integer(k, v));
                case "threads" -> p.setThreads(Values.integer(k, v));
                case "backend" -> p.setBackend(BackendMode.parse(Values.string(k, v)));
                case "gpu_precision" -> p.setGpuPrecision(GemmPrecision.parse(Values.string(k, v)));
                case "cpu_precision" -> p.setCpuPrecision(CpuPrecision.option(Values.string(k, v)));
                default ->
                    throw new IllegalArgumentException("generate parameter '" + k + "': unknown; expected one of"
                            + " token_ids_col, text_col, messages_col, output_prefix, row_overrides, max_new_tokens,"
                            + " temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,"
                            + " frequency_penalty, seed, stop, stop_token_ids, ignore_eos, n, logprobs, top_logprobs,"
                            + " max_cache_mb, max_batch_tokens, max_batch_seqs, threads, backend, gpu_precision,"
                            + " cpu_precision");
            }
        }
        return p;
    }

    /** Every sampling setting at once (the engine's record: temperature 0 is greedy). */
    public GenerateParams setSampling(SamplingParams s) {
        return setTemperature(s.temperature())
                .setTopK(s.topK())
                .setTopP(s.topP())
                .setMinP(s.minP())
                .setRepetitionPenalty(s.repetitionPenalty())
                .setPresencePenalty(s.presencePenalty())
                .setFrequencyPenalty(s.frequencyPenalty())
                .setSeed(s.seed());
    }

    /** Column of prompt token ids (array of int or bigint). Default token_ids. */
    public GenerateParams setTokenIdsCol(String v) {
        tokenIdsCol = Values.name("token ids column", v);
        return this;
    }

    /** Column of prompt text, tokenised with BOS, for rows without token ids or messages. Default prompt. */
    public GenerateParams setTextCol(String v) {
        textCol = Values.name("text column", v);
        return this;
    }

    /**
     * Column of chat messages (array of struct with role and content, or its JSON text), rendered with the chat
     * template, for rows without token ids. Default messages.
     */
    public GenerateParams setMessagesCol(String v) {
        messagesCol = Values.name("messages column", v);
        return this;
    }

    /** A string column that, where not null, makes its row's samples error rows with that message. Default: none. */
    public GenerateParams setInputErrorCol(String v) {
        inputErrorCol = v;
        return this;
    }

    /** A string column naming each row in the messages of its input errors. Default: none. */
    public GenerateParams setRowLabelCol(String v) {
        rowLabelCol = v;
        return this;
    }

    /** Put before every result column's name. */
    public GenerateParams setOutputPrefix(String v) {
        outputPrefix = v == null ? "" : v;
        return this;
    }

    /**
     * Whether input columns named max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
     * presence_penalty, frequency_penalty, seed and stop (a string or an array of strings) override these settings
     * in their rows where not null, as in the generate job. Default false: a table's own columns of those names
     * are left alone.
     */
    public GenerateParams setRowOverrides(boolean v) {
        rowOverrides = v;
        return this;
    }

    public GenerateParams setMaxNewTokens(Integer v) {
        maxNewTokens = v == null ? null : Bounds.MAX_NEW_TOKENS.check("max_new_tokens", v);
        return this;
    }

    public GenerateParams setTemperature(Double v) {
        temperature = v == null ? null : Bounds.TEMPERATURE.check("temperature", v);
        return this;
    }

    public GenerateParams setTopK(Integer v) {
        topK = v == null ? null : Bounds.SAMPLING_TOP_K.check("top_k", v);
        return this;
    }

    public GenerateParams setTopP(Double v) {
        topP = v == null ? null : Bounds.TOP_P.check("top_p", v);
        return this;
    }

    public GenerateParams setMinP(double v) {
        minP = Bounds.MIN_P.check("min_p", v);
        return this;
    }

    public GenerateParams setRepetitionPenalty(double v) {
        repetitionPenalty = Bounds.REPETITION_PENALTY.check("repetition_penalty", v);
        return this;
    }

    public GenerateParams setPresencePenalty(double v) {
        presencePenalty = Bounds.OPENAI_PENALTY.check("presence_penalty", v);
        return this;
    }

    public GenerateParams setFrequencyPenalty(double v) {
        frequencyPenalty = Bounds.OPENAI_PENALTY.check("frequency_penalty", v);
        return this;
    }

    /** Seed of rows' random streams (each row and sample its own stream from it). */
    public GenerateParams setSeed(long v) {
        seed = v;
        return this;
    }

    /** Stop strings: a completion's text ends before the first. */
    public GenerateParams setStop(List<String> v) {
        stop = List.copyOf(v);
        return this;
    }

    /** Extra ids that end a completion, like EOS. */
    public GenerateParams setStopTokenIds(List<Integer> v) {
        for (Integer id : v) {
            if (id == null) {
                throw new IllegalArgumentException("stop_token_ids: null id");
            }
            Bounds.TOKEN_ID.check("stop_token_ids", id);
        }
        stopTokenIds = List.copyOf(v);
        return this;
    }

    /** Do not stop at generation_config.json's EOS ids. */
    public GenerateParams setIgnoreEos(boolean v) {
        ignoreEos = v;
        return this;
    }

    /** Completions per row: n result rows per input row, sample 0 .. n-1. */
    public GenerateParams setN(int v) {
        n = Bounds.SAMPLES.check("n", v);
        return this;
    }

    /** Add token_logprobs: log p of each generated token. */
    public GenerateParams setLogprobs(boolean v) {
        logprobs = v;
        return this;
    }

    /** Add top_logprobs with this many alternatives per generated token (0: no such column). */
    public GenerateParams setTopLogprobs(int v) {
        topLogprobs = Bounds.TOP_LOGPROBS.check("top_logprobs", v);
        return this;
    }

    /** KV cache memory one task may hold (each running sequence reserves prompt + max_new_tokens). */
    public GenerateParams setMaxCacheBytes(long v) {
        if (v < 1 || v > Bounds.MEMORY_MB.max() << 20) {
            throw new IllegalArgumentException(
                    "max cache " + v + " bytes: expected 1 to " + (Bounds.MEMORY_MB.max() << 20));
        }
        maxCacheBytes = v;
        return this;
    }

    /** Prompt tokens prefilled together. */
    public GenerateParams setMaxBatchTokens(int v) {
        maxBatchTokens = Bounds.BATCH_TOKENS.check("max_batch_tokens", v);
        return this;
    }

    /** Sequences decoded together. */
    public GenerateParams setMaxBatchSeqs(int v) {
        maxBatchSeqs = Bounds.BATCH_SEQUENCES.check("max_batch_seqs", v);
        return this;
    }

    /** Engine threads per task on the CPU (0: spark.task.cpus). */
    public GenerateParams setThreads(int v) {
        threads = Bounds.THREADS_OR_DEFAULT.check("threads", v);
        return this;
    }

    public GenerateParams setBackend(BackendMode v) {
        backend = v;
        return this;
    }

    public GenerateParams setGpuPrecision(GemmPrecision v) {
        gpuPrecision = v;
        return this;
    }

    /** As {@link ScoreParams#setCpuPrecision}: prefill GEMMs of CPU tasks; null, the default: the executor's. */
    public GenerateParams setCpuPrecision(CpuPrecision v) {
        cpuPrecision = v;
        return this;
    }

    /** The CPU precision asked, or null: the executor's default. */
    public CpuPrecision cpuPrecision() {
        return cpuPrecision;
    }

    /** Accumulators the tasks add their rows, completion tokens and errors to (null: none). */
    public GenerateParams setMetrics(JobMetrics v) {
        metrics = v;
        return this;
    }

    public String tokenIdsCol() {
        return tokenIdsCol;
    }

    public String textCol() {
        return textCol;
    }

    public String messagesCol() {
        return messagesCol;
    }

    public String inputErrorCol() {
        return inputErrorCol;
    }

    public String rowLabelCol() {
        return rowLabelCol;
    }

    public String outputPrefix() {
        return outputPrefix;
    }

    public boolean rowOverrides() {
        return rowOverrides;
    }

    public int n() {
        return n;
    }

    public boolean logprobs() {
        return logprobs;
    }

    public int topLogprobs() {
        return topLogprobs;
    }

    public JobMetrics metrics() {
        return metrics;
    }

    /** What the tasks run: these settings over the checkpoint's generation config, EOS ids as stops unless ignored. */
    public GenerateOptions options(SparkSession spark, GenerationConfig gc) {
        boolean sample = gc.doSample();
        SamplingParams sampling = new SamplingParams(
                temperature != null ? temperature : sample ? orElse(gc.temperature(), 1.0) : 0,
                topK != null ? topK : sample ? orElse(gc.topK(), 0) : 0,
                topP != null ? topP : sample ? orElse(gc.topP(), 1.0) : 1,
                minP,
                repetitionPenalty,
                presencePenalty,
                frequencyPenalty,
                seed);
        Set<Integer> stopIds = new LinkedHashSet<>(ignoreEos ? List.of() : gc.eosTokenIds());
        stopIds.addAll(stopTokenIds);
        int maxNew = maxNewTokens != null ? maxNewTokens : orElse(gc.maxNewTokens(), 256);
        return new GenerateOptions(
                sampling,
                maxNew,
                stop,
                new ArrayList<>(stopIds),
                n,
                logprobs,
                topLogprobs,
                new GenerateOptions.Limits(maxCacheBytes, maxBatchTokens, maxBatchSeqs),
                Values.threads(spark, threads),
                backend,
                gpuPrecision,
                cpuPrecision);
    }

    private static <T> T orElse(T v, T dflt) {
        return v != null ? v : dflt;
    }
}
