package dev.scorch.engine.kernels;

import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * The CPU device's kernels ({@link dev.scorch.engine.device.cpu.CpuDevice} is the seam; this is what it runs, not a
 * second seam): packed-panel Vector API GEMM for prefill, row-dot GEMM straight from the mapped weights for decode
 * (scalar fallback without SIMD for both), and attention computed one query row at a time per (sequence, head, query
 * tile) work item, so no [T × T × heads] score tensor exists. Every reduction has a fixed order independent of batch
 * mates and thread count. The plain-loop twin of the whole device is {@link dev.scorch.engine.device.host.HostDevice}.
 * Not final only so that a fault-injection test can stand in for a matmul.
 */
public class CpuOps implements AutoCloseable {
    private final Parallel par;
    private final boolean simd;
    private final CpuPrecision precision;
    /** Decode's: precision where {@link RowDotGemm#runs} it, else fp32 (the selection's decode_precision says why). */
    private final CpuPrecision decodePrecision;

    /**
     * The Vector API and native kernels where {@link KernelSelection} picks them (the Vector API has 4+ lanes), else
     * scalar; prefill's GEMMs in the selection's precision.
     */
    public CpuOps(int threads) {
        this(threads, KernelSelection.current().simd());
    }

    public CpuOps(int threads, boolean simd) {
        this(threads, simd, simd ? KernelSelection.current().cpuPrecision() : CpuPrecision.FP32);
    }

    /** Prefill's GEMMs in precision, which must run here ({@link PackedGemm#runs}; fp32 without simd). */
    public CpuOps(int threads, CpuPrecision precision) {
        this(threads, KernelSelection.current().simd(), precision);
    }

    private CpuOps(int threads, boolean simd, CpuPrecision precision) {
        if (precision != CpuPrecision.FP32 && !(simd && PackedGemm.runs(precision))) {
            throw new IllegalArgumentException("CPU precision " + precision.id() + " does not run here: "
                    + KernelSelection.current().precision().reason());
        }
        this.par = new Parallel(threads);
        this.simd = simd;
        this.precision = precision;
        this.decodePrecision = simd && RowDotGemm.runs(precision) ? precision : CpuPrecision.FP32;
    }

    /** How prefill's GEMMs multiply. */
    public CpuPrecision precision() {
        return precision;
    }

    /** How decode's GEMMs multiply BF16 weights: the precision, or fp32 where the decode kernel for it does not run. */
    public CpuPrecision decodePrecision() {
        return decodePrecision;
    }

    public boolean simd() {
        return simd;
    }

    public int threads() {
        return par.threads();
    }

    /** y[m, out] = x[m, in] · Wᵀ: prefill's and scoring's GEMM. */
    public void matmul(float[] x, int m, Linear w, float[] y) {
        if (simd) {
            PackedGemm.matmul(x, m, w, y, par, precision);
        } else {
            ScalarGemm.matmul(x, m, w, y, par);
        }
    }

    /**
     * y[g] = x · w[g]ᵀ for weights that share their input x [m, in] (q_a_proj with kv_a_proj, gate_proj with
     * up_proj), as one pass; each y[g] has the bits {@link #matmul(float[], int, Linear, float[])} gives it alone.
     */
    public void matmul(float[] x, int m, Linear[] w, float[][] y) {
        if (simd) {
            PackedGemm.matmul(x, m, w, y, par, precision);
        } else {
            for (int g = 0; g < w.length; g++) {
                matmul(x, m, w[g], y[g]);
            }
        }
    }

    /**
     * y[m, out] = x[m, in] · Wᵀ for decode-shaped calls (m of 1 to a few dozen rows), the matmul of every token that
     * extends a KV cache: each output row's bits depend only on its x row and W (never on m, the other rows or the
     * threads), but may differ from {@link #matmul}'s in rounding. In {@link #decodePrecision}. Without SIMD, the scalar
     * FMA chain as matmul.
     */
    public void matmulDecode(float[] x, int m, Linear w, float[] y) {
        if (simd) {
            RowDotGemm.matmul(x, m, w, y, par, decodePrecision);
        } else {
            ScalarGemm.matmul(x, m, w, y, par);
        }
    }

