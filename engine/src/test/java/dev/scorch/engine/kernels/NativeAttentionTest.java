package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

class NativeAttentionTest {
    /** Random operands, sequences packed one after another from packed row `first` (kv holds rows from kvRow0 on). */
    private static MlaInputs inputs(
            int first, int kvRow0, int[] lens, int heads, int qkNope, int qkRope, int vHead, long seed) {
        Random rnd = new Random(seed);
        int[] start = new int[lens.length];
        int t = first;
        for (int s = 0; s < lens.length; s++) {
            start[s] = t;
            t += lens[s];
        }
        float[] q = new float[t * heads * (qkNope + qkRope)];
        float[] kv = new float[(t - kvRow0) * heads * (qkNope + vHead)];
        float[] kPe = new float[t * qkRope];
        for (float[] a : new float[][] {q, kv, kPe}) {
            for (int i = 0; i < a.length; i++) {
                a[i] = (float) (rnd.nextGaussian() * 2); // wide enough that some probabilities are tiny
            }
        }
        return new MlaInputs(q, kv, kPe, heads, qkNope, qkRope, vHead, start, lens.clone(), 0.3f, kvRow0);
    }

    private static float[] attend(MlaInputs in, boolean nativeCode) {
        int rows = in.seqStart()[in.seqLen().length - 1] + in.seqLen()[in.seqLen().length - 1];
        float[] out = new float[rows * in.heads() * in.vHead()];
        Arrays.fill(out, -7f); // rows outside the sequences must stay as they are
        for (int s = 0; s < in.seqLen().length; s++) {
            for (int h = 0; h < in.heads(); h++) {
                if (nativeCode) {
                    NativeAttention.attendHead(in, s, h, out);
                } else {
                    CpuOps.VecMath.attendHead(in, s, h, out);
                }
            }
        }
        return out;
    }

    @Test
    void cGivesTheJavaVectorBits() {
        assumeTrue(
                NativeAttention.AVAILABLE && CpuOps.VecMath.S.length() == 16, "needs the native library and AVX-512");
        // Lengths around the 8-row tiles, the 4-row p.v groups and the 32-key blocks; v_head 64 (whole groups of 4
        // vectors),
        // 48 and 16 (the shorter groups); sequences starting past row 0 with kv from a later row.
        int[] lens = {1, 3, 4, 7, 8, 9, 31, 32, 33, 100, 257};
        for (int vHead : new int[] {64, 48, 16, 80}) {
            MlaInputs in = inputs(5, 2, lens, 3, 64, 32, vHead, vHead);
            float[] java = attend(in, false);
            float[] c = attend(in, true);
            for (int i = 0; i < java.length; i++) {
                assertEquals(
                        Float.floatToIntBits(java[i]),
                        Float.floatToIntBits(c[i]),
                        "v_head " + vHead + ", element " + i);
            }
            assertTrue(java[in.seqStart()[0] * in.heads() * vHead] != -7f, "the first sequence's output was written");
            assertEquals(-7f, c[0], "rows before the first sequence are left alone");
        }
        // Odd head dims (q_head not a multiple of anything) still give the same bits.
        MlaInputs odd = inputs(0, 0, new int[] {19, 45}, 2, 13, 6, 32, 9);
        float[] java = attend(odd, false);
        float[] c = attend(odd, true);
        for (int i = 0; i < java.length; i++) {
            assertEquals(Float.floatToIntBits(java[i]), Float.floatToIntBits(c[i]), "odd dims, element " + i);
        }
    }

    @Test
    void aNanScoreMakesNanRowsInBoth() {
        assumeTrue(
                NativeAttention.AVAILABLE && CpuOps.VecMath.S.length() == 16, "needs the native library and AVX-512");
        MlaInputs in = inputs(0, 0, new int[] {40}, 2, 16, 8, 32, 3);
        in.kv()[in.kvOffset(10, 1)] = Float.NaN; // key 10 of head 1: rows 10 .. 39 of head 1 see it
        float[] java = attend(in, false);
        float[] c = attend(in, true);
        for (int i = 0; i < java.length; i++) {
            assertEquals(Float.isNaN(java[i]), Float.isNaN(c[i]), "element " + i);
            if (!Float.isNaN(java[i])) {
                assertEquals(Float.floatToIntBits(java[i]), Float.floatToIntBits(c[i]), "element " + i);
            }
        }
        assertTrue(Float.isNaN(c[(20 * 2 + 1) * 32])
                && !Float.isNaN(c[(5 * 2 + 1) * 32])
                && !Float.isNaN(c[(20 * 2) * 32]));
    }

    @Test
    void operandsOutsideTheirArraysAreRefusedBeforeTheCall() {
        assumeTrue(NativeAttention.AVAILABLE, "needs the native library and AVX-512");
        MlaInputs in = inputs(0, 0, new int[] {12}, 2, 16, 8, 32, 4);
        float[] shortOut = new float[11 * 2 * 32];
        assertThrows(IndexOutOfBoundsException.class, () -> NativeAttention.attendHead(in, 0, 0, shortOut));
        float[] out = new float[12 * 2 * 32];
        assertThrows(IndexOutOfBoundsException.class, () -> NativeAttention.attendHead(in, 0, 2, out));
        MlaInputs shortKv = new MlaInputs(
                in.q(),
                Arrays.copyOf(in.kv(), in.kv().length - 1),
                in.kPe(),
                2,
                16,
                8,
                32,
                in.seqStart(),
                in.seqLen(),
                0.3f,
                0);
        assertThrows(IndexOutOfBoundsException.class, () -> NativeAttention.attendHead(shortKv, 0, 0, out));
    }
}
