package dev.scorch.jobs.score;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
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
        int pipelineNodes)
        implements JobSpec {

    @Override
    public String job() {
        return "score";
    }
}