    /** Independent decode matmuls y[g] = x[g] · w[g]ᵀ (the experts of a step) as one pass, each with its own bits. */
    public void matmulDecode(float[][] x, int[] m, Linear[] w, float[][] y) {
        if (simd) {
            RowDotGemm.matmulGroup(x, m, w, y, par, decodePrecision);
        } else {
            for (int g = 0; g < w.length; g++) {
                matmulDecode(x[g], m[g], w[g], y[g]);
            }
        }
    }

    /** log Σ e^(x[i]) over x[off .. off + n), a row of logits' log-softmax denominator: the same bits on every call. */
    public double logSumExp(float[] x, int off, int n) {
        if (!simd) {
            return LogSoftmax.logSumExp(x, off, n);
        }
        return NativeVecMath.AVAILABLE
                ? NativeVecMath.logSumExp(x, off, n)
                : VecMath.logSumExp(x, off, n); // the same bits
    }

    /** g[i] = silu(g[i]) · u[i] over [off, off + n), SwiGLU's gate; each element's bits depend on its g and u alone. */
    public void siluMul(float[] g, float[] u, int off, int n) {
        if (simd) {
            if (NativeVecMath.AVAILABLE) {
                NativeVecMath.siluMul(g, u, off, n); // the same bits
            } else {
                VecMath.siluMul(g, u, off, n);
            }
        } else {
            for (int i = off; i < off + n; i++) {
                g[i] = silu(g[i]) * u[i];
            }
        }
    }

    /** body(i) for i in [0, n) over the threads: row work beside the kernels; each item the same on any thread. */
    public void forEachRow(int n, java.util.function.IntConsumer body) {
        par.forEach(n, body);
    }

    /** out[T, heads, v_head]: causal softmax(q·kᵀ · scale) · v per sequence, softmax in fp32. */
    public void attention(MlaInputs in, float[] out) {
        if (simd) {
            // One work item per (sequence, head): its keys are transposed once, then every query row is scored.
            AttendHeads items = ATTEND_HEADS.get();
            items.set(in, out);
            try {
                par.forEach(in.seqLen().length * in.heads(), items);
            } finally {
                items.set(null, null);
            }
            return;
        }
        int maxLen = 0;
        for (int len : in.seqLen()) {
            maxLen = Math.max(maxLen, len);
        }
        int scoreLen = maxLen;
        int heads = in.heads();
        par.forEach(in.seqLen().length * heads, item -> {
            int s = item / heads;
            float[] scores = new float[scoreLen];
            for (int i = 0; i < in.seqLen()[s]; i++) {
                attendRow(in, in.seqStart()[s], i, item % heads, scores, out);
            }
        });
    }

    /**
     * Item (sequence, head) = (item / heads, item % heads) of one attention call. One per calling thread, set per
     * call, so that a call makes no lambda (a layer calls once per group of sequences).
     */
    private static final class AttendHeads implements java.util.function.IntConsumer {
        private MlaInputs in;
        private float[] out;

        void set(MlaInputs in, float[] out) {
            this.in = in;
            this.out = out;
        }

        @Override
        public void accept(int item) {
            if (NativeAttention.supports(in)) {
                NativeAttention.attendHead(in, item / in.heads(), item % in.heads(), out); // the same bits, in C
            } else {
                VecMath.attendHead(in, item / in.heads(), item % in.heads(), out);
            }
        }
    }

    private static final ThreadLocal<AttendHeads> ATTEND_HEADS = ThreadLocal.withInitial(AttendHeads::new);

