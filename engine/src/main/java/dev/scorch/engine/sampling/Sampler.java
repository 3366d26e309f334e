package dev.scorch.engine.sampling;

import dev.scorch.engine.kernels.LogSoftmax;
import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * Chooses the next token of one row from its logits, in the usual order: repetition penalty, presence and
 * frequency penalties, then greedy, or temperature → top-k → softmax → top-p → min-p → a draw. The draw's
 * random number comes from (seed, sample, step) alone, so a row samples the same text in any batch and
 * partition. Probabilities are computed in double.
 *
 * <p>The draw walks the kept tokens in order of (logit desc, id asc) and stops where the cumulative probability
 * passes u × (their total). Only the tokens that can be kept are sorted: the top k, or those above min_p, or for
 * top_p alone the few most likely whose mass already reaches top_p; with nothing cut off, the walk goes in id
 * order and nothing is sorted. The softmax normaliser sums the top k in that order, else every token in id
 * order. {@code SamplerTest} checks all of this against a plain full sort.
 */
public final class Sampler {
    private Sampler() {}

    /** Per-thread buffers sized to the vocabulary, so a draw allocates only its short sorted list. */
    private static final class Scratch {
        double[] l = new double[0];
        double[] prob = new double[0];
        int[] ids = new int[0];
        int[] count = new int[0];
        boolean[] seen = new boolean[0];

        Scratch ensure(int vocab) {
            if (l.length < vocab) {
                l = new double[vocab];
                prob = new double[vocab];
                ids = new int[vocab];
                count = new int[vocab];
                seen = new boolean[vocab];
            }
            return this;
        }
    }

    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    /** Thresholds (× the top probability) tried in turn to find a small set holding top_p of the mass. */
    private static final double[] TOP_P_THRESHOLDS = {1e-3, 1e-6, 1e-12};

    /** The uniform number row {@code seed} draws at {@code step} of sample {@code sample}. */
    public static double uniform(long seed, int sample, int step) {
        long key = seed * 0x9E3779B97F4A7C15L + sample * 0xC2B2AE3D27D4EB4FL + step * 0x165667B19E3779F9L;
        return new SplittableRandom(key).nextDouble();
    }

    /**
     * The next token. logits[off .. off + vocab) are not modified; prompt and generated[0 .. generatedLen) are
     * the row's tokens so far (for the penalties).
     */
    public static int sample(
            float[] logits,
            int off,
            int vocab,
            SamplingParams p,
            int[] prompt,
            int[] generated,
            int generatedLen,
            int sample,
            int step) {
        Scratch s = SCRATCH.get().ensure(vocab);
        double[] l = s.l;
        for (int i = 0; i < vocab; i++) {
            l[i] = logits[off + i];
        }
        applyPenalties(l, p, prompt, generated, generatedLen, s);
        if (p.isGreedy()) {
            return argmax(l, vocab);
        }
        for (int i = 0; i < vocab; i++) {
            l[i] /= p.temperature();
        }
        double u = uniform(p.seed(), sample, step);
        double[] prob = s.prob;
        if (p.topK() > 0 && p.topK() < vocab) {
            // The top k, sorted; softmax over them in that order.
            int[] order = LogSoftmax.topK(l, vocab, p.topK());
            double max = l[order[0]];
            double z = 0;
            for (int id : order) {
                prob[id] = Math.exp(l[id] - max);
                z += prob[id];
            }
            for (int id : order) {
                prob[id] /= z;
            }
            return walk(order, order.length, prob, p, u);
        }
        // Softmax over every token, summed in id order.
        int best = argmax(l, vocab);
        double max = l[best];
        double z = 0;
        for (int i = 0; i < vocab; i++) {
            prob[i] = Math.exp(l[i] - max);
            z += prob[i];
        }
        for (int i = 0; i < vocab; i++) {
            prob[i] /= z;
        }
        if (p.topP() >= 1 && p.minP() == 0) {
            // Nothing is cut off: walk in id order, no sort needed.
            double acc = 0;
            for (int i = 0; i < vocab; i++) {
                acc += prob[i];
            }
            double target = u * acc;
            acc = 0;
            for (int i = 0; i < vocab; i++) {
                acc += prob[i];
                if (target < acc) {
                    return i;
                }
            }
            return vocab - 1;
        }
        // Sort only the tokens that can be kept: those above min_p's floor, or a set already holding top_p's mass.
        // Every token left out is less likely than every token taken, so the sorted set is a prefix of the full order.
        double top = prob[best];
        int n = 0;
        if (p.minP() > 0) {
            n = above(prob, vocab, p.minP() * top, s.ids);
        } else {
            for (double f : TOP_P_THRESHOLDS) {
                n = above(prob, vocab, f * top, s.ids);
                double mass = 0;
                for (int r = 0; r < n; r++) {
                    mass += prob[s.ids[r]];
                }
                if (mass >= p.topP() + 1e-9) {
                    break;
                }
                n = 0;
            }
            if (n == 0) {
                n = above(prob, vocab, 0, s.ids);
            }
        }
        int[] order = sortByLogit(s.ids, n, l);
        return walk(order, n, prob, p, u);
    }

