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
import java.util.Arrays;
import java.util.function.IntConsumer;

/**
 * Multi-head latent attention (DeepseekV3Attention). Prefill form: kv_b_proj expands the latent per head.
 * With a {@link KvCache} per sequence, each token's normed latent and rotated k_pe are also cached; a
 * sequence whose cache was empty still attends in the prefill form (so its bits equal scoring's), one with
 * cached tokens attends in the absorbed form over its cache.
 */
final class MlaAttention {
    // Fresh sequences' keys and values are expanded from their latents in groups of whole sequences of up to this many
    // rows: 256 = PackedGemm.MB, the rows kv_b_proj runs per decode of its weights, so longer groups only add memory.
    static final int KV_GROUP_ROWS = 256;

    /** A workspace's activations for every layer's attention (one runs at a time). */
    static final class Scratch extends Workspace.Buffers {
        // The two projections of x: q_a (or q) [T, q_lora_rank (or heads * q_head_dim)] and kv_a [T, kv_lora_rank +
        // qk_rope].
        private float[][] xProjections;
        private float[] q; // [T, heads, q_head_dim]
        private float[] latent; // [T, kv_lora_rank]
        private float[] kPe; // [T, qk_rope]
        private float[] headsOut; // [T, heads, v_head]
        private final RmsNorm.Rows norm = new RmsNorm.Rows();
        private final Workspace.ByLength<int[]> freshStart = new Workspace.ByLength<>(int[]::new); // [empty caches]
        private final Workspace.ByLength<int[]> freshLen = new Workspace.ByLength<>(int[]::new); // [empty caches]
        private final Workspace.ByLength<int[]> cachedSeqs = new Workspace.ByLength<>(int[]::new); // [cached tokens]
        // fresh's groups: their latents [group rows, kv_lora_rank], keys and values [group rows, heads, qk_nope +
        // v_head], sequences (when not all of them) and attention operands, kept group by group while a call names the
        // same buffers and first row: every layer of a batch does, so the layers after the first make no new ones.
        private float[] groupLatent;
        private float[] kv;
        private final Workspace.ByLength<int[]> groupStart = new Workspace.ByLength<>(int[]::new);
        private final Workspace.ByLength<int[]> groupLen = new Workspace.ByLength<>(int[]::new);
        private MlaInputs[] groupInputs = new MlaInputs[0];
        // The operands of the pass running now, read by the row bodies below (made once: a pass makes no lambda).
        private MlaAttention attention;
        private Rope rope;
        private float[] cs; // the rope's table, position p's cos/sin at p · qk_rope
        private int[] positions;
        private float[] queries; // q, or q_proj's output
        private float[] kvA;
        private PackedBatch batch;
        private KvCache[] caches;
        private int[] seqs;
        private boolean simd;
        private final IntConsumer rotateRow = i -> attention.rotateRow(i, this);
        private final IntConsumer absorbedItem = item -> attention.attendAbsorbed(item, this);

        Scratch(Workspace ws) {
            super(ws);
        }

        /** fresh's operands of group g (keys and values in kv): the kept ones while they are the same. */
        private MlaInputs groupInputs(int g, MlaAttention a, float[] q, float[] kPe, int[] start, int[] len, int row0) {
            if (g >= groupInputs.length) {
                groupInputs = Arrays.copyOf(groupInputs, Math.max(g + 1, 2 * groupInputs.length));
            }
            MlaInputs k = groupInputs[g];
            if (k == null
                    || k.q() != q
                    || k.kv() != kv
                    || k.kPe() != kPe
                    || k.heads() != a.heads
                    || k.qkNope() != a.qkNope
                    || k.qkRope() != a.qkRope
                    || k.vHead() != a.vHead
                    || k.seqStart() != start
                    || k.seqLen() != len
                    || k.scale() != a.softmaxScale
                    || k.kvRow0() != row0) {
                k = groupInputs[g] = new MlaInputs(
                        q, kv, kPe, a.heads, a.qkNope, a.qkRope, a.vHead, start, len, a.softmaxScale, row0);
            }
            return k;
        }
    }

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