    /** One query row i (0-based inside its sequence starting at packed row base) of head h. */
    private void attendRow(MlaInputs in, int base, int i, int h, float[] scores, float[] out) {
        int qHead = in.qHead();
        int heads = in.heads();
        int qOff = ((base + i) * heads + h) * qHead;
        float max = Float.NEGATIVE_INFINITY;
        for (int j = 0; j <= i; j++) {
            int kOff = in.kvOffset(base + j, h);
            float nope = dot(in.q(), qOff, in.kv(), kOff, in.qkNope());
            float pe = dot(in.q(), qOff + in.qkNope(), in.kPe(), (base + j) * in.qkRope(), in.qkRope());
            float sc = (nope + pe) * in.scale();
            scores[j] = sc;
            max = Math.max(max, sc);
        }
        float sum = 0;
        for (int j = 0; j <= i; j++) {
            float e = (float) Math.exp(scores[j] - max);
            scores[j] = e;
            sum += e;
        }
        float inv = 1f / sum;
        int vDim = in.vHead();
        int oOff = ((base + i) * heads + h) * vDim;
        java.util.Arrays.fill(out, oOff, oOff + vDim, 0f);
        for (int j = 0; j <= i; j++) {
            float p = scores[j] * inv;
            int vOff = in.kvOffset(base + j, h) + in.qkNope();
            axpy(p, in.kv(), vOff, out, oOff, vDim);
        }
    }

    private float dot(float[] a, int ao, float[] b, int bo, int n) {
        if (!simd) {
            float acc = 0;
            for (int k = 0; k < n; k++) {
                acc = Math.fma(a[ao + k], b[bo + k], acc);
            }
            return acc;
        }
        return VecMath.dot(a, ao, b, bo, n);
    }

    private void axpy(float p, float[] x, int xo, float[] y, int yo, int n) {
        if (simd) {
            VecMath.axpy(p, x, xo, y, yo, n);
            return;
        }
        for (int k = 0; k < n; k++) {
            y[yo + k] = Math.fma(p, x[xo + k], y[yo + k]);
        }
    }

    /** silu(x) = x / (1 + e^-x) in double, rounded once: the plain loops' activation. */
    static float silu(float x) {
        return (float) (x / (1.0 + Math.exp(-x)));
    }

    @Override
    public void close() {
        par.close();
    }

    /** Vector helpers kept apart so the scalar path never loads Vector API classes. */
    static final class VecMath {
        static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
        private static final FloatVector IOTA = FloatVector.broadcast(S, 0f).addIndex(1); // [0, 1, 2, ...]

        /**
         * The lanes [0, n) of a vector: the mask of a partial last vector. A compare against the lane indices, which C2
         * compiles on every x86 vector size; {@code S.indexInRange} is intrinsic only where the CPU has mask registers
         * (AVX-512), and elsewhere its fallback boxes every vector of the method that uses it.
         */
        static VectorMask<Float> lanesBelow(int n) {
            return IOTA.lt((float) n);
        }

        /**
         * Lane-wise FMA over full vectors, then the lanes summed in index order, then a scalar FMA tail.
         * (reduceLanes(ADD) may sum in any order, differently in the interpreter and in compiled code.)
         */
        static float dot(float[] a, int ao, float[] b, int bo, int n) {
            int l = S.length();
            int k = 0;
            float acc = 0;
            if (n >= l) {
                FloatVector v = FloatVector.zero(S);
                for (; k + l <= n; k += l) {
                    v = FloatVector.fromArray(S, a, ao + k).fma(FloatVector.fromArray(S, b, bo + k), v);
                }
                acc = sumLanes(v);
            }
            for (; k < n; k++) {
                acc = Math.fma(a[ao + k], b[bo + k], acc);
            }
            return acc;
        }

        /** Per-thread buffers of attendHead, grown as needed. */
        private static final class HeadScratch {
            float[] kT = new float[0];
            float[] v = new float[0];
            float[][] scores = new float[QUERY_TILE][0];

            float[][] scores(int n) {
                if (scores[0].length < n) {
                    scores = new float[QUERY_TILE][n];
                }
                return scores;
            }

            float[] kT(int n) {
                return kT.length >= n ? kT : (kT = new float[n]);
            }

            float[] v(int n) {
                return v.length >= n ? v : (v = new float[n]);
            }
        }

        private static final ThreadLocal<HeadScratch> HEAD_SCRATCH = ThreadLocal.withInitial(HeadScratch::new);

        /** Query rows scored together against each block of keys (the 4-row tiles here). */
        static final int QUERY_TILE = 4;

