package dev.scorch.udfs.api;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.udfs.progress.JobMetrics;
import dev.scorch.udfs.score.ScoreOptions;
import java.util.Locale;
import java.util.Map;
import org.apache.spark.sql.SparkSession;

/**
 * What {@link ScorchModel#score} reads and computes: the input columns (a row's token ids, or its text and an optional
 * continuation whose tokens alone are scored), the result columns' prefix, the scores asked for, and how tasks batch
 * and run. Setters return this; the defaults are the score job's.
 */
public final class ScoreParams {
    private String tokenIdsCol = "token_ids";
    private String textCol = "prompt";
    private String continuationCol = "continuation";
    private String inputErrorCol;
    private String rowLabelCol;
    private String outputPrefix = "";
    private int topK;
    private LogitsMode logits = LogitsMode.NONE;
    private int maxBatchTokens = 4096;
    private int windowRows = 256;
    private int gpuBatchTokens = ScoreOptions.DEFAULT_GPU_BATCH_TOKENS;
    private long arrowMemoryBytes = 1024L << 20;
    private int threads;
    private BackendMode backend = BackendMode.AUTO;
    private GemmPrecision gpuPrecision = ScoreOptions.defaultGpuPrecision();
    private CpuPrecision cpuPrecision; // null: the executor's default
    private JobMetrics metrics;
    private int pipelineNodes;
    private boolean sharePrefixes;
    private String scoreFromCol;
    private String sharedPrefixCol;

    /**
     * The settings a map names, by the CLI's option names with '_' for '-' (as the Python module passes them):
     * token_ids_col, text_col, continuation_col, output_prefix, top_k, logits (none|last|all), max_batch_tokens,
     * window_rows, arrow_memory_mb, threads, backend (auto|cpu|cuda), gpu_precision, cpu_precision, share_prefixes, score_from_col,
     * shared_prefix_col.
     */
    public static ScoreParams fromMap(Map<String, ?> m) {
        ScoreParams p = new ScoreParams();
        for (Map.Entry<String, ?> e : m.entrySet()) {
            Object v = e.getValue();
            switch (e.getKey()) {
                case "token_ids_col" -> p.setTokenIdsCol(Values.string(e.getKey(), v));
                case "text_col" -> p.setTextCol(Values.string(e.getKey(), v));
                case "continuation_col" -> p.setContinuationCol(Values.string(e.getKey(), v));
                case "output_prefix" -> p.setOutputPrefix(Values.string(e.getKey(), v));
                case "top_k" -> p.setTopK(Values.integer(e.getKey(), v));
                case "logits" -> p.setLogits(Values.logits(Values.string(e.getKey(), v)));
                case "max_batch_tokens" -> p.setMaxBatchTokens(Values.integer(e.getKey(), v));
                case "window_rows" -> p.setWindowRows(Values.integer(e.getKey(), v));
                case "arrow_memory_mb" ->
                    p.setArrowMemoryBytes(
                            (long) Bounds.MEMORY_MB.check(e.getKey(), Values.integer(e.getKey(), v)) << 20);
                case "threads" -> p.setThreads(Values.integer(e.getKey(), v));
                case "backend" -> p.setBackend(BackendMode.parse(Values.string(e.getKey(), v)));
                case "gpu_precision" -> p.setGpuPrecision(GemmPrecision.parse(Values.string(e.getKey(), v)));
                case "cpu_precision" -> p.setCpuPrecision(CpuPrecision.option(Values.string(e.getKey(), v)));
                case "share_prefixes" -> p.setSharePrefixes(Values.bool(e.getKey(), v));
                case "score_from_col" -> p.setScoreFromCol(Values.string(e.getKey(), v));
                case "shared_prefix_col" -> p.setSharedPrefixCol(Values.string(e.getKey(), v));
                default ->
                    throw new IllegalArgumentException("score parameter '" + e.getKey() + "': unknown; expected one of"
                            + " token_ids_col, text_col, continuation_col, output_prefix, top_k, logits,"
                            + " max_batch_tokens, window_rows, arrow_memory_mb, threads, backend, gpu_precision,"
                            + " cpu_precision, share_prefixes, score_from_col, shared_prefix_col");
            }
        }
        return p;
    }