    /**
     * x: [T, hidden] (already input-normed) → out [T, hidden]. caches, when not null, holds one cache per sequence
     * (room reserved, positions numbered from each cache's length): this layer's latent and rotated k_pe of every
     * token are written there, and sequences with cached tokens attend in the absorbed form. Activations live in s.
     * out may be x: x is read only by the first projections, so the layer's normed input can take its output and a
     * [T, hidden] buffer is saved.
     */
    void forward(float[] x, PackedBatch batch, Rope rope, Matmuls mm, KvCache[] caches, Scratch s, float[] out) {
        Ops ops = mm.ops();
        int t = batch.numTokens();
        // Queries: q_a_proj → q_a_layernorm → q_b_proj (or q_proj): [T, heads, q_head_dim] = [q_nope | q_pe].
        // Joint compressed kv: [T, kv_lora_rank + qk_rope] = [latent | k_pe]; only the latent is normed.
        // q_a_proj and kv_a_proj_with_mqa read the same x: one pass.
        int kvAWidth = kvLoraRank + qkRope;
        int qWidth = heads * qHead;
        float[][] proj = s.xProjections =
                s.floatRows(s.xProjections, 2, t * Math.max(qLoraRank > 0 ? qLoraRank : qWidth, kvAWidth));
        mm.apply(x, t, xProjections, proj);
        float[] kvA = proj[1];
        float[] q;
        if (qLoraRank > 0) {
            float[] qA = proj[0];
            s.norm.apply(ops, qA, t, qLoraRank, qALayernorm, ModelConfig.LORA_NORM_EPS, qA);
            q = s.q = s.floats(s.q, t * qWidth);
            mm.apply(qA, t, qBProj, q);
        } else {
            q = proj[0];
        }
        float[] latent = s.latent = s.floats(s.latent, t * kvLoraRank); // [T, kv_lora_rank]
        s.norm.apply(ops, kvA, t, kvAWidth, 0, kvLoraRank, kvALayernorm, ModelConfig.LORA_NORM_EPS, latent);
        float[] kPe = s.kPe = s.floats(s.kPe, t * qkRope); // [T, qk_rope]: one rotary key head shared by all heads
        rotate(batch.positions(), t, rope, q, kvA, ops, s); // kPe = k_pe out of kvA; RoPE on q_pe and kPe
        float[] attn = s.headsOut = s.zeros(s.headsOut, t * heads * vHead); // [T, heads, v_head]
        int[] freshStart = batch.seqStart();
        int[] freshLen = batch.seqLen();
        if (caches != null) {
            int n = batch.numSequences();
            int fresh = 0;
            for (int b = 0; b < n; b++) {
                int past = caches[b].length();
                for (int i = 0; i < batch.seqLen()[b]; i++) {
                    int row = batch.seqStart()[b] + i;
                    caches[b].put(layer, past + i, latent, row * kvLoraRank, kPe, row * qkRope);
                }
                fresh += past == 0 ? 1 : 0;
            }
            freshStart = s.freshStart.get(fresh);
            freshLen = s.freshLen.get(fresh);
            int[] cachedSeqs = s.cachedSeqs.get(n - fresh);
            for (int b = 0, f = 0, c = 0; b < n; b++) {
                if (caches[b].length() == 0) {
                    freshStart[f] = batch.seqStart()[b];
                    freshLen[f++] = batch.seqLen()[b];
                } else {
                    cachedSeqs[c++] = b;
                }
            }
            if (cachedSeqs.length > 0) {
                absorbed(q, batch, caches, cachedSeqs, ops, s);
            }
        }
        if (freshStart.length > 0) {
            fresh(q, latent, kPe, freshStart, freshLen, ops, attn, s);
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
            Scratch s) {
        int longest = 0;
        for (int len : freshLen) {
            longest = Math.max(longest, len);
        }
        int cap = Math.max(KV_GROUP_ROWS, longest);
        float[] groupLatent = s.groupLatent = s.floats(s.groupLatent, cap * kvLoraRank); // [group rows, kv_lora_rank]
        float[] kv = s.kv = s.floats(s.kv, cap * heads * (qkNope + vHead)); // [group rows, heads, k_nope | v]
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
                start = s.groupStart.get(g1 - g0);
                len = s.groupLen.get(g1 - g0);
                System.arraycopy(freshStart, g0, start, 0, g1 - g0);
                System.arraycopy(freshLen, g0, len, 0, g1 - g0);
            }
            ops.attention(s.groupInputs(g0, this, q, kPe, start, len, row0), attn);
        }
    }

    /**
     * k_pe of each token out of kv_a's output into s's buffer, then q_pe of every head and k_pe rotated at the token's
     * position, token by token over the engine's threads.
     */
    private void rotate(int[] positions, int t, Rope rope, float[] q, float[] kvA, Ops ops, Scratch s) {
        int last = 0;
        for (int i = 0; i < t; i++) {
            last = Math.max(last, positions[i]);
        }
        s.attention = this;
        s.rope = rope;
        s.cs = rope.table(last + 1);
        s.positions = positions;
        s.queries = q;
        s.kvA = kvA;
        ops.forEachRow(t, s.rotateRow);
    }

    /** Token i of s's {@link #rotate} pass. */
    private void rotateRow(int i, Scratch s) {
        int csOff = s.positions[i] * qkRope;
        System.arraycopy(s.kvA, i * (kvLoraRank + qkRope) + kvLoraRank, s.kPe, i * qkRope, qkRope);
        for (int h = 0; h < heads; h++) {
            s.rope.rotate(s.queries, (i * heads + h) * qHead + qkNope, s.cs, csOff);
        }
        s.rope.rotate(s.kPe, i * qkRope, s.cs, csOff);
    }

    /**
     * Absorbed attention of the listed sequences' new tokens (rows of batch) over their caches, which already
     * hold this layer's entries for the new tokens. Per head h and query i at position p:
     * q_latent = W_UK_hᵀ q_nope; score_j = (q_latent · c_j + q_pe · k_pe_j) · scale for j <= p; softmax in fp32;
     * o_latent = Σ p_j c_j; out_h = W_UV_h o_latent ({@link LatentAttention}: vectorised where {@link Ops#simd}, plain
     * loops otherwise). One work item per (head, sequence), every sum in a fixed order; the output goes to s's
     * [T, heads, v_head] buffer. W_UK_h and W_UV_h are head h's rows of kv_b_proj, decoded from the checkpoint into
     * the thread's scratch by the item that needs them: items run head by head, so a thread decodes a head once for
     * the run of its sequences it takes, and the heap never holds more than one head's weights per thread.
     */
    private void absorbed(float[] q, PackedBatch batch, KvCache[] caches, int[] seqs, Ops ops, Scratch s) {
        s.attention = this;
        s.queries = q;
        s.batch = batch;
        s.caches = caches;
        s.seqs = seqs;
        s.simd = ops.simd();
        try {
            ops.forEachRow(seqs.length * heads, s.absorbedItem);
        } finally {
            s.batch = null; // the workspace outlives the caches' sequences: it keeps none of them
            s.caches = null;
        }
    }

    /** Item (head item / seqs, sequence seqs[item % seqs]) of s's absorbed pass: the head's new tokens over its cache. */
    private void attendAbsorbed(int item, Scratch s) {
        int b = s.seqs[item % s.seqs.length];
        int h = item / s.seqs.length;
        KvCache cache = s.caches[b];
        int past = cache.length();
        float[] rows = cache.layer(layer); // [positions, kv_lora_rank + qk_rope] = [latent | k_pe]
        int width = cache.width();
        LatentAttention.Scratch scratch = LatentAttention.scratch();
        LatentAttention.Head head =
                LatentAttention.head(kvBProj, h, qkNope, qkRope, vHead, softmaxScale, s.simd, scratch);
        for (int i = 0; i < s.batch.seqLen()[b]; i++) {
            int row = s.batch.seqStart()[b] + i;
            int len = past + i + 1; // causal: the cache before this batch, then new tokens up to i
            int qOff = (row * heads + h) * qHead;
            int oOff = (row * heads + h) * vHead;
            if (s.simd) {
                LatentAttention.attendVector(head, s.queries, qOff, rows, width, len, s.headsOut, oOff, scratch);
            } else {
                LatentAttention.attendScalar(head, s.queries, qOff, rows, width, len, s.headsOut, oOff, scratch);
            }
        }
    }
}
