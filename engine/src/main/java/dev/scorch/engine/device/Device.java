package dev.scorch.engine.device;

import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.Rope;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.util.function.LongFunction;

/**
 * The backend seam: memory and the kernels the decoder block ({@code DecoderStage}) runs, on one device.
 * {@code CpuDevice} runs them on the CPU kernels over the checkpoint's mapped weights; {@code cuda.CudaDevice} on an
 * NVIDIA GPU (cuBLAS for GEMMs, the kernels of src/main/cuda for the rest); {@code HostDevice} is the plain-loop twin
 * of the CUDA kernels, which the tests run the same block on. Shapes are row-major; calls run in order (one stream),
 * and reads back to the host wait for what came before.
 */
public interface Device extends AutoCloseable {
    /**
     * A default method that a decorator ({@link DeviceDecorator}) runs on itself rather than hand to the device it wraps:
     * it is made of other calls of the seam (capture: reruns its step), which the decorator then sees one by one. A
     * device's own version of it is passed over there; by the seam's contract its bits are the same. Every other method,
     * default or not, a decorator hands on whole.
     */
    @Retention(RetentionPolicy.RUNTIME)
    @Target(ElementType.METHOD)
    @interface Composite {}

    /** The device, in words (name, memory). */
    String describe();

    /** Bytes of device memory in all and free now. */
    long totalBytes();

    long freeBytes();

    // --- Memory

    /** A new zeroed buffer of n elements. */
    Buf alloc(Buf.Kind kind, long n);

    void free(Buf b);

    void zero(Buf b);

    void write(Buf dst, float[] src, int off, int n);

    void write(Buf dst, int[] src, int off, int n);

    void read(Buf src, float[] dst, int off, int n);

    void read(Buf src, int[] dst, int off, int n);

    /**
     * dst[:n] = src[:n] (F32), src on this device and dst on to, device to device: returns once dst holds them, or
     * false, having copied nothing, where this device has no such path to to (the caller then hands the floats over
     * through the host).
     */
    default boolean copyTo(Buf src, Device to, Buf dst, long n) {
        return false;
    }

    /**
     * dst[i] = the device address of src[i], i &lt; src.length, dst an {@link Buf.Kind#ADDR} buffer: a table through
     * which a kernel finds buffers that change from call to call (a decode step's caches) while its arguments stay fixed.
     */
    void writeAddresses(Buf dst, Buf[] src);

    /**
     * Linear weights [out, in] stacked along out (one GEMM computes all of them: q_a_proj with kv_a_proj_with_mqa,
     * gate_proj with up_proj). All share in. INT4 weights of one group size stay packed ({@link PackedInt4}), FP8 block
     * weights of one block width stay as their codes and scales ({@link PackedFp8}), the same whatever the precision:
     * the GEMM decides how it multiplies them; others (and mixed stacks) as {@link #denseWeight}.
     */
    default Buf weight(GemmPrecision precision, Linear... stacked) {
        if (PackedInt4.packable(stacked)) {
            return PackedInt4.upload(this, stacked);
        }
        return PackedFp8.packable(stacked) ? PackedFp8.upload(this, stacked) : denseWeight(precision, stacked);
    }

    /**
     * Linear weights stacked along out as {@link #weight}, decoded into the precision's dtype (FP8 block scales and INT4
     * group scales applied, then rounded): tables that are gathered rather than multiplied, and weights kept in fp32.
     */
    Buf denseWeight(GemmPrecision precision, Linear... stacked);