    /** Column of token ids (array of int or bigint; the first token is context only). Default token_ids. */
    public ScoreParams setTokenIdsCol(String v) {
        tokenIdsCol = Values.name("token ids column", v);
        return this;
    }

    /** Column of text, tokenised with the model's tokenizer (BOS first), for rows whose token ids are null. Default prompt. */
    public ScoreParams setTextCol(String v) {
        textCol = Values.name("text column", v);
        return this;
    }

    /** Column of a continuation of the text: when set, only its tokens are scored. Default continuation. */
    public ScoreParams setContinuationCol(String v) {
        continuationCol = Values.name("continuation column", v);
        return this;
    }

    /**
     * A string column that, where not null, makes its row an error row with that message (a problem found while
     * reading the row). Default: none.
     */
    public ScoreParams setInputErrorCol(String v) {
        inputErrorCol = v;
        return this;
    }

    /** A string column naming each row in the messages of its input errors ("... (input row LABEL)"). Default: none. */
    public ScoreParams setRowLabelCol(String v) {
        rowLabelCol = v;
        return this;
    }

    /** Put before every result column's name (to score twice with two models, or beside a column named error). */
    public ScoreParams setOutputPrefix(String v) {
        outputPrefix = v == null ? "" : v;
        return this;
    }

    /** Alternatives per scored token in top_logprobs (0: no such column). */
    public ScoreParams setTopK(int v) {
        topK = Bounds.TOP_LOGPROBS.check("top_k", v);
        return this;
    }

    /** Which positions' full logits go into a logits column (NONE: no such column). */
    public ScoreParams setLogits(LogitsMode v) {
        logits = v;
        return this;
    }

    /** Token budget of one engine batch (a GPU's free memory may lower it; the scores do not change). */
    public ScoreParams setMaxBatchTokens(int v) {
        maxBatchTokens = Bounds.BATCH_TOKENS.check("max_batch_tokens", v);
        return this;
    }

    /**
     * Tokens a CUDA task packs into one forward at least, above {@link #setMaxBatchTokens} (sized for the CPU), where
     * the GPU's free memory holds them; a task's windows then hold two such batches (the scores do not change).
     */
    public ScoreParams setGpuBatchTokens(int v) {
        gpuBatchTokens = Bounds.BATCH_TOKENS.check("gpu_batch_tokens", v);
        return this;
    }

    /** Rows a task reads, sorts by length and batches together before their results leave. */
    public ScoreParams setWindowRows(int v) {
        windowRows = Bounds.WINDOW_ROWS.check("window_rows", v);
        return this;
    }

    /** Off-heap memory one task's Arrow buffers may take. */
    public ScoreParams setArrowMemoryBytes(long v) {
        if (v < 1 || v > Bounds.MEMORY_MB.max() << 20) {
            throw new IllegalArgumentException(
                    "arrow memory " + v + " bytes: expected 1 to " + (Bounds.MEMORY_MB.max() << 20));
        }
        arrowMemoryBytes = v;
        return this;
    }

    /** Engine threads per task on the CPU (0: spark.task.cpus). */
    public ScoreParams setThreads(int v) {
        threads = Bounds.THREADS_OR_DEFAULT.check("threads", v);
        return this;
    }

    /** auto (CUDA where a task holds a GPU and CUDA loads), cpu or cuda. */
    public ScoreParams setBackend(BackendMode v) {
        backend = v;
        return this;
    }

    /** GEMM precision of tasks that run on CUDA. */
    public ScoreParams setGpuPrecision(GemmPrecision v) {
        gpuPrecision = v;
        return this;
    }

    /**
     * Prefill GEMM precision of tasks that run on the CPU: fp32, bf16x3, bf16x2 or bf16 (bf16 parts on AVX512-BF16; an
     * executor whose CPU lacks them runs fp32 and logs why); null (the default): the executor's -Dscorch.cpu.precision,
     * else fp32.
     */
    public ScoreParams setCpuPrecision(CpuPrecision v) {
        cpuPrecision = v;
        return this;
    }

