package dev.scorch.engine.kernels;

import java.util.function.IntConsumer;

/** RMSNorm in fp32 as the reference: x * rsqrt(mean(x²) + eps) * weight, per row of [rows, dim]. */
public final class RmsNorm {
    private RmsNorm() {}

    /** Rows a {@link Rows} item normalises together: {@link #group}'s independent sums. */
    static final int GROUP = 8;

    /** Normalises x[row * stride + offset .. + dim) into out[row * dim ..) for every row. */
    public static void apply(
            float[] x, int rows, int stride, int offset, int dim, float[] weight, double eps, float[] out) {
        for (int r = 0; r < rows; r++) {
            row(x, r * stride + offset, dim, weight, eps, out, r * dim);
        }
    }

    /**
     * {@link #row} of the GROUP rows from r0, their sums of squares interleaved: each is one chain of dependent adds (4
     * cycles each), so one row at a time waits on latency, while eight chains side by side keep the adders busy. Each row's
     * sum is the same sequence of operations as {@link #row}'s: the same bits.
     */
    static void group(float[] x, int r0, int stride, int offset, int dim, float[] weight, double eps, float[] out) {
        int x0 = r0 * stride + offset;
        int x1 = x0 + stride;
        int x2 = x1 + stride;
        int x3 = x2 + stride;
        int x4 = x3 + stride;
        int x5 = x4 + stride;
        int x6 = x5 + stride;
        int x7 = x6 + stride;
        float s0 = 0;
        float s1 = 0;
        float s2 = 0;
        float s3 = 0;
        float s4 = 0;
        float s5 = 0;
        float s6 = 0;
        float s7 = 0;
        for (int i = 0; i < dim; i++) {
            s0 += x[x0 + i] * x[x0 + i];
            s1 += x[x1 + i] * x[x1 + i];
            s2 += x[x2 + i] * x[x2 + i];
            s3 += x[x3 + i] * x[x3 + i];
            s4 += x[x4 + i] * x[x4 + i];
            s5 += x[x5 + i] * x[x5 + i];
            s6 += x[x6 + i] * x[x6 + i];
            s7 += x[x7 + i] * x[x7 + i];
        }
        int o = r0 * dim;
        scale(x, x0, dim, weight, inverse(s0, dim, eps), out, o);
        scale(x, x1, dim, weight, inverse(s1, dim, eps), out, o + dim);
        scale(x, x2, dim, weight, inverse(s2, dim, eps), out, o + 2 * dim);
        scale(x, x3, dim, weight, inverse(s3, dim, eps), out, o + 3 * dim);
        scale(x, x4, dim, weight, inverse(s4, dim, eps), out, o + 4 * dim);
        scale(x, x5, dim, weight, inverse(s5, dim, eps), out, o + 5 * dim);
        scale(x, x6, dim, weight, inverse(s6, dim, eps), out, o + 6 * dim);
        scale(x, x7, dim, weight, inverse(s7, dim, eps), out, o + 7 * dim);
    }

    /** out[oi .. oi + dim) = RMSNorm(x[xi .. xi + dim)); out may be x at the same offset. */
    static void row(float[] x, int xi, int dim, float[] weight, double eps, float[] out, int oi) {
        float ss = 0;
        for (int i = 0; i < dim; i++) {
            ss += x[xi + i] * x[xi + i];
        }
        scale(x, xi, dim, weight, inverse(ss, dim, eps), out, oi);
    }

    /** rsqrt(mean(x²) + eps) from the sum of squares. */
    private static float inverse(float ss, int dim, double eps) {
        return (float) (1.0 / Math.sqrt(ss / dim + eps));
    }

    private static void scale(float[] x, int xi, int dim, float[] weight, float inv, float[] out, int oi) {
        for (int i = 0; i < dim; i++) {
            out[oi + i] = weight[i] * (x[xi + i] * inv);
        }
    }

    /**
     * The same per row, groups of GROUP rows spread over {@link CpuOps#forEachRow}'s threads; each row's bits are
     * {@link #apply}'s. One per CPU device, set per call, so that a call makes no lambda.
     */
    public static final class Rows implements IntConsumer {
        private float[] x;
        private int stride;
        private int offset;
        private int dim;
        private float[] weight;
        private double eps;
        private float[] out;
        private int rows;

        /** As {@link RmsNorm#apply(float[], int, int, int, int, float[], double, float[])}. */
        public void apply(
                CpuOps ops,
                float[] x,
                int rows,
                int stride,
                int offset,
                int dim,
                float[] weight,
                double eps,
                float[] out) {
            this.x = x;
            this.stride = stride;
            this.offset = offset;
            this.dim = dim;
            this.weight = weight;
            this.eps = eps;
            this.out = out;
            this.rows = rows;
            try {
                ops.forEachRow((rows + GROUP - 1) / GROUP, this);
            } finally {
                this.x = this.weight = this.out = null;
            }
        }

        /** Item g: rows [g · GROUP, (g + 1) · GROUP), fewer in the last group. */
        @Override
        public void accept(int g) {
            int r0 = g * GROUP;
            int n = Math.min(GROUP, rows - r0);
            if (n == GROUP) {
                group(x, r0, stride, offset, dim, weight, eps, out);
                return;
            }
            for (int r = r0; r < r0 + n; r++) {
                row(x, r * stride + offset, dim, weight, eps, out, r * dim);
            }
        }
    }
}