        /**
         * Causal attention of one head over one sequence. The head's keys [k_nope | k_pe] are transposed in blocks
         * of 2L keys: kT[block][d][2L] (keys padded to whole blocks), so a block's q_head rows lie one after another
         * (d-major over the whole sequence put them 4 KiB apart: one L1 set for all of them). Each score is one FMA
         * chain over d = 0 .. q_head-1, computed for two vectors of keys at a time and QUERY_TILE queries per load
         * (AVX-512 machines run the native attention, whose 8-row tiles give the same bits);
         * then softmax in fp32 and p · v.
         */
        static void attendHead(MlaInputs in, int s, int h, float[] out) {
            int tile = QUERY_TILE;
            int l = S.length();
            int base = in.seqStart()[s];
            int len = in.seqLen()[s];
            int heads = in.heads();
            int qHead = in.qHead();
            int nope = in.qkNope();
            int rope = in.qkRope();
            int vDim = in.vHead();
            int lenPad = (len + 2 * l - 1) / (2 * l) * (2 * l); // whole pairs of key vectors
            int w = 2 * l;
            HeadScratch hs = HEAD_SCRATCH.get();
            float[] kT = hs.kT(qHead * lenPad); // [len / 2L, q_head, 2L]
            java.util.Arrays.fill(kT, (len / w) * qHead * w, qHead * lenPad, 0f); // the last block's padding keys
            // This head's values [len, v_head], contiguous: the p · v loops stream them instead of striding heads ×
            // kv_head.
            float[] vH = hs.v(len * vDim);
            for (int j = 0; j < len; j++) {
                System.arraycopy(in.kv(), in.kvOffset(base + j, h) + nope, vH, j * vDim, vDim);
            }
            for (int j = 0; j < len; j++) {
                int kOff = in.kvOffset(base + j, h);
                int t = (j / w) * qHead * w + j % w;
                for (int d = 0; d < nope; d++) {
                    kT[t + d * w] = in.kv()[kOff + d];
                }
                for (int d = 0; d < rope; d++) {
                    kT[t + (nope + d) * w] = in.kPe()[(base + j) * rope + d];
                }
            }
            float[][] scores = hs.scores(lenPad); // every entry a tile reads is written by its scoreTile first
            float[] q = in.q();
            int qStride = heads * qHead;
            for (int i0 = 0; i0 < len; i0 += tile) {
                int rows = Math.min(tile, len - i0);
                // The tile's query rows; a partial tile repeats its last row (scored, never used), so the loop has no
                // branches.
                int q0 = ((base + i0) * heads + h) * qHead;
                int q1 = q0 + Math.min(1, rows - 1) * qStride;
                int q2 = q0 + Math.min(2, rows - 1) * qStride;
                int q3 = q0 + Math.min(3, rows - 1) * qStride;
                int jEnd = Math.min(
                        lenPad, (i0 + rows + 2 * l - 1) / (2 * l) * (2 * l)); // keys any row of the tile may see
                scoreTile(kT, qHead, q, q0, q1, q2, q3, jEnd, scores);
                for (int r = 0; r < rows; r++) {
                    int i = i0 + r;
                    int n = i + 1;
                    int nPad = (n + l - 1) / l * l;
                    float[] sc = scores[r];
                    // Scale, then mask the keys past i in the last vector (they are other rows' keys or padding).
                    FloatVector scale = FloatVector.broadcast(S, in.scale());
                    FloatVector vmax = FloatVector.broadcast(S, Float.NEGATIVE_INFINITY);
                    for (int jb = 0; jb < nPad; jb += l) {
                        FloatVector v = FloatVector.fromArray(S, sc, jb).mul(scale);
                        if (jb + l > n) {
                            v = v.blend(
                                    Float.NEGATIVE_INFINITY, lanesBelow(n - jb).not());
                        }
                        v.intoArray(sc, jb);
                        vmax = vmax.max(v);
                    }
                    FloatVector max = FloatVector.broadcast(
                            S, vmax.reduceLanes(VectorOperators.MAX)); // max is exact in any order
                    // exp(s - max) lane-wise, summed per lane, lanes then added in index order: a fixed order.
                    FloatVector vsum = FloatVector.zero(S);
                    for (int jb = 0; jb < nPad; jb += l) {
                        FloatVector e = exp(FloatVector.fromArray(S, sc, jb).sub(max));
                        e.intoArray(sc, jb);
                        vsum = vsum.add(e);
                    }
                    float sum = sumLanes(vsum);
                    float inv = 1f / sum;
                    for (int j = 0; j <= i; j++) {
                        sc[j] *= inv; // the probabilities
                    }
                }
                weightedValuesTile(in, scores, i0, rows, base, h, out, vH);
            }
        }

