package dev.scorch.jobs.lmeval;

import java.util.Arrays;
import java.util.OptionalDouble;

/**
 * lm-eval's aggregations (api/metrics.py) and their standard errors: mean, median, perplexity, weighted_perplexity,
 * bits_per_byte, weighted_mean; mean_stderr, and the bootstrap for median and perplexity, its resamples drawn with
 * PyRandom exactly as lm-eval's {@code bootstrap_stderr} draws them.
 *
 * @param sum how Python's {@code sum} adds floats in the lm-eval run to match
 */
public record Aggregations(PyFloatSum sum) {
    /** lm-eval's default {@code bootstrap_iters}. */
    public static final int DEFAULT_BOOTSTRAP_ITERS = 100_000;

    public double mean(double[] xs) {
        return sum.sum(xs) / xs.length;
    }

    /** The element at len // 2 of the sorted values: the upper median, never an average of two. */
    public double median(double[] xs) {
        double[] s = xs.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }

    /** exp(-mean(loglikelihoods)). */
    public double perplexity(double[] lls) {
        return Math.exp(-mean(lls));
    }

    /** sum(loglikelihoods) / sum(weights) over (loglikelihood, word or byte count) pairs. */
    public double weightedMean(double[] lls, long[] weights) {
        long w = 0;
        for (long x : weights) {
            w += x;
        }
        return sum.sum(lls) / (double) w;
    }

    /** word_perplexity and byte_perplexity: exp(-weighted_mean). */
    public double weightedPerplexity(double[] lls, long[] weights) {
        return Math.exp(-weightedMean(lls, weights));
    }

    /** -weighted_mean / ln 2 over (loglikelihood, bytes) pairs. */
    public double bitsPerByte(double[] lls, long[] bytes) {
        return -weightedMean(lls, bytes) / Math.log(2);
    }

    /** Sample standard deviation (n - 1). */
    public double sampleStddev(double[] xs) {
        double mu = mean(xs);
        double[] sq = new double[xs.length];
        for (int i = 0; i < xs.length; i++) {
            double d = xs[i] - mu;
            sq[i] = d * d;
        }
        return Math.sqrt(sum.sum(sq) / (xs.length - 1));
    }

    public double meanStderr(double[] xs) {
        return sampleStddev(xs) / Math.sqrt(xs.length);
    }

    /** A statistic over a resample. */
    public interface Statistic {
        double apply(double[] xs);
    }

    /**
     * lm-eval's bootstrap_stderr: chunks of min(1000, iters) resamples, iters // chunk of them, chunk i drawing with a
     * fresh {@code Random(i)}, each resample {@code choices(xs, k=len(xs))}; the sample stddev of all the statistics.
     */
    public double bootstrapStderr(Statistic f, double[] xs, int iters) {
        int chunk = Math.min(1000, iters);
        int chunks = iters / chunk;
        double[] res = new double[chunks * chunk];
        int at = 0;
        for (int i = 0; i < chunks; i++) {
            PyRandom rnd = new PyRandom(i);
            for (int j = 0; j < chunk; j++) {
                res[at++] = f.apply(rnd.choices(xs, xs.length));
            }
        }
        return sampleStddev(res);
    }

    /**
     * The {@code <metric>_stderr} lm-eval reports for an aggregation over per-sample values; empty where lm-eval
     * writes "N/A": bootstrap_iters <= 0, one value or none, or an aggregation with no stderr (weighted_perplexity,
     * bits_per_byte). bleu, chrf and ter (whose iterations lm-eval caps at 100) are not implemented and refused.
     */
    public OptionalDouble stderr(String aggregation, double[] xs, int bootstrapIters) {
        if (bootstrapIters <= 0 || xs.length <= 1) {
            return OptionalDouble.empty();
        }
        return switch (aggregation) {
            case "mean" -> OptionalDouble.of(meanStderr(xs));
            case "median" -> OptionalDouble.of(bootstrapStderr(this::median, xs, bootstrapIters));
            case "perplexity" -> OptionalDouble.of(bootstrapStderr(this::perplexity, xs, bootstrapIters));
            case "weighted_perplexity", "bits_per_byte" -> OptionalDouble.empty();
            default -> throw new IllegalArgumentException("aggregation '" + aggregation + "' is not supported");
        };
    }

    /** The aggregation of per-sample values by name: mean, median or perplexity. */
    public double aggregate(String aggregation, double[] xs) {
        return switch (aggregation) {
            case "mean" -> mean(xs);
            case "median" -> median(xs);
            case "perplexity" -> perplexity(xs);
            default ->
                throw new IllegalArgumentException("aggregation '" + aggregation
                        + "' is not supported over plain values (weighted ones take (loglikelihood, count) pairs)");
        };
    }

    /**
     * A group's value (lm-eval's aggregate_subtask_metrics): sum(value * size) / sum(size), or with weight_by_size
     * false every size taken as 1.
     */
    public double groupMean(double[] values, long[] sizes, boolean weightBySize) {
        double[] products = new double[values.length];
        long total = 0;
        for (int i = 0; i < values.length; i++) {
            long size = weightBySize ? sizes[i] : 1;
            products[i] = values[i] * size;
            total += size;
        }
        return sum.sum(products) / (double) total;
    }

    /**
     * A group's stderr (lm-eval's pooled_sample_stderr, used whether or not weight_by_size):
     * sqrt(sum((n_i - 1) * se_i^2 * n_i) / (sum(n_i) - k) / sum(n_i)). lm-eval reports "N/A" when any subtask's is.
     */
    public double pooledStderr(double[] stderrs, long[] sizes) {
        double[] terms = new double[stderrs.length];
        long total = 0;
        for (int i = 0; i < stderrs.length; i++) {
            terms[i] = (sizes[i] - 1) * (stderrs[i] * stderrs[i]) * sizes[i];
            total += sizes[i];
        }
        double pooledVar = sum.sum(terms) / (double) (total - stderrs.length);
        return Math.sqrt(pooledVar / total);
    }
}
