package dev.scorch.engine.device.host;

import dev.scorch.engine.checkpoint.NumberFormats;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.DequantPlan;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.KeyTiles;
import dev.scorch.engine.device.MlaShape;
import dev.scorch.engine.device.PackedFp8;
import dev.scorch.engine.device.PackedInt4;
import dev.scorch.engine.device.Rotary;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.kernels.Rope;

/**
 * {@link Device} in plain Java loops over heap arrays: the twin of the CUDA kernels, one loop nest per kernel,
 * with the same rounding (BF16 weights and GEMM inputs, fp32 sums, log-sum-exp in fp64). Tests run
 * {@code GpuModel} on it to check the GPU path's model code without a GPU; it is not meant to be fast.
 */
public final class HostDevice extends HeapDevice {
    private long dequantScratchBytes;

    @Override
    public String describe() {
        return "host (Java loops standing in for a GPU)";
    }

    @Override
    public long totalBytes() {
        return Runtime.getRuntime().maxMemory();
    }

    @Override
    public long freeBytes() {
        return Runtime.getRuntime().maxMemory() - allocated;
    }

    @Override
    public Buf denseWeight(GemmPrecision precision, Linear... stacked) {
        int n = 0;
        for (Linear w : stacked) {
            n += w.out() * w.in();
        }
        float[] all = new float[n];
        int at = 0;
        for (Linear w : stacked) {
            float[] v = w.toFloat();
            System.arraycopy(v, 0, all, at, v.length);
            at += v.length;
        }
        return weight(all, precision);
    }

    @Override
    public Buf weight(float[] w, GemmPrecision precision) {
        float[] v = w.clone();
        if (precision.bf16Weights()) {
            for (int i = 0; i < v.length; i++) {
                v[i] = bf16(v[i]);
            }
        }
        allocated += (long) v.length * precision.weightBytes();
        return new Buf(v, precision.bf16Weights() ? Buf.Kind.BF16 : Buf.Kind.F32, 0, v.length);
    }

    static float bf16(float v) {
        return NumberFormats.roundToBf16(v);
    }

    @Override
    public void gemm(Buf x, int m, int k, Buf w, int n, Buf y, GemmPrecision precision) {
        if (w.storage() instanceof PackedInt4 p) {
            p.check(n, k);
            DequantPlan plan = p.plan(precision);
            dequantGemm(x, m, k, n, y, plan, (row0, rows, parts) -> int4Dequant(p, row0, rows, plan.fp32(), parts));
            return;
        }
        if (w.storage() instanceof PackedFp8 p) {
            p.check(n, k);
            DequantPlan plan = p.plan(precision);
            dequantGemm(x, m, k, n, y, plan, (row0, rows, parts) -> fp8Dequant(p, row0, rows, plan.fp32(), parts));
            return;
        }
        float[] xs = floats(x.need(Buf.Kind.F32, (long) m * k, "gemm x"));
        float[] ws = floats(w);
        float[] ys = floats(y.need(Buf.Kind.F32, (long) m * n, "gemm y"));
        if (w.length() < (long) n * k) {
            throw new IllegalArgumentException("gemm w: needs " + n + " x " + k + ", got " + w.length());
        }
        int parts = w.kind() == Buf.Kind.BF16 ? Math.max(1, precision.inputParts()) : 0;
        float[][] part = new float[Math.max(1, parts)][k];
        for (int i = 0; i < m; i++) {
            splitRow(xs, off(x) + i * k, k, parts == 0, parts, part);
            for (int j = 0; j < n; j++) {
                int wo = off(w) + j * k;
                float acc = 0f;
                for (int p = 0; p < part.length; p++) {
                    acc += dot(part[p], ws, wo, k);
                }
                ys[off(y) + i * n + j] = acc;
            }
        }
    }

    /** Writes rows [row0, row0 + rows) of a packed weight into a tile: fp32 into parts[0], or its BF16 parts. */
    private interface Dequantiser {
        void tile(int row0, int rows, float[][] parts);
    }

