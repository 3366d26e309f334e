package dev.scorch.engine.model;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.CheckpointValidator;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.kernels.RmsNorm;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.runtime.PackedBatch;
import java.nio.file.Path;

/**
 * DeepseekV3ForCausalLM (Kimi K2, DeepSeek-V3/R1): embed_tokens → num_hidden_layers decoder layers → norm →
 * lm_head, logits in fp32. Weights stay memory-mapped in their checkpoint dtype.
 */
public final class DeepseekV3Model {
  private final ModelConfig config;
  private final Linear embedTokens; // [vocab, hidden]; rows are looked up, never multiplied
  private final DecoderLayer[] layers;
  private final float[] norm; // [hidden]
  private final Linear lmHead; // [vocab, hidden]
  private final Rope rope;

  public DeepseekV3Model(ModelWeights w) {
    config = w.config();
    embedTokens = w.linear("model.embed_tokens.weight");
    layers = new DecoderLayer[config.numHiddenLayers()];
    for (int i = 0; i < layers.length; i++) {
      layers[i] = new DecoderLayer(w, i);
    }
    norm = w.vector("model.norm.weight");
    lmHead = w.linear("lm_head.weight");
    rope = new Rope(config);
  }

  /** Opens, validates (failing on the first problems, named) and builds the model in {@code dir}. */
  public static DeepseekV3Model load(Path dir) {
    ModelConfig config = ModelConfig.read(dir.resolve("config.json"));
    Checkpoint ckpt = Checkpoint.open(dir);
    CheckpointValidator.validate(config, ckpt).orThrow();
    return new DeepseekV3Model(new ModelWeights(ckpt, config));
  }

  public ModelConfig config() {
    return config;
  }

  public int vocabSize() {
    return config.vocabSize();
  }

  public int numMoeLayers() {
    int n = 0;
    for (DecoderLayer l : layers) {
      n += l.isMoe() ? 1 : 0;
    }
    return n;
  }

  /**
   * Runs the decoder over a packed batch and returns the final-normed hidden states [T, hidden].
   * routes, when not null, is [moe layer][T * top_k] and receives each token's experts.
   */
  public float[] forward(PackedBatch batch, Ops ops, int[][] routes) {
    int t = batch.numTokens();
    int hidden = config.hiddenSize();
    float[] x = new float[t * hidden]; // [T, hidden]
    for (int i = 0; i < t; i++) {
      int id = batch.tokens()[i];
      if (id < 0 || id >= config.vocabSize()) {
        throw new IllegalArgumentException("token id " + id + " is outside the vocabulary [0, " + config.vocabSize() + ")");
      }
      embedTokens.row(id, 0, hidden, x, i * hidden);
    }
    int moeIndex = 0;
    for (DecoderLayer layer : layers) {
      int[] r = null;
      if (routes != null && layer.isMoe()) {
        r = routes[moeIndex] = new int[t * config.numExpertsPerTok()];
      }
      moeIndex += layer.isMoe() ? 1 : 0;
      layer.forward(x, batch, rope, ops, r);
    }
    RmsNorm.apply(x, t, hidden, norm, config.rmsNormEps(), x);
    return x;
  }

  /** logits[rows, vocab] = lm_head(hidden rows), fp32. */
  public void logits(float[] hiddenRows, int rows, Ops ops, float[] out) {
    ops.matmul(hiddenRows, rows, lmHead, out);
  }
}
