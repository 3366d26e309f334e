package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.LatentAttention;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.MlaInputs;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.kernels.RmsNorm;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.runtime.KvCache;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;
import java.util.function.IntConsumer;

/**
 * Multi-head latent attention (DeepseekV3Attention). Prefill form: kv_b_proj expands the latent per head.
 * With a {@link KvCache} per sequence, each token's normed latent and rotated k_pe are also cached; a
 * sequence whose cache was empty still attends in the prefill form (so its bits equal scoring's), one with
 * cached tokens attends in the absorbed form over its cache.
 */
final class MlaAttention {
    private static final Workspace.Key Q = new Workspace.Key("attn.q"); // [T, heads, q_head_dim]
    // The two projections of x: q_a (or q) [T, q_lora_rank (or heads * q_head_dim)] and kv_a [T, kv_lora_rank +
    // qk_rope].
    private static final Workspace.Key X_PROJECTIONS = new Workspace.Key("attn.x_projections");
    private static final Workspace.Key LATENT = new Workspace.Key("attn.latent"); // [T, kv_lora_rank]
    private static final Workspace.Key K_PE = new Workspace.Key("attn.k_pe"); // [T, qk_rope]
    private static final Workspace.Key NORM = new Workspace.Key("attn.norm"); // the RmsNorm.Rows items
    private static final Workspace.Key ROTATE = new Workspace.Key("attn.rotate"); // the RotateRows items
    // Fresh sequences' keys and values are expanded from their latents in groups of whole sequences of up to this many
    // rows: 256 = PackedGemm.MB, the rows kv_b_proj runs per decode of its weights, so longer groups only add memory.
    static final int KV_GROUP_ROWS = 256;
    private static final Workspace.Key GROUP_LATENT =
            new Workspace.Key("attn.group_latent"); // [group rows, kv_lora_rank]
    private static final Workspace.Key KV = new Workspace.Key("attn.kv"); // [group rows, heads, qk_nope + v_head]
    private static final Workspace.Key GROUP_START = new Workspace.Key("attn.group_start"); // [group's sequences]
    private static final Workspace.Key GROUP_LEN = new Workspace.Key("attn.group_len"); // [group's sequences]
    private static final Workspace.Key KEPT_INPUTS = new Workspace.Key("attn.kept_inputs"); // the groups' MlaInputs
    private static final Workspace.Key HEADS_OUT = new Workspace.Key("attn.heads_out"); // [T, heads, v_head]
    private static final Workspace.Key FRESH_START =
            new Workspace.Key("attn.fresh_start"); // [sequences with empty caches]
    private static final Workspace.Key FRESH_LEN = new Workspace.Key("attn.fresh_len"); // [sequences with empty caches]
    private static final Workspace.Key CACHED_SEQS =
            new Workspace.Key("attn.cached_seqs"); // [sequences with cached tokens]
    private static final Workspace.Key ABSORBED =
            new Workspace.Key("attn.absorbed"); // the absorbed pass's AbsorbedItems

    private final int layer;
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
    private final Linear[] xProjections; // {q_a_proj or q_proj, kv_a_proj_with_mqa}: both read x, in one pass
    private final float[] kvALayernorm; // [kv_lora_rank]
    private final Linear kvBProj; // [heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank]
    private final Linear oProj; // [hidden, heads * v_head_dim]
    // kv_b_proj decoded to fp32 [heads * (qk_nope + v_head), kv_lora_rank] on the first absorbed call (then kept),
    // seen per head: rows h * (qk_nope + v_head) + d are W_UK of head h (d < qk_nope), the next v_head rows its W_UV.
    private volatile LatentAttention.Head[] absorbedHeads;

    MlaAttention(ModelWeights w, int layer) {
        ModelConfig c = w.config();
        String p = WeightLayout.layer(layer) + "self_attn.";
        this.layer = layer;
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
        xProjections = new Linear[] {qLoraRank > 0 ? qAProj : qProj, kvAProjWithMqa};
        kvALayernorm = w.vector(p + "kv_a_layernorm.weight");
        kvBProj = w.linear(p + "kv_b_proj.weight");
        oProj = w.linear(p + "o_proj.weight");
    }

    /** x: [T, hidden] (already input-normed) → [T, hidden], a new array. */
    float[] forward(float[] x, PackedBatch batch, Rope rope, Ops ops) {
        float[] out = new float[batch.numTokens() * oProj.out()];
        forward(x, batch, rope, Matmuls.prefill(ops), null, new Workspace(), out);
        return out;
    }

