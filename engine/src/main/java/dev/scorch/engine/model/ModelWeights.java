package dev.scorch.engine.model;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.Tensor;
import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.QuantizationConfig;
import dev.scorch.engine.kernels.Linear;

/**
 * Looks tensors up by their Hugging Face DeepSeek-V3 names in a validated checkpoint (under a K2.5 wrapper's
 * {@code language_model.} prefix where it has one) and wraps them for the kernels.
 */
public final class ModelWeights {
    private final Checkpoint ckpt;
    private final ModelConfig config;

    public ModelWeights(Checkpoint ckpt, ModelConfig config) {
        this.ckpt = ckpt;
        this.config = config;
    }

    /** The checkpoint folder dir's tensors under its config.json (not validated: {@code DeepseekV3Model.load} does that). */
    public static ModelWeights open(java.nio.file.Path dir) {
        return new ModelWeights(Checkpoint.open(dir), ModelConfig.read(dir.resolve("config.json")));
    }

    public ModelConfig config() {
        return config;
    }

    public Checkpoint checkpoint() {
        return ckpt;
    }

    public Tensor tensor(String name) {
        return ckpt.tensor(config.checkpointName(name));
    }

    /** A small tensor (norm weight, router bias) decoded to fp32. */
    public float[] vector(String name) {
        return tensor(name).toFloatArray();
    }

    /**
     * A linear weight [out, in]: plain; F8_E4M3 with its block scales (DeepSeek's weight_scale_inv, compressed-tensors'
     * weight_scale); or compressed-tensors' INT4 triple (X.weight_packed, X.weight_scale, X.weight_shape) where config.json
     * declares pack-quantized groups and the checkpoint stores X that way.
     */
    public Linear linear(String name) {
        String file = config.checkpointName(name);
        QuantizationConfig q = config.quantization();
        if (config.isInt4() && !ckpt.has(file) && ckpt.has(file + WeightLayout.PACKED)) {
            return int4(file, q.groupSize());
        }
        Tensor w = ckpt.tensor(file);
        if (w.dtype() != DType.F8_E4M3) {
            return new Linear(w);
        }
        String scale = file + (q == null ? "_scale_inv" : q.fp8ScaleSuffix());
        if (!ckpt.has(scale)) {
            throw new CheckpointException(w.info().file() + ": F8_E4M3 tensor '" + file + "' has no '" + scale + "'");
        }
        return new Linear(w, ckpt.tensor(scale), q == null ? 128 : q.blockRows(), q == null ? 128 : q.blockCols());
    }

    private Linear int4(String file, int groupSize) {
        Tensor packed = ckpt.tensor(file + WeightLayout.PACKED);
        Tensor shapeTensor = ckpt.tensor(file + WeightLayout.SHAPE);
        long[] shape = shapeTensor.toLongArray();
        if (shape.length != 2
                || shape[0] < 1
                || shape[1] < 1
                || shape[0] > Integer.MAX_VALUE
                || shape[1] > Integer.MAX_VALUE) {
            throw new CheckpointException(shapeTensor.info().file() + ": tensor '" + shapeTensor.name() + "' says "
                    + java.util.Arrays.toString(shape) + ", not a weight's [out, in]");
        }
        try {
            return Linear.int4(
                    file, packed, ckpt.tensor(file + WeightLayout.SCALE), (int) shape[0], (int) shape[1], groupSize);
        } catch (IllegalArgumentException e) {
            throw new CheckpointException(packed.info().file() + ": INT4 weight '" + file + "': " + e.getMessage(), e);
        }
    }
}