    /** Ids whose probability is at least floor, into ids[0 ..); returns how many. */
    private static int above(double[] prob, int vocab, double floor, int[] ids) {
        int n = 0;
        for (int i = 0; i < vocab; i++) {
            if (prob[i] >= floor) {
                ids[n++] = i;
            }
        }
        return n;
    }

    /** ids[0 .. n) ordered by (l desc, id asc). */
    static int[] sortByLogit(int[] ids, int n, double[] l) {
        Integer[] boxed = new Integer[n];
        for (int r = 0; r < n; r++) {
            boxed[r] = ids[r];
        }
        Arrays.sort(boxed, (a, b) -> l[a] != l[b] ? Double.compare(l[b], l[a]) : Integer.compare(a, b));
        int[] out = new int[n];
        for (int r = 0; r < n; r++) {
            out[r] = boxed[r];
        }
        return out;
    }

    /** top-p (the smallest prefix reaching it) and min-p (only tokens within min_p of the best), then the draw. */
    private static int walk(int[] order, int size, double[] prob, SamplingParams p, double u) {
        double floor = p.minP() * prob[order[0]];
        int n = 0;
        double cum = 0;
        while (n < size && (n == 0 || cum < p.topP()) && prob[order[n]] >= floor) {
            cum += prob[order[n]];
            n++;
        }
        double target = u * cum;
        double acc = 0;
        for (int r = 0; r < n; r++) {
            acc += prob[order[r]];
            if (target < acc) {
                return order[r];
            }
        }
        return order[n - 1];
    }

    static void applyPenalties(double[] l, SamplingParams p, int[] prompt, int[] generated) {
        applyPenalties(l, p, prompt, generated, generated.length, new Scratch().ensure(l.length));
    }

    private static void applyPenalties(
            double[] l, SamplingParams p, int[] prompt, int[] generated, int generatedLen, Scratch s) {
        if (p.repetitionPenalty() != 1) {
            boolean[] seen = s.seen;
            for (int k = 0; k < prompt.length + generatedLen; k++) {
                int id = k < prompt.length ? prompt[k] : generated[k - prompt.length];
                if (!seen[id]) {
                    seen[id] = true;
                    l[id] = l[id] > 0 ? l[id] / p.repetitionPenalty() : l[id] * p.repetitionPenalty();
                }
            }
            for (int k = 0; k < prompt.length + generatedLen; k++) {
                seen[k < prompt.length ? prompt[k] : generated[k - prompt.length]] = false;
            }
        }
        if (p.presencePenalty() != 0 || p.frequencyPenalty() != 0) {
            int[] count = s.count;
            for (int k = 0; k < generatedLen; k++) {
                count[generated[k]]++;
            }
            for (int k = 0; k < generatedLen; k++) {
                int id = generated[k];
                if (count[id] > 0) {
                    l[id] -= p.presencePenalty() + p.frequencyPenalty() * count[id];
                    count[id] = 0; // each id once
                }
            }
        }
    }

    static int argmax(double[] l, int n) {
        int best = 0;
        for (int i = 1; i < n; i++) {
            if (l[i] > l[best]) {
                best = i;
            }
        }
        return best;
    }
}
