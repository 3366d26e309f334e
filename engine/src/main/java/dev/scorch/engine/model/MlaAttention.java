package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.device.MlaShape;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.Arrays;

/**
 * Multi-head latent attention (DeepseekV3Attention) on a device: a sequence without
 * cached tokens (scoring, a prompt into an empty cache) attends in the prefill form, kv_b_proj expanding the latents
 * of its own tokens; one with cached tokens (a decode step) in the absorbed form over its latent cache
 * ({@link Device#mlaDecode}), so a step's cost grows with the cache only through the attention itself.
 */
final class MlaAttention {
    private final int layer;
    private final int hidden;
    private final MlaShape shape;
    // q_a_proj (or q_proj when q_lora_rank is null) and kv_a_proj_with_mqa stacked, [q_out + kv_lora_rank + qk_rope,
    // hidden] (MlaShape.qOut)
    private final Buf qkvAProj;
    private final Buf qALayernorm; // [q_lora_rank]; null without q_lora_rank
    private final Buf qBProj; // [heads * q_head_dim, q_lora_rank]; null without q_lora_rank
    private final Buf kvALayernorm; // [kv_lora_rank]
    private final Buf kvBProj; // [heads * (qk_nope + v_head), kv_lora_rank]
    // kv_b_proj as the absorbed form reads it: kvBProj itself, or its fp32 values when it is packed (INT4 or FP8)
    private final Buf kvBProjAbsorbed;
    private final Buf oProj; // [hidden, heads * v_head]

    MlaAttention(DeviceWeights w, ModelConfig c, String prefix, int layer) {
        this.layer = layer;
        hidden = c.hiddenSize();
        shape = MlaShape.of(c);
        if (c.hasQLora()) {
            qkvAProj = w.stacked(prefix + "q_a_proj.weight", prefix + "kv_a_proj_with_mqa.weight");
            qALayernorm = w.vector(prefix + "q_a_layernorm.weight");
            qBProj = w.linear(prefix + "q_b_proj.weight");
        } else {
            qkvAProj = w.stacked(prefix + "q_proj.weight", prefix + "kv_a_proj_with_mqa.weight");
            qALayernorm = null;
            qBProj = null;
        }
        kvALayernorm = w.vector(prefix + "kv_a_layernorm.weight");
        kvBProj = w.linear(prefix + "kv_b_proj.weight");
        kvBProjAbsorbed = kvBProj.kind() == Buf.Kind.INT4 || kvBProj.kind() == Buf.Kind.FP8
                ? w.fp32(prefix + "kv_b_proj.weight")
                : kvBProj;
        oProj = w.linear(prefix + "o_proj.weight");
    }

    /** Multi-head latent attention of h [T, hidden] → [T, hidden]. */
    Buf forward(Pass p, Buf h, LatentCache[] caches) {
        Device dev = p.dev;
        int t = p.packed.numTokens();
        int heads = shape.heads();
        int qHead = shape.qHead();
        int qOut = shape.qOut();
        int kvLora = shape.kvLoraRank();
        int qkRope = shape.qkRope();
        double loraEps = ModelConfig.LORA_NORM_EPS;
        // One GEMM for both low-rank projections: qkvA [T, q_out + kv_lora_rank + qk_rope] = [q_a | latent | k_pe]
        int width = qOut + shape.kvAWidth();
        Buf qkvA = p.floats.take((long) t * width);
        p.gemm(h, t, hidden, qkvAProj, width, qkvA);
        // q = q_b_proj(q_a_layernorm(q_a)) or q_proj(h): [T, heads, q_head_dim] = [q_nope | q_pe]
        Buf q = p.floats.take((long) t * heads * qHead);
        if (qBProj != null) {
            int qLora = shape.qLoraRank();
            Buf qA = p.floats.take((long) t * qLora);
            dev.rmsNorm(qkvA, t, width, 0, qLora, qALayernorm, loraEps, qA);
            p.gemm(qA, t, qLora, qBProj, heads * qHead, q);
        } else {
            dev.copyCols(qkvA, t, width, 0, heads * qHead, q, heads * qHead, 0);
        }
        // Only the latent is normed: latent [T, kv_lora_rank]; k_pe [T, qk_rope] is one rotary key head shared by all
        // heads, rotated in the same kernel. RoPE on q_pe of every head, at each token's position.
        Buf latent = p.floats.take((long) t * kvLora);
        Buf kPe = p.floats.take((long) t * qkRope);
        dev.rmsNormRope(qkvA, t, kvALayernorm, loraEps, shape, p.rotary, latent, kPe);
        dev.rope(q, t, heads, heads * qHead, qHead, shape.qkNope(), qkRope, p.rotary);
        Buf attn = p.floats.take((long) t * heads * shape.vHead()); // [T, heads, v_head]
        if (p.decode != null) {
            // A decode step: lengths and caches from the device, so the same launches serve every step.
            Buf table = p.decode.layer(layer);
            dev.cacheAppend(latent, kPe, t, shape, table, p.decode.lengths());
            dev.mlaDecodeRows(q, t, table, p.decode.lengths(), kvBProjAbsorbed, shape, attn);
        } else if (caches != null) {
            PackedBatch pb = p.packed;
            for (int s = 0; s < caches.length; s++) {
                // This pass's latents and k_pe join the sequence's cache, after the p.past[s] it held (the caches
                // advance once every layer has run).
                Buf cache = caches[s].layer(layer);
                int w = caches[s].width();
                int len = pb.seqLen()[s];
                int row0 = pb.seqStart()[s];
                dev.copyCols(latent, len, kvLora, row0 * kvLora, kvLora, cache, w, p.past[s] * w);
                dev.copyCols(kPe, len, qkRope, row0 * qkRope, qkRope, cache, w, p.past[s] * w + kvLora);
            }
            Pass.Cached c = p.cached;
            if (c.seq.length > 0) {
                // Sequences with cached tokens attend in the absorbed form over their latent caches.
                for (int i = 0; i < c.seq.length; i++) {
                    c.layers[i] = caches[c.seq[i]].layer(layer);
                }
                dev.mlaDecode(q, c.rowStart, c.rows, c.layers, c.past, kvBProjAbsorbed, shape, attn);
                Arrays.fill(c.layers, null); // the pass does not keep a sequence's cache alive
            }
        }
        if (p.keys != null && p.keys.numTiles() > 0) {
            // The other sequences (scoring; a prompt into an empty cache) attend in the prefill form over their own
            // tokens: kv = kv_b_proj(latent) [T, heads, qk_nope + v_head] = [k_nope | v] (in a batch that mixes the
            // forms, the absorbed rows may be expanded too, and are not attended)
            dev.mlaPrefill(q, latent, kPe, kvBProj, p.keys, shape, attn, p.rules);
        }
        Buf out = p.floats.take((long) t * hidden);
        p.gemm(attn, t, heads * shape.vHead(), oProj, hidden, out);
        return out;
    }
}