        /**
         * Raw scores q_r · k_j of 4 query rows (offsets q0 .. q3 in q) against keys [0, jEnd) of kT [blocks, q_head, 2L],
         * one block (2 key vectors) per pass: each score one FMA chain over d = 0 .. q_head - 1.
         */
        static void scoreTile(
                float[] kT, int qHead, float[] q, int q0, int q1, int q2, int q3, int jEnd, float[][] scores) {
            int l = S.length();
            for (int jb = 0; jb < jEnd; jb += 2 * l) {
                int kb = jb * qHead; // block jb / 2L starts at (jb / 2L) · q_head · 2L
                FloatVector a0 = FloatVector.zero(S);
                FloatVector a1 = a0;
                FloatVector a2 = a0;
                FloatVector a3 = a0;
                FloatVector b0 = a0;
                FloatVector b1 = a0;
                FloatVector b2 = a0;
                FloatVector b3 = a0;
                for (int d = 0; d < qHead; d++) {
                    FloatVector k = FloatVector.fromArray(S, kT, kb + d * 2 * l);
                    FloatVector k2 = FloatVector.fromArray(S, kT, kb + d * 2 * l + l);
                    FloatVector v = FloatVector.broadcast(S, q[q0 + d]);
                    a0 = k.fma(v, a0);
                    b0 = k2.fma(v, b0);
                    v = FloatVector.broadcast(S, q[q1 + d]);
                    a1 = k.fma(v, a1);
                    b1 = k2.fma(v, b1);
                    v = FloatVector.broadcast(S, q[q2 + d]);
                    a2 = k.fma(v, a2);
                    b2 = k2.fma(v, b2);
                    v = FloatVector.broadcast(S, q[q3 + d]);
                    a3 = k.fma(v, a3);
                    b3 = k2.fma(v, b3);
                }
                a0.intoArray(scores[0], jb);
                a1.intoArray(scores[1], jb);
                a2.intoArray(scores[2], jb);
                a3.intoArray(scores[3], jb);
                b0.intoArray(scores[0], jb + l);
                b1.intoArray(scores[1], jb + l);
                b2.intoArray(scores[2], jb + l);
                b3.intoArray(scores[3], jb + l);
            }
        }

