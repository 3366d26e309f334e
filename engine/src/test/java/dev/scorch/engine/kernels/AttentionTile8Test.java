package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;

class AttentionTile8Test {
    /** Random operands for sequences of the given lengths, packed one after another. */
    private static MlaInputs inputs(int[] lens, int heads, int qkNope, int qkRope, int vHead, long seed) {
        Random rnd = new Random(seed);
        int[] start = new int[lens.length];
        int t = 0;
        for (int s = 0; s < lens.length; s++) {
            start[s] = t;
            t += lens[s];
        }
        float[] q = new float[t * heads * (qkNope + qkRope)];
        float[] kv = new float[t * heads * (qkNope + vHead)];
        float[] kPe = new float[t * qkRope];
        for (float[] a : new float[][] {q, kv, kPe}) {
            for (int i = 0; i < a.length; i++) {
                a[i] = (float) rnd.nextGaussian();
            }
        }
        return new MlaInputs(q, kv, kPe, heads, qkNope, qkRope, vHead, start, lens.clone(), 0.125f);
    }

    private static float[] attend(MlaInputs in, int tile) {
        int t = 0;
        for (int len : in.seqLen()) {
            t += len;
        }
        float[] out = new float[t * in.heads() * in.vHead()];
        java.util.Arrays.fill(out, Float.NaN); // every element must be written
        for (int s = 0; s < in.seqLen().length; s++) {
            for (int h = 0; h < in.heads(); h++) {
                CpuOps.VecMath.attendHead(in, s, h, out, tile);
            }
        }
        return out;
    }

    @Test
    void eightRowTilesGiveTheFourRowTilesBits() {
        // Lengths around tile and key-block edges: 1, a partial tile, whole tiles, past a 2L block, long with a tail.
        int[] lens = {1, 5, 8, 16, 33, 67, 130};
        for (int vHead : new int[] {64, 32, 48}) { // 48: not a whole number of vector pairs on 16 lanes
            MlaInputs in = inputs(lens, 3, 64, 32, vHead, vHead);
            float[] four = attend(in, CpuOps.VecMath.QUERY_TILE);
            float[] eight = attend(in, AttentionTile8.ROWS);
            for (int i = 0; i < four.length; i++) {
                assertTrue(!Float.isNaN(four[i]), "4-row tiles left element " + i);
                assertEquals(
                        Float.floatToIntBits(four[i]),
                        Float.floatToIntBits(eight[i]),
                        "v_head " + vHead + ", element " + i);
            }
        }
    }

    @Test
    void eightRowTilesMatchThePlainLoops() {
        int[] lens = {9, 24, 41};
        MlaInputs in = inputs(lens, 2, 16, 8, 32, 7);
        float[] eight = attend(in, AttentionTile8.ROWS);
        int qHead = in.qHead();
        for (int s = 0; s < lens.length; s++) {
            for (int h = 0; h < in.heads(); h++) {
                for (int i = 0; i < lens[s]; i++) {
                    int row = in.seqStart()[s] + i;
                    double[] sc = new double[i + 1];
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = 0; j <= i; j++) {
                        int key = in.seqStart()[s] + j;
                        double dot = 0;
                        for (int d = 0; d < in.qkNope(); d++) {
                            dot += in.q()[(row * in.heads() + h) * qHead + d]
                                    * (double) in.kv()[in.kvOffset(key, h) + d];
                        }
                        for (int d = 0; d < in.qkRope(); d++) {
                            dot += in.q()[(row * in.heads() + h) * qHead + in.qkNope() + d]
                                    * (double) in.kPe()[key * in.qkRope() + d];
                        }
                        sc[j] = dot * in.scale();
                        max = Math.max(max, sc[j]);
                    }
                    double sum = 0;
                    for (int j = 0; j <= i; j++) {
                        sc[j] = Math.exp(sc[j] - max);
                        sum += sc[j];
                    }
                    for (int d = 0; d < in.vHead(); d++) {
                        double o = 0;
                        for (int j = 0; j <= i; j++) {
                            o += sc[j] / sum * in.kv()[in.kvOffset(in.seqStart()[s] + j, h) + in.qkNope() + d];
                        }
                        float got = eight[(row * in.heads() + h) * in.vHead() + d];
                        assertEquals(
                                o,
                                got,
                                1e-5 * (1 + Math.abs(o)),
                                "seq " + s + " head " + h + " row " + i + " dim " + d);
                    }
                }
            }
        }
    }
}