    /**
     * An INT4 weight [rows, cols] kept packed (a {@link Buf.Kind#INT4} buffer over a {@link PackedInt4}): packed words
     * [rows, ceil(cols / 8)] as compressed-tensors stores them, scales [rows, ceil(cols / groupSize)] in fp32 (held in
     * BF16 when every one is a BF16 value).
     */
    default Buf int4Weight(int[] packed, float[] scales, int rows, int cols, int groupSize) {
        if (rows <= 0
                || cols <= 0
                || groupSize <= 0
                || packed.length != (long) rows * PackedInt4.wordsPerRow(cols)
                || scales.length != (long) rows * PackedInt4.groupsPerRow(cols, groupSize)) {
            throw new IllegalArgumentException("INT4 weight [" + rows + ", " + cols + "] in groups of " + groupSize
                    + ": " + packed.length + " packed words and " + scales.length + " scales");
        }
        Buf p = upload(packed);
        Buf s = PackedInt4.allBf16(scales) ? weight(scales, GemmPrecision.BF16) : upload(scales);
        return new Buf(
                new PackedInt4(p, s, rows, cols, groupSize, PackedInt4.allSplitExact(scales)),
                Buf.Kind.INT4,
                0,
                (long) rows * cols);
    }

    /**
     * An FP8 E4M3 block-scaled weight [rows, cols] kept as its codes (a {@link Buf.Kind#FP8} buffer over a
     * {@link PackedFp8}): codes four a word [ceil(rows · cols / 4)], scales [scale rows, ceil(cols / blockCols)] in fp32,
     * and each weight row's scale row [rows].
     */
    default Buf fp8Weight(int[] codes, float[] scales, int[] scaleRows, int rows, int cols, int blockCols) {
        int scaleCols = blockCols <= 0 ? 0 : PackedFp8.scaleColsOf(cols, blockCols);
        if (rows <= 0
                || cols <= 0
                || blockCols <= 0
                || codes.length != PackedFp8.words(rows, cols)
                || scaleRows.length != rows
                || scales.length == 0
                || scales.length % scaleCols != 0) {
            throw new IllegalArgumentException("FP8 weight [" + rows + ", " + cols + "] in blocks of " + blockCols
                    + " columns: " + codes.length + " code words, " + scales.length + " scales and "
                    + scaleRows.length + " scale rows");
        }
        for (int r = 0; r < rows; r++) {
            if (scaleRows[r] < 0 || scaleRows[r] >= scales.length / scaleCols) {
                throw new IllegalArgumentException("FP8 weight [" + rows + ", " + cols + "]: row " + r
                        + " has scale row " + scaleRows[r] + " of " + scales.length / scaleCols);
            }
        }
        return new Buf(
                new PackedFp8(
                        upload(codes),
                        upload(scales),
                        upload(scaleRows),
                        rows,
                        cols,
                        blockCols,
                        PackedFp8.weightParts(scales)),
                Buf.Kind.FP8,
                0,
                (long) rows * cols);
    }

    /** A weight given as fp32 values, in the precision's dtype (small matrices and tests). */
    Buf weight(float[] w, GemmPrecision precision);

    @Composite
    default Buf upload(float[] v) {
        Buf b = alloc(Buf.Kind.F32, v.length);
        write(b, v, 0, v.length);
        return b;
    }

    @Composite
    default Buf upload(int[] v) {
        Buf b = alloc(Buf.Kind.I32, v.length);
        write(b, v, 0, v.length);
        return b;
    }

    // --- Kernels

    /**
     * y[m, n] = x[m, k] · wᵀ, w [n, k] from {@link #weight}, fp32 accumulate. An fp32 w multiplies fp32 x; a BF16 w
     * multiplies x split into the precision's BF16 parts (x ≈ p0 + p1 + p2, {@link GemmPrecision#inputParts}), one
     * GEMM per part, summed in fp32; an INT4 or FP8 w is dequantised a tile at a time and multiplied as
     * {@link PackedInt4} or {@link PackedFp8} says for the precision ({@link DequantPlan}).
     */
    void gemm(Buf x, int m, int k, Buf w, int n, Buf y, GemmPrecision precision);

