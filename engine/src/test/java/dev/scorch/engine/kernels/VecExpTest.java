package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jdk.incubator.vector.FloatVector;
import org.junit.jupiter.api.Test;

/**
 * The attention softmax's own exp: close to Math.exp over the range softmax uses, and the same bits every call; and
 * SwiGLU's silu(g) · u built on it.
 */
class VecExpTest {
    @Test
    void closeToMathExpOnTheSoftmaxRange() {
        int l = CpuOps.VecMath.S.length();
        float[] x = new float[l];
        float[] y = new float[l];
        double worst = 0;
        for (int i = 0; i <= 200_000; i += l) {
            for (int k = 0; k < l; k++) {
                x[k] = Math.max(-87f, -87f * (i + k) / 200_000f);
            }
            CpuOps.VecMath.exp(FloatVector.fromArray(CpuOps.VecMath.S, x, 0)).intoArray(y, 0);
            for (int k = 0; k < l; k++) {
                double e = Math.exp(x[k]);
                worst = Math.max(worst, Math.abs(y[k] - e) / e);
            }
        }
        assertTrue(worst < 5e-7, "max relative error " + worst);
        x[0] = 0f;
        CpuOps.VecMath.exp(FloatVector.fromArray(CpuOps.VecMath.S, x, 0)).intoArray(y, 0);
        assertEquals(1f, y[0], 0f, "e^0 is exactly 1");
        x[0] = Float.NEGATIVE_INFINITY;
        CpuOps.VecMath.exp(FloatVector.fromArray(CpuOps.VecMath.S, x, 0)).intoArray(y, 0);
        assertTrue(y[0] >= 0 && y[0] < 1e-37, "masked keys weigh nothing: " + y[0]);
    }

    @Test
    void logSumExpMatchesTheDoubleLoopAndKeepsItsBitsAtAnyOffset() {
        java.util.Random r = new java.util.Random(11);
        for (int n : new int[] {1, 7, 8, 33, 32768}) {
            float[] x = new float[n + 3];
            for (int i = 0; i < x.length; i++) {
                x[i] = (float) (r.nextGaussian() * 4);
            }
            double ref = dev.scorch.engine.kernels.LogSoftmax.logSumExp(x, 1, n);
            double fast = CpuOps.VecMath.logSumExp(x, 1, n);
            assertEquals(ref, fast, 3e-7, "n = " + n);
            // The same row at another offset (another place in a batch's logits) gives the same bits.
            float[] moved = new float[n + 5];
            System.arraycopy(x, 1, moved, 5, n);
            assertEquals(fast, CpuOps.VecMath.logSumExp(moved, 5, n), 0.0, "n = " + n + " moved");
        }
        float[] masked = {Float.NEGATIVE_INFINITY, 2f, Float.NEGATIVE_INFINITY};
        assertEquals(2.0, CpuOps.VecMath.logSumExp(masked, 0, 3), 1e-7, "-inf logits weigh nothing");
    }

    @Test
    void siluMulIsCloseToTheDoubleReferenceAndElementWise() {
        java.util.Random r = new java.util.Random(5);
        int n = 1000;
        float[] g = new float[n + 3];
        float[] u = new float[n + 3];
        for (int i = 0; i < g.length; i++) {
            g[i] = (float) (r.nextGaussian() * (i % 3 == 0 ? 30 : 3));
            u[i] = (float) r.nextGaussian();
        }
        g[5] = 0f;
        g[6] = -0f;
        g[7] = 200f;
        g[8] = -200f;
        g[9] = Float.NaN;
        float[] ref = g.clone();
        new CpuOps(1, false).siluMul(ref, u, 0, g.length); // the plain loop: e^-g in double
        float[] fast = g.clone();
        CpuOps.VecMath.siluMul(fast, u, 0, g.length); // a partial last vector: 1003 is no multiple of the lanes
        for (int i = 0; i < g.length; i++) {
            if (Float.isNaN(ref[i])) {
                assertTrue(Float.isNaN(fast[i]), "NaN in, NaN out at " + i);
            } else {
                assertEquals(ref[i], fast[i], Math.abs(ref[i]) * 1e-6 + 1e-30, "g = " + g[i] + ", u = " + u[i]);
            }
        }
        assertEquals(200f * u[7], fast[7], 0f, "silu(200) is 200");
        // Each element's bits do not depend on where the range starts or ends (a row of a batch, or a lone row).
        for (int off : new int[] {1, 2, 9}) {
            float[] part = g.clone();
            CpuOps.VecMath.siluMul(part, u, off, 37);
            for (int i = off; i < off + 37; i++) {
                assertEquals(fast[i], part[i], 0f, "element " + i + " from offset " + off);
            }
            assertEquals(g[off - 1], part[off - 1], 0f, "before the range untouched");
            assertEquals(g[off + 37], part[off + 37], 0f, "after the range untouched");
        }
    }
}