        /**
         * out[i0 + r] = Σ_{j <= i0 + r} p[r][j] · v_j for the rows of a query tile. With a full tile and v_head a
         * multiple of two vectors, each V vector is loaded once for all four rows, from vH, the head's values copied
         * contiguous [len, v_head]; per element every row gets the same FMA chain over j = 0 .. i as
         * {@link #weightedValues}, so the bits are the same.
         */
        static void weightedValuesTile(
                MlaInputs in, float[][] p, int i0, int rows, int base, int h, float[] out, float[] vH) {
            int l = S.length();
            int vDim = in.vHead();
            if (rows < QUERY_TILE || vDim % (2 * l) != 0) {
                for (int r = 0; r < rows; r++) {
                    weightedValues(in, p[r], i0 + r, base, h, out);
                }
                return;
            }
            int heads = in.heads();
            float[] kv = vH; // this head's values [len, v_head]
            float[] p0 = p[0];
            float[] p1 = p[1];
            float[] p2 = p[2];
            float[] p3 = p[3];
            int oStride = heads * vDim; // out row i + 1 lies this far after row i
            int oOff = ((base + i0) * heads + h) * vDim;
            int vBase = 0; // v of key j starts at vBase + j * vStride in this head's values
            int vStride = vDim;
            for (int d0 = 0; d0 < vDim; d0 += 2 * l) {
                FloatVector a0 = FloatVector.zero(S);
                FloatVector b0 = FloatVector.zero(S);
                FloatVector a1 = FloatVector.zero(S);
                FloatVector b1 = FloatVector.zero(S);
                FloatVector a2 = FloatVector.zero(S);
                FloatVector b2 = FloatVector.zero(S);
                FloatVector a3 = FloatVector.zero(S);
                FloatVector b3 = FloatVector.zero(S);
                int j = 0;
                int v = vBase + d0;
                for (; j <= i0; j++, v += vStride) { // keys every row of the tile sees
                    FloatVector va = FloatVector.fromArray(S, kv, v);
                    FloatVector vb = FloatVector.fromArray(S, kv, v + l);
                    FloatVector w = FloatVector.broadcast(S, p0[j]);
                    a0 = va.fma(w, a0);
                    b0 = vb.fma(w, b0);
                    w = FloatVector.broadcast(S, p1[j]);
                    a1 = va.fma(w, a1);
                    b1 = vb.fma(w, b1);
                    w = FloatVector.broadcast(S, p2[j]);
                    a2 = va.fma(w, a2);
                    b2 = vb.fma(w, b2);
                    w = FloatVector.broadcast(S, p3[j]);
                    a3 = va.fma(w, a3);
                    b3 = vb.fma(w, b3);
                }
                // Keys i0 + 1 .. i0 + 3: key i0 + k is seen by rows k .. 3 only (straight-line code: no vector phis).
                FloatVector va = FloatVector.fromArray(S, kv, v);
                FloatVector vb = FloatVector.fromArray(S, kv, v + l);
                FloatVector w = FloatVector.broadcast(S, p1[j]);
                a1 = va.fma(w, a1);
                b1 = vb.fma(w, b1);
                w = FloatVector.broadcast(S, p2[j]);
                a2 = va.fma(w, a2);
                b2 = vb.fma(w, b2);
                w = FloatVector.broadcast(S, p3[j]);
                a3 = va.fma(w, a3);
                b3 = vb.fma(w, b3);
                j++;
                v += vStride;
                va = FloatVector.fromArray(S, kv, v);
                vb = FloatVector.fromArray(S, kv, v + l);
                w = FloatVector.broadcast(S, p2[j]);
                a2 = va.fma(w, a2);
                b2 = vb.fma(w, b2);
                w = FloatVector.broadcast(S, p3[j]);
                a3 = va.fma(w, a3);
                b3 = vb.fma(w, b3);
                j++;
                v += vStride;
                va = FloatVector.fromArray(S, kv, v);
                vb = FloatVector.fromArray(S, kv, v + l);
                w = FloatVector.broadcast(S, p3[j]);
                a3 = va.fma(w, a3);
                b3 = vb.fma(w, b3);
                a0.intoArray(out, oOff + d0);
                b0.intoArray(out, oOff + d0 + l);
                a1.intoArray(out, oOff + oStride + d0);
                b1.intoArray(out, oOff + oStride + d0 + l);
                a2.intoArray(out, oOff + 2 * oStride + d0);
                b2.intoArray(out, oOff + 2 * oStride + d0 + l);
                a3.intoArray(out, oOff + 3 * oStride + d0);
                b3.intoArray(out, oOff + 3 * oStride + d0 + l);
            }
        }