    /**
     * {@link #gemm} where rows says which rows of x are decode rows (tokens that extend a non-empty KV cache): a device
     * whose GEMM rounds a row differently by its shape (the CPU's, {@link DecodeRows}) runs each row by its own rule,
     * so that a row's bits never depend on its batch mates; one that rounds every row alike ignores rows.
     */
    default void gemm(Buf x, int m, int k, Buf w, int n, Buf y, GemmPrecision precision, DecodeRows rows) {
        gemm(x, m, k, w, n, y, precision);
    }

    /**
     * A SwiGLU MLP: out [m, hidden] = down_proj(silu(gate_proj(x)) · up_proj(x)), w's gate_proj and up_proj stacked
     * [2 · inter, hidden] ({@link #weight}), its down_proj [hidden, inter]; this default as {@link #gemm} into [m, 2 ·
     * inter], {@link #swiglu} and {@link #gemm} over every row at once by the pass's rules, its intermediates from
     * their floats. A device may run long batches a chunk of rows at a time (the CPU: the [rows, inter] activations
     * stay small), each row's bits the same.
     */
    @Composite
    default void mlp(Mlp w, Buf x, int m, Buf out, PassRules pass) {
        int hidden = w.hidden();
        int inter = w.inter();
        Buf gu = pass.floats().apply((long) m * 2 * inter); // [m, gate | up]
        gemm(x, m, hidden, w.gateUpProj(), 2 * inter, gu, pass.precision(), pass.rows());
        Buf act = pass.floats().apply((long) m * inter); // silu(gate_proj(x)) * up_proj(x)
        swiglu(gu, m, inter, act);
        gemm(act, m, inter, w.downProj(), hidden, out, pass.precision(), pass.rows());
    }

    /** out[r, :dim] = weight · x[r·stride + offset ..][:dim] / rms, for r < rows. */
    void rmsNorm(Buf x, int rows, int stride, int offset, int dim, Buf weight, double eps, Buf out);

    /**
     * Rotates, in place, the rope_dim values at x[r·rowStride + h·headStride + offset] of every row r and head h by
     * the angles of row r's position ({@link Rotary}).
     */
    void rope(Buf x, int rows, int heads, int rowStride, int headStride, int offset, int ropeDim, Rotary rotary);

    /**
     * kv_a_layernorm and the key's RoPE over kv_a_proj_with_mqa's output in one kernel. x [rows, q_out + kv_lora_rank +
     * qk_rope] is the stacked projection [q_a | latent | k_pe] ({@link MlaShape#qOut}); for i &lt; rows, latent[i,
     * :kv_lora_rank] = weight · (x's latent of row i) / rms (as {@link #rmsNorm}), and kPe[i, :qk_rope] = x's k_pe of
     * row i rotated by the angles of its position (as {@link #copyCols} then one head of {@link #rope}).
     */
    default void rmsNormRope(Buf x, int rows, Buf weight, double eps, MlaShape s, Rotary rotary, Buf latent, Buf kPe) {
        int stride = s.qOut() + s.kvAWidth();
        rmsNorm(x, rows, stride, s.qOut(), s.kvLoraRank(), weight, eps, latent);
        copyCols(x, rows, stride, s.qOut() + s.kvLoraRank(), s.qkRope(), kPe, s.qkRope(), 0);
        rope(kPe, rows, 1, s.qkRope(), 0, 0, s.qkRope(), rotary);
    }

    /** dst[r·dstStride + dstOff + c] = src[r·srcStride + srcOff + c] for r < rows, c < width. */
    void copyCols(Buf src, int rows, int srcStride, int srcOff, int width, Buf dst, int dstStride, int dstOff);

    /** x[:n] += y[:n]. */
    void add(Buf x, Buf y, long n);

    /** SwiGLU over fused gate/up rows: out[r, c] = silu(gu[r, c]) · gu[r, inter + c], gu [rows, 2 · inter]. */
    void swiglu(Buf gu, int rows, int inter, Buf out);

