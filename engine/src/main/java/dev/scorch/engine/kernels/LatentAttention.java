package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.DType;
import java.util.Arrays;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * MLA attention in the absorbed form for one query row of one head over a latent cache (the decode step):
 * q_latent = W_UKᵀ q_nope; score_j = (q_latent · c_j + q_pe · k_pe_j) · scale for j < len; softmax in fp32;
 * o_latent = Σ_j p_j c_j; out = W_UV o_latent. W_UK and W_UV are this head's rows of kv_b_proj in fp32
 * [qk_nope + v_head, kv_lora_rank]: {@link #head} decodes them from the checkpoint's kv_b_proj into the thread's
 * scratch, one head at a time, so no fp32 copy of the whole weight is ever made (on Kimi K2 it would be 32 MiB a layer,
 * 2 GiB a model, on the heap of a machine whose RAM the mapped checkpoint may already exceed).
 *
 * <p>The cache is one array of rows, a token's latent c_j then its rotated k_pe (the layout of both KV caches):
 * c_j at {@code cache[j * stride ..]}, k_pe_j at {@code cache[j * stride + rank ..]}.
 *
 * <p>Two implementations with a fixed order of every sum, so a row's bits never depend on its batch mates or
 * the thread that runs it: {@link #attendScalar} (plain FMA chains, Math.exp), and {@link #attendVector} for
 * SIMD backends (lane-wise chains, lanes added in a fixed tree, the deterministic polynomial exp of
 * {@link CpuOps}); they agree within fp32 rounding.
 */
public final class LatentAttention {
    private LatentAttention() {}

    /** Shapes and the head's weights; wOff is the first W_UK row of the head in w, W_UV rows follow at + qkNope. */
    public record Head(float[] w, int wOff, int qkNope, int qkRope, int vHead, int rank, float scale) {}

    /** Per-thread buffers: q_latent, o_latent and the scores of one row, and the weights of one head. */
    public static final class Scratch {
        public Scratch() {}

        float[] qLat = new float[0];
        float[] oLat = new float[0];
        float[] scores = new float[0];
        float[] inPlace = new float[0]; // the native kernel's q_latent, o_latent and scores
        final float[] lanes = new float[5 * 64]; // four accumulators' lanes and one more, at up to 64 lanes
        // The head {@link #head} decoded last: its rows of kv_b_proj [qk_nope + v_head, rank] in fp32, which
        // Linear and head they are (weights never change: the pair names the values), and its Head (kept while its
        // shapes are the same: a decode step makes none).
        private float[] headW = new float[0];
        private Linear headOf;
        private int headIndex = -1;
        private Head head;
        private RowDecoder decoder; // the SIMD path's vector decoder, made on its first use

        /** Floats this scratch keeps for a head's weights: one head's rows, whatever the weight's size. */
        public int headWeightFloats() {
            return headW.length;
        }

        void ensure(int rank, int len) {
            if (qLat.length < rank) {
                qLat = new float[rank];
                oLat = new float[rank];
            }
            int padded = len + 64;
            if (scores.length < padded) {
                scores = new float[Math.max(padded, 2 * scores.length)];
            }
        }
    }

    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    /** This thread's scratch buffers. */
    public static Scratch scratch() {
        return SCRATCH.get();
    }

    /**
     * Head h of kvBProj [heads * (qk_nope + v_head), rank] (W_UK_h at rows h · (qk_nope + v_head), W_UV_h the v_head
     * after), its rows decoded to fp32 into s as {@link Linear#row} gives them (BF16, FP8 with its block scales, INT4
     * with its group scales), so attending with it has the bits of attending over {@code kvBProj.toFloat()}. s keeps
     * the head it decoded last and returns it again without decoding; simd picks the vector decoder (the scalar path
     * never loads Vector API classes).
     */
    public static Head head(
            Linear kvBProj, int h, int qkNope, int qkRope, int vHead, float scale, boolean simd, Scratch s) {
        if (s.headOf == kvBProj && s.headIndex == h) {
            return s.head;
        }
        int rows = qkNope + vHead;
        int rank = kvBProj.in();
        if (h < 0 || (long) (h + 1) * rows > kvBProj.out()) {
            throw new IllegalArgumentException(
                    kvBProj.name() + ": no head " + h + " of " + rows + " rows in " + kvBProj.out() + " rows");
        }
        if (s.headW.length < rows * rank) {
            s.headW = new float[rows * rank];
        }
        s.headOf = null; // a failed decode leaves no head behind
        if (simd) {
            if (s.decoder == null || s.decoder.maxLen() < rank) {
                s.decoder = new RowDecoder(rank);
            }
            for (int r = 0; r < rows; r++) {
                s.decoder.decode(kvBProj, h * rows + r, 0, rank, s.headW, r * rank);
            }
        } else {
            for (int r = 0; r < rows; r++) {
                kvBProj.row(h * rows + r, 0, rank, s.headW, r * rank);
            }
        }
        Head k = s.head;
        if (k == null
                || k.w() != s.headW
                || k.qkNope() != qkNope
                || k.qkRope() != qkRope
                || k.vHead() != vHead
                || k.rank() != rank
                || Float.floatToRawIntBits(k.scale()) != Float.floatToRawIntBits(scale)) {
            s.head = new Head(s.headW, 0, qkNope, qkRope, vHead, rank, scale); // the same for every head of a layer
        }
        s.headOf = kvBProj;
        s.headIndex = h;
        return s.head;
    }

    /** Whether {@link #attendInPlace} takes kvBProj: the native row-dot's kernels run here and its values are BF16. */
    public static boolean attendsInPlace(Linear kvBProj) {
        return RowDotGemm.NATIVE_ROWDOT && kvBProj.dtype() == DType.BF16;
    }

    /**
     * As {@link #head} then {@link #attendVector} for heads h0 .. h0 + heads - 1, with the same bits (the JVM's lanes)
     * for every head whatever the count, but their rows of a BF16 kvBProj read in place by the native kernel (no fp32
     * copy) and the cache read once for all of them: q[qOff ..] holds their queries one after another (q_head floats
     * each), out [oOff ..] receives their outputs (v_head each). shape gives the dimensions (its weights are not read).
     * False, nothing done, where the heads' rows cross a mapping border (the caller takes another way).
     */
    public static boolean attendInPlace(
            Linear kvBProj,
            int h0,
            int heads,
            Head shape,
            float[] q,
            int qOff,
            float[] cache,
            int stride,
            int len,
            float[] out,
            int oOff,
            Scratch s) {
        if (!attendsInPlace(kvBProj)) {
            throw new IllegalStateException("no in-place absorbed attention for " + kvBProj.name());
        }
        int rank = shape.rank();
        int rows = shape.qkNope() + shape.vHead();
        if (h0 < 0 || heads < 1 || (long) (h0 + heads) * rows > kvBProj.out() || kvBProj.in() != rank) {
            throw new IllegalArgumentException(kvBProj.name() + ": no heads " + h0 + " .. " + (h0 + heads - 1) + " of "
                    + rows + " rows of " + rank + " in [" + kvBProj.out() + ", " + kvBProj.in() + "]");
        }
        int n = heads * rows * rank;
        java.nio.MappedByteBuffer map = kvBProj.rawMapping(h0 * rows, 0, n);
        if (map == null) {
            return false;
        }
        long need = NativeCpu.mlaScratchFloats(heads, rank, len);
        if (s.inPlace.length < need) {
            s.inPlace = new float[(int) Math.max(need, 2L * s.inPlace.length)];
        }
        int qHead = shape.qkNope() + shape.qkRope();
        long at = kvBProj.rawMappedAt(h0 * rows, 0, n);
        if (len < 1
                || stride < rank + shape.qkRope()
                || !map.isDirect()
                || at < 0
                || at + 2L * n > map.capacity()
                || qOff < 0
                || (long) qOff + (long) heads * qHead > q.length
                || (long) len * stride > cache.length
                || oOff < 0
                || (long) oOff + (long) heads * shape.vHead() > out.length) {
            throw new IndexOutOfBoundsException("absorbed attention out of bounds: " + heads + " heads of ["
                    + shape.qkNope() + " + " + shape.vHead() + ", " + rank + "]; q " + q.length + " from " + qOff
                    + ", cache " + cache.length + " for " + len + " rows of " + stride + ", out " + out.length
                    + " from " + oOff);
        }
        if (!NativeCpu.mlaAbsorbedBf16Mapped0(
                map,
                at,
                heads,
                shape.qkNope(),
                shape.qkRope(),
                shape.vHead(),
                rank,
                shape.scale(),
                q,
                qOff,
                qHead,
                cache,
                stride,
                len,
                out,
                oOff,
                shape.vHead(),
                s.inPlace,
                NativeCpu.rowDotLanes())) {
            throw kvBProj.rawMappingFault(h0 * rows, 0, n);
        }
        return true;
    }

    /**
     * out[oOff .. + v_head) for the query q[qOff ..] = [q_nope | q_pe] over the first len rows of cache [.., stride]:
     * row j = [c_j (rank) | k_pe_j (qk_rope) | anything], so stride is at least rank + qk_rope.
     */
    public static void attendScalar(
            Head h, float[] q, int qOff, float[] cache, int stride, int len, float[] out, int oOff, Scratch s) {
        checkStride(h, stride);
        int rank = h.rank();
        s.ensure(rank, len);
        float[] w = h.w();
        float[] qLat = s.qLat;
        float[] oLat = s.oLat;
        float[] scores = s.scores;
        Arrays.fill(qLat, 0, rank, 0f);
        for (int d = 0; d < h.qkNope(); d++) {
            float qd = q[qOff + d];
            int wOff = (h.wOff() + d) * rank;
            for (int c = 0; c < rank; c++) {
                qLat[c] = Math.fma(qd, w[wOff + c], qLat[c]);
            }
        }
        float max = Float.NEGATIVE_INFINITY;
        for (int j = 0; j < len; j++) {
            int row = j * stride;
            float sc = (dot(qLat, 0, cache, row, rank) + dot(q, qOff + h.qkNope(), cache, row + rank, h.qkRope()))
                    * h.scale();
            scores[j] = sc;
            max = Math.max(max, sc);
        }
        float sum = 0;
        for (int j = 0; j < len; j++) {
            float e = (float) Math.exp(scores[j] - max);
            scores[j] = e;
            sum += e;
        }
        float inv = 1f / sum;
        Arrays.fill(oLat, 0, rank, 0f);
        for (int j = 0; j < len; j++) {
            float p = scores[j] * inv;
            int cOff = j * stride;
            for (int c = 0; c < rank; c++) {
                oLat[c] = Math.fma(p, cache[cOff + c], oLat[c]);
            }
        }
        int uv = h.wOff() + h.qkNope();
        for (int e = 0; e < h.vHead(); e++) {
            out[oOff + e] = dot(w, (uv + e) * rank, oLat, 0, rank);
        }
    }

    private static void checkStride(Head h, int stride) {
        if (stride < h.rank() + h.qkRope()) {
            throw new IllegalArgumentException("cache rows of " + stride + " floats cannot hold a latent of " + h.rank()
                    + " and a k_pe of " + h.qkRope());
        }
    }

    private static float dot(float[] a, int ao, float[] b, int bo, int n) {
        float acc = 0;
        for (int k = 0; k < n; k++) {
            acc = Math.fma(a[ao + k], b[bo + k], acc);
        }
        return acc;
    }

    /** As {@link #attendScalar}, vectorised; call only where the Vector API is usable. */
    public static void attendVector(
            Head h, float[] q, int qOff, float[] cache, int stride, int len, float[] out, int oOff, Scratch s) {
        checkStride(h, stride);
        s.ensure(h.rank(), len);
        Vec.attend(h, q, qOff, cache, stride, len, out, oOff, s);
    }

    /** Vector code kept apart so the scalar path never loads Vector API classes. */
    static final class Vec {
        static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
        static final int L = S.length();

        /**
         * One head's absorbed attention, in three small methods so each compiles to register code (as one method of
         * this size, C2 kept materialising vector objects in the loops: an allocation per vector op).
         */
        static void attend(
                Head h, float[] q, int qOff, float[] cache, int stride, int len, float[] out, int oOff, Scratch s) {
            int rank = h.rank();
            int rv = rank / L * L;
            // q_latent[c] = Σ_d q_nope[d] W_UK[d, c]: per element an FMA chain over d in order, as the scalar loop.
            axpyRows(q, qOff, h.qkNope(), h.w(), h.wOff() * rank, rank, rank, rv, s.qLat);
            scores(h, q, qOff, cache, stride, len, s);
            softmax(s.scores, len);
            // o_latent[c] = Σ_j p_j c_j[c]: per element an FMA chain over j in order.
            axpyRows(s.scores, 0, len, cache, 0, stride, rank, rv, s.oLat);
            output(h, out, oOff, s);
        }

        /** sc[j] = (q_latent · c_j + q_pe · k_pe_j) · scale for the len cached keys. */
        static void scores(Head h, float[] q, int qOff, float[] cache, int stride, int len, Scratch s) {
            int rank = h.rank();
            int nope = h.qkNope();
            float[] qLat = s.qLat;
            float[] sc = s.scores;
            float[] lanes = s.lanes;
            int rv = rank / L * L;
            // Scores, four keys per pass over q_latent.
            int j = 0;
            for (; j + 4 <= len; j += 4) {
                int c0 = j * stride;
                dots4(cache, c0, stride, qLat, rv, lanes);
                sc[j] = score(h, lanes, 0, qLat, cache, c0, rv, q, qOff + nope);
                sc[j + 1] = score(h, lanes, L, qLat, cache, c0 + stride, rv, q, qOff + nope);
                sc[j + 2] = score(h, lanes, 2 * L, qLat, cache, c0 + 2 * stride, rv, q, qOff + nope);
                sc[j + 3] = score(h, lanes, 3 * L, qLat, cache, c0 + 3 * stride, rv, q, qOff + nope);
            }
            for (; j < len; j++) {
                FloatVector a = FloatVector.zero(S);
                int c0 = j * stride;
                for (int c = 0; c < rv; c += L) {
                    a = FloatVector.fromArray(S, cache, c0 + c).fma(FloatVector.fromArray(S, qLat, c), a);
                }
                a.intoArray(lanes, 0);
                sc[j] = score(h, lanes, 0, qLat, cache, c0, rv, q, qOff + nope);
            }
        }

        /** sc[0 .. len) = softmax(sc) in fp32. */
        static void softmax(float[] sc, int len) {
            // Softmax: the max is exact in any order; exp lane-wise, lanes past len zeroed, lanes summed in index
            // order.
            // Every vector, the partial last one too, takes the same path under its mask (every lane for whole
            // vectors):
            // one exp call site, which C2 inlines (a second one for the tail was not, and boxed its vectors), and no
            // vector reassigned under a condition. The scratch holds len + 64 scores, so the last vector is in bounds.
            int nPad = (len + L - 1) / L * L;
            FloatVector vmax = FloatVector.broadcast(S, Float.NEGATIVE_INFINITY);
            for (int k = 0; k < nPad; k += L) {
                VectorMask<Float> in = CpuOps.VecMath.lanesBelow(len - k);
                vmax = vmax.max(FloatVector.fromArray(S, sc, k).blend(Float.NEGATIVE_INFINITY, in.not()));
            }
            FloatVector max = FloatVector.broadcast(S, vmax.reduceLanes(VectorOperators.MAX));
            FloatVector vsum = FloatVector.zero(S);
            for (int k = 0; k < nPad; k += L) {
                VectorMask<Float> in = CpuOps.VecMath.lanesBelow(len - k);
                FloatVector e = CpuOps.VecMath.exp(
                                FloatVector.fromArray(S, sc, k).sub(max))
                        .blend(0f, in.not());
                e.intoArray(sc, k);
                vsum = vsum.add(e);
            }
            float inv = 1f / CpuOps.VecMath.sumLanes(vsum);
            for (int k = 0; k < len; k++) {
                sc[k] *= inv; // the probabilities
            }
        }

        /**
         * lanes[i L .. (i + 1) L) = the lane sums of m's row r0 + i ld times x over the first rv columns, for i < 4: each
         * x vector loaded once for the four rows. The accumulators leave registers through lanes, never as vector
         * objects passed to a method (C2 boxes those when the callee is not inlined: an allocation and a slow path a
         * call).
         */
        private static void dots4(float[] m, int r0, int ld, float[] x, int rv, float[] lanes) {
            FloatVector a0 = FloatVector.zero(S);
            FloatVector a1 = a0;
            FloatVector a2 = a0;
            FloatVector a3 = a0;
            for (int c = 0; c < rv; c += L) {
                FloatVector v = FloatVector.fromArray(S, x, c);
                a0 = FloatVector.fromArray(S, m, r0 + c).fma(v, a0);
                a1 = FloatVector.fromArray(S, m, r0 + ld + c).fma(v, a1);
                a2 = FloatVector.fromArray(S, m, r0 + 2 * ld + c).fma(v, a2);
                a3 = FloatVector.fromArray(S, m, r0 + 3 * ld + c).fma(v, a3);
            }
            a0.intoArray(lanes, 0);
            a1.intoArray(lanes, L);
            a2.intoArray(lanes, 2 * L);
            a3.intoArray(lanes, 3 * L);
        }

        /** out[e] = W_UV[e] · o_latent for the head's v_head outputs. */
        static void output(Head h, float[] out, int oOff, Scratch s) {
            int rank = h.rank();
            int nope = h.qkNope();
            float[] w = h.w();
            float[] oLat = s.oLat;
            float[] lanes = s.lanes;
            int rv = rank / L * L;
            // out[e] = W_UV[e] · o_latent, four rows per pass.
            int uv = (h.wOff() + nope) * rank;
            int e = 0;
            for (; e + 4 <= h.vHead(); e += 4) {
                int r0 = uv + e * rank;
                dots4(w, r0, rank, oLat, rv, lanes);
                out[oOff + e] = finishDot(lanes, 0, w, r0, oLat, rv, rank);
                out[oOff + e + 1] = finishDot(lanes, L, w, r0 + rank, oLat, rv, rank);
                out[oOff + e + 2] = finishDot(lanes, 2 * L, w, r0 + 2 * rank, oLat, rv, rank);
                out[oOff + e + 3] = finishDot(lanes, 3 * L, w, r0 + 3 * rank, oLat, rv, rank);
            }
            for (; e < h.vHead(); e++) {
                FloatVector a = FloatVector.zero(S);
                int r0 = uv + e * rank;
                for (int c = 0; c < rv; c += L) {
                    a = FloatVector.fromArray(S, w, r0 + c).fma(FloatVector.fromArray(S, oLat, c), a);
                }
                a.intoArray(lanes, 0);
                out[oOff + e] = finishDot(lanes, 0, w, r0, oLat, rv, rank);
            }
        }

        /** Rows of m {@link #axpyRows} takes at a time: a block of the cache stays in L1 while its strips run. */
        static final int AXPY_ROWS = 8;

        /**
         * dst[c] = Σ_{r < rows} coef[co + r] · m[mo + r·stride + c] for c < width: per element one FMA chain over r
         * in order, four vectors of dst held in registers while a block of {@link #AXPY_ROWS} rows runs, kept in dst
         * between blocks (no bits change), so m is read from memory once, not once per strip of 4 vectors.
         */
        static void axpyRows(
                float[] coef, int co, int rows, float[] m, int mo, int stride, int width, int wv, float[] dst) {
            java.util.Arrays.fill(dst, 0, wv, 0f);
            for (int r0 = 0; r0 < rows; r0 += AXPY_ROWS) {
                int r1 = Math.min(rows, r0 + AXPY_ROWS);
                int c = 0;
                for (; c + 4 * L <= wv; c += 4 * L) {
                    FloatVector d0 = FloatVector.fromArray(S, dst, c);
                    FloatVector d1 = FloatVector.fromArray(S, dst, c + L);
                    FloatVector d2 = FloatVector.fromArray(S, dst, c + 2 * L);
                    FloatVector d3 = FloatVector.fromArray(S, dst, c + 3 * L);
                    for (int r = r0, o = mo + r0 * stride + c; r < r1; r++, o += stride) {
                        FloatVector k = FloatVector.broadcast(S, coef[co + r]);
                        d0 = FloatVector.fromArray(S, m, o).fma(k, d0);
                        d1 = FloatVector.fromArray(S, m, o + L).fma(k, d1);
                        d2 = FloatVector.fromArray(S, m, o + 2 * L).fma(k, d2);
                        d3 = FloatVector.fromArray(S, m, o + 3 * L).fma(k, d3);
                    }
                    d0.intoArray(dst, c);
                    d1.intoArray(dst, c + L);
                    d2.intoArray(dst, c + 2 * L);
                    d3.intoArray(dst, c + 3 * L);
                }
                for (; c < wv; c += L) {
                    FloatVector d = FloatVector.fromArray(S, dst, c);
                    for (int r = r0, o = mo + r0 * stride + c; r < r1; r++, o += stride) {
                        d = FloatVector.fromArray(S, m, o).fma(FloatVector.broadcast(S, coef[co + r]), d);
                    }
                    d.intoArray(dst, c);
                }
            }
            int c = wv;
            for (; c < width; c++) {
                float d = 0;
                for (int r = 0, o = mo + c; r < rows; r++, o += stride) {
                    d = Math.fma(coef[co + r], m[o], d);
                }
                dst[c] = d;
            }
        }

        /**
         * The L lanes at lanes[lo ..] added in a fixed tree (halves folded, in place), then the elements past the whole
         * vectors by scalar FMAs.
         */
        static float finishDot(float[] lanes, int lo, float[] a, int ao, float[] b, int from, int n) {
            float sum = Lanes.foldTree(lanes, lo, L);
            for (int k = from; k < n; k++) {
                sum = Math.fma(a[ao + k], b[k], sum);
            }
            return sum;
        }

        /**
         * (q_latent · c_j + q_pe · k_pe_j) · scale for the cache row at cache[row ..] = [c_j | k_pe_j], from the latent
         * part's lane sums at lanes[lo ..]; lanes[4L ..] is scratch.
         */
        static float score(
                Head h, float[] lanes, int lo, float[] qLat, float[] cache, int row, int rv, float[] q, int qPeOff) {
            float s = finishDot(lanes, lo, cache, row, qLat, rv, h.rank());
            int peOff = row + h.rank();
            int rope = h.qkRope();
            int pv = rope / L * L;
            FloatVector a = FloatVector.zero(S);
            for (int d = 0; d < pv; d += L) {
                a = FloatVector.fromArray(S, cache, peOff + d).fma(FloatVector.fromArray(S, q, qPeOff + d), a);
            }
            a.intoArray(lanes, 4 * L);
            float p = Lanes.foldTree(lanes, 4 * L, L);
            for (int d = pv; d < rope; d++) {
                p = Math.fma(cache[peOff + d], q[qPeOff + d], p);
            }
            return (s + p) * h.scale();
        }
    }
}