    /**
     * A packed weight's GEMM as CUDA runs it ({@link DequantPlan}): per tile of weight rows, the dequantisation kernel's
     * weights (fp32, or BF16 parts), then the plan's GEMMs, each a sequential fp32 sum over k as {@link #gemm}'s, added
     * into y in order.
     */
    private void dequantGemm(Buf x, int m, int k, int n, Buf y, DequantPlan plan, Dequantiser dequant) {
        float[] xs = floats(x.need(Buf.Kind.F32, (long) m * k, "gemm x"));
        float[] ys = floats(y.need(Buf.Kind.F32, (long) m * n, "gemm y"));
        int tileRows = DequantPlan.tileRows(n, k);
        long scratch = plan.scratchBytes((long) tileRows * k);
        if (scratch > dequantScratchBytes) { // as CUDA's dequantisation scratch, which only grows
            allocated += scratch - dequantScratchBytes;
            dequantScratchBytes = scratch;
        }
        float[][] tile = new float[Math.max(1, plan.weightParts())][tileRows * k]; // fp32 weights in an fp32 plan
        float[][] part = new float[Math.max(1, plan.inputParts())][k];
        for (int r0 = 0; r0 < n; r0 += tileRows) {
            int nb = Math.min(tileRows, n - r0);
            dequant.tile(r0, nb, tile);
            for (int i = 0; i < m; i++) {
                splitRow(xs, off(x) + i * k, k, plan.fp32(), plan.inputParts(), part);
                for (int j = 0; j < nb; j++) {
                    float acc = 0f;
                    if (plan.fp32()) {
                        acc += dot(part[0], tile[0], j * k, k);
                    }
                    for (int a = 0; a < plan.weightParts(); a++) {
                        for (int p = 0; p < plan.inputParts() - a; p++) {
                            acc += dot(part[p], tile[a], j * k, k);
                        }
                    }
                    ys[off(y) + i * n + r0 + j] = acc;
                }
            }
        }
    }

    /** The k values of x from at into part[0] as they are (fp32), then into parts BF16 parts (x ≈ part[0] + part[1] ..). */
    private static void splitRow(float[] xs, int at, int k, boolean fp32, int parts, float[][] part) {
        for (int c = 0; c < k; c++) {
            float r = xs[at + c];
            if (fp32) {
                part[0][c] = r;
            }
            for (int p = 0; p < parts; p++) {
                part[p][c] = bf16(r);
                r -= part[p][c];
            }
        }
    }

    private static float dot(float[] a, float[] b, int bo, int k) {
        float sum = 0f;
        for (int c = 0; c < k; c++) {
            sum += a[c] * b[bo + c];
        }
        return sum;
    }

    /**
     * The int4_dequant kernels' twin: rows [row0, row0 + rows) of w, W = q · scale in fp32, into parts[0] (fp32), or its
     * BF16 parts hi = bf16(W) into parts[0] and lo = bf16(W - hi) into parts[1] when there is a second.
     */
    static void int4Dequant(PackedInt4 w, int row0, int rows, boolean fp32, float[][] parts) {
        int[] packed = ints(w.packed());
        float[] scales = floats(w.scales());
        int words = w.wordsPerRow();
        int groups = w.groupsPerRow();
        int k = w.cols();
        for (int r = 0; r < rows; r++) {
            int po = off(w.packed()) + (row0 + r) * words;
            int so = off(w.scales()) + (row0 + r) * groups;
            for (int c = 0; c < k; c++) {
                int q = ((packed[po + c / 8] >>> (4 * (c % 8))) & 0xF) - 8;
                float v = q * scales[so + c / w.groupSize()];
                if (fp32) {
                    parts[0][r * k + c] = v;
                } else {
                    float h = bf16(v);
                    parts[0][r * k + c] = h;
                    if (parts.length > 1) {
                        parts[1][r * k + c] = PackedInt4.lo(v, h);
                    }
                }
            }
        }
    }

