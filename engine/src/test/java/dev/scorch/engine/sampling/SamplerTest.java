package dev.scorch.engine.sampling;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class SamplerTest {
    static final float[] LOGITS = {1f, 3f, 3f, 0f, -1f, 2.5f};
    static final int[] NONE = {};

    static int draw(SamplingParams p, int step) {
        return Sampler.sample(LOGITS, 0, LOGITS.length, p, NONE, NONE, 0, 0, step);
    }

    @Test
    void greedyTakesTheLowestIdAmongTies() {
        assertEquals(1, draw(SamplingParams.greedy(), 0));
        assertEquals(1, draw(new SamplingParams(1.0, 1, 1, 0, 1, 0, 0, 9), 0), "top_k 1 is greedy");
    }

    @Test
    void temperatureSamplingFollowsTheSoftmax() {
        SamplingParams p = SamplingParams.temperature(1.0, 42);
        int[] counts = new int[LOGITS.length];
        int n = 60_000;
        for (int step = 0; step < n; step++) {
            counts[draw(p, step)]++;
        }
        double z = 0;
        for (float v : LOGITS) {
            z += Math.exp(v);
        }
        for (int i = 0; i < LOGITS.length; i++) {
            double expected = Math.exp(LOGITS[i]) / z;
            assertEquals(expected, counts[i] / (double) n, 0.01, "frequency of token " + i);
        }
    }

    @Test
    void aDrawDependsOnlyOnSeedSampleAndStep() {
        SamplingParams p = SamplingParams.temperature(1.5, 7);
        int first = Sampler.sample(LOGITS, 0, LOGITS.length, p, NONE, NONE, 0, 3, 11);
        for (int other = 0; other < 50; other++) {
            draw(SamplingParams.temperature(1.0, other), other); // other rows' draws in between change nothing
        }
        assertEquals(first, Sampler.sample(LOGITS, 0, LOGITS.length, p, NONE, NONE, 0, 3, 11));
        float[] shifted = new float[LOGITS.length + 3];
        System.arraycopy(LOGITS, 0, shifted, 3, LOGITS.length);
        assertEquals(
                first,
                Sampler.sample(shifted, 3, LOGITS.length, p, NONE, NONE, 0, 3, 11),
                "offset into a batch's logits");
    }

    @Test
    void topPAndMinPNarrowTheChoice() {
        // Probabilities: ids 1 and 2 about 0.35 each, 5 about 0.21: top_p 0.5 keeps only {1, 2}.
        for (int step = 0; step < 500; step++) {
            int t = draw(new SamplingParams(1.0, 0, 0.5, 0, 1, 0, 0, 5), step);
            assertTrue(t == 1 || t == 2, "top_p 0.5 drew " + t);
            int m = draw(new SamplingParams(1.0, 0, 1, 0.7, 1, 0, 0, 5), step);
            assertTrue(m == 1 || m == 2, "min_p 0.7 drew " + m);
        }
    }

    @Test
    void penaltiesFollowTheirDefinitions() {
        double[] l = {2, -2, 1, 0.5};
        Sampler.applyPenalties(l, new SamplingParams(1, 0, 1, 0, 2.0, 0, 0, 0), new int[] {0, 1}, new int[] {1});
        assertEquals(1.0, l[0], 0); // positive: divided
        assertEquals(-4.0, l[1], 0); // negative: multiplied, once although seen twice
        assertEquals(1.0, l[2], 0);
        double[] m = {2, 2, 2, 2};
        Sampler.applyPenalties(m, new SamplingParams(1, 0, 1, 0, 1, 0.5, 0.25, 0), new int[] {3}, new int[] {1, 1, 2});
        assertEquals(2.0, m[0], 0);
        assertEquals(2 - 0.5 - 0.5, m[1], 0); // presence once, frequency × 2
        assertEquals(2 - 0.5 - 0.25, m[2], 0);
        assertEquals(2.0, m[3], 0, "prompt tokens are not penalised by presence/frequency");
        // Greedy with a repetition penalty moves off a repeated token.
        assertEquals(
                2,
                Sampler.sample(
                        LOGITS,
                        0,
                        LOGITS.length,
                        new SamplingParams(0, 0, 1, 0, 3.0, 0, 0, 0),
                        NONE,
                        new int[] {1},
                        1,
                        0,
                        0));
    }

    @Test
    void badParametersAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> new SamplingParams(-1, 0, 1, 0, 1, 0, 0, 0));
        assertThrows(IllegalArgumentException.class, () -> new SamplingParams(1, 0, 0, 0, 1, 0, 0, 0));
    }

    /** The rules of {@link Sampler} restated with a full sort of the vocabulary and no shortcuts. */
    static int reference(float[] logits, SamplingParams p, int[] prompt, int[] generated, int sample, int step) {
        int vocab = logits.length;
        double[] l = new double[vocab];
        for (int i = 0; i < vocab; i++) {
            l[i] = logits[i];
        }
        Sampler.applyPenalties(l, p, prompt, generated);
        if (p.isGreedy()) {
            return Sampler.argmax(l, vocab);
        }
        Integer[] order = new Integer[vocab];
        for (int i = 0; i < vocab; i++) {
            order[i] = i;
            l[i] /= p.temperature();
        }
        java.util.Arrays.sort(order, (a, b) -> l[a] != l[b] ? Double.compare(l[b], l[a]) : Integer.compare(a, b));
        boolean cutK = p.topK() > 0 && p.topK() < vocab;
        int keep = cutK ? p.topK() : vocab;
        double max = l[order[0]];
        double[] prob = new double[vocab];
        double z = 0;
        for (int r = 0; r < keep; r++) {
            int id = cutK ? order[r] : r; // top-k: summed in sorted order; else in id order
            prob[id] = Math.exp(l[id] - max);
            z += prob[id];
        }
        for (int r = 0; r < keep; r++) {
            prob[cutK ? order[r] : r] /= z;
        }
        double u = Sampler.uniform(p.seed(), sample, step);
        if (!cutK && p.topP() >= 1 && p.minP() == 0) {
            Integer[] byId = new Integer[vocab];
            for (int i = 0; i < vocab; i++) {
                byId[i] = i;
            }
            order = byId;
        }
        int n = 0;
        double cum = 0;
        while (n < keep && (n == 0 || cum < p.topP()) && prob[order[n]] >= p.minP() * prob[order[0]]) {
            cum += prob[order[n]];
            n++;
        }
        double acc = 0;
        for (int r = 0; r < n; r++) {
            acc += prob[order[r]];
            if (u * cum < acc) {
                return order[r];
            }
        }
        return order[n - 1];
    }

    @Test
    void theShortcutsDrawWhatAFullSortDraws() {
        java.util.Random rnd = new java.util.Random(11);
        SamplingParams[] params = {
            new SamplingParams(1.0, 0, 1, 0, 1, 0, 0, 1), // nothing cut: id-order walk
            new SamplingParams(0.7, 0, 0.9, 0, 1, 0, 0, 2), // top_p alone: thresholded sort
            new SamplingParams(1.3, 0, 0.999999, 0, 1, 0, 0, 3), // top_p near 1: falls back to the full set
            new SamplingParams(1.0, 0, 1, 0.05, 1, 0, 0, 4), // min_p
            new SamplingParams(0.9, 40, 0.95, 0.01, 1.2, 0.3, 0.1, 5), // everything
            new SamplingParams(1.0, 5000, 0.8, 0, 1, 0, 0, 6), // top_k wider than the vocabulary
        };
        int[] prompt = {3, 3, 17, 250};
        for (int trial = 0; trial < 9; trial++) {
            int vocab = 300 + rnd.nextInt(1500);
            float[] logits = new float[vocab];
            double scale = trial % 3 == 0 ? 0.1 : trial % 3 == 1 ? 2 : 8; // flat, moderate, peaked
            for (int i = 0; i < vocab; i++) {
                logits[i] = (float) (rnd.nextGaussian() * scale);
            }
            logits[rnd.nextInt(vocab)] = logits[rnd.nextInt(vocab)]; // a tie
            int[] generated = {5, 9, 5, rnd.nextInt(vocab)};
            for (SamplingParams p : params) {
                for (int step = 0; step < 12; step++) {
                    int expected = reference(logits, p, prompt, generated, 1, step);
                    assertEquals(
                            expected,
                            Sampler.sample(logits, 0, vocab, p, prompt, generated, generated.length, 1, step),
                            "vocab " + vocab + ", scale " + scale + ", " + p + ", step " + step);
                }
            }
        }
    }
}
