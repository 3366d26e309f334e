package dev.scorch.engine.model;

import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import java.util.List;

/**
 * DeepseekV3ForCausalLM on one {@link Device}: the {@link DecoderStage} of all the layers (embed_tokens through
 * lm_head), and the device it owns.
 *
 * <p>One forward runs at a time per model (the device has one stream and one scratch arena): callers on
 * several threads (Spark tasks sharing an executor's GPU) take turns, on this object's lock.
 */
public final class GpuModel implements GpuStages, AutoCloseable {
    private final DecoderStage stage;

    private GpuModel(DecoderStage stage) {
        this.stage = stage;
    }

    /** Uploads the model's weights to dev. */
    public static GpuModel load(ModelWeights w, Device dev, GemmPrecision precision) {
        return new GpuModel(DecoderStage.load(w, dev, precision, 0, w.config().numHiddenLayers()));
    }

    /** The one stage, of every layer. */
    public DecoderStage stage() {
        return stage;
    }

    @Override
    public List<DecoderStage> stages() {
        return List.of(stage);
    }

    @Override
    public synchronized void run(List<Micro> micro, Finish finish) {
        GpuStages.runInOrder(List.of(stage), micro, finish);
    }

    public Device device() {
        return stage.device();
    }

    /** Frees the weights and scratch, then closes the device. */
    @Override
    public synchronized void close() {
        try {
            stage.close();
        } finally {
            stage.device().close();
        }
    }
}