    /** out[j, :width] = x[rows[j], :width], j < n; x F32, or BF16 (a weight table) widened to fp32. */
    void gatherRows(Buf x, Buf rows, int n, int width, Buf out);

    /**
     * MLA attention, prefill form, over the batch's t = keys.t() tokens: q [t, heads, qk_nope + qk_rope], kv [t, heads,
     * qk_nope + v_head] = [k_nope | v], kPe [t, qk_rope]; query i attends the tokens keyStart[i] .. keyStart[i] +
     * keyLen[i] - 1, softmax in fp32. out [t, heads, v_head]. Only the tiles' queries are computed (rows of out outside
     * them are left as they are), and a device may share key loads across a tile's queries ({@link KeyTiles}).
     */
    void mlaAttention(Buf q, Buf kv, Buf kPe, KeyTiles keys, MlaShape s, Buf out);

    /**
     * {@link #mlaDecode} of several sequences: sequence i's rows[i] new tokens are rows [rowStart[i], + rows[i]) of q
     * [*, heads, qk_nope + qk_rope] and of out [*, heads, v_head], over caches[i] (this layer's, {@link LatentCache})
     * holding past[i] tokens before them. A device may share work across the sequences (the CPU decodes a head of
     * kv_b_proj once for all of them); each sequence's bits are its {@link #mlaDecode}'s.
     */
    @Composite
    default void mlaDecode(
            Buf q, int[] rowStart, int[] rows, Buf[] caches, int[] past, Buf kvBProj, MlaShape s, Buf out) {
        int qRow = s.heads() * s.qHead();
        int outRow = s.heads() * s.vHead();
        for (int i = 0; i < rows.length; i++) {
            mlaDecode(
                    q.slice((long) rowStart[i] * qRow, (long) rows[i] * qRow),
                    rows[i],
                    caches[i],
                    past[i],
                    kvBProj,
                    s,
                    out.slice((long) rowStart[i] * outRow, (long) rows[i] * outRow));
        }
    }

    /**
     * MLA attention in the prefill form from the latents: kv = latent · kv_b_projᵀ [t, heads, qk_nope + v_head] = [k_nope
     * | v] by the pass's rules, then {@link #mlaAttention} over the tiles (q, kPe, keys and out as there; latent [t,
     * kv_lora_rank]). This default expands every row at once into a buffer from the pass's floats; a device may expand
     * a group of whole sequences at a time (the CPU: the keys and values of a long batch never exist at once), each
     * row's bits the same.
     */
    @Composite
    default void mlaPrefill(
            Buf q, Buf latent, Buf kPe, Buf kvBProj, KeyTiles keys, MlaShape s, Buf out, PassRules pass) {
        int t = keys.t();
        Buf kv = pass.floats().apply((long) t * s.heads() * s.kvHead());
        gemm(latent, t, s.kvLoraRank(), kvBProj, s.heads() * s.kvHead(), kv, pass.precision(), pass.rows());
        mlaAttention(q, kv, kPe, keys, s, out);
    }

    /**
     * A decode step's latents and k_pe into each row's cache, the append position read on the device: for i &lt; rows,
     * row lengths[i] of caches[i] (an {@link Buf.Kind#ADDR} table of layer caches [capacity, kv_lora_rank + qk_rope],
     * {@link LatentCache#layer}) = latent[i, :kv_lora_rank] then kPe[i, :qk_rope].
     */
    void cacheAppend(Buf latent, Buf kPe, int rows, MlaShape s, Buf caches, Buf lengths);

    /**
     * {@link #mlaDecode} of a decode step, one new token per row, everything that changes between steps read on the
     * device: row i's query q[i] attends caches[i] (as in {@link #cacheAppend}), which holds lengths[i] tokens before
     * it and the token itself after them; out [rows, heads, v_head]. Each row's bits are its {@link #mlaDecode}'s with
     * rows 1 and past lengths[i].
     */
    void mlaDecodeRows(Buf q, int rows, Buf caches, Buf lengths, Buf kvBProj, MlaShape s, Buf out);

