package dev.scorch.jobs.lmeval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * The CPython numbers were computed by lm-eval's own api/metrics.py (commit 4e7e0d47f, imported with its registry,
 * sacrebleu and tqdm stubbed, DISABLE_MULTIPROC=1 — the pool path draws the same resamples) under CPython 3.11.7 and
 * 3.12.1, over inputs drawn from {@code random.Random(7)}: 37 x {@code -uniform(0.1, 40)}, 50 x
 * {@code float(random() < 0.6)}, 23 x {@code uniform(0, 1)}; regenerated here with PyRandom.
 */
class AggregationsTest {
    private static final double[] LLS = new double[37];
    private static final double[] ACC = new double[50];
    private static final double[] VALS = new double[23];
    private static final long[] WEIGHTS = new long[37];

    static {
        PyRandom r = new PyRandom(7);
        for (int i = 0; i < LLS.length; i++) LLS[i] = -(0.1 + (40.0 - 0.1) * r.random());
        for (int i = 0; i < ACC.length; i++) ACC[i] = r.random() < 0.6 ? 1.0 : 0.0;
        for (int i = 0; i < VALS.length; i++) VALS[i] = 0.0 + 1.0 * r.random();
        for (int i = 0; i < WEIGHTS.length; i++) WEIGHTS[i] = 3 + i % 5;
    }

    private static final Aggregations PY311 = new Aggregations(PyFloatSum.PY310);
    private static final Aggregations PY312 = new Aggregations(PyFloatSum.PY312);

    /** exp and log are not correctly rounded in every libm: allow a couple of ulps there. */
    private static void assertClose(double expected, double actual) {
        assertEquals(expected, actual, 4 * Math.ulp(expected));
    }

    @Test
    void inputsAreCPythons() {
        assertEquals(-13.020927316843178, LLS[0]);
        assertEquals(-6.118882039587626, LLS[1]);
        assertEquals(-26.072285474290165, LLS[2]);
    }

    @Test
    void meanMedianStderrAsCPython311() {
        assertEquals(-15.555111624950781, PY311.mean(LLS));
        assertClose(5695071.017590321, PY311.perplexity(LLS));
        assertEquals(0.62, PY311.mean(ACC));
        assertEquals(0.06934092056863767, PY311.meanStderr(ACC));
        assertEquals(0.41894650112532794, PY311.median(VALS));
        assertEquals(0.06007342011674932, PY311.meanStderr(VALS));
        assertClose(23.624939505546017, PY311.weightedPerplexity(LLS, WEIGHTS));
        assertClose(4.562238730034385, PY311.bitsPerByte(LLS, WEIGHTS));
    }

    @Test
    void meanAndStderrAsCPython312sCompensatedSum() {
        assertEquals(-15.555111624950785, PY312.mean(LLS));
        assertClose(5695071.01759034, PY312.perplexity(LLS));
        assertEquals(0.06934092056863769, PY312.meanStderr(ACC));
        assertClose(23.624939505546028, PY312.weightedPerplexity(LLS, WEIGHTS));
        assertClose(4.562238730034386, PY312.bitsPerByte(LLS, WEIGHTS));
    }

    @Test
    void bootstrapDrawsLmEvalsResamples() {
        // 3000 iters: three chunks of 1000, seeded 0, 1, 2
        assertClose(207174215.04881966, PY311.bootstrapStderr(PY311::perplexity, LLS, 3000));
        assertClose(207174215.04882073, PY312.bootstrapStderr(PY312::perplexity, LLS, 3000));
        // 2500 iters: 2500 // 1000 = two chunks, 2000 resamples
        assertEquals(0.08195989977140425, PY311.bootstrapStderr(PY311::median, VALS, 2500));
        assertEquals(0.08195989977140417, PY312.bootstrapStderr(PY312::median, VALS, 2500));
        // 100 iters: one chunk of 100
        assertEquals(0.0700809304164945, PY311.stderr("median", VALS, 100).getAsDouble());
    }

    @Test
    void stderrRules() {
        assertTrue(PY311.stderr("mean", ACC, 0).isEmpty());
        assertTrue(PY311.stderr("mean", new double[] {1.0}, 100).isEmpty());
        assertTrue(PY311.stderr("bits_per_byte", ACC, 100).isEmpty());
        assertTrue(PY311.stderr("weighted_perplexity", ACC, 100).isEmpty());
        assertEquals(PY311.meanStderr(ACC), PY311.stderr("mean", ACC, 100).getAsDouble());
        assertThrows(IllegalArgumentException.class, () -> PY311.stderr("bleu", ACC, 100));
    }

    @Test
    void handWorkedSmallCases() {
        // median of 4 values is the upper one, sorted[2]
        assertEquals(3.0, PY311.median(new double[] {4, 1, 3, 2}));
        // sample stddev of 1, 2, 3, 4: sqrt(5/3); stderr / 2
        assertEquals(Math.sqrt(5.0 / 3.0) / 2.0, PY311.meanStderr(new double[] {1, 2, 3, 4}));
        // perplexity of mean -ln 2 is 2
        assertClose(2.0, PY311.perplexity(new double[] {-Math.log(2), -Math.log(2)}));
        // bits per byte: -(-8 ln2 - 8 ln2) / (8 + 8) / ln2 = 1
        assertClose(1.0, PY311.bitsPerByte(new double[] {-8 * Math.log(2), -8 * Math.log(2)}, new long[] {8, 8}));
        // group: (0.5*1 + 1.0*3) / 4 weighted; (0.5 + 1.0) / 2 unweighted
        assertEquals(0.875, PY311.groupMean(new double[] {0.5, 1.0}, new long[] {1, 3}, true));
        assertEquals(0.75, PY311.groupMean(new double[] {0.5, 1.0}, new long[] {1, 3}, false));
        // pooled: sqrt(((2-1)*0.25*2 + (2-1)*1*2) / (4-2) / 4) = sqrt(1.25/4)
        assertEquals(Math.sqrt(1.25 / 4), PY311.pooledStderr(new double[] {0.5, 1.0}, new long[] {2, 2}));
    }

    @Test
    void groupAggregationAsLmEval() {
        // CPython: aggregate_subtask_metrics and pooled_sample_stderr (3.11 and 3.12 agree)
        double[] v = {0.5, 0.7, 0.61};
        long[] n = {100, 250, 40};
        assertEquals(0.6394871794871795, PY311.groupMean(v, n, true));
        assertEquals(0.6033333333333334, PY311.groupMean(v, n, false));
        assertEquals(0.0131856761395616, PY311.pooledStderr(new double[] {0.01, 0.02, 0.015}, n));
        assertEquals(0.0131856761395616, PY312.pooledStderr(new double[] {0.01, 0.02, 0.015}, n));
    }
}
