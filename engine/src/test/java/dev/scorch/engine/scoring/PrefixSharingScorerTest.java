package dev.scorch.engine.scoring;

import static dev.scorch.engine.bench.SharedPrefixPairs.concat;
import static dev.scorch.engine.bench.SharedPrefixPairs.random;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.testing.DemoModels;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The shared-prefix scorer against plain scoring, and its bits against its batch mates and its kept blocks. */
class PrefixSharingScorerTest {
    private static DeepseekV3Model model;
    private static CpuOps ops;

    @BeforeAll
    static void load() {
        model = DeepseekV3Model.load(DemoModels.tinyBf16());
        ops = new CpuOps(2);
    }

    @AfterAll
    static void close() {
        ops.close();
    }

    /** A few-shot multiple-choice layout: one shared prompt, docs of their own, choices of 1 to 3 tokens each. */
    static List<ScoreRequest> multipleChoice(int vocab, int shared, int docs, int choices, long seed, int topK) {
        Random r = new Random(seed);
        int[] shots = random(r, vocab, shared);
        List<ScoreRequest> out = new ArrayList<>();
        for (int d = 0; d < docs; d++) {
            int[] question = random(r, vocab, 5 + r.nextInt(70));
            int[] context = concat(shots, question);
            for (int c = 0; c < choices; c++) {
                int[] choice = random(r, vocab, 1 + r.nextInt(3));
                ScoreRequest q = ScoreRequest.continuation(context, choice, topK, LogitsMode.NONE);
                out.add(new ScoreRequest(q.tokens(), q.scoreFrom(), topK, LogitsMode.NONE, shots.length));
            }
        }
        return out;
    }

    /** Every scored log-prob within 1e-4 of plain scoring, the greedy tokens and top-k ids the same. */
    @Test
    void matchesPlainScoringWithinTheStatedError() {
        List<ScoreRequest> reqs = multipleChoice(model.vocabSize(), 150, 4, 4, 1, 3);
        List<SequenceScore> plain = new Scorer(model.on(ops)).score(reqs);
        PrefixSharingScorer shared = new PrefixSharingScorer(model, ops);
        List<SequenceScore> got = shared.score(reqs);
        double worst = 0;
        for (int s = 0; s < reqs.size(); s++) {
            float[] a = plain.get(s).tokenLogprobs();
            float[] b = got.get(s).tokenLogprobs();
            assertEquals(a.length, b.length);
            for (int k = reqs.get(s).scoreFrom(); k < a.length; k++) {
                worst = Math.max(worst, Math.abs(a[k] - b[k]));
            }
            assertEquals(plain.get(s).sumLogprob(), got.get(s).sumLogprob(), 1e-4 * a.length, "sequence " + s);
        }
        assertTrue(worst <= 1e-4, "largest log-prob difference " + worst);
        assertTrue(worst > 0 || reqs.isEmpty(), "the shared path really ran (absorbed attention rounds differently)");
        // the 150-token prompt once, each document's own text once: 1 + 4 blocks kept, 150 + the questions' tokens
        int width = model.config().kvLoraRank() + model.config().qkRopeHeadDim();
        long perToken = (long) model.config().numHiddenLayers() * width * Float.BYTES;
        long contextTokens = 150;
        for (int d = 0; d < 4; d++) {
            contextTokens += reqs.get(4 * d).scoreFrom() - 1 - 150;
        }
        assertEquals(contextTokens * perToken, shared.keptBytes());
    }

    /** A sequence's bits do not depend on its batch mates, on the batch's order, or on which blocks were kept. */
    @Test
    void bitsDoNotDependOnBatchMatesOrKeptBlocks() {
        List<ScoreRequest> reqs = multipleChoice(model.vocabSize(), 130, 3, 3, 7, 2);
        List<SequenceScore> together = new PrefixSharingScorer(model, ops).score(reqs);
        PrefixSharingScorer warm = new PrefixSharingScorer(model, ops);
        warm.score(reqs.subList(0, 2)); // keeps the shared blocks
        List<ScoreRequest> reversed = new ArrayList<>(reqs);
        java.util.Collections.reverse(reversed);
        List<SequenceScore> again = warm.score(reversed);
        PrefixSharingScorer keepsNothing = new PrefixSharingScorer(model, ops, 0);
        for (int s = 0; s < reqs.size(); s++) {
            float[] expected = together.get(s).tokenLogprobs();
            SequenceScore alone = keepsNothing.score(List.of(reqs.get(s))).get(0);
            assertArrayEquals(expected, alone.tokenLogprobs(), "sequence " + s + " alone");
            assertArrayEquals(
                    expected, again.get(reqs.size() - 1 - s).tokenLogprobs(), "sequence " + s + ", blocks kept");
            assertArrayEquals(together.get(s).topIds(), alone.topIds(), "sequence " + s + " top-k ids");
        }
        assertEquals(0, keepsNothing.keptBytes(), "a budget of 0 keeps nothing past a batch");
    }

    /** A sequence scored from its first token (no context), or asking for every position's logits, is plain scoring. */
    @Test
    void aSequenceWithoutAContextIsScoredAsPlainScoringScoresIt() {
        Random r = new Random(3);
        int[] t = random(r, model.vocabSize(), 90);
        List<ScoreRequest> reqs = List.of(
                ScoreRequest.of(t),
                new ScoreRequest(t, 40, 0, LogitsMode.ALL),
                new ScoreRequest(Arrays.copyOf(t, 70), 69, 1, LogitsMode.LAST));
        List<SequenceScore> plain = new Scorer(model.on(ops)).score(reqs);
        List<SequenceScore> got = new PrefixSharingScorer(model, ops).score(reqs);
        assertArrayEquals(plain.get(0).tokenLogprobs(), got.get(0).tokenLogprobs());
        assertArrayEquals(plain.get(1).tokenLogprobs(), got.get(1).tokenLogprobs());
        assertArrayEquals(plain.get(1).logits()[5], got.get(1).logits()[5]);
        // the third has a context: its tail extends the context's cache, close to plain scoring, not equal
        float[] a = plain.get(2).tokenLogprobs();
        float[] b = got.get(2).tokenLogprobs();
        assertEquals(a[69], b[69], 1e-4);
        assertEquals(plain.get(2).logits()[0].length, got.get(2).logits()[0].length);
    }

    /** Blocks past the budget are dropped, least recently used first, and what is dropped is recomputed the same. */
    @Test
    void theBudgetBoundsWhatIsKept() {
        int width = model.config().kvLoraRank() + model.config().qkRopeHeadDim();
        long perToken = (long) model.config().numHiddenLayers() * width * Float.BYTES;
        PrefixSharingScorer s = new PrefixSharingScorer(model, ops, 100 * perToken);
        List<ScoreRequest> first = multipleChoice(model.vocabSize(), 200, 2, 2, 11, 0);
        List<SequenceScore> a = s.score(first);
        assertTrue(s.keptBytes() <= 100 * perToken, "kept " + s.keptBytes() / perToken + " tokens' rows");
        s.score(multipleChoice(model.vocabSize(), 200, 2, 2, 12, 0)); // another prompt pushes the first out
        List<SequenceScore> b = s.score(first);
        for (int i = 0; i < first.size(); i++) {
            assertArrayEquals(a.get(i).tokenLogprobs(), b.get(i).tokenLogprobs());
        }
    }
}