    /** Queries per attention tile (the CUDA kernel's ATTN_Q). */
    int ATTENTION_TILE = 16;

    /**
     * MLA attention, absorbed form (decode): the rows new tokens of one sequence over its latent cache, which already
     * holds them. q [rows, heads, qk_nope + qk_rope] (RoPE applied); cache [past + rows, kv_lora_rank + qk_rope], a
     * token's normed latent c and rotated k_pe (a {@link LatentCache}); kvBProj [heads * (qk_nope + v_head), kv_lora_rank],
     * F32 or BF16 ({@link #weight}), whose rows h · (qk_nope + v_head) + d are W_UK of head h for d &lt; qk_nope and
     * W_UV after them. Query i and head h, over cache rows j &lt;= past + i:
     * q_latent = W_UKᵀ q_nope; score_j = (q_latent · c_j + q_pe · k_pe_j) · scale; p = softmax(score) in fp32;
     * o_latent = Σ_j p_j c_j; out[i, h] = W_UV o_latent. out [rows, heads, v_head]. No kv_b_proj GEMM over the cache:
     * a step costs O(cache · kv_lora_rank) per head, and a row's bits depend only on its own sequence.
     */
    void mlaDecode(Buf q, int rows, Buf cache, int past, Buf kvBProj, MlaShape s, Buf out);

    /**
     * Grouped GEMM (one per expert): for g &lt; w.length, rows [rowStart[g], + rows[g]) of y [*, n] = the same rows of
     * x [*, k] · w[g]ᵀ, each w[g] [n, k] from {@link #weight}; as {@link #gemm} per group.
     */
    default void gemmGrouped(Buf x, int[] rowStart, int[] rows, int k, Buf[] w, int n, Buf y, GemmPrecision precision) {
        for (int g = 0; g < w.length; g++) {
            gemm(
                    x.slice((long) rowStart[g] * k, (long) rows[g] * k),
                    rows[g],
                    k,
                    w[g],
                    n,
                    y.slice((long) rowStart[g] * n, (long) rows[g] * n),
                    precision);
        }
    }

    /**
     * Whether {@link #gemmGrouped} runs groups laid out at a uniform stride as one batched call (so a caller should
     * pad groups to the same row count); otherwise it runs each group alone and padding only costs memory.
     */
    default boolean batchesGroups() {
        return false;
    }

    /**
     * MoE permutation, on the device: experts [t, top_k] from {@link #moeRoute} (each in [0, nExperts)) → offsets
     * [nExperts + 1] (offsets[e] = the slots of the experts below e, offsets[nExperts] = t · top_k), slotOf [t, top_k]
     * (the slot of each (token, choice)) and slotRow [t · top_k] (the token of each slot). Slots run by expert in
     * ascending id, tokens in order within an expert: the groups of {@link #gemmExperts}, with no host round trip.
     */
    void moePermute(Buf experts, int t, int topK, int nExperts, Buf offsets, Buf slotOf, Buf slotRow);

    /**
     * All experts of a layer as one grouped GEMM whose group bounds live on the device: for e &lt; w.length, rows
     * [offsets[e], offsets[e + 1]) of y [slots, n] = the same rows of x [slots, k] · w[e]ᵀ, each w[e] [n, k] from
     * {@link #weight}, as {@link #gemm} of those rows (offsets from {@link #moePermute}). A device may keep a table of
     * w's experts between calls: pass the same array, unchanged, every time.
     */
    default void gemmExperts(Buf x, Buf offsets, int slots, int k, Buf[] w, int n, Buf y, GemmPrecision precision) {
        int[] g = expertRows(offsets, w.length, slots);
        for (int e = 0; e < w.length; e++) {
            int rows = g[e + 1] - g[e];
            if (rows > 0) {
                gemm(
                        x.slice((long) g[e] * k, (long) rows * k),
                        rows,
                        k,
                        w[e],
                        n,
                        y.slice((long) g[e] * n, (long) rows * n),
                        precision);
            }
        }
    }

