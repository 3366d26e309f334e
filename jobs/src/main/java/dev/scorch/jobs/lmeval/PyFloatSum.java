package dev.scorch.jobs.lmeval;

/**
 * Python's built-in {@code sum} over floats, which lm-eval's mean, weighted_mean and stddev use. CPython 3.12 changed
 * it from plain left-to-right addition to Neumaier's compensated summation, so the last bits of a mean depend on the
 * Python that ran lm-eval; pick the one to match. (0/1 accuracies sum exactly either way.)
 */
public enum PyFloatSum {
    /** CPython 3.10 and 3.11: left-to-right addition. */
    PY310,
    /** CPython 3.12 and later: Neumaier compensation, the compensation added at the end when finite and non-zero. */
    PY312;

    public double sum(double[] xs) {
        return sum(xs, 0, xs.length);
    }

    public double sum(double[] xs, int from, int to) {
        double s = 0.0;
        if (this == PY310) {
            for (int i = from; i < to; i++) {
                s += xs[i];
            }
            return s;
        }
        double c = 0.0;
        for (int i = from; i < to; i++) {
            double x = xs[i];
            double t = s + x;
            if (Math.abs(s) >= Math.abs(x)) {
                c += (s - t) + x;
            } else {
                c += (x - t) + s;
            }
            s = t;
        }
        if (c != 0.0 && Double.isFinite(c)) {
            s += c;
        }
        return s;
    }
}