        /**
         * out[i] = Σ_{j <= i} p_j · v_j for one query row, with up to four vectors of the output held in registers
         * while j runs: per element the same FMA chain over j = 0 .. i as a plain loop would compute.
         */
        static void weightedValues(MlaInputs in, float[] p, int i, int base, int h, float[] out) {
            int l = S.length();
            int heads = in.heads();
            int kvHead = in.kvHead();
            int vDim = in.vHead();
            float[] kv = in.kv();
            int oOff = ((base + i) * heads + h) * vDim;
            int vBase = in.kvOffset(base, h) + in.qkNope(); // v of key j starts at vBase + j * vStride
            int vStride = heads * kvHead;
            int d0 = 0;
            for (; d0 + 4 * l <= vDim; d0 += 4 * l) {
                FloatVector o0 = FloatVector.zero(S);
                FloatVector o1 = FloatVector.zero(S);
                FloatVector o2 = FloatVector.zero(S);
                FloatVector o3 = FloatVector.zero(S);
                for (int j = 0, v = vBase + d0; j <= i; j++, v += vStride) {
                    FloatVector pj = FloatVector.broadcast(S, p[j]);
                    o0 = FloatVector.fromArray(S, kv, v).fma(pj, o0);
                    o1 = FloatVector.fromArray(S, kv, v + l).fma(pj, o1);
                    o2 = FloatVector.fromArray(S, kv, v + 2 * l).fma(pj, o2);
                    o3 = FloatVector.fromArray(S, kv, v + 3 * l).fma(pj, o3);
                }
                o0.intoArray(out, oOff + d0);
                o1.intoArray(out, oOff + d0 + l);
                o2.intoArray(out, oOff + d0 + 2 * l);
                o3.intoArray(out, oOff + d0 + 3 * l);
            }
            for (; d0 + l <= vDim; d0 += l) {
                FloatVector o = FloatVector.zero(S);
                for (int j = 0, v = vBase + d0; j <= i; j++, v += vStride) {
                    o = FloatVector.fromArray(S, kv, v).fma(FloatVector.broadcast(S, p[j]), o);
                }
                o.intoArray(out, oOff + d0);
            }
            for (; d0 < vDim; d0++) {
                float o = 0;
                for (int j = 0, v = vBase + d0; j <= i; j++, v += vStride) {
                    o = Math.fma(p[j], kv[v], o);
                }
                out[oOff + d0] = o;
            }
        }

        static final VectorSpecies<Double> D = VectorSpecies.of(double.class, S.vectorShape());

        /**
         * log Σ e^(x[i]) over x[off .. off + n): the max (exact in any order), then e^(x - max) by {@link #exp} (about
         * 1e-7 relative error per term) summed in double, lane-wise, the lanes added in index order. Masked tail lanes
         * count 0. The same bits on every call, JIT tier and thread.
         */
        static double logSumExp(float[] x, int off, int n) {
            int l = S.length();
            FloatVector mv = FloatVector.broadcast(S, Float.NEGATIVE_INFINITY);
            int k = 0;
            for (; k + l <= n; k += l) {
                mv = mv.max(FloatVector.fromArray(S, x, off + k));
            }
            float max = Float.NEGATIVE_INFINITY;
            for (int i = 0; i < l; i++) {
                max = Math.max(max, mv.lane(i));
            }
            for (; k < n; k++) {
                max = Math.max(max, x[off + k]);
            }
            if (max == Float.NEGATIVE_INFINITY || Float.isNaN(max) || max == Float.POSITIVE_INFINITY) {
                return LogSoftmax.logSumExp(x, off, n);
            }
            DoubleVector s0 = DoubleVector.zero(D);
            DoubleVector s1 = s0;
            for (k = 0; k + l <= n; k += l) {
                FloatVector e = exp(FloatVector.fromArray(S, x, off + k).sub(max));
                s0 = s0.add((DoubleVector) e.convertShape(VectorOperators.F2D, D, 0));
                s1 = s1.add((DoubleVector) e.convertShape(VectorOperators.F2D, D, 1));
            }
            if (k < n) {
                VectorMask<Float> m = lanesBelow(n - k);
                FloatVector e =
                        exp(FloatVector.fromArray(S, x, off + k, m).sub(max)).blend(0f, m.not());
                s0 = s0.add((DoubleVector) e.convertShape(VectorOperators.F2D, D, 0));
                s1 = s1.add((DoubleVector) e.convertShape(VectorOperators.F2D, D, 1));
            }
            double sum = 0;
            for (int i = 0; i < D.length(); i++) {
                sum += s0.lane(i);
            }
            for (int i = 0; i < D.length(); i++) {
                sum += s1.lane(i);
            }
            return max + Math.log(sum);
        }

        /** The lanes of v added in index order (read one by one: no array allocated per call). */
        static float sumLanes(FloatVector v) {
            float sum = 0;
            for (int i = 0; i < S.length(); i++) {
                sum += v.lane(i);
            }
            return sum;
        }