    /** Group e's rows [offsets[e], offsets[e + 1]) of {@link #gemmExperts}, read back and checked. */
    private int[] expertRows(Buf offsets, int experts, int slots) {
        int[] g = new int[experts + 1];
        read(offsets.need(Buf.Kind.I32, experts + 1L, "gemmExperts offsets"), g, 0, experts + 1);
        for (int e = 0; e < experts; e++) {
            if (g[e] < 0 || g[e + 1] < g[e] || g[e + 1] > slots) {
                throw new IllegalArgumentException("gemmExperts: expert " + e + " has rows [" + g[e] + ", " + g[e + 1]
                        + ") of " + slots + " slots");
            }
        }
        return g;
    }

    /**
     * {@link #gemmExperts} over gate_proj and up_proj stacked ([2 · inter, k] each) with SwiGLU applied to its output:
     * out [slots, inter] as gemmExperts into [slots, 2 · inter] then {@link #swiglu}, without the intermediate.
     */
    default void gemmExpertsSwiglu(
            Buf x, Buf offsets, int slots, int k, Buf[] w, int inter, Buf out, GemmPrecision precision) {
        int[] g = expertRows(offsets, w.length, slots);
        for (int e = 0; e < w.length; e++) {
            int rows = g[e + 1] - g[e];
            if (rows > 0) {
                // the CUDA kernel keeps an expert tile's gate and up columns in shared memory; here a buffer
                Buf gu = alloc(Buf.Kind.F32, (long) rows * 2 * inter);
                gemm(x.slice((long) g[e] * k, (long) rows * k), rows, k, w[e], 2 * inter, gu, precision);
                swiglu(gu, rows, inter, out.slice((long) g[e] * inter, (long) rows * inter));
                free(gu);
            }
        }
    }

    /**
     * MoE combine: y[t, :] = Σ_k weights[t, k] · ye[slot[t, k], :] over k &lt; top_k in order, for t &lt; tokens; then,
     * when addend is not null (the shared experts' output [tokens, width]), + addend[t, :], as {@link #add} after.
     */
    void moeCombine(Buf ye, Buf slot, Buf weights, int tokens, int topK, int width, Buf addend, Buf y);

    /**
     * DeepseekV3MoE's experts on x [t, hidden], routed ({@link #moeRoute}: experts and weights [t, top_k], ascending
     * id): y [t, hidden] = Σ_k weights[t, k] · expert_e(x_t) over the token's experts in ascending id, then + the
     * shared experts' output when moe has them; each expert is a SwiGLU MLP ({@link MoeExperts}). This default permutes
     * the (token, choice) pairs by expert on the device ({@link #moePermute}), runs the experts as
     * {@link #gemmExpertsSwiglu} and {@link #gemmExperts} and sums with {@link #moeCombine}, its buffers from the pass's
     * floats and ints; a device may run the experts its own way with the same bits per token. Rows as the pass's rules
     * say, by token.
     */
    @Composite
    default void moeExperts(Buf x, int t, Buf experts, Buf weights, MoeExperts moe, Buf y, PassRules pass) {
        MoeShape s = moe.shape();
        int hidden = s.hidden();
        int inter = s.moeInter();
        int topK = s.numExpertsPerTok();
        int nExperts = moe.gateUp().length;
        int pairs = t * topK;
        LongFunction<Buf> floats = pass.floats();
        LongFunction<Buf> ints = pass.ints();
        // Slots: the pairs grouped by expert in ascending id, tokens in order within an expert.
        Buf offsets = ints.apply(nExperts + 1L); // expert e's slots [offsets[e], offsets[e + 1])
        Buf slotOf = ints.apply(pairs); // slot of each (token, choice)
        Buf slotRow = ints.apply(pairs); // token of each slot
        moePermute(experts, t, topK, nExperts, offsets, slotOf, slotRow);
        Buf xs = floats.apply((long) pairs * hidden); // [slots, hidden]
        gatherRows(x, slotRow, pairs, hidden, xs);
        Buf act = floats.apply((long) pairs * inter); // [slots, moe_intermediate]
        gemmExpertsSwiglu(xs, offsets, pairs, hidden, moe.gateUp(), inter, act, pass.precision());
        Buf ye = floats.apply((long) pairs * hidden); // [slots, hidden]
        gemmExperts(act, offsets, pairs, inter, moe.down(), hidden, ye, pass.precision());
        Buf shared = null;
        if (moe.shared() != null) {
            shared = floats.apply((long) t * hidden);
            mlp(moe.shared(), x, t, shared, pass);
        }
        moeCombine(ye, slotOf, weights, t, topK, hidden, shared, y);
    }

