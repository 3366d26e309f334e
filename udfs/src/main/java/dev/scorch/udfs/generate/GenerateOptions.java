package dev.scorch.udfs.generate;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.generation.Generator;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.sampling.SamplingParams;
import java.io.Serializable;
import java.util.List;

/**
 * What the generate partition function does, shipped to executors with it. Per-row columns override the
 * sampling settings and max_new_tokens; the rest holds for the whole job.
 *
 * @param sampling     the job's sampling settings (temperature 0 = greedy) and seed
 * @param maxNewTokens the job's max_new_tokens
 * @param stopStrings  the job's stop strings (a row's own 'stop' column replaces them)
 * @param stopTokenIds ids that end a completion: EOS from generation_config.json and any given
 * @param n            completions per row
 * @param logprobs     write token_logprobs (log p of each generated token)
 * @param topLogprobs  alternatives per generated token in top_logprobs (0 = none)
 * @param limits       KV cache bytes, prefill tokens and sequences one task runs at once
 * @param threads      engine threads per task
 * @param backend      where each task runs the engine
 * @param gpuPrecision GEMM precision of tasks on CUDA
 * @param cpuPrecision prefill GEMM precision of tasks on the CPU (null: the executor's default, -Dscorch.cpu.precision
 *                     else fp32; a mode its CPU cannot run gives fp32, logged with the reason)
 */
public record GenerateOptions(
        SamplingParams sampling,
        int maxNewTokens,
        List<String> stopStrings,
        List<Integer> stopTokenIds,
        int n,
        boolean logprobs,
        int topLogprobs,
        Limits limits,
        int threads,
        BackendMode backend,
        GemmPrecision gpuPrecision,
        CpuPrecision cpuPrecision)
        implements Serializable {

    /** {@link Generator.Limits}, serializable. */
    public record Limits(long maxCacheBytes, int maxPrefillTokens, int maxSequences) implements Serializable {
        Generator.Limits engine() {
            return new Generator.Limits(maxCacheBytes, maxPrefillTokens, maxSequences);
        }
    }

    public GenerateOptions {
        if (maxNewTokens < 1 || n < 1 || topLogprobs < 0 || threads < 1) {
            throw new IllegalArgumentException("max_new_tokens, n and threads must be >= 1, top_logprobs >= 0");
        }
        dev.scorch.udfs.api.Bounds.THREADS.check("threads", threads);
        limits.engine(); // checks the limits
        stopStrings = List.copyOf(stopStrings);
        stopTokenIds = List.copyOf(stopTokenIds);
    }
}