    /**
     * The fp8_dequant kernels' twin: rows [row0, row0 + rows) of w, W = e4m3(code) · scale in fp32, into parts[0] (fp32),
     * or its BF16 parts into parts[0 ..] ({@link PackedFp8#part}).
     */
    static void fp8Dequant(PackedFp8 w, int row0, int rows, boolean fp32, float[][] parts) {
        int[] codes = ints(w.codes());
        float[] scales = floats(w.scales());
        int[] scaleRows = ints(w.scaleRows());
        int k = w.cols();
        int scaleCols = w.scaleCols();
        for (int r = 0; r < rows; r++) {
            long at = (long) (row0 + r) * k;
            int so = off(w.scales()) + scaleRows[off(w.scaleRows()) + row0 + r] * scaleCols;
            for (int c = 0; c < k; c++, at++) {
                byte code = (byte) (codes[off(w.codes()) + (int) (at >>> 2)] >>> (8 * (int) (at & 3)));
                float v = NumberFormats.e4m3ToFloat(code) * scales[so + c / w.blockCols()];
                if (fp32) {
                    parts[0][r * k + c] = v;
                } else {
                    for (int a = 0; a < parts.length; a++) {
                        parts[a][r * k + c] = PackedFp8.part(v, a);
                    }
                }
            }
        }
    }

    @Override
    public void rmsNorm(Buf x, int rows, int stride, int offset, int dim, Buf weight, double epsilon, Buf out) {
        float eps = (float) epsilon; // the CUDA kernel's
        float[] xs = floats(x);
        float[] ws = floats(weight);
        float[] os = floats(out.need(Buf.Kind.F32, (long) rows * dim, "rmsNorm out"));
        for (int r = 0; r < rows; r++) {
            int xi = off(x) + r * stride + offset;
            float ss = 0f;
            for (int i = 0; i < dim; i++) {
                ss += xs[xi + i] * xs[xi + i];
            }
            float inv = (float) (1.0 / Math.sqrt(ss / dim + eps));
            for (int i = 0; i < dim; i++) {
                os[off(out) + r * dim + i] = ws[off(weight) + i] * (xs[xi + i] * inv);
            }
        }
    }

    @Override
    public void rope(Buf x, int rows, int heads, int rowStride, int headStride, int offset, int ropeDim, Rotary rot) {
        Buf positions = rot.positions();
        Buf cosSin = rot.cosSin();
        float[] xs = floats(x);
        int[] pos = ints(positions);
        float[] cs = floats(cosSin);
        for (int r = 0; r < rows; r++) {
            int c0 = off(cosSin) + pos[off(positions) + r] * ropeDim;
            for (int h = 0; h < heads; h++) {
                Rope.rotate(xs, off(x) + r * rowStride + h * headStride + offset, ropeDim, cs, c0);
            }
        }
    }

    @Override
    public void copyCols(Buf src, int rows, int srcStride, int srcOff, int width, Buf dst, int dstStride, int dstOff) {
        for (int r = 0; r < rows; r++) {
            System.arraycopy(
                    floats(src),
                    off(src) + r * srcStride + srcOff,
                    floats(dst),
                    off(dst) + r * dstStride + dstOff,
                    width);
        }
    }

    @Override
    public void add(Buf x, Buf y, long n) {
        float[] xs = floats(x);
        float[] ys = floats(y);
        for (int i = 0; i < n; i++) {
            xs[off(x) + i] += ys[off(y) + i];
        }
    }

