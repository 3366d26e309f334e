package dev.scorch.engine.scoring;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import dev.scorch.engine.bench.PrefillBenchmark;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.testing.DemoModels;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class BatchScoresTest {

    /**
     * One BatchScores kept across batches of different shapes and modes gives every batch the scores a fresh one
     * gives it: nothing of a larger earlier batch (its log-probs, sums, top-k, logits rows, packed tokens) shows.
     */
    @Test
    void keptScoresMatchFreshOnesBatchAfterBatch() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        int vocab = m.vocabSize();
        List<ScoreRequest> large = new ArrayList<>();
        for (ScoreRequest r : PrefillBenchmark.randomRequests(vocab, 3, 30, 1)) {
            large.add(new ScoreRequest(r.tokens(), 1, 4, LogitsMode.ALL));
        }
        List<ScoreRequest> small = new ArrayList<>();
        List<ScoreRequest> random = PrefillBenchmark.randomRequests(vocab, 3, 9, 2);
        small.add(new ScoreRequest(random.get(0).tokens(), 5, 0, LogitsMode.NONE)); // a continuation, no extras
        small.add(new ScoreRequest(random.get(1).tokens(), 1, 2, LogitsMode.LAST));
        small.add(ScoreRequest.of(new int[] {random.get(2).tokens()[0]})); // one token: nothing scored
        try (CpuOps ops = new CpuOps(2)) {
            Scorer scorer = new Scorer(m.on(ops));
            List<SequenceScore> freshSmall = scorer.score(small);
            List<SequenceScore> freshLarge = scorer.score(large);
            BatchScores kept = new BatchScores();
            scorer.score(large, kept);
            assertSame(freshLarge, kept);
            scorer.score(small, kept);
            assertSame(freshSmall, kept);
            scorer.score(large, kept);
            assertSame(freshLarge, kept);
        }
    }

    @Test
    void nothingScoredGivesNanMeanAndNoAlternatives() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        try (CpuOps ops = new CpuOps(1)) {
            BatchScores scores = new BatchScores();
            new Scorer(m.on(ops)).score(List.of(new ScoreRequest(new int[] {3}, 1, 2, LogitsMode.LAST)), scores);
            assertEquals(0, scores.numScored(0));
            assertEquals(Double.NaN, scores.meanLogprob(0));
            assertEquals(Double.NaN, scores.perplexity(0));
            SequenceScore s = scores.sequence(0);
            assertNull(s.topIds()[0]);
            assertEquals(1, s.logits().length, "LAST keeps the one position's logits");
            assertEquals(Float.NaN, s.tokenLogprobs()[0]);
        }
    }

    @Test
    void topKIntoAnArrayMatchesTheAllocatingOne() {
        SplittableRandom rnd = new SplittableRandom(7);
        float[] row = new float[300];
        for (int i = 0; i < row.length; i++) {
            row[i] = rnd.nextInt(40) / 4f; // ties
        }
        int[] into = new int[20];
        for (int k : new int[] {1, 5, 12}) {
            LogSoftmax.topK(row, 50, 200, k, into, 3);
            int[] want = LogSoftmax.topK(row, 50, 200, k);
            int[] got = java.util.Arrays.copyOfRange(into, 3, 3 + k);
            assertArrayEquals(want, got, "k = " + k);
            for (int j = 1; j < k; j++) {
                float a = row[50 + got[j - 1]];
                float b = row[50 + got[j]];
                assertEquals(true, a > b || (a == b && got[j - 1] < got[j]), "largest first, ties by lower id at " + j);
            }
        }
    }

    private static void assertSame(List<SequenceScore> want, BatchScores got) {
        assertEquals(want.size(), got.sequences());
        for (int s = 0; s < want.size(); s++) {
            SequenceScore w = want.get(s);
            SequenceScore g = got.sequence(s);
            assertArrayEquals(w.tokenLogprobs(), g.tokenLogprobs(), "sequence " + s);
            assertArrayEquals(w.argmax(), g.argmax(), "sequence " + s);
            assertEquals(w.sumLogprob(), g.sumLogprob(), "sequence " + s);
            assertEquals(w.numScored(), g.numScored(), "sequence " + s);
            assertEquals(w.meanLogprob(), got.meanLogprob(s), "sequence " + s);
            if (w.topIds() == null) {
                assertNull(g.topIds(), "sequence " + s);
            } else {
                for (int k = 0; k < w.topIds().length; k++) {
                    assertArrayEquals(w.topIds()[k], g.topIds()[k], "sequence " + s + " position " + k);
                    assertArrayEquals(w.topLogprobs()[k], g.topLogprobs()[k], "sequence " + s + " position " + k);
                }
            }
            if (w.logits() == null) {
                assertNull(g.logits(), "sequence " + s);
            } else {
                assertEquals(w.logits().length, g.logits().length, "sequence " + s);
                for (int r = 0; r < w.logits().length; r++) {
                    assertArrayEquals(w.logits()[r], g.logits()[r], "sequence " + s + " logits row " + r);
                }
            }
        }
    }
}
