package dev.scorch.jobs.generate;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.jobs.JobSpec;
import dev.scorch.jobs.output.WriteMode;
import java.util.List;

/**
 * Everything one generate run needs, resolved from the command line and the job config. Sampling values left
 * null come from the checkpoint's generation_config.json (see {@link dev.scorch.udfs.api.GenerateParams}).
 *
 * @param maxCacheBytes  KV cache bytes one task may hold (running sequences reserve prompt + max_new_tokens each)
 * @param maxBatchTokens prompt tokens prefilled together
 * @param maxBatchSeqs   sequences decoded together
 * @param backend        where each task runs the engine (auto: CUDA when the task holds a GPU and CUDA loads)
 * @param gpuPrecision   GEMM precision of tasks on CUDA
 * @param cpuPrecision   GEMM precision of tasks on the CPU (prefill, and decode over BF16 weights) (null: the executors' default)
 */
public record GenerateSpec(
        String model,
        String input,
        String inputFormat,
        String output,
        String outputFormat,
        int partitions,
        String idColumn,
        String tokenIdsColumn,
        String textColumn,
        String messagesColumn,
        String weights,
        int threads,
        int slices,
        WriteMode write,
        Integer maxNewTokens,
        Double temperature,
        Integer topK,
        Double topP,
        double minP,
        double repetitionPenalty,
        double presencePenalty,
        double frequencyPenalty,
        long seed,
        List<String> stop,
        List<Integer> stopTokenIds,
        boolean ignoreEos,
        int n,
        boolean logprobs,
        int topLogprobs,
        long maxCacheBytes,
        int maxBatchTokens,
        int maxBatchSeqs,
        BackendMode backend,
        GemmPrecision gpuPrecision,
        CpuPrecision cpuPrecision)
        implements JobSpec {

    public GenerateSpec {
        stop = List.copyOf(stop);
        stopTokenIds = List.copyOf(stopTokenIds);
    }

    /** The components that change no result bits; every other one is in {@link #resultOptions}. */
    public static final java.util.Set<String> RESULT_NEUTRAL = java.util.Set.of(
            "model",
            "input",
            "output",
            "partitions",
            "weights",
            "threads",
            "slices",
            "write",
            "maxCacheBytes",
            "maxBatchTokens",
            "maxBatchSeqs");

    @Override
    public String job() {
        return "generate";
    }

    @Override
    public java.util.Map<String, String> resultOptions() {
        java.util.Map<String, String> o = new java.util.LinkedHashMap<>();
        o.put("input-format", resolvedInputFormat());
        o.put("output-format", outputFormat);
        o.put("id-column", idColumn);
        o.put("token-ids-column", tokenIdsColumn);
        o.put("text-column", textColumn);
        o.put("messages-column", messagesColumn);
        o.put("max-new-tokens", String.valueOf(maxNewTokens));
        o.put("temperature", String.valueOf(temperature));
        o.put("top-k", String.valueOf(topK));
        o.put("top-p", String.valueOf(topP));
        o.put("min-p", String.valueOf(minP));
        o.put("repetition-penalty", String.valueOf(repetitionPenalty));
        o.put("presence-penalty", String.valueOf(presencePenalty));
        o.put("frequency-penalty", String.valueOf(frequencyPenalty));
        o.put("seed", String.valueOf(seed));
        o.put("stop", String.valueOf(stop));
        o.put("stop-token-ids", String.valueOf(stopTokenIds));
        o.put("ignore-eos", String.valueOf(ignoreEos));
        o.put("n", String.valueOf(n));
        o.put("logprobs", String.valueOf(logprobs));
        o.put("top-logprobs", String.valueOf(topLogprobs));
        o.put("backend", String.valueOf(backend));
        o.put("gpu-precision", String.valueOf(gpuPrecision));
        o.put("cpu-precision", JobSpec.cpuPrecision(cpuPrecision));
        return o;
    }
}
