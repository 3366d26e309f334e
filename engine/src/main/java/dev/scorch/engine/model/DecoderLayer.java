package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.kernels.RmsNorm;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.runtime.KvCache;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;

/** One block: input RMSNorm → MLA → residual → post-attention RMSNorm → dense MLP or MoE → residual. */
final class DecoderLayer {
    private static final Workspace.Key NORMED = new Workspace.Key("layer.normed"); // [T, hidden]
    private static final Workspace.Key NORM = new Workspace.Key("layer.norm"); // the RmsNorm.Rows items
    private static final Workspace.Key RESIDUAL = new Workspace.Key("layer.residual"); // the AddRows items
    private final int hidden;
    private final double eps;
    private final float[] inputLayernorm; // [hidden]
    private final MlaAttention selfAttn;
    private final float[] postAttentionLayernorm; // [hidden]
    private final DenseMlp mlp; // layers below first_k_dense_replace
    private final Moe moe; // the others

    DecoderLayer(ModelWeights w, int layer) {
        ModelConfig c = w.config();
        String p = WeightLayout.layer(layer);
        hidden = c.hiddenSize();
        eps = c.rmsNormEps();
        inputLayernorm = w.vector(p + "input_layernorm.weight");
        selfAttn = new MlaAttention(w, layer);
        postAttentionLayernorm = w.vector(p + "post_attention_layernorm.weight");
        if (c.isMoeLayer(layer)) {
            moe = new Moe(w, layer);
            mlp = null;
        } else {
            mlp = new DenseMlp(w, p + "mlp.");
            moe = null;
        }
    }

    boolean isMoe() {
        return moe != null;
    }

    /** x: [T, hidden], updated in place; routes receives the MoE choice of each token when not null. */
    void forward(float[] x, PackedBatch batch, Rope rope, Ops ops, int[] routes) {
        forward(x, batch, rope, Matmuls.prefill(ops), routes, null, new Workspace());
    }

    /**
     * As above, each row's linears through the matmul mm picks for it; caches (one per sequence, room reserved)
     * receive this layer's latents and rotated k_pe when not null; activations live in ws.
     */
    void forward(float[] x, PackedBatch batch, Rope rope, Matmuls mm, int[] routes, KvCache[] caches, Workspace ws) {
        int t = batch.numTokens();
        int n = t * hidden;
        float[] h = ws.floats(NORMED, n);
        // Norms and residual adds row by row over the engine's threads.
        RmsNorm.Rows norm = ws.object(NORM, RmsNorm.Rows::new);
        norm.apply(mm.ops(), x, t, hidden, inputLayernorm, eps, h);
        selfAttn.forward(h, batch, rope, mm, caches, ws, h); // h: the normed input, then attention's output
        norm.addThenApply(mm.ops(), x, h, t, hidden, postAttentionLayernorm, eps, h); // x += attention; h = its norm
        float[] m = h; // the dense MLP's output replaces its input; the MoE's is its own buffer (h is its scratch)
        if (moe != null) {
            m = moe.forward(h, t, mm, routes, ws);
        } else {
            mlp.forward(h, t, mm, ws, h);
        }
        ws.object(RESIDUAL, AddRows::new).run(mm.ops(), t, x, m, null, null, hidden); // x += m
    }
}
