package dev.scorch.udfs.pipeline;

import dev.scorch.engine.backend.BackendChoice;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.model.DecoderStage;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.model.GpuStages;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.udfs.model.LoadedModel;
import dev.scorch.udfs.model.ModelSource;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One loaded pipeline stage per executor JVM, checkpoint, layer range, devices and precision, shared by the tasks
 * that run that stage there (a retried barrier stage reuses it). A stage runs on the task's GPUs when it holds them and
 * CUDA loads (its layers split over all of them: a node's GPUs), else on the CPU device (the executor's CPU kernels,
 * its engine threads shared with its other tasks), the same model code.
 */
final class StageCache {
    private static final Map<Key, DeviceChain> STAGES = new ConcurrentHashMap<>();

    private static final Map<Integer, Long> GPU_BYTES = new ConcurrentHashMap<>();

    private record Key(
            String contentHash,
            int first,
            List<Integer> perDevice,
            List<Integer> ordinals,
            boolean cuda,
            GemmPrecision p,
            dev.scorch.engine.kernels.CpuPrecision cpu) {}

    private StageCache() {}

    /**
     * The stage of layers [first, first + sum(perDevice)) on the task's devices: device d (one CUDA device per ordinal,
     * a node's GPUs, which the task owns; or a CPU device each where CUDA is not used) holding the next perDevice[d]
     * layers, a device of none left out.
     */
    static StageEngine stage(
            ModelSource source,
            LoadedModel loaded,
            int first,
            int[] perDevice,
            List<Integer> ordinals,
            boolean cuda,
            GemmPrecision precision,
            dev.scorch.engine.kernels.CpuPrecision cpuPrecision,
            int threads) {
        if (perDevice.length != ordinals.size()) {
            throw new IllegalArgumentException(
                    "a split over " + perDevice.length + " devices for the task's " + ordinals.size());
        }
        Key key = new Key(
                source.manifest().contentHash(),
                first,
                Arrays.stream(perDevice).boxed().toList(),
                List.copyOf(ordinals),
                cuda,
                precision,
                cuda ? null : cpuPrecision);
        return STAGES.computeIfAbsent(key, k -> {
            ModelWeights w = ModelWeights.open(loaded.folder());
            List<DecoderStage> stages = new ArrayList<>();
            try {
                for (int d = 0, at = first; d < perDevice.length; at += perDevice[d++]) {
                    if (perDevice[d] == 0) {
                        continue;
                    }
                    Device dev = cuda
                            ? BackendChoice.cudaDevice(ordinals.get(d))
                            : BackendChoice.cpuDevice(threads, cpuPrecision);
                    try {
                        stages.add(DecoderStage.load(w, dev, precision, at, at + perDevice[d]));
                    } catch (RuntimeException | Error e) {
                        dev.close();
                        throw e;
                    }
                }
                return new DeviceChain(stages);
            } catch (RuntimeException | Error e) {
                for (DecoderStage st : stages) {
                    st.close();
                    st.device().close();
                }
                throw e;
            }
        });
    }

    /**
     * The smallest total memory of the GPUs of these ordinals, read once per ordinal and JVM (a device opened and
     * closed before the stage loads: the pipeline's split needs every stage's before any loads).
     */
    static long gpuBytes(List<Integer> ordinals) {
        long smallest = Long.MAX_VALUE;
        for (int o : ordinals) {
            smallest = Math.min(smallest, GPU_BYTES.computeIfAbsent(o, k -> {
                try (Device d = BackendChoice.cudaDevice(k)) {
                    return d.totalBytes();
                }
            }));
        }
        return smallest;
    }

    /**
     * A node's stage as {@link DecoderStage}s on its devices, run as a {@link GpuPipeline}: a batch cut into
     * micro-batches of whole sequences that flow through the devices at once, hidden states handed device to device;
     * every sequence gets one device's bits. The last node scores through {@link Scorer}.
     */
    record DeviceChain(GpuPipeline pipeline) implements StageEngine {
        DeviceChain(List<DecoderStage> stages) {
            this(GpuPipeline.of(stages));
        }

        List<DecoderStage> stages() {
            return pipeline.stages();
        }

        @Override
        public int first() {
            return stages().get(0).first();
        }

        @Override
        public int end() {
            return stages().get(stages().size() - 1).end();
        }

        @Override
        public float[] forward(PackedBatch batch, float[] in) {
            int n = batch.numSequences();
            if (n == 0) {
                return new float[0];
            }
            int[] cut = GpuStages.cuts(batch.seqLen(), pipeline.microBatches(n));
            List<GpuStages.Micro> micro = new ArrayList<>();
            for (int p = 0; p + 1 < cut.length; p++) {
                List<int[]> seqs = new ArrayList<>();
                for (int s = cut[p]; s < cut[p + 1]; s++) {
                    int at = batch.seqStart()[s];
                    seqs.add(Arrays.copyOfRange(batch.tokens(), at, at + batch.seqLen()[s]));
                }
                micro.add(new GpuStages.Micro(PackedBatch.of(seqs), null, null));
            }
            float[] out = new float[batch.numTokens() * pipeline.config().hiddenSize()];
            int[] at = {0};
            pipeline.fedFrom(in).run(micro, (p, last, pass, h) -> {
                float[] part = last.read(h); // [T of micro-batch p, hidden]
                System.arraycopy(part, 0, out, at[0], part.length);
                at[0] += part.length;
            });
            return out;
        }

        @Override
        public void score(List<ScoreRequest> requests, PackedBatch batch, float[] in, BatchScores out) {
            new Scorer(pipeline.fedFrom(in)).score(requests, out);
        }
    }
}
