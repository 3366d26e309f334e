package dev.scorch.engine.diagnostics;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * What {@link Int4Equivalence} and {@link Fp8Equivalence} share: a GEMM with a weight kept packed, in each precision,
 * against the same weight dequantised on the host and uploaded as a plain weight, and both against the fp64 product of
 * the dequantised weight.
 */
final class PackedEquivalence {
    private PackedEquivalence() {}

    /** x [m, k] uniform in [-1, 1), then w [n, k] ~ N(0, 0.02²), drawn from rnd in that order. */
    static float[][] operands(SplittableRandom rnd, int m, int n, int k) {
        float[] x = new float[m * k];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) (rnd.nextDouble() * 2 - 1);
        }
        float[] w = new float[n * k];
        for (int i = 0; i < w.length; i++) {
            w[i] = (float) (rnd.nextGaussian() * 0.02);
        }
        return new float[][] {x, w};
    }

    /**
     * Puts into out, each name after prefix: "dequantised fp32 vs fp64", then for every precision P "P packed vs
     * dequantised fp32", "P packed vs dequantised P" (deq uploaded in P) and "P packed vs fp64". x [m, k] is on the
     * device as xb; packed and deq are the weight [n, k]. Returns the largest |y| of the fp64 product.
     */
    static double measure(
            Device dev,
            float[] x,
            Buf xb,
            int m,
            int k,
            Buf packed,
            float[] deq,
            int n,
            String prefix,
            Map<String, Double> out) {
        double[] exact = new double[m * n];
        double maxY = 0;
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int c = 0; c < k; c++) {
                    s += (double) x[i * k + c] * deq[j * k + c];
                }
                exact[i * n + j] = s;
                maxY = Math.max(maxY, Math.abs(s));
            }
        }
        Buf plain = dev.weight(deq, GemmPrecision.FP32);
        float[] fp32 = gemm(dev, xb, m, k, plain, n, GemmPrecision.FP32);
        dev.free(plain);
        out.put(prefix + "dequantised fp32 vs fp64", diff(fp32, exact));
        for (GemmPrecision p : GemmPrecision.values()) {
            float[] y = gemm(dev, xb, m, k, packed, n, p);
            out.put(prefix + p + " packed vs dequantised fp32", diff(y, fp32));
            plain = dev.weight(deq, p);
            out.put(prefix + p + " packed vs dequantised " + p, diff(y, gemm(dev, xb, m, k, plain, n, p)));
            dev.free(plain);
            out.put(prefix + p + " packed vs fp64", diff(y, exact));
        }
        return maxY;
    }

    private static float[] gemm(Device dev, Buf x, int m, int k, Buf w, int n, GemmPrecision p) {
        Buf y = dev.alloc(Buf.Kind.F32, (long) m * n);
        dev.gemm(x, m, k, w, n, y, p);
        float[] out = new float[m * n];
        dev.read(y, out, 0, out.length);
        dev.free(y);
        return out;
    }

    private static double diff(float[] a, float[] b) {
        double d = 0;
        for (int i = 0; i < a.length; i++) {
            d = Math.max(d, Math.abs((double) a[i] - b[i]));
        }
        return d;
    }

    private static double diff(float[] a, double[] b) {
        double d = 0;
        for (int i = 0; i < a.length; i++) {
            d = Math.max(d, Math.abs(a[i] - b[i]));
        }
        return d;
    }
}
