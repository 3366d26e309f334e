package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.MlaInputs;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.kernels.RmsNorm;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.runtime.PackedBatch;

/** Multi-head latent attention (DeepseekV3Attention), prefill form: kv_b_proj expands the latent per head. */
final class MlaAttention {
  private final int heads;
  private final int qLoraRank; // 0 when q_lora_rank is null (plain q_proj)
  private final int kvLoraRank;
  private final int qkNope;
  private final int qkRope;
  private final int vHead;
  private final int qHead;
  private final float softmaxScale;

  private final Linear qAProj; // [q_lora_rank, hidden]
  private final float[] qALayernorm; // [q_lora_rank]
  private final Linear qBProj; // [heads * q_head_dim, q_lora_rank]
  private final Linear qProj; // [heads * q_head_dim, hidden] when q_lora_rank is null
  private final Linear kvAProjWithMqa; // [kv_lora_rank + qk_rope_head_dim, hidden]
  private final float[] kvALayernorm; // [kv_lora_rank]
  private final Linear kvBProj; // [heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank]
  private final Linear oProj; // [hidden, heads * v_head_dim]

  MlaAttention(ModelWeights w, int layer) {
    ModelConfig c = w.config();
    String p = WeightLayout.layer(layer) + "self_attn.";
    heads = c.numAttentionHeads();
    kvLoraRank = c.kvLoraRank();
    qkNope = c.qkNopeHeadDim();
    qkRope = c.qkRopeHeadDim();
    vHead = c.vHeadDim();
    qHead = c.qHeadDim();
    softmaxScale = Rope.softmaxScale(c);
    if (c.hasQLora()) {
      qLoraRank = c.qLoraRank();
      qAProj = w.linear(p + "q_a_proj.weight");
      qALayernorm = w.vector(p + "q_a_layernorm.weight");
      qBProj = w.linear(p + "q_b_proj.weight");
      qProj = null;
    } else {
      qLoraRank = 0;
      qAProj = null;
      qALayernorm = null;
      qBProj = null;
      qProj = w.linear(p + "q_proj.weight");
    }
    kvAProjWithMqa = w.linear(p + "kv_a_proj_with_mqa.weight");
    kvALayernorm = w.vector(p + "kv_a_layernorm.weight");
    kvBProj = w.linear(p + "kv_b_proj.weight");
    oProj = w.linear(p + "o_proj.weight");
  }

  /** x: [T, hidden] (already input-normed) → [T, hidden]. */
  float[] forward(float[] x, PackedBatch batch, Rope rope, Ops ops) {
    int t = batch.numTokens();
    // Queries: q_a_proj → q_a_layernorm → q_b_proj (or q_proj): [T, heads, q_head_dim] = [q_nope | q_pe]
    float[] q = new float[t * heads * qHead];
    if (qLoraRank > 0) {
      float[] qA = new float[t * qLoraRank];
      ops.matmul(x, t, qAProj, qA);
      RmsNorm.apply(qA, t, qLoraRank, qALayernorm, ModelConfig.LORA_NORM_EPS, qA);
      ops.matmul(qA, t, qBProj, q);
    } else {
      ops.matmul(x, t, qProj, q);
    }
    // Joint compressed kv: [T, kv_lora_rank + qk_rope] = [latent | k_pe]; only the latent is normed.
    int kvAWidth = kvLoraRank + qkRope;
    float[] kvA = new float[t * kvAWidth];
    ops.matmul(x, t, kvAProjWithMqa, kvA);
    float[] latent = new float[t * kvLoraRank]; // [T, kv_lora_rank]
    RmsNorm.apply(kvA, t, kvAWidth, 0, kvLoraRank, kvALayernorm, ModelConfig.LORA_NORM_EPS, latent);
    float[] kPe = new float[t * qkRope]; // [T, qk_rope]: one rotary key head shared by all heads
    for (int i = 0; i < t; i++) {
      System.arraycopy(kvA, i * kvAWidth + kvLoraRank, kPe, i * qkRope, qkRope);
    }
    float[] kv = new float[t * heads * (qkNope + vHead)]; // [T, heads, qk_nope + v_head] = [k_nope | v]
    ops.matmul(latent, t, kvBProj, kv);
    // RoPE on q_pe (every head) and k_pe at each token's position.
    float[] cs = new float[qkRope];
    for (int i = 0; i < t; i++) {
      rope.cosSin(batch.positions()[i], cs);
      for (int h = 0; h < heads; h++) {
        rope.rotate(q, (i * heads + h) * qHead + qkNope, cs);
      }
      rope.rotate(kPe, i * qkRope, cs);
    }
    float[] attn = new float[t * heads * vHead]; // [T, heads, v_head]
    ops.attention(new MlaInputs(q, kv, kPe, heads, qkNope, qkRope, vHead, batch.seqStart(), batch.seqLen(), softmaxScale), attn);
    float[] out = new float[t * oProj.out()];
    ops.matmul(attn, t, oProj, out);
    return out;
  }
}