    /**
     * As {@link #forward(float[], PackedBatch, Rope, Ops)}; caches, when not null, holds one cache per
     * sequence (room reserved, positions numbered from each cache's length): this layer's latent and rotated
     * k_pe of every token are written there, and sequences with cached tokens attend in the absorbed form.
     * Activations live in ws; the result goes to out ([T, hidden]), which may be x: x is read only by the first
     * projections, so the layer's normed input can take its output and a [T, hidden] buffer is saved.
     */
    void forward(float[] x, PackedBatch batch, Rope rope, Matmuls mm, KvCache[] caches, Workspace ws, float[] out) {
        Ops ops = mm.ops();
        int t = batch.numTokens();
        // Queries: q_a_proj → q_a_layernorm → q_b_proj (or q_proj): [T, heads, q_head_dim] = [q_nope | q_pe].
        // Joint compressed kv: [T, kv_lora_rank + qk_rope] = [latent | k_pe]; only the latent is normed.
        // q_a_proj and kv_a_proj_with_mqa read the same x: one pass.
        int kvAWidth = kvLoraRank + qkRope;
        int qWidth = heads * qHead;
        float[][] proj = ws.floatRows(X_PROJECTIONS, 2, t * Math.max(qLoraRank > 0 ? qLoraRank : qWidth, kvAWidth));
        mm.apply(x, t, xProjections, proj);
        float[] kvA = proj[1];
        float[] q;
        RmsNorm.Rows norm = ws.object(NORM, RmsNorm.Rows::new); // norms row by row over the engine's threads
        if (qLoraRank > 0) {
            float[] qA = proj[0];
            norm.apply(ops, qA, t, qLoraRank, qALayernorm, ModelConfig.LORA_NORM_EPS, qA);
            q = ws.floats(Q, t * qWidth);
            mm.apply(qA, t, qBProj, q);
        } else {
            q = proj[0];
        }
        float[] latent = ws.floats(LATENT, t * kvLoraRank); // [T, kv_lora_rank]
        norm.apply(ops, kvA, t, kvAWidth, 0, kvLoraRank, kvALayernorm, ModelConfig.LORA_NORM_EPS, latent);
        float[] kPe = ws.floats(K_PE, t * qkRope); // [T, qk_rope]: one rotary key head shared by all heads
        // RoPE on q_pe (every head) and k_pe at each token's position, token by token over the engine's threads.
        ws.object(ROTATE, RotateRows::new).run(this, ops, rope, batch.positions(), t, q, kvA, kPe);
        float[] attn = ws.zeros(HEADS_OUT, t * heads * vHead); // [T, heads, v_head]
        int[] freshStart = batch.seqStart();
        int[] freshLen = batch.seqLen();
        if (caches != null) {
            int n = batch.numSequences();
            int fresh = 0;
            for (int s = 0; s < n; s++) {
                int past = caches[s].length();
                for (int i = 0; i < batch.seqLen()[s]; i++) {
                    int row = batch.seqStart()[s] + i;
                    caches[s].put(layer, past + i, latent, row * kvLoraRank, kPe, row * qkRope);
                }
                fresh += past == 0 ? 1 : 0;
            }
            freshStart = ws.exactInts(FRESH_START, fresh);
            freshLen = ws.exactInts(FRESH_LEN, fresh);
            int[] cachedSeqs = ws.exactInts(CACHED_SEQS, n - fresh);
            for (int s = 0, f = 0, c = 0; s < n; s++) {
                if (caches[s].length() == 0) {
                    freshStart[f] = batch.seqStart()[s];
                    freshLen[f++] = batch.seqLen()[s];
                } else {
                    cachedSeqs[c++] = s;
                }
            }
            if (cachedSeqs.length > 0) {
                absorbed(q, batch, caches, cachedSeqs, ops, attn, ws);
            }
        }
        if (freshStart.length > 0) {
            fresh(q, latent, kPe, freshStart, freshLen, ops, attn, ws);
        }
        mm.apply(attn, t, oProj, out);
    }