    /**
     * Router logits [t, n_routed_experts] → experts and weights [t, top_k], experts in ascending id, by the noaux_tc
     * router of s.
     */
    void moeRoute(Buf logits, Buf bias, int t, MoeShape s, Buf experts, Buf weights);

    /**
     * Per logits row r of [rows, vocab]: stats[3r] = log-sum-exp, stats[3r + 1] = logits[r, targets[r]] (0 when
     * targets[r] &lt; 0), stats[3r + 2] = argmax (lowest index on ties).
     */
    void logSoftmaxStats(Buf logits, int rows, int vocab, Buf targets, Buf stats);

    /**
     * {@link #logSoftmaxStats(Buf, int, int, Buf, Buf)} read back into out [3 · rows] on the host, stats being its
     * scratch: this default reads the device's fp32 stats; the CPU device computes them on the logits in place, the
     * log-sum-exp in double as its kernels reduce it.
     */
    default void logSoftmaxStats(Buf logits, int rows, int vocab, Buf targets, Buf stats, double[] out) {
        logSoftmaxStats(logits, rows, vocab, targets, stats);
        float[] f = new float[3 * rows];
        read(stats, f, 0, f.length);
        for (int i = 0; i < f.length; i++) {
            out[i] = f[i];
        }
    }

    /**
     * src's first n floats on the host, from index 0 of the array returned: src's own array where this device keeps it
     * as one from index 0 (a heap device: no copy), else into (a new array when into is null or short) read from the
     * device.
     */
    default float[] hostFloats(Buf src, int n, float[] into) {
        float[] dst = into != null && into.length >= n ? into : new float[n];
        read(src, dst, 0, n);
        return dst;
    }

    /**
     * YaRN cos/sin of positions [0, positions) at least, [positions, qk_rope_head_dim] as {@link Rope#table} lays them
     * out, on this device; previous (the last table this call returned, or null) is no longer used.
     */
    @Composite
    default Buf ropeTable(Rope rope, int positions, Buf previous) {
        if (previous != null) {
            free(previous);
        }
        return upload(java.util.Arrays.copyOf(rope.table(positions), positions * rope.dim()));
    }

    /**
     * Whether scratch is best carved from large blocks ({@code Arena}); false for a device whose kernels take whole
     * heap arrays (the CPU's), which gets one array per slice instead.
     */
    default boolean slicesScratch() {
        return true;
    }

    /**
     * Records step's device work as a graph without running it; {@link DeviceGraph#launch} runs it. Every call is
     * recorded with its arguments as given: buffers are read when the graph runs, host numbers are baked. So step must
     * make no host reads, writes, allocations or synchronisation, and everything that changes between launches must
     * live in buffers written before each launch. This default records nothing: launch runs step again.
     */
    @Composite
    default DeviceGraph capture(Runnable step) {
        return DeviceGraph.rerun(step);
    }

    /** Waits until everything queued so far has run (for timing). */
    void synchronize();

    @Override
    void close();
}
