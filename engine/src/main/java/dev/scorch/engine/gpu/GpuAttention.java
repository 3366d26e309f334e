package dev.scorch.engine.gpu;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.runtime.PackedBatch;

/**
 * Multi-head latent attention (DeepseekV3Attention) on a device, in the prefill form: kv_b_proj expands the latent
 * of every key (the batch's own tokens, or a sequence's whole cache once its new tokens are appended).
 */
final class GpuAttention {
    private final int layer;
    private final int hidden;
    private final int heads;
    private final int qkNope;
    private final int qkRope;
    private final int vHead;
    private final int kvLora;
    private final float softmaxScale;
    // q_a_proj (or q_proj when q_lora_rank is null) and kv_a_proj_with_mqa stacked, [qOut + kv_lora_rank + qk_rope,
    // hidden]
    private final Buf qkvAProj;
    private final int qOut;
    private final Buf qALayernorm; // [q_lora_rank]; null without q_lora_rank
    private final Buf qBProj; // [heads * q_head_dim, q_lora_rank]; null without q_lora_rank
    private final Buf kvALayernorm; // [kv_lora_rank]
    private final Buf kvBProj; // [heads * (qk_nope + v_head), kv_lora_rank]
    private final Buf oProj; // [hidden, heads * v_head]

    GpuAttention(DeviceWeights w, ModelConfig c, String prefix, int layer) {
        this.layer = layer;
        hidden = c.hiddenSize();
        heads = c.numAttentionHeads();
        qkNope = c.qkNopeHeadDim();
        qkRope = c.qkRopeHeadDim();
        vHead = c.vHeadDim();
        kvLora = c.kvLoraRank();
        softmaxScale = Rope.softmaxScale(c);
        if (c.hasQLora()) {
            qkvAProj = w.stacked(prefix + "q_a_proj.weight", prefix + "kv_a_proj_with_mqa.weight");
            qOut = c.qLoraRank();
            qALayernorm = w.vector(prefix + "q_a_layernorm.weight");
            qBProj = w.linear(prefix + "q_b_proj.weight");
        } else {
            qkvAProj = w.stacked(prefix + "q_proj.weight", prefix + "kv_a_proj_with_mqa.weight");
            qOut = heads * c.qHeadDim();
            qALayernorm = null;
            qBProj = null;
        }
        kvALayernorm = w.vector(prefix + "kv_a_layernorm.weight");
        kvBProj = w.linear(prefix + "kv_b_proj.weight");
        oProj = w.linear(prefix + "o_proj.weight");
    }

    /** Multi-head latent attention of h [T, hidden] → [T, hidden]. */
    Buf forward(GpuPass p, Buf h, AttentionBatch b, GpuKvCache[] caches, Buf cosSin) {
        Device dev = p.dev();
        int t = b.packed().numTokens();
        int qHead = qkNope + qkRope;
        float loraEps = (float) ModelConfig.LORA_NORM_EPS;
        // One GEMM for both low-rank projections: qkvA [T, qOut + kv_lora_rank + qk_rope] = [q_a | latent | k_pe]
        int kvAWidth = kvLora + qkRope;
        int width = qOut + kvAWidth;
        Buf qkvA = p.floats().take((long) t * width);
        dev.gemm(h, t, hidden, qkvAProj, width, qkvA, p.precision());
        // q = q_b_proj(q_a_layernorm(q_a)) or q_proj(h): [T, heads, q_head_dim] = [q_nope | q_pe]
        Buf q = p.floats().take((long) t * heads * qHead);
        if (qBProj != null) {
            int qLora = qOut;
            Buf qA = p.floats().take((long) t * qLora);
            dev.rmsNorm(qkvA, t, width, 0, qLora, qALayernorm, loraEps, qA);
            dev.gemm(qA, t, qLora, qBProj, heads * qHead, q, p.precision());
        } else {
            dev.copyCols(qkvA, t, width, 0, heads * qHead, q, heads * qHead, 0);
        }
        // Only the latent is normed: latent [T, kv_lora_rank]; k_pe [T, qk_rope] is one rotary key head shared by all
        // heads.
        Buf latent = p.floats().take((long) t * kvLora);
        dev.rmsNorm(qkvA, t, width, qOut, kvLora, kvALayernorm, loraEps, latent);
        Buf kPe = p.floats().take((long) t * qkRope);
        dev.copyCols(qkvA, t, width, qOut + kvLora, qkRope, kPe, qkRope, 0);
        // RoPE on q_pe of every head and on k_pe, at each token's position.
        dev.rope(q, t, heads, heads * qHead, qHead, qkNope, qkRope, b.positions(), cosSin);
        dev.rope(kPe, t, 1, qkRope, 0, 0, qkRope, b.positions(), cosSin);
        // Keys: this batch's tokens, or each sequence's whole cache once the new tokens are appended to it.
        Buf keyLatent = latent;
        Buf keyPe = kPe;
        if (caches != null) {
            keyLatent = p.floats().take((long) b.keys() * kvLora);
            keyPe = p.floats().take((long) b.keys() * qkRope);
            PackedBatch pb = b.packed();
            for (int s = 0; s < caches.length; s++) {
                GpuKvCache c = caches[s];
                int w = c.width();
                int past = c.length();
                int len = pb.seqLen()[s];
                Buf rows = c.layer(layer);
                Buf fresh = rows.slice((long) past * w, (long) len * w);
                dev.copyCols(
                        latent.slice((long) pb.seqStart()[s] * kvLora, (long) len * kvLora),
                        len,
                        kvLora,
                        0,
                        kvLora,
                        fresh,
                        w,
                        0);
                dev.copyCols(
                        kPe.slice((long) pb.seqStart()[s] * qkRope, (long) len * qkRope),
                        len,
                        qkRope,
                        0,
                        qkRope,
                        fresh,
                        w,
                        kvLora);
                int all = past + len;
                dev.copyCols(
                        rows,
                        all,
                        w,
                        0,
                        kvLora,
                        keyLatent.slice((long) b.keyOffset()[s] * kvLora, (long) all * kvLora),
                        kvLora,
                        0);
                dev.copyCols(
                        rows,
                        all,
                        w,
                        kvLora,
                        qkRope,
                        keyPe.slice((long) b.keyOffset()[s] * qkRope, (long) all * qkRope),
                        qkRope,
                        0);
            }
        }
        // kv = kv_b_proj(latent of every key): [keys, heads, qk_nope + v_head] = [k_nope | v]
        Buf kv = p.floats().take((long) b.keys() * heads * (qkNope + vHead));
        dev.gemm(keyLatent, b.keys(), kvLora, kvBProj, heads * (qkNope + vHead), kv, p.precision());
        Buf attn = p.floats().take((long) t * heads * vHead); // [T, heads, v_head]
        dev.mlaAttention(
                q,
                kv,
                keyPe,
                b.keyStart(),
                b.keyLen(),
                b.tiles(),
                b.numTiles(),
                t,
                heads,
                qkNope,
                qkRope,
                vHead,
                softmaxScale,
                attn);
        Buf out = p.floats().take((long) t * hidden);
        dev.gemm(attn, t, heads * vHead, oProj, hidden, out, p.precision());
        return out;
    }
}
