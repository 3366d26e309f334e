package dev.scorch.jobs.eval;

import java.util.SplittableRandom;
import java.util.function.ToDoubleFunction;

/** The standard errors the eval job reports, each named by how it was computed. */
final class Stats {
    static final String ANALYTIC = "analytic: sample standard deviation / sqrt(n)";
    static final int BOOTSTRAP_RESAMPLES = 1000;
    static final String BOOTSTRAP = "bootstrap over examples, " + BOOTSTRAP_RESAMPLES + " resamples, seed 1234";

    private Stats() {}

    /** The share of examples where a 0/1 figure is 1, with its analytic standard error. */
    static TaskRun.Metric proportion(String name, java.util.List<Double> values, long errors) {
        double[] x = values.stream().mapToDouble(Double::doubleValue).toArray();
        return new TaskRun.Metric(name, mean(x), stderrOfMean(x), ANALYTIC, x.length, errors, true);
    }

    static double mean(double[] x) {
        double s = 0;
        for (double v : x) {
            s += v;
        }
        return x.length == 0 ? Double.NaN : s / x.length;
    }

    /** Standard error of the mean: sqrt(Σ(x - mean)² / (n - 1) / n), as log-likelihood harnesses report it. */
    static double stderrOfMean(double[] x) {
        if (x.length < 2) {
            return Double.NaN;
        }
        double m = mean(x);
        double ss = 0;
        for (double v : x) {
            ss += (v - m) * (v - m);
        }
        return Math.sqrt(ss / (x.length - 1) / x.length);
    }

    /**
     * Standard deviation of metric over bootstrap resamples of the n examples (indices drawn with replacement,
     * a fixed seed so a rerun reports the same figure).
     */
    static double bootstrap(int n, ToDoubleFunction<int[]> metric) {
        if (n < 2) {
            return Double.NaN;
        }
        SplittableRandom rnd = new SplittableRandom(1234);
        double[] values = new double[BOOTSTRAP_RESAMPLES];
        int[] idx = new int[n];
        for (int b = 0; b < BOOTSTRAP_RESAMPLES; b++) {
            for (int i = 0; i < n; i++) {
                idx[i] = rnd.nextInt(n);
            }
            values[b] = metric.applyAsDouble(idx);
        }
        double m = mean(values);
        double ss = 0;
        for (double v : values) {
            ss += (v - m) * (v - m);
        }
        return Math.sqrt(ss / (BOOTSTRAP_RESAMPLES - 1));
    }
}
