package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.RmsNorm;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.runtime.KvCache;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;

/** One block: input RMSNorm → MLA → residual → post-attention RMSNorm → dense MLP or MoE → residual. */
final class DecoderLayer {
    /** A workspace's activations for every layer (one runs at a time), and those of the modules inside. */
    static final class Scratch extends Workspace.Buffers {
        private float[] normed; // [T, hidden]
        private final RmsNorm.Rows norm = new RmsNorm.Rows();
        private final AddRows residual = new AddRows();
        private final MlaAttention.Scratch attention;
        private final DenseMlp.Scratch mlp;
        private final Moe.Scratch moe;

        Scratch(Workspace ws) {
            super(ws);
            attention = new MlaAttention.Scratch(ws);
            mlp = new DenseMlp.Scratch(ws);
            moe = new Moe.Scratch(ws, mlp); // the experts run as the dense MLPs do, one at a time: one scratch
        }
    }

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

    /**
     * x: [T, hidden], updated in place, each row's linears through the matmul mm picks for it; routes receives the MoE
     * choice of each token when not null; caches (one per sequence, room reserved) receive this layer's latents and
     * rotated k_pe when not null; activations live in s.
     */
    void forward(float[] x, PackedBatch batch, Rope rope, Matmuls mm, int[] routes, KvCache[] caches, Scratch s) {
        int t = batch.numTokens();
        float[] h = s.normed = s.floats(s.normed, t * hidden);
        // Norms and residual adds row by row over the engine's threads.
        s.norm.apply(mm.ops(), x, t, hidden, inputLayernorm, eps, h);
        selfAttn.forward(h, batch, rope, mm, caches, s.attention, h); // h: the normed input, then attention's output
        s.norm.addThenApply(mm.ops(), x, h, t, hidden, postAttentionLayernorm, eps, h); // x += attention; h = its norm
        float[] m = h; // the dense MLP's output replaces its input; the MoE's is its own buffer (h is its scratch)
        if (moe != null) {
            m = moe.forward(h, t, mm, routes, s.moe);
        } else {
            mlp.forward(h, t, mm, s.mlp, h);
        }
        s.residual.run(mm.ops(), t, x, m, null, null, hidden); // x += m
    }
}