    @Override
    public void swiglu(Buf gu, int rows, int inter, Buf out) {
        float[] in = floats(gu);
        float[] os = floats(out);
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < inter; c++) {
                float a = in[off(gu) + r * 2 * inter + c];
                os[off(out) + r * inter + c] =
                        a / (1f + (float) Math.exp(-a)) * in[off(gu) + r * 2 * inter + inter + c];
            }
        }
    }

    @Override
    public void gatherRows(Buf x, Buf rows, int n, int width, Buf out) {
        int[] rs = ints(rows);
        for (int j = 0; j < n; j++) {
            System.arraycopy(floats(x), off(x) + rs[off(rows) + j] * width, floats(out), off(out) + j * width, width);
        }
    }

    @Override
    public void mlaAttention(Buf q, Buf kv, Buf kPe, KeyTiles keys, MlaShape s, Buf out) {
        checkTiles(keys);
        Buf tiles = keys.tiles();
        int[] ts = ints(tiles);
        for (int tile = 0; tile < keys.numTiles(); tile++) {
            int q0 = ts[off(tiles) + 2 * tile];
            for (int i = q0; i < q0 + ts[off(tiles) + 2 * tile + 1]; i++) {
                attend(q, kv, kPe, keys, i, s, out);
            }
        }
    }

    /** Query i of {@link #mlaAttention}, every head. */
    private static void attend(Buf q, Buf kv, Buf kPe, KeyTiles keys, int i, MlaShape shape, Buf out) {
        float[] qs = floats(q);
        float[] kvs = floats(kv);
        float[] pes = floats(kPe);
        float[] os = floats(out);
        int heads = shape.heads();
        int qkNope = shape.qkNope();
        int qkRope = shape.qkRope();
        int vHead = shape.vHead();
        float scale = shape.scale();
        int qHead = shape.qHead();
        int kvHead = shape.kvHead();
        Buf keyStart = keys.keyStart();
        Buf keyLen = keys.keyLen();
        int k0 = ints(keyStart)[off(keyStart) + i];
        int len = ints(keyLen)[off(keyLen) + i];
        for (int h = 0; h < heads; h++) {
            int qo = off(q) + (i * heads + h) * qHead;
            float[] s = new float[len];
            float max = Float.NEGATIVE_INFINITY;
            for (int j = 0; j < len; j++) {
                int ko = off(kv) + ((k0 + j) * heads + h) * kvHead;
                int po = off(kPe) + (k0 + j) * qkRope;
                float dot = 0f;
                for (int d = 0; d < qkNope; d++) {
                    dot += qs[qo + d] * kvs[ko + d];
                }
                for (int d = 0; d < qkRope; d++) {
                    dot += qs[qo + qkNope + d] * pes[po + d];
                }
                s[j] = dot * scale;
                max = Math.max(max, s[j]);
            }
            float sum = 0f;
            for (int j = 0; j < len; j++) {
                s[j] = (float) Math.exp(s[j] - max);
                sum += s[j];
            }
            int oo = off(out) + (i * heads + h) * vHead;
            for (int d = 0; d < vHead; d++) {
                float acc = 0f;
                for (int j = 0; j < len; j++) {
                    acc += s[j] * kvs[off(kv) + ((k0 + j) * heads + h) * kvHead + qkNope + d];
                }
                os[oo + d] = acc / sum;
            }
        }
    }

    /** The tiles must be in ascending order and apart, within the t queries, each inside one sequence (one key_start). */
    private static void checkTiles(KeyTiles keys) {
        Buf tiles = keys.tiles();
        Buf keyStart = keys.keyStart();
        int numTiles = keys.numTiles();
        int t = keys.t();
        int[] ts = ints(tiles);
        int[] ks = ints(keyStart);
        int next = 0;
        for (int i = 0; i < numTiles; i++) {
            int q0 = ts[off(tiles) + 2 * i];
            int n = ts[off(tiles) + 2 * i + 1];
            if (q0 < next || n < 1 || n > ATTENTION_TILE || q0 + n > t) {
                throw new IllegalArgumentException("attention tile " + i + " (" + q0 + ", " + n
                        + ") does not follow query " + (next - 1) + " within " + t + " queries");
            }
            for (int j = 1; j < n; j++) {
                if (ks[off(keyStart) + q0 + j] != ks[off(keyStart) + q0]) {
                    throw new IllegalArgumentException("attention tile " + i + " spans two sequences");
                }
            }
            next = q0 + n;
        }
    }

    /**
     * The absorbed form with the order of every sum of the CPU's {@code LatentAttention.attendScalar}: FMA chains in
     * index order, exp in double rounded to float, one sum of the exponentials, then the probabilities.
     */
    @Override
    public void mlaDecode(Buf q, int rows, Buf cache, int past, Buf kvBProj, MlaShape s, Buf out) {
        int heads = s.heads();
        int qkNope = s.qkNope();
        int qkRope = s.qkRope();
        int vHead = s.vHead();
        float scale = s.scale();
        int qHead = s.qHead();
        int width = s.kvAWidth();
        int rank = s.kvLoraRank();
        float[] qs = floats(q.need(Buf.Kind.F32, (long) rows * heads * qHead, "mlaDecode q"));
        float[] cs = floats(cache.need(Buf.Kind.F32, (long) (past + rows) * width, "mlaDecode cache"));
        if (kvBProj.kind() != Buf.Kind.F32 && kvBProj.kind() != Buf.Kind.BF16) {
            throw new IllegalArgumentException("mlaDecode takes kv_b_proj in F32 or BF16, not " + kvBProj.kind());
        }
        float[] w = floats(kvBProj.need(kvBProj.kind(), (long) heads * (qkNope + vHead) * rank, "mlaDecode kv_b_proj"));
        float[] os = floats(out.need(Buf.Kind.F32, (long) rows * heads * vHead, "mlaDecode out"));
        int c0 = off(cache);
        float[] qLat = new float[rank];
        float[] oLat = new float[rank];
        float[] scores = new float[past + rows];
        for (int i = 0; i < rows; i++) {
            int len = past + i + 1; // causal: the cache before this pass, then its tokens up to i
            for (int h = 0; h < heads; h++) {
                int qo = off(q) + (i * heads + h) * qHead;
                int wo = off(kvBProj) + h * (qkNope + vHead) * rank; // W_UK of head h; W_UV at + qk_nope rows
                // q_latent[c] = Σ_d q_nope[d] · W_UK[d, c]
                java.util.Arrays.fill(qLat, 0f);
                for (int d = 0; d < qkNope; d++) {
                    for (int c = 0; c < rank; c++) {
                        qLat[c] = Math.fma(qs[qo + d], w[wo + d * rank + c], qLat[c]);
                    }
                }
                float max = Float.NEGATIVE_INFINITY;
                for (int j = 0; j < len; j++) {
                    int co = c0 + j * width;
                    float lat = 0f;
                    for (int c = 0; c < rank; c++) {
                        lat = Math.fma(qLat[c], cs[co + c], lat);
                    }
                    float pe = 0f;
                    for (int d = 0; d < qkRope; d++) {
                        pe = Math.fma(qs[qo + qkNope + d], cs[co + rank + d], pe);
                    }
                    scores[j] = (lat + pe) * scale;
                    max = Math.max(max, scores[j]);
                }
                float sum = 0f;
                for (int j = 0; j < len; j++) {
                    scores[j] = (float) Math.exp(scores[j] - max);
                    sum += scores[j];
                }
                float inv = 1f / sum;
                // o_latent = Σ_j p_j c_j
                java.util.Arrays.fill(oLat, 0f);
                for (int j = 0; j < len; j++) {
                    float p = scores[j] * inv;
                    for (int c = 0; c < rank; c++) {
                        oLat[c] = Math.fma(p, cs[c0 + j * width + c], oLat[c]);
                    }
                }
                // out[e] = W_UV[e] · o_latent
                int oo = off(out) + (i * heads + h) * vHead;
                for (int e = 0; e < vHead; e++) {
                    int uv = wo + (qkNope + e) * rank;
                    float acc = 0f;
                    for (int c = 0; c < rank; c++) {
                        acc = Math.fma(w[uv + c], oLat[c], acc);
                    }
                    os[oo + e] = acc;
                }
            }
        }
    }

    @Override
    public void moePermute(Buf experts, int t, int topK, int nExperts, Buf offsets, Buf slotOf, Buf slotRow) {
        permute(experts, t, topK, nExperts, offsets, slotOf, slotRow);
    }

    /** {@link #moePermute} over heap arrays (the CPU device's too). */
    public static void permute(Buf experts, int t, int topK, int nExperts, Buf offsets, Buf slotOf, Buf slotRow) {
        int pairs = t * topK;
        int[] ex = ints(experts.need(Buf.Kind.I32, pairs, "moePermute experts"));
        int[] os = ints(offsets.need(Buf.Kind.I32, nExperts + 1L, "moePermute offsets"));
        int[] so = ints(slotOf.need(Buf.Kind.I32, pairs, "moePermute slotOf"));
        int[] sr = ints(slotRow.need(Buf.Kind.I32, pairs, "moePermute slotRow"));
        int[] next = new int[nExperts];
        for (int i = 0; i < pairs; i++) {
            int e = ex[off(experts) + i];
            if (e < 0 || e >= nExperts) {
                throw new IllegalArgumentException(
                        "moePermute: expert " + e + " of pair " + i + " is not in [0, " + nExperts + ")");
            }
            next[e]++;
        }
        int o = off(offsets);
        os[o] = 0;
        for (int e = 0; e < nExperts; e++) {
            os[o + e + 1] = os[o + e] + next[e];
            next[e] = os[o + e];
        }
        for (int i = 0; i < pairs; i++) {
            int slot = next[ex[off(experts) + i]]++;
            so[off(slotOf) + i] = slot;
            sr[off(slotRow) + slot] = i / topK;
        }
    }

    @Override
    public void moeCombine(Buf ye, Buf slot, Buf weights, int tokens, int topK, int width, Buf addend, Buf y) {
        combine(ye, slot, weights, tokens, topK, width, addend, y);
    }

    /** {@link #moeCombine} over heap arrays (the CPU device's too). */
    public static void combine(Buf ye, Buf slot, Buf weights, int tokens, int topK, int width, Buf addend, Buf y) {
        float[] es = floats(ye);
        int[] ss = ints(slot);
        float[] ws = floats(weights);
        float[] ys = floats(y);
        float[] as = addend == null ? null : floats(addend);
        for (int t = 0; t < tokens; t++) {
            for (int c = 0; c < width; c++) {
                float a = 0f;
                for (int k = 0; k < topK; k++) {
                    a += ws[off(weights) + t * topK + k] * es[off(ye) + ss[off(slot) + t * topK + k] * width + c];
                }
                if (as != null) {
                    a += as[off(addend) + t * width + c];
                }
                ys[off(y) + t * width + c] = a;
            }
        }
    }

    @Override
    protected NoauxTcRouter.Scratch routerScratch() {
        return new NoauxTcRouter.Scratch();
    }

    @Override
    public void logSoftmaxStats(Buf logits, int rows, int vocab, Buf targets, Buf stats) {
        stats(logits, rows, vocab, targets, stats);
    }

    /** {@link #logSoftmaxStats} over heap arrays (the CPU device's too). */
    public static void stats(Buf logits, int rows, int vocab, Buf targets, Buf stats) {
        float[] ls = floats(logits);
        float[] ss = floats(stats);
        for (int r = 0; r < rows; r++) {
            int o = off(logits) + r * vocab;
            int target = ints(targets)[off(targets) + r];
            ss[off(stats) + 3 * r] = (float) LogSoftmax.logSumExp(ls, o, vocab);
            ss[off(stats) + 3 * r + 1] = target >= 0 ? ls[o + target] : 0f;
            ss[off(stats) + 3 * r + 2] = LogSoftmax.argmax(ls, o, vocab);
        }
    }

    @Override
    public void synchronize() {}

    @Override
    public void close() {}
}
