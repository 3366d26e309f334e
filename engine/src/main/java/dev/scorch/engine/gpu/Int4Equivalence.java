package dev.scorch.engine.gpu;

import dev.scorch.engine.demo.Int4Groups;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * On one device: a GEMM with an INT4 weight kept packed against the same weight dequantised on the host (q · scale,
 * element by element) and uploaded as a plain weight, in each precision, and both against an fp64 product of the
 * dequantised weight. The tests run it on {@link HostDevice}; the device check on the GPU.
 */
public final class Int4Equivalence {
    private Int4Equivalence() {}

    /** Shape of the check: m rows of x, a weight [n, k] (k not a multiple of the group, 32, nor of 8). */
    static final int M = 24;

    static final int N = 96;
    static final int K = 1000 + 4;

    /**
     * Max absolute differences, by name: "P packed vs dequantised fp32" and "P packed vs dequantised P" (the same weight
     * uploaded as fp32 values in precision P: equal numbers expected in FP32 and BF16), "P packed vs fp64" and
     * "dequantised fp32 vs fp64" (the exact product: the measured error of each mode), and "max |y|" for scale.
     */
    public static Map<String, Double> measure(Device dev) {
        SplittableRandom rnd = new SplittableRandom(25);
        float[] x = new float[M * K];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) (rnd.nextDouble() * 2 - 1);
        }
        float[] w = new float[N * K];
        for (int i = 0; i < w.length; i++) {
            w[i] = (float) (rnd.nextGaussian() * 0.02);
        }
        Int4Groups q = Int4Groups.quantize(w, N, K, 32);
        float[] deq = q.dequantize();
        double[] exact = new double[M * N];
        double maxY = 0;
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int c = 0; c < K; c++) {
                    s += (double) x[i * K + c] * deq[j * K + c];
                }
                exact[i * N + j] = s;
                maxY = Math.max(maxY, Math.abs(s));
            }
        }
        Map<String, Double> out = new LinkedHashMap<>();
        Buf xb = dev.upload(x);
        Buf packed = dev.int4Weight(q.packed(), q.scales(), N, K, 32);
        Buf plain = dev.weight(deq, GemmPrecision.FP32);
        float[] fp32 = gemm(dev, xb, plain, GemmPrecision.FP32);
        dev.free(plain);
        out.put("dequantised fp32 vs fp64", diff(fp32, exact));
        for (GemmPrecision p : GemmPrecision.values()) {
            float[] y = gemm(dev, xb, packed, p);
            out.put(p + " packed vs dequantised fp32", diff(y, fp32));
            plain = dev.weight(deq, p);
            out.put(p + " packed vs dequantised " + p, diff(y, gemm(dev, xb, plain, p)));
            dev.free(plain);
            out.put(p + " packed vs fp64", diff(y, exact));
        }
        out.put("max |y|", maxY);
        dev.free(packed);
        dev.free(xb);
        return out;
    }

    private static float[] gemm(Device dev, Buf x, Buf w, GemmPrecision p) {
        Buf y = dev.alloc(Buf.Kind.F32, (long) M * N);
        dev.gemm(x, M, K, w, N, y, p);
        float[] out = new float[M * N];
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