        private static final float LOG2E = 1.44269504088896341f;
        private static final float LN2_HI = 0.693359375f;
        private static final float LN2_LO = -2.12194440e-4f;

        /**
         * e^x for x <= 0 (softmax after subtracting the max), from IEEE adds, multiplies, FMAs and an exponent
         * shift only, so every JIT tier and the interpreter give the same bits (unlike Math.exp intrinsics or
         * the Vector API's EXP). x = n·ln2 + r with |r| <= ln2/2, e^r by a degree-6 polynomial (about 1e-7
         * relative error), times 2^n; x below -87 (e^x < 2e-38) gives about 1e-38 instead of 0.
         */
        static FloatVector exp(FloatVector x) {
            x = x.max(-87f);
            FloatVector t =
                    x.mul(LOG2E).add(12582912f); // 1.5·2^23 + n: n = x·log2(e) rounded to nearest, in t's low bits
            FloatVector n = t.sub(12582912f);
            FloatVector r = n.fma(FloatVector.broadcast(S, -LN2_HI), x);
            r = n.fma(FloatVector.broadcast(S, -LN2_LO), r);
            FloatVector p = FloatVector.broadcast(S, 1f / 720);
            p = p.fma(r, FloatVector.broadcast(S, 1f / 120));
            p = p.fma(r, FloatVector.broadcast(S, 1f / 24));
            p = p.fma(r, FloatVector.broadcast(S, 1f / 6));
            p = p.fma(r, FloatVector.broadcast(S, 0.5f));
            p = p.fma(r, FloatVector.broadcast(S, 1f));
            p = p.fma(r, FloatVector.broadcast(S, 1f));
            // 2^n: n + 127 (1 to 127 here) moved into the exponent field, n read from t's bits (bits(t) =
            // bits(1.5·2^23) + n).
            // No F2I conversion and no shift: JDK 17's Vector API compiles neither here, and their fallbacks allocated
            // megabytes per token.
            IntVector bits = t.reinterpretAsInts().sub(0x4B400000 - 127).mul(1 << 23);
            return p.mul(bits.reinterpretAsFloats());
        }

        /**
         * g = silu(g) · u lane-wise, a partial last vector under a mask, so every element goes through the same lanes'
         * arithmetic wherever it sits. With z = e^-|g| from {@link #exp} (its argument is never positive):
         * sigmoid(g) = 1 / (1 + z) for g >= 0 and z / (1 + z) below; silu(g) = g · sigmoid(g). About 2e-7 relative to
         * the double reference; g < -87 gives g · 1e-38, not -0.
         */
        static void siluMul(float[] g, float[] u, int off, int n) {
            int l = S.length();
            int k = 0;
            for (; k + l <= n; k += l) {
                siluMul(FloatVector.fromArray(S, g, off + k))
                        .mul(FloatVector.fromArray(S, u, off + k))
                        .intoArray(g, off + k);
            }
            if (k < n) {
                VectorMask<Float> m = lanesBelow(n - k);
                FloatVector gv = FloatVector.fromArray(S, g, off + k, m);
                siluMul(gv).mul(FloatVector.fromArray(S, u, off + k, m)).intoArray(g, off + k, m);
            }
        }

        private static FloatVector siluMul(FloatVector g) {
            FloatVector z = exp(g.abs().neg());
            FloatVector onePlusZ = z.add(1f);
            FloatVector sigmoid =
                    FloatVector.broadcast(S, 1f).blend(z, g.lt(0f)).div(onePlusZ);
            return g.mul(sigmoid);
        }

        /** y += p · x lane-wise: the same fused operation per element as the scalar loop. */
        static void axpy(float p, float[] x, int xo, float[] y, int yo, int n) {
            int l = S.length();
            int k = 0;
            FloatVector pv = FloatVector.broadcast(S, p);
            for (; k + l <= n; k += l) {
                FloatVector.fromArray(S, x, xo + k)
                        .fma(pv, FloatVector.fromArray(S, y, yo + k))
                        .intoArray(y, yo + k);
            }
            for (; k < n; k++) {
                y[yo + k] = Math.fma(p, x[xo + k], y[yo + k]);
            }
        }
    }
}
