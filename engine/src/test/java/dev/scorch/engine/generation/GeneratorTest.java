package dev.scorch.engine.generation;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.KvCache;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.testing.DemoModels;
import dev.scorch.engine.testing.TestModels;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class GeneratorTest {
    static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).asInt();
        }
        return out;
    }

    @Test
    void greedyWithContinuousBatchingEqualsTheGoldenContinuations() throws Exception {
        DeepseekV3Model m = DeepseekV3Model.load(TestModels.conformanceModel());
        JsonNode golden =
                new ObjectMapper().readTree(TestModels.conformanceGolden().toFile());
        List<GenerationRequest> reqs = new ArrayList<>();
        List<int[]> expected = new ArrayList<>();
        for (JsonNode p : golden.get("prompts")) {
            reqs.add(new GenerationRequest(
                    ints(p.get("token_ids")), SamplingParams.greedy(), 16, Set.of(), List.of(), 1, 0));
            expected.add(ints(p.get("greedy_continuation")));
        }
        // A budget for about three sequences at a time: sequences join as others finish.
        long budget = 3 * KvCache.bytesPerToken(m.config()) * (200 + 16);
        try (CpuOps ops = new CpuOps(2)) {
            List<List<Completion>> out = new Generator(m, ops, budget, null).generate(reqs);
            for (int r = 0; r < reqs.size(); r++) {
                Completion c = out.get(r).get(0);
                assertArrayEquals(expected.get(r), c.tokenIds(), "prompt " + r);
                assertEquals(Completion.FinishReason.LENGTH, c.finishReason());
                for (float lp : c.logprobs()) {
                    assertTrue(lp <= 0 && lp > -50, "log-prob " + lp);
                }
            }
        }
    }

    static List<GenerationRequest> sampled(DeepseekV3Model m) {
        List<GenerationRequest> reqs = new ArrayList<>();
        java.util.Random r = new java.util.Random(5);
        for (int i = 0; i < 6; i++) {
            int[] prompt = new int[1 + r.nextInt(40)];
            for (int k = 0; k < prompt.length; k++) {
                prompt[k] = r.nextInt(m.vocabSize());
            }
            SamplingParams p = new SamplingParams(0.9, 50, 0.95, 0.01, 1.1, 0.1, 0.05, 1000 + i);
            reqs.add(new GenerationRequest(prompt, p, 5 + 3 * i, Set.of(), List.of(), 2, 0));
        }
        return reqs;
    }

    @Test
    void seededSamplingGivesTheSameTokensWhateverTheBatch() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        List<GenerationRequest> reqs = sampled(m);
        try (CpuOps ops = new CpuOps(2);
                CpuOps one = new CpuOps(1)) {
            List<List<Completion>> wide = new Generator(m, ops, Long.MAX_VALUE, null).generate(reqs);
            // One sequence at a time, on one thread.
            long single = KvCache.bytesPerToken(m.config()) * (41 + 20);
            List<List<Completion>> narrow = new Generator(m, one, single, null).generate(reqs);
            List<GenerationRequest> reversed = new ArrayList<>(reqs);
            Collections.reverse(reversed);
            List<List<Completion>> rev = new Generator(m, ops, Long.MAX_VALUE, null).generate(reversed);
            boolean samplesDiffer = false;
            for (int r = 0; r < reqs.size(); r++) {
                for (int s = 0; s < 2; s++) {
                    Completion a = wide.get(r).get(s);
                    assertArrayEquals(a.tokenIds(), narrow.get(r).get(s).tokenIds(), "request " + r + " sample " + s);
                    assertArrayEquals(a.logprobs(), narrow.get(r).get(s).logprobs(), "request " + r + " sample " + s);
                    assertArrayEquals(
                            a.tokenIds(), rev.get(reqs.size() - 1 - r).get(s).tokenIds(), "reversed, request " + r);
                }
                samplesDiffer |= !java.util.Arrays.equals(
                        wide.get(r).get(0).tokenIds(), wide.get(r).get(1).tokenIds());
            }
            assertTrue(samplesDiffer, "the two samples of a request draw different streams");
        }
    }

    @Test
    void stopTokensAndStopStringsEndACompletion() throws Exception {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        Tokenizer tok = Tokenizers.load(DemoModels.tinyBf16()).orElseThrow();
        int[] prompt = tok.encode("The model is here and the", true);
        try (CpuOps ops = new CpuOps(2)) {
            Generator g = new Generator(m, ops, Long.MAX_VALUE, tok);
            Completion free = g.generate(List.of(
                            new GenerationRequest(prompt, SamplingParams.greedy(), 12, Set.of(), List.of(), 1, 0)))
                    .get(0)
                    .get(0);
            assertEquals(12, free.tokenIds().length);
            // The greedy third token as a stop id: two tokens come out, then EOS.
            int stopId = free.tokenIds()[2];
            Completion eos = g.generate(List.of(new GenerationRequest(
                            prompt, SamplingParams.greedy(), 12, Set.of(stopId), List.of(), 1, 0)))
                    .get(0)
                    .get(0);
            int firstStop = 0;
            while (free.tokenIds()[firstStop] != stopId) {
                firstStop++;
            }
            assertEquals(Completion.FinishReason.EOS, eos.finishReason());
            assertArrayEquals(java.util.Arrays.copyOf(free.tokenIds(), firstStop), eos.tokenIds());
            // A stop string taken from the middle of the free text: the text is cut before it, and the tokens end with
            // the one that completed it.
            String text = free.text();
            assertEquals(tok.decode(free.tokenIds(), true), text);
            String stop = text.substring(text.length() / 2, text.length() / 2 + 2);
            Completion cut = g.generate(List.of(
                            new GenerationRequest(prompt, SamplingParams.greedy(), 12, Set.of(), List.of(stop), 1, 0)))
                    .get(0)
                    .get(0);
            assertEquals(Completion.FinishReason.STOP, cut.finishReason());
            assertEquals(text.substring(0, text.indexOf(stop)), cut.text());
            int[] ids = cut.tokenIds();
            assertArrayEquals(java.util.Arrays.copyOf(free.tokenIds(), ids.length), ids);
            assertTrue(tok.decode(ids, true).contains(stop));
            assertFalse(tok.decode(java.util.Arrays.copyOf(ids, ids.length - 1), true)
                    .contains(stop));
        }
    }

    @Test
    void topLogprobsRankTheAlternativesAndIncludeTheGreedyChoice() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        int[] prompt = {5, 17, 300, 42};
        try (CpuOps ops = new CpuOps(2)) {
            Completion c = new Generator(m, ops, Long.MAX_VALUE, null)
                    .generate(List.of(
                            new GenerationRequest(prompt, SamplingParams.greedy(), 6, Set.of(), List.of(), 1, 4)))
                    .get(0)
                    .get(0);
            assertEquals(6, c.topIds().length);
            double totalTop = 0;
            for (int step = 0; step < 6; step++) {
                assertEquals(4, c.topIds()[step].length);
                assertEquals(c.tokenIds()[step], c.topIds()[step][0], "greedy picks the most likely");
                assertEquals(c.logprobs()[step], c.topLogprobs()[step][0], 0f);
                for (int k = 1; k < 4; k++) {
                    assertTrue(c.topLogprobs()[step][k] <= c.topLogprobs()[step][k - 1]);
                }
                for (float lp : c.topLogprobs()[step]) {
                    totalTop += Math.exp(lp);
                }
            }
            assertTrue(totalTop <= 6 + 1e-4, "probabilities of distinct tokens sum to at most 1 per step");
        }
    }

    @Test
    void streamingUnderTightLimitsPullsLazilyAndMatchesTheWideBatch() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        List<GenerationRequest> reqs = sampled(m);
        try (CpuOps ops = new CpuOps(2)) {
            List<List<Completion>> wide = new Generator(m, ops, Long.MAX_VALUE, null).generate(reqs);
            // At most 2 sequences and 30 prompt tokens at a time.
            Generator tight = new Generator(m, ops, new Generator.Limits(Long.MAX_VALUE, 30, 2), null);
            int[] pulled = {0};
            List<Generator.Tagged<Integer>> tagged = new ArrayList<>();
            for (int r = 0; r < reqs.size(); r++) {
                tagged.add(new Generator.Tagged<>(r, reqs.get(r)));
            }
            java.util.Iterator<Generator.Tagged<Integer>> source = tagged.iterator();
            java.util.Iterator<Generator.Tagged<Integer>> counting = new java.util.Iterator<>() {
                public boolean hasNext() {
                    return source.hasNext();
                }

                public Generator.Tagged<Integer> next() {
                    pulled[0]++;
                    return source.next();
                }
            };
            var it = tight.stream(counting);
            Generator.Finished<Integer> first = it.next();
            assertTrue(
                    pulled[0] < reqs.size(), "the first result came before every request was read (" + pulled[0] + ")");
            List<Generator.Finished<Integer>> all = new ArrayList<>(List.of(first));
            it.forEachRemaining(all::add);
            assertEquals(reqs.size(), all.size());
            for (Generator.Finished<Integer> f : all) {
                for (int s = 0; s < 2; s++) {
                    assertArrayEquals(
                            wide.get(f.tag()).get(s).tokenIds(),
                            f.completions().get(s).tokenIds(),
                            "request " + f.tag());
                }
            }
        }
    }
}
