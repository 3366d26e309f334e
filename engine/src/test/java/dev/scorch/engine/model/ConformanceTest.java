package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.engine.testing.TestModels;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The engine against shared/conformance/tiny-k2-bf16/golden.json (a float64 re-implementation of the
 * Hugging Face code): next-token log-probs and last-position logits within 1e-4, argmax and routed experts equal.
 */
class ConformanceTest {
    static final double TOL = 1e-4;
    static DeepseekV3Model model;
    static JsonNode golden;

    @BeforeAll
    static void load() throws IOException {
        model = DeepseekV3Model.load(TestModels.conformanceModel());
        golden = new ObjectMapper().readTree(TestModels.conformanceGolden().toFile());
    }

    static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).asInt();
        }
        return out;
    }

    static Stream<Arguments> paths() {
        return Stream.of(
                Arguments.of("fast, 2 threads", (java.util.function.Supplier<CpuOps>) () -> new CpuOps(2)),
                Arguments.of("scalar fallback, 2 threads", (java.util.function.Supplier<CpuOps>)
                        () -> new CpuOps(2, false)));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("paths")
    void matchesGoldenOneByOne(String name, java.util.function.Supplier<CpuOps> opsFactory) {
        try (CpuOps ops = opsFactory.get()) {
            Scorer scorer = new Scorer(model.on(ops));
            double maxLp = 0;
            double maxLogit = 0;
            for (JsonNode p : golden.get("prompts")) {
                int[] tokens = ints(p.get("token_ids"));
                int[][] routes = new int[model.numMoeLayers()][];
                SequenceScore s = scorer.score(List.of(new ScoreRequest(tokens, 1, 0, LogitsMode.ALL)), routes)
                        .get(0);
                JsonNode lps = p.get("next_token_logprobs");
                assertEquals(tokens.length - 1, lps.size());
                for (int k = 0; k < lps.size(); k++) {
                    maxLp = Math.max(
                            maxLp,
                            Math.abs(s.tokenLogprobs()[k + 1] - lps.get(k).asDouble()));
                }
                float[] last = s.logits()[tokens.length - 1];
                JsonNode gl = p.get("last_logits");
                for (int v = 0; v < gl.size(); v++) {
                    maxLogit = Math.max(maxLogit, Math.abs(last[v] - gl.get(v).asDouble()));
                }
                assertArrayEquals(
                        ints(p.get("argmax")), s.argmax(), name + ": argmax of a " + tokens.length + "-token prompt");
                JsonNode re = p.get("routed_experts");
                int topK = model.config().numExpertsPerTok();
                for (int l = 0; l < re.size(); l++) {
                    for (int pos = 0; pos < tokens.length; pos++) {
                        int[] got = Arrays.copyOfRange(routes[l], pos * topK, (pos + 1) * topK);
                        assertArrayEquals(
                                ints(re.get(l).get(pos)),
                                got,
                                name + ": experts of moe layer " + l + " at position " + pos);
                    }
                }
            }
            System.out.printf("conformance %s: max |dlogprob| %.3g, max |dlast_logit| %.3g%n", name, maxLp, maxLogit);
            assertTrue(maxLp <= TOL, name + ": max |d logprob| " + maxLp);
            assertTrue(maxLogit <= TOL, name + ": max |d last logit| " + maxLogit);
        }
    }

    /** Every prompt in one packed batch gives the same bits as scoring it alone. */
    @Test
    void batchedEqualsOneByOneBitwise() {
        try (CpuOps ops = new CpuOps(2)) {
            Scorer scorer = new Scorer(model.on(ops));
            List<ScoreRequest> all = new ArrayList<>();
            for (JsonNode p : golden.get("prompts")) {
                all.add(new ScoreRequest(ints(p.get("token_ids")), 1, 3, LogitsMode.LAST));
            }
            List<SequenceScore> batched = scorer.score(all);
            for (int i = 0; i < all.size(); i++) {
                SequenceScore alone = scorer.score(List.of(all.get(i))).get(0);
                assertArrayEquals(alone.tokenLogprobs(), batched.get(i).tokenLogprobs(), "prompt " + i);
                assertArrayEquals(alone.logits()[0], batched.get(i).logits()[0], "prompt " + i);
                assertEquals(alone.sumLogprob(), batched.get(i).sumLogprob(), 0.0);
            }
        }
    }

    /** 16 greedy tokens by full recomputation equal the golden continuation. */
    @Test
    void greedyContinuationByRecomputation() {
        try (CpuOps ops = new CpuOps(2)) {
            Scorer scorer = new Scorer(model.on(ops));
            for (JsonNode p : golden.get("prompts")) {
                int[] tokens = ints(p.get("token_ids"));
                int[] expected = ints(p.get("greedy_continuation"));
                int[] got = new int[expected.length];
                for (int step = 0; step < expected.length; step++) {
                    SequenceScore s = scorer.score(List.of(new ScoreRequest(tokens, tokens.length, 0, LogitsMode.LAST)))
                            .get(0);
                    got[step] = s.argmax()[tokens.length - 1];
                    tokens = Arrays.copyOf(tokens, tokens.length + 1);
                    tokens[tokens.length - 1] = got[step];
                }
                assertArrayEquals(
                        expected,
                        got,
                        "greedy continuation of a " + p.get("token_ids").size() + "-token prompt");
            }
        }
    }
}