    /** The CPU precision asked, or null: the executor's default. */
    public CpuPrecision cpuPrecision() {
        return cpuPrecision;
    }

    /** Accumulators the tasks add their rows, tokens, batches, errors and engine time to (null: none). */
    public ScoreParams setMetrics(JobMetrics v) {
        metrics = v;
        return this;
    }

    /**
     * Splits the model's layers over this many Spark tasks that run at once (a barrier stage, one task per node), each
     * holding a contiguous range of layers and handing hidden states to the next over TCP: for a model no one node
     * holds. 0 (the default): every task holds the whole model.
     */
    public ScoreParams setPipelineNodes(int v) {
        pipelineNodes = Bounds.PIPELINE_NODES.check("pipeline_nodes", v);
        return this;
    }

    /**
     * On the CPU, computes the leading tokens rows share (a multiple-choice question's context, a few-shot prompt) once
     * per task and extends their latent cache for each row ({@link dev.scorch.engine.scoring.PrefixSharingScorer}):
     * log-probs within 1e-4 of plain scoring, each row's the same bits whatever its batch mates. Rows are then batched
     * in token order. Off by default; tasks on a GPU score as without it.
     */
    public ScoreParams setSharePrefixes(boolean v) {
        sharePrefixes = v;
        return this;
    }

    /**
     * Column of int: in a token_ids row, the index of the first token whose log-prob counts (a continuation's start,
     * as for a prompt and continuation given as text); null or no column: 1, every token after the first. A value
     * outside [1, number of tokens] fails its row.
     */
    public ScoreParams setScoreFromCol(String v) {
        scoreFromCol = v;
        return this;
    }

    public String scoreFromCol() {
        return scoreFromCol;
    }

    /**
     * Column of int: with {@link #setSharePrefixes}, where a prefix the row's tokens share with other rows ends (a
     * few-shot prompt before a document's own text), computed once and extended for each row; null, 0 or no column:
     * the row's context (its tokens before the scored ones) is the shared unit. A value outside the row fails it.
     */
    public ScoreParams setSharedPrefixCol(String v) {
        sharedPrefixCol = v;
        return this;
    }

    public String sharedPrefixCol() {
        return sharedPrefixCol;
    }

    public boolean sharePrefixes() {
        return sharePrefixes;
    }

    public int pipelineNodes() {
        return pipelineNodes;
    }

    public String tokenIdsCol() {
        return tokenIdsCol;
    }

    public String textCol() {
        return textCol;
    }

    public String continuationCol() {
        return continuationCol;
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

    public int topK() {
        return topK;
    }

    public LogitsMode logits() {
        return logits;
    }

    public long arrowMemoryBytes() {
        return arrowMemoryBytes;
    }

    public JobMetrics metrics() {
        return metrics;
    }

    /** What the tasks run, threads resolved against the session (checks every value). */
    public ScoreOptions options(SparkSession spark) {
        return new ScoreOptions(
                maxBatchTokens,
                windowRows,
                topK,
                logits,
                Values.threads(spark, threads),
                backend,
                gpuPrecision,
                gpuBatchTokens,
                sharePrefixes,
                cpuPrecision);
    }

    @Override
    public String toString() {
        return String.format(
                Locale.ROOT,
                "ScoreParams[tokenIdsCol=%s, textCol=%s, continuationCol=%s, outputPrefix=%s, topK=%d, logits=%s,"
                        + " maxBatchTokens=%d, gpuBatchTokens=%d, windowRows=%d, threads=%d, backend=%s,"
                        + " gpuPrecision=%s, cpuPrecision=%s, pipelineNodes=%d, sharePrefixes=%s]",
                tokenIdsCol,
                textCol,
                continuationCol,
                outputPrefix,
                topK,
                logits,
                maxBatchTokens,
                gpuBatchTokens,
                windowRows,
                threads,
                backend.flag(),
                gpuPrecision,
                cpuPrecision == null ? "default" : cpuPrecision.id(),
                pipelineNodes,
                sharePrefixes);
    }
}
