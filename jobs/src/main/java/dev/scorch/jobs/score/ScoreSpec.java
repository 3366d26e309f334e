package dev.scorch.jobs.score;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.jobs.JobSpec;
import dev.scorch.jobs.output.WriteMode;

/**
 * Everything one score run needs, resolved from the command line and the job config.
 *
 * @param backend      where each task runs the engine (auto: CUDA when the task holds a GPU and CUDA loads)
 * @param gpuPrecision GEMM precision of tasks that run on CUDA
 * @param gpuBatchTokens tokens a CUDA task packs into one forward at least, where its memory budget holds them
 * @param pipelineNodes the model's layers split over this many tasks of a barrier stage, one per node (0: none)
 * @param cpuPrecision GEMM precision of tasks on the CPU (prefill, and decode over BF16 weights) (null: the executors' default)
 */
public record ScoreSpec(
        String model,
        String input,
        String inputFormat,
        String output,
        String outputFormat,
        int partitions,
        int maxBatchTokens,
        int windowRows,
        long arrowMemoryBytes,
        int topK,
        LogitsMode logits,
        String idColumn,
        String tokenIdsColumn,
        String textColumn,
        String continuationColumn,
        String weights,
        int threads,
        int slices,
        WriteMode write,
        BackendMode backend,
        GemmPrecision gpuPrecision,
        int gpuBatchTokens,
        int pipelineNodes,
        CpuPrecision cpuPrecision)
        implements JobSpec {

    /** The components that change no result bits; every other one is in {@link #resultOptions}. */
    public static final java.util.Set<String> RESULT_NEUTRAL = java.util.Set.of(
            "model",
            "input",
            "output",
            "partitions",
            "maxBatchTokens",
            "windowRows",
            "arrowMemoryBytes",
            "weights",
            "threads",
            "slices",
            "write",
            "gpuBatchTokens",
            "pipelineNodes");

    @Override
    public String job() {
        return "score";
    }

    @Override
    public java.util.Map<String, String> resultOptions() {
        java.util.Map<String, String> o = new java.util.LinkedHashMap<>();
        o.put("input-format", resolvedInputFormat());
        o.put("output-format", outputFormat);
        o.put("top-k", String.valueOf(topK));
        o.put("logits", String.valueOf(logits));
        o.put("id-column", idColumn);
        o.put("token-ids-column", tokenIdsColumn);
        o.put("text-column", textColumn);
        o.put("continuation-column", continuationColumn);
        o.put("backend", String.valueOf(backend));
        o.put("gpu-precision", String.valueOf(gpuPrecision));
        o.put("cpu-precision", JobSpec.cpuPrecision(cpuPrecision));
        return o;
    }
}
