package dev.scorch.engine.model;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.Tensor;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.QuantizationConfig;
import dev.scorch.engine.kernels.Linear;

/** Looks tensors up by their Hugging Face names in a validated checkpoint and wraps them for the kernels. */
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
    return ckpt.tensor(name);
  }

  /** A small tensor (norm weight, router bias) decoded to fp32. */
  public float[] vector(String name) {
    return ckpt.tensor(name).toFloatArray();
  }

  /** A linear weight, with its weight_scale_inv when it is FP8. */
  public Linear linear(String name) {
    Tensor w = ckpt.tensor(name);
    if (w.dtype() != DType.F8_E4M3) {
      return new Linear(w);
    }
    String scale = name + "_scale_inv";
    if (!ckpt.has(scale)) {
      throw new CheckpointException(w.info().file() + ": F8_E4M3 tensor '" + name + "' has no '" + scale + "'");
    }
    QuantizationConfig q = config.quantization();
    return new Linear(w, ckpt.tensor(scale), q == null ? 128 : q.blockRows(), q == null ? 128 : q.blockCols());
  }
}
