package dev.scorch.engine.kernels;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.RopeScaling;

/**
 * Rotary position embedding over qk_rope_head_dim with YaRN scaling, as the DeepSeek-V3 reference code
 * builds it: inv_freq blends interpolated and extrapolated frequencies over the correction range (the same
 * at every length), cos/sin carry mscale(factor, mscale) / mscale(factor, mscale_all_dim).
 *
 * <p>The reference de-interleaves the rope dims before rotate_half, so input dims (2i, 2i+1) rotate together
 * by angle pos × inv_freq[i]. Rotating those pairs in place leaves q and k in the checkpoint's interleaved
 * order; q·k is the same either way.
 */
public final class Rope {
    private final int dim;
    private final double[] invFreq;
    private final double mscale;
    private volatile float[] table = new float[0]; // [positions, dim]: see table()

    public Rope(ModelConfig c) {
        this.dim = c.qkRopeHeadDim();
        this.invFreq = invFreq(dim, c.ropeTheta(), c.ropeScaling());
        RopeScaling s = c.ropeScaling();
        this.mscale = s == null ? 1.0 : yarnMscale(s.factor(), s.mscale()) / yarnMscale(s.factor(), s.mscaleAllDim());
    }

    static double[] invFreq(int dim, double base, RopeScaling s) {
        int half = dim / 2;
        double[] extra = new double[half];
        for (int i = 0; i < half; i++) {
            extra[i] = 1.0 / Math.pow(base, (2.0 * i) / dim);
        }
        if (s == null) {
            return extra;
        }
        double low = Math.max(Math.floor(correctionDim(s.betaFast(), dim, base, s.originalMaxPositionEmbeddings())), 0);
        double high =
                Math.min(Math.ceil(correctionDim(s.betaSlow(), dim, base, s.originalMaxPositionEmbeddings())), dim - 1);
        if (low == high) {
            high += 0.001;
        }
        double[] out = new double[half];
        for (int i = 0; i < half; i++) {
            double ramp = Math.min(1, Math.max(0, (i - low) / (high - low)));
            double extrapolate = 1.0 - ramp;
            double inter = extra[i] / s.factor();
            out[i] = inter * (1 - extrapolate) + extra[i] * extrapolate;
        }
        return out;
    }

    static double correctionDim(double rotations, int dim, double base, int maxPos) {
        return (dim * Math.log(maxPos / (rotations * 2 * Math.PI))) / (2 * Math.log(base));
    }

    /** yarn_get_mscale: 0.1 · m · ln(scale) + 1 for scale > 1, else 1. */
    public static double yarnMscale(double scale, double m) {
        return scale <= 1 ? 1.0 : 0.1 * m * Math.log(scale) + 1.0;
    }

    /** Softmax scale: (qk_nope + qk_rope)^-0.5, × mscale(factor, mscale_all_dim)² under YaRN with mscale_all_dim set. */
    public static float softmaxScale(ModelConfig c) {
        double scale = 1.0 / Math.sqrt(c.qHeadDim());
        RopeScaling s = c.ropeScaling();
        if (s != null && s.mscaleAllDim() != 0) {
            double m = yarnMscale(s.factor(), s.mscaleAllDim());
            scale *= m * m;
        }
        return (float) scale;
    }

    public int dim() {
        return dim;
    }

    /** cos and sin for one position: out[2i] = cos, out[2i + 1] = sin of pos × inv_freq[i], times mscale. */
    public void cosSin(int pos, float[] out) {
        System.arraycopy(table(pos + 1), pos * dim, out, 0, dim);
    }

    /**
     * {@link #cosSin} of positions [0, positions) at least, position p's at p · dim: computed once per model and grown as
     * longer sequences come (every layer of every batch rotates with the same values). Safe to share between threads.
     */
    public float[] table(int positions) {
        float[] t = table;
        return t.length >= (long) positions * dim ? t : grow(positions);
    }

    private synchronized float[] grow(int positions) {
        float[] t = table;
        if (t.length >= (long) positions * dim) {
            return t;
        }
        // Doubling (from 1024 positions), so a long generation grows it a few times, not every step. dim > 0 here: with
        // dim 0 every table is long enough.
        int n = (int) Math.min(Integer.MAX_VALUE / dim, Math.max(positions, Math.max(1024L, 2L * t.length / dim)));
        float[] grown = java.util.Arrays.copyOf(t, n * dim);
        for (int pos = t.length / dim; pos < n; pos++) {
            for (int i = 0; i < dim / 2; i++) {
                double a = pos * invFreq[i];
                grown[pos * dim + 2 * i] = (float) (Math.cos(a) * mscale);
                grown[pos * dim + 2 * i + 1] = (float) (Math.sin(a) * mscale);
            }
        }
        table = grown;
        return grown;
    }

    /** Rotates x[off .. off + dim) in place with a table from {@link #cosSin}. */
    public void rotate(float[] x, int off, float[] cs) {
        rotate(x, off, cs, 0);
    }

    /** Rotates x[off .. off + dim) in place with cos/sin at cs[csOff ..] (a row of {@link #table}). */
    public void rotate(float[] x, int off, float[] cs, int csOff) {
        rotate(x, off, dim, cs, csOff);
    }

    /** Rotates x[off .. off + dim) in place with cos/sin at cs[csOff ..] (a row of a {@link #table} of width dim). */
    public static void rotate(float[] x, int off, int dim, float[] cs, int csOff) {
        for (int i = 0; i < dim / 2; i++) {
            float x0 = x[off + 2 * i];
            float x1 = x[off + 2 * i + 1];
            float c = cs[csOff + 2 * i];
            float s = cs[csOff + 2 * i + 1];
            x[off + 2 * i] = x0 * c - x1 * s;
            x[off + 2 * i + 1] = x1 * c + x0 * s;
        }
    }
}
