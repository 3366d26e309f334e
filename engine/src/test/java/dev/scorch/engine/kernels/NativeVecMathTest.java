package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

class NativeVecMathTest {
    private static void assumeAvx512() {
        assumeTrue(NativeVecMath.AVAILABLE && CpuOps.VecMath.S.length() == 16, "needs the native library and AVX-512");
    }

    @Test
    void logSumExpGivesTheJavaVectorBits() {
        assumeAvx512();
        Random rnd = new Random(11);
        for (int n : new int[] {1, 5, 15, 16, 17, 31, 100, 1000, 32768}) {
            for (double spread : new double[] {0.5, 8, 60}) {
                float[] x = new float[n + 7];
                for (int i = 0; i < x.length; i++) {
                    x[i] = (float) (rnd.nextGaussian() * spread);
                }
                if (n > 3) {
                    x[5] = Float.NEGATIVE_INFINITY; // a masked logit: e^-inf counts 0
                }
                double java = CpuOps.VecMath.logSumExp(x, 3, n);
                double c = NativeVecMath.logSumExp(x, 3, n);
                assertEquals(
                        Double.doubleToLongBits(java), Double.doubleToLongBits(c), "n " + n + ", spread " + spread);
            }
        }
        // A NaN or infinite max: both take the reference loop.
        for (float bad : new float[] {Float.NaN, Float.POSITIVE_INFINITY}) {
            float[] x = new float[40];
            Arrays.fill(x, 1f);
            x[33] = bad;
            assertEquals(
                    Double.doubleToLongBits(CpuOps.VecMath.logSumExp(x, 0, 40)),
                    Double.doubleToLongBits(NativeVecMath.logSumExp(x, 0, 40)));
        }
    }

    @Test
    void siluMulGivesTheJavaVectorBits() {
        assumeAvx512();
        Random rnd = new Random(12);
        float[] special = {
            0f,
            -0f,
            1e-38f,
            -1e-38f,
            -86f,
            -88f,
            -200f,
            87f,
            200f,
            Float.NaN,
            Float.POSITIVE_INFINITY,
            Float.NEGATIVE_INFINITY,
            Float.MIN_VALUE,
            -Float.MIN_VALUE
        };
        for (int n : new int[] {1, 7, 16, 19, 256, 2816}) {
            float[] g = new float[n + 4];
            float[] u = new float[n + 4];
            for (int i = 0; i < g.length; i++) {
                g[i] = i < special.length ? special[i] : (float) (rnd.nextGaussian() * 6);
                u[i] = (float) rnd.nextGaussian();
            }
            float[] java = g.clone();
            float[] c = g.clone();
            CpuOps.VecMath.siluMul(java, u, 2, n);
            NativeVecMath.siluMul(c, u, 2, n);
            assertArrayEquals(java, c, "n " + n); // float arrays: equal bits, NaN included
            assertEquals(g[0], c[0], "elements before off are left alone");
        }
    }
}
