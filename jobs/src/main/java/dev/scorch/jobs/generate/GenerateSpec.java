package dev.scorch.jobs.generate;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
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
        GemmPrecision gpuPrecision)
        implements JobSpec {

    public GenerateSpec {
        stop = List.copyOf(stop);
        stopTokenIds = List.copyOf(stopTokenIds);
    }

    @Override
    public String job() {
        return "generate";
    }
}
