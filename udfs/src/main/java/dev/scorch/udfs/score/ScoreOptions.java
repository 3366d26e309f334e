package dev.scorch.udfs.score;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.scoring.LogitsMode;
import java.io.Serializable;

/**
 * What the score partition function computes, shipped to executors with it.
 *
 * @param maxBatchTokens token budget of one engine batch (on a GPU, capped by what its free memory holds)
 * @param windowRows     rows read, sorted by length and batched together before their results are emitted
 * @param topK           alternatives per token (0 for none)
 * @param logits         which logits to return
 * @param threads        engine threads per task (CPU backend)
 * @param backend        which backend each task picks ({@link dev.scorch.engine.backend.BackendChoice#choose})
 * @param gpuPrecision   GEMM precision of the GPU model, when a task runs on CUDA
 * @param cpuPrecision   prefill GEMM precision of tasks on the CPU (null: the executor's default,
 *                       -Dscorch.cpu.precision else fp32; a mode its CPU cannot run gives fp32, logged with the reason)
 * @param gpuBatchTokens tokens a CUDA task packs into one forward at least, where its memory budget holds them
 *                       (above maxBatchTokens, which is sized for the CPU): a forward of a few thousand tokens leaves
 *                       a large GPU idle, and a MoE layer's experts get tokens x top_k / n_routed_experts rows each
 */
public record ScoreOptions(
        int maxBatchTokens,
        int windowRows,
        int topK,
        LogitsMode logits,
        int threads,
        BackendMode backend,
        GemmPrecision gpuPrecision,
        int gpuBatchTokens,
        boolean sharePrefixes,
        CpuPrecision cpuPrecision)
        implements Serializable {

    /** The GPU precision when none is given, as {@link GemmPrecision#parse} reads it (the CLI's default too). */
    public static final String DEFAULT_GPU_PRECISION = "bf16x3";

    /**
     * The default {@link #gpuBatchTokens}: 16,384 tokens give each of Kimi K2's 384 experts about 341 rows a forward
     * (16,384 x 8 / 384), against 85 at the CPU's 4,096. A starting point from the shapes, not a measured optimum.
     */
    public static final int DEFAULT_GPU_BATCH_TOKENS = 16384;

    public ScoreOptions {
        if (maxBatchTokens < 1 || windowRows < 1 || topK < 0 || threads < 1 || gpuBatchTokens < 1) {
            throw new IllegalArgumentException(
                    "max batch tokens, GPU batch tokens, window rows and threads must be >= 1, top-k >= 0");
        }
        dev.scorch.udfs.api.Bounds.THREADS.check("threads", threads);
        if (backend == null || gpuPrecision == null) {
            throw new IllegalArgumentException("backend and GPU precision must be given");
        }
    }

    /** As the canonical constructor, without shared prefixes. */
    public ScoreOptions(
            int maxBatchTokens,
            int windowRows,
            int topK,
            LogitsMode logits,
            int threads,
            BackendMode backend,
            GemmPrecision gpuPrecision,
            int gpuBatchTokens) {
        this(maxBatchTokens, windowRows, topK, logits, threads, backend, gpuPrecision, gpuBatchTokens, false, null);
    }

    /** As the canonical constructor, with {@link #DEFAULT_GPU_BATCH_TOKENS}, without shared prefixes. */
    public ScoreOptions(
            int maxBatchTokens,
            int windowRows,
            int topK,
            LogitsMode logits,
            int threads,
            BackendMode backend,
            GemmPrecision gpuPrecision) {
        this(maxBatchTokens, windowRows, topK, logits, threads, backend, gpuPrecision, DEFAULT_GPU_BATCH_TOKENS);
    }

    /** The backend picked per task ({@link BackendMode#AUTO}), GPUs in the default precision. */
    public ScoreOptions(int maxBatchTokens, int windowRows, int topK, LogitsMode logits, int threads) {
        this(maxBatchTokens, windowRows, topK, logits, threads, BackendMode.AUTO, defaultGpuPrecision());
    }

    public static GemmPrecision defaultGpuPrecision() {
        return GemmPrecision.parse(DEFAULT_GPU_PRECISION);
    }
}
