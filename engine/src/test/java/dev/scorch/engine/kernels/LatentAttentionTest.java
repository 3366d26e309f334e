package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** Absorbed MLA attention of one row: the vector path against the plain loops, and its bits reproducible. */
class LatentAttentionTest {
    @Test
    void vectorMatchesScalarAndRepeatsItsBits() {
        // Odd sizes too: rank and rope not multiples of the vector width, v_head not of 4, lengths 1 .. 37.
        int[][] shapes = {{64, 32, 64, 256}, {16, 8, 12, 40}, {5, 3, 7, 19}};
        for (int[] sh : shapes) {
            int nope = sh[0];
            int rope = sh[1];
            int vHead = sh[2];
            int rank = sh[3];
            int heads = 3;
            float[] w = GemmTest.randn(heads * (nope + vHead) * rank, 1);
            for (int i = 0; i < w.length; i++) {
                w[i] *= 0.1f;
            }
            for (int len : new int[] {1, 2, 5, 8, 9, 37}) {
                float[] lat = GemmTest.randn(len * rank, 2 + len);
                float[] pe = GemmTest.randn(len * rope, 3 + len);
                float[] q = GemmTest.randn(2 * (nope + rope), 4 + len);
                for (int h = 0; h < heads; h++) {
                    LatentAttention.Head head =
                            new LatentAttention.Head(w, h * (nope + vHead), nope, rope, vHead, rank, 0.125f);
                    float[] scalar = new float[vHead + 1];
                    float[] vector = new float[vHead + 1];
                    float[] again = new float[vHead + 1];
                    int qOff = nope + rope; // the second query row
                    LatentAttention.attendScalar(head, q, qOff, lat, pe, len, scalar, 1, new LatentAttention.Scratch());
                    LatentAttention.attendVector(head, q, qOff, lat, pe, len, vector, 1, new LatentAttention.Scratch());
                    LatentAttention.Scratch used = new LatentAttention.Scratch();
                    LatentAttention.attendVector(head, q, 0, lat, pe, len, again, 1, used); // dirty the scratch first
                    LatentAttention.attendVector(head, q, qOff, lat, pe, len, again, 1, used);
                    String what = Arrays.toString(sh) + " len " + len + " head " + h;
                    assertArrayEquals(vector, again, what + ": vector path repeats its bits");
                    for (int e = 0; e <= vHead; e++) {
                        assertEquals(scalar[e], vector[e], 1e-5 + 1e-5 * Math.abs(scalar[e]), what + " at " + e);
                    }
                }
            }
        }
    }
}
