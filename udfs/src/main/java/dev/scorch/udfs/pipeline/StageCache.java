package dev.scorch.udfs.pipeline;

import dev.scorch.engine.backend.BackendChoice;
import dev.scorch.engine.gpu.Device;
import dev.scorch.engine.gpu.GemmPrecision;
import dev.scorch.engine.gpu.GpuStage;
import dev.scorch.engine.gpu.HostDevice;
import dev.scorch.engine.gpu.StageScorer;
import dev.scorch.engine.gpu.cuda.CudaDevice;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.udfs.model.LoadedModel;
import dev.scorch.udfs.model.ModelSource;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One loaded pipeline stage per executor JVM, checkpoint, layer range, device and precision, shared by the tasks
 * that run that stage there (a retried barrier stage reuses it). A stage runs on the task's GPU when it holds one and
 * CUDA loads, else on a {@link HostDevice}, the plain-Java twin of the CUDA kernels: slow, but the same model code and
 * rounding, which is what the CPU tests of the pipeline check.
 */
final class StageCache {
    private static final Map<Key, GpuStageEngine> STAGES = new ConcurrentHashMap<>();

    private record Key(String contentHash, int first, int end, int ordinal, GemmPrecision precision) {}

    private StageCache() {}

    static StageEngine stage(
            ModelSource source, LoadedModel loaded, int first, int end, BackendChoice choice, GemmPrecision precision) {
        Key key = new Key(source.manifest().contentHash(), first, end, choice.gpuOrdinal(), precision);
        return STAGES.computeIfAbsent(key, k -> {
            Device dev = choice.cuda() ? new CudaDevice(choice.gpuOrdinal()) : new HostDevice();
            try {
                return new GpuStageEngine(
                        GpuStage.load(ModelWeights.open(loaded.folder()), dev, precision, first, end));
            } catch (RuntimeException | Error e) {
                dev.close();
                throw e;
            }
        });
    }

    /** A {@link GpuStage} as a pipeline stage; the last scores with a {@link StageScorer}. */
    private record GpuStageEngine(GpuStage stage, StageScorer scorer) implements StageEngine {
        GpuStageEngine(GpuStage stage) {
            this(stage, stage.isLast() ? new StageScorer(stage) : null);
        }

        @Override
        public int first() {
            return stage.first();
        }

        @Override
        public int end() {
            return stage.end();
        }

        @Override
        public float[] forward(PackedBatch batch, float[] in) {
            return stage.forward(batch, null, in);
        }

        @Override
        public void score(List<ScoreRequest> requests, PackedBatch batch, float[] in, BatchScores out) {
            scorer.score(requests, batch, in, out);
        }
    }
}
