package dev.scorch.jobs.lmeval;

import java.util.List;

/**
 * lm-eval's per-document metrics for a multiple_choice task, from the choices' loglikelihoods: acc (argmax of the
 * loglikelihoods), acc_norm (argmax of loglikelihood / the choice's length in characters, Python's {@code len}: code
 * points), acc_bytes (/ UTF-8 bytes), acc_mutual_info (argmax of conditional minus unconditional loglikelihood) and
 * exact_match (whether the gold choice was the greedy continuation). argmax is numpy's: the first maximum, and a NaN
 * wins. A gold index at or past the number of choices becomes -100, which nothing matches.
 *
 * @param accMutualInfo NaN unless unconditional loglikelihoods were given
 */
public record MultipleChoiceScore(double acc, double accNorm, double accBytes, double accMutualInfo, int exactMatch) {
    public static final int INVALID_GOLD = -100;

    /**
     * @param golds the gold indexes: one, or several for a multiple-target task
     * @param unconditional loglikelihoods of each choice with an empty context (for acc_mutual_info), or null
     */
    public static MultipleChoiceScore of(
            List<String> choices,
            double[] lls,
            boolean[] isGreedy,
            List<Integer> golds,
            boolean multipleTarget,
            double[] unconditional) {
        int k = choices.size();
        if (lls.length != k || isGreedy.length != k) {
            throw new IllegalArgumentException("expected " + k + " loglikelihoods, got " + lls.length + " and "
                    + isGreedy.length + " greedy flags");
        }
        double[] norm = new double[k];
        double[] bytes = new double[k];
        for (int i = 0; i < k; i++) {
            norm[i] = lls[i] / PyText.len(choices.get(i));
            bytes[i] = lls[i] / PyText.countBytes(choices.get(i));
        }
        int pred = argmax(lls);
        int predNorm = argmax(norm);
        int predBytes = argmax(bytes);
        List<Integer> gold = golds.stream().map(g -> g < k ? g : INVALID_GOLD).toList();
        if (!multipleTarget && gold.size() != 1) {
            throw new IllegalArgumentException("a single-target task needs one gold index, got " + gold);
        }
        int exact;
        if (multipleTarget) {
            exact = 0;
            for (int g : gold) {
                if (g != INVALID_GOLD && isGreedy[pyIndex(g, k)]) {
                    exact = 1;
                }
            }
        } else {
            int g = gold.get(0);
            exact = g != INVALID_GOLD && isGreedy[pyIndex(g, k)] ? 1 : 0;
        }
        double mutual = Double.NaN;
        if (unconditional != null) {
            if (unconditional.length != k) {
                throw new IllegalArgumentException("expected " + k + " unconditional loglikelihoods");
            }
            double[] mi = new double[k];
            for (int i = 0; i < k; i++) {
                mi[i] = lls[i] - unconditional[i];
            }
            // lm-eval compares this one against gold with ==, a list gold never equals
            mutual = !multipleTarget && argmax(mi) == gold.get(0) ? 1.0 : 0.0;
        }
        return new MultipleChoiceScore(hit(pred, gold), hit(predNorm, gold), hit(predBytes, gold), mutual, exact);
    }

    /** The gold as lm-eval resolves doc_to_target's value: an int as is, a str by its index in choices (or -100). */
    public static int goldIndex(Object target, List<String> choices) {
        if (target instanceof Number n) {
            return n.intValue();
        }
        int i = choices.indexOf(String.valueOf(target));
        return i < 0 ? INVALID_GOLD : i;
    }

    private static double hit(int pred, List<Integer> gold) {
        return gold.contains(pred) ? 1.0 : 0.0;
    }

    private static int pyIndex(int i, int k) {
        return i < 0 ? i + k : i;
    }

    /** numpy's argmax: the first maximum; the first NaN if there is one. */
    static int argmax(double[] xs) {
        int best = 0;
        for (int i = 0; i < xs.length; i++) {
            if (Double.isNaN(xs[i])) {
                return i;
            }
            if (xs[i] > xs[best]) {
                best = i;
            }
        }
        return best;
    }
}