    /**
     * Attention of the sequences with empty caches (rows freshStart[f] .. + freshLen[f], in packed order), from their
     * latents. kv_b_proj expands the latents a group of whole sequences at a time, at most KV_GROUP_ROWS rows unless one
     * sequence is longer: the expanded keys and values ([rows, heads, qk_nope + v_head], 64 KiB a row for Kimi K2) of
     * the whole batch never exist at once. Each row's bits do not depend on its group.
     */
    private void fresh(
            float[] q,
            float[] latent,
            float[] kPe,
            int[] freshStart,
            int[] freshLen,
            Ops ops,
            float[] attn,
            Workspace ws) {
        int longest = 0;
        for (int len : freshLen) {
            longest = Math.max(longest, len);
        }
        int cap = Math.max(KV_GROUP_ROWS, longest);
        float[] groupLatent = ws.floats(GROUP_LATENT, cap * kvLoraRank); // [group rows, kv_lora_rank]
        float[] kv =
                ws.floats(KV, cap * heads * (qkNope + vHead)); // [group rows, heads, qk_nope + v_head] = [k_nope | v]
        KeptInputs kept = ws.object(KEPT_INPUTS, KeptInputs::new);
        for (int g0 = 0, g1; g0 < freshStart.length; g0 = g1) {
            int row0 = freshStart[g0];
            g1 = g0 + 1;
            while (g1 < freshStart.length && freshStart[g1] + freshLen[g1] - row0 <= cap) {
                g1++; // rows between fresh sequences (a cached sequence's) are expanded too, and not attended
            }
            int rows = freshStart[g1 - 1] + freshLen[g1 - 1] - row0;
            System.arraycopy(latent, row0 * kvLoraRank, groupLatent, 0, rows * kvLoraRank);
            ops.matmul(groupLatent, rows, kvBProj, kv);
            int[] start = freshStart;
            int[] len = freshLen;
            if (g1 - g0 < freshStart.length) {
                start = ws.exactInts(GROUP_START, g1 - g0);
                len = ws.exactInts(GROUP_LEN, g1 - g0);
                System.arraycopy(freshStart, g0, start, 0, g1 - g0);
                System.arraycopy(freshLen, g0, len, 0, g1 - g0);
            }
            ops.attention(
                    kept.inputs(g0, q, kv, kPe, heads, qkNope, qkRope, vHead, start, len, softmaxScale, row0), attn);
        }
    }

    /**
     * Item i: k_pe of token i out of kv_a's output, then q_pe of every head and k_pe rotated at the token's position. One per
     * workspace, set per use (no lambda per layer).
     */
    private static final class RotateRows implements IntConsumer {
        private MlaAttention a;
        private Rope rope;
        private float[] cs; // the rope's table, position p's cos/sin at p · qk_rope
        private int[] positions;
        private float[] q;
        private float[] kvA;
        private float[] kPe;

        void run(MlaAttention a, Ops ops, Rope rope, int[] positions, int t, float[] q, float[] kvA, float[] kPe) {
            int last = 0;
            for (int i = 0; i < t; i++) {
                last = Math.max(last, positions[i]);
            }
            this.a = a;
            this.rope = rope;
            this.cs = rope.table(last + 1);
            this.positions = positions;
            this.q = q;
            this.kvA = kvA;
            this.kPe = kPe;
            try {
                ops.forEachRow(t, this);
            } finally {
                this.a = null;
                this.rope = null;
                this.cs = this.q = this.kvA = this.kPe = null;
                this.positions = null;
            }
        }

        @Override
        public void accept(int i) {
            int qkRope = a.qkRope;
            int csOff = positions[i] * qkRope;
            System.arraycopy(kvA, i * (a.kvLoraRank + qkRope) + a.kvLoraRank, kPe, i * qkRope, qkRope);
            for (int h = 0; h < a.heads; h++) {
                rope.rotate(q, (i * a.heads + h) * a.qHead + a.qkNope, cs, csOff);
            }
            rope.rotate(kPe, i * qkRope, cs, csOff);
        }
    }

    /**
     * The groups' attention operands, group by group, kept while a call names the same buffers and first row: every
     * layer of a batch does (they share the workspace), so the layers after the first make no new ones.
     */
    private static final class KeptInputs {
        private MlaInputs[] byGroup = new MlaInputs[0];

