package dev.scorch.engine.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link CpuOps.VecMath#attendHead}'s tiles of 8 query rows, for machines with 32 vector registers (AVX-512). A 4-row
 * tile keeps 8 accumulators, each a chain of dependent FMAs (q_head of them per score, up to len per output); with a
 * 4-cycle FMA latency and two FMA ports 8 is exactly the number in flight that keeps the ports busy, so the 4-row tiles
 * wait on latency. 8 rows keep 16. Every score and every output element is the same FMA chain, in the same order, as
 * the 4-row tiles compute it: the bits do not depend on the tile.
 */
final class AttentionTile8 {
    static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
    static final int ROWS = 8;

    private AttentionTile8() {}

    /**
     * Raw scores q_r · k_j of the 8 query rows at offsets q0 .. q7 of q against keys [0, jEnd) of kT [blocks, q_head, 2L],
     * one block (2 key vectors) per pass: each score one FMA chain over d = 0 .. q_head - 1.
     */
    static void scoreTile(
            float[] kT,
            int qHead,
            float[] q,
            int q0,
            int q1,
            int q2,
            int q3,
            int q4,
            int q5,
            int q6,
            int q7,
            int jEnd,
            float[][] scores) {
        int l = S.length();
        for (int jb = 0; jb < jEnd; jb += 2 * l) {
            int kb = jb * qHead; // block jb / 2L starts at (jb / 2L) · q_head · 2L
            FloatVector a0 = FloatVector.zero(S);
            FloatVector a1 = a0;
            FloatVector a2 = a0;
            FloatVector a3 = a0;
            FloatVector a4 = a0;
            FloatVector a5 = a0;
            FloatVector a6 = a0;
            FloatVector a7 = a0;
            FloatVector b0 = a0;
            FloatVector b1 = a0;
            FloatVector b2 = a0;
            FloatVector b3 = a0;
            FloatVector b4 = a0;
            FloatVector b5 = a0;
            FloatVector b6 = a0;
            FloatVector b7 = a0;
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
                v = FloatVector.broadcast(S, q[q4 + d]);
                a4 = k.fma(v, a4);
                b4 = k2.fma(v, b4);
                v = FloatVector.broadcast(S, q[q5 + d]);
                a5 = k.fma(v, a5);
                b5 = k2.fma(v, b5);
                v = FloatVector.broadcast(S, q[q6 + d]);
                a6 = k.fma(v, a6);
                b6 = k2.fma(v, b6);
                v = FloatVector.broadcast(S, q[q7 + d]);
                a7 = k.fma(v, a7);
                b7 = k2.fma(v, b7);
            }
            a0.intoArray(scores[0], jb);
            a1.intoArray(scores[1], jb);
            a2.intoArray(scores[2], jb);
            a3.intoArray(scores[3], jb);
            a4.intoArray(scores[4], jb);
            a5.intoArray(scores[5], jb);
            a6.intoArray(scores[6], jb);
            a7.intoArray(scores[7], jb);
            b0.intoArray(scores[0], jb + l);
            b1.intoArray(scores[1], jb + l);
            b2.intoArray(scores[2], jb + l);
            b3.intoArray(scores[3], jb + l);
            b4.intoArray(scores[4], jb + l);
            b5.intoArray(scores[5], jb + l);
            b6.intoArray(scores[6], jb + l);
            b7.intoArray(scores[7], jb + l);
        }
    }

    /**
     * out[i0 + r] = Σ_{j <= i0 + r} p[r][j] · v_j for the 8 rows of a full tile, v_head a multiple of 2L, from vH (the head's
     * values, [len, v_head]). Keys every row sees (j <= i0) go through all 16 accumulators, each V vector loaded once for
     * the 8 rows; then each row's chain continues from what it stored with keys i0 + 1 .. its own. Per element: the FMA
     * chain over j = 0 .. i of {@link CpuOps.VecMath#weightedValues}.
     */
    static void weightedValuesTile(MlaInputs in, float[][] p, int i0, int base, int h, float[] out, float[] vH) {
        int l = S.length();
        int vDim = in.vHead();
        int oStride = in.heads() * vDim; // out row i + 1 lies this far after row i
        int oOff = ((base + i0) * in.heads() + h) * vDim;
        float[] p0 = p[0];
        float[] p1 = p[1];
        float[] p2 = p[2];
        float[] p3 = p[3];
        float[] p4 = p[4];
        float[] p5 = p[5];
        float[] p6 = p[6];
        float[] p7 = p[7];
        for (int d0 = 0; d0 < vDim; d0 += 2 * l) {
            FloatVector a0 = FloatVector.zero(S);
            FloatVector a1 = a0;
            FloatVector a2 = a0;
            FloatVector a3 = a0;
            FloatVector a4 = a0;
            FloatVector a5 = a0;
            FloatVector a6 = a0;
            FloatVector a7 = a0;
            FloatVector b0 = a0;
            FloatVector b1 = a0;
            FloatVector b2 = a0;
            FloatVector b3 = a0;
            FloatVector b4 = a0;
            FloatVector b5 = a0;
            FloatVector b6 = a0;
            FloatVector b7 = a0;
            for (int j = 0, v = d0; j <= i0; j++, v += vDim) {
                FloatVector va = FloatVector.fromArray(S, vH, v);
                FloatVector vb = FloatVector.fromArray(S, vH, v + l);
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
                w = FloatVector.broadcast(S, p4[j]);
                a4 = va.fma(w, a4);
                b4 = vb.fma(w, b4);
                w = FloatVector.broadcast(S, p5[j]);
                a5 = va.fma(w, a5);
                b5 = vb.fma(w, b5);
                w = FloatVector.broadcast(S, p6[j]);
                a6 = va.fma(w, a6);
                b6 = vb.fma(w, b6);
                w = FloatVector.broadcast(S, p7[j]);
                a7 = va.fma(w, a7);
                b7 = vb.fma(w, b7);
            }
            int o = oOff + d0;
            a0.intoArray(out, o);
            b0.intoArray(out, o + l);
            a1.intoArray(out, o + oStride);
            b1.intoArray(out, o + oStride + l);
            a2.intoArray(out, o + 2 * oStride);
            b2.intoArray(out, o + 2 * oStride + l);
            a3.intoArray(out, o + 3 * oStride);
            b3.intoArray(out, o + 3 * oStride + l);
            a4.intoArray(out, o + 4 * oStride);
            b4.intoArray(out, o + 4 * oStride + l);
            a5.intoArray(out, o + 5 * oStride);
            b5.intoArray(out, o + 5 * oStride + l);
            a6.intoArray(out, o + 6 * oStride);
            b6.intoArray(out, o + 6 * oStride + l);
            a7.intoArray(out, o + 7 * oStride);
            b7.intoArray(out, o + 7 * oStride + l);
        }
        // Key i0 + k is seen by rows k .. 7 only: row r's chain goes on from its stored sums with keys i0 + 1 .. i0 +
        // r.
        for (int r = 1; r < ROWS; r++) {
            float[] pr = p[r];
            int o = oOff + r * oStride;
            for (int d0 = 0; d0 < vDim; d0 += 2 * l) {
                FloatVector a = FloatVector.fromArray(S, out, o + d0);
                FloatVector b = FloatVector.fromArray(S, out, o + d0 + l);
                for (int j = i0 + 1; j <= i0 + r; j++) {
                    FloatVector w = FloatVector.broadcast(S, pr[j]);
                    a = FloatVector.fromArray(S, vH, j * vDim + d0).fma(w, a);
                    b = FloatVector.fromArray(S, vH, j * vDim + d0 + l).fma(w, b);
                }
                a.intoArray(out, o + d0);
                b.intoArray(out, o + d0 + l);
            }
        }
    }
}