        MlaInputs inputs(
                int g,
                float[] q,
                float[] kv,
                float[] kPe,
                int heads,
                int qkNope,
                int qkRope,
                int vHead,
                int[] start,
                int[] len,
                float scale,
                int row0) {
            if (g >= byGroup.length) {
                byGroup = java.util.Arrays.copyOf(byGroup, Math.max(g + 1, 2 * byGroup.length));
            }
            MlaInputs k = byGroup[g];
            if (k == null
                    || k.q() != q
                    || k.kv() != kv
                    || k.kPe() != kPe
                    || k.heads() != heads
                    || k.qkNope() != qkNope
                    || k.qkRope() != qkRope
                    || k.vHead() != vHead
                    || k.seqStart() != start
                    || k.seqLen() != len
                    || k.scale() != scale
                    || k.kvRow0() != row0) {
                k = byGroup[g] = new MlaInputs(q, kv, kPe, heads, qkNope, qkRope, vHead, start, len, scale, row0);
            }
            return k;
        }
    }

    private LatentAttention.Head[] absorbedHeads() {
        LatentAttention.Head[] hs = absorbedHeads;
        if (hs == null) {
            synchronized (this) {
                hs = absorbedHeads;
                if (hs == null) {
                    float[] w = kvBProj.toFloat();
                    hs = new LatentAttention.Head[heads];
                    for (int h = 0; h < heads; h++) {
                        hs[h] = new LatentAttention.Head(
                                w, h * (qkNope + vHead), qkNope, qkRope, vHead, kvLoraRank, softmaxScale);
                    }
                    absorbedHeads = hs;
                }
            }
        }
        return hs;
    }

    /**
     * Absorbed attention of the listed sequences' new tokens (rows of batch) over their caches, which already
     * hold this layer's entries for the new tokens. Per head h and query i at position p:
     * q_latent = W_UK_hᵀ q_nope; score_j = (q_latent · c_j + q_pe · k_pe_j) · scale for j <= p; softmax in fp32;
     * o_latent = Σ p_j c_j; out_h = W_UV_h o_latent ({@link LatentAttention}: vectorised where {@link Ops#simd}, plain
     * loops otherwise). One work item per (sequence, head), every sum in a fixed order.
     */
    private void absorbed(
            float[] q, PackedBatch batch, KvCache[] caches, int[] seqs, Ops ops, float[] attn, Workspace ws) {
        AbsorbedItems items = ws.object(ABSORBED, AbsorbedItems::new);
        items.set(this, q, batch, caches, seqs, ops.simd(), attn);
        try {
            ops.forEachRow(seqs.length * heads, items);
        } finally {
            items.set(null, null, null, null, null, false, null);
        }
    }

    /**
     * The work items of one absorbed pass, (sequence, head) each; one object per workspace whose fields each pass
     * sets (a capturing lambda would be a new object per layer and step).
     */
    private static final class AbsorbedItems implements IntConsumer {
        private MlaAttention attention;
        private float[] q;
        private PackedBatch batch;
        private KvCache[] caches;
        private int[] seqs;
        private boolean simd;
        private float[] attn;

        void set(
                MlaAttention attention,
                float[] q,
                PackedBatch batch,
                KvCache[] caches,
                int[] seqs,
                boolean simd,
                float[] attn) {
            this.attention = attention;
            this.q = q;
            this.batch = batch;
            this.caches = caches;
            this.seqs = seqs;
            this.simd = simd;
            this.attn = attn;
        }

        @Override
        public void accept(int item) {
            attention.attendAbsorbed(
                    q,
                    batch,
                    caches[seqs[item / attention.heads]],
                    seqs[item / attention.heads],
                    item % attention.heads,
                    simd,
                    attn);
        }
    }

    /** Head h of sequence s's new tokens over its cache. */
    private void attendAbsorbed(float[] q, PackedBatch batch, KvCache cache, int s, int h, boolean simd, float[] attn) {
        int past = cache.length();
        float[] lat = cache.latents(layer); // [positions, kv_lora_rank]
        float[] pe = cache.kPes(layer); // [positions, qk_rope]
        LatentAttention.Head head = absorbedHeads()[h];
        LatentAttention.Scratch scratch = LatentAttention.scratch();
        for (int i = 0; i < batch.seqLen()[s]; i++) {
            int row = batch.seqStart()[s] + i;
            int len = past + i + 1; // causal: the cache before this batch, then new tokens up to i
            int qOff = (row * heads + h) * qHead;
            int oOff = (row * heads + h) * vHead;
            if (simd) {
                LatentAttention.attendVector(head, q, qOff, lat, pe, len, attn, oOff, scratch);
            } else {
                LatentAttention.attendScalar(head, q, qOff, lat, pe, len, attn, oOff, scratch);
            }
        }
    }
}
