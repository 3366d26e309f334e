package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.kernels.PackedGemm;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.engine.testing.DemoModels;
import dev.scorch.engine.testing.TestModels;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The model in each bf16 CPU precision (prefill's GEMMs on AVX512-BF16): bf16x3 within 1e-4 of the golden log-probs and
 * of the fp32 path, with the same argmax and routed experts, on the conformance model and on the BF16, FP8 and INT4 demo
 * models; bitwise invariant to batch mates and threads. bf16x2 and bf16 are measured and printed (their error is
 * documented, not bounded here). Runs where the CPU has the units.
 */
class CpuPrecisionConformanceTest {
    static final double TOL = 1e-4;

    @BeforeEach
    void units() {
        assumeTrue(PackedGemm.runs(CpuPrecision.BF16X3), "no AVX512-BF16 kernel here");
    }

    static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).asInt();
        }
        return out;
    }

    /** Each prompt scored alone (all log-probs and the last logits), and its routed experts per MoE layer. */
    record Scored(List<SequenceScore> scores, List<int[][]> routes) {}

    static Scored score(DeepseekV3Model model, CpuPrecision p, List<int[]> prompts) {
        List<SequenceScore> scores = new ArrayList<>();
        List<int[][]> routes = new ArrayList<>();
        try (CpuOps ops = new CpuOps(2, p)) {
            Scorer scorer = new Scorer(model.on(ops));
            for (int[] tokens : prompts) {
                int[][] r = new int[model.numMoeLayers()][];
                scores.add(scorer.score(List.of(new ScoreRequest(tokens, 1, 0, LogitsMode.ALL)), r)
                        .get(0));
                routes.add(r);
            }
        }
        return new Scored(scores, routes);
    }

    /** max |Δ| of the next-token log-probs and of every position's logits between a and b. */
    static double maxDiff(Scored a, Scored b) {
        double d = 0;
        for (int i = 0; i < a.scores().size(); i++) {
            SequenceScore x = a.scores().get(i), y = b.scores().get(i);
            for (int k = 1; k < x.tokenLogprobs().length; k++) {
                d = Math.max(d, Math.abs(x.tokenLogprobs()[k] - y.tokenLogprobs()[k]));
            }
            for (int t = 0; t < x.logits().length; t++) {
                for (int v = 0; v < x.logits()[t].length; v++) {
                    d = Math.max(d, Math.abs(x.logits()[t][v] - y.logits()[t][v]));
                }
            }
        }
        return d;
    }

    @Test
    void conformanceModelInEachPrecision() throws IOException {
        DeepseekV3Model model = DeepseekV3Model.load(TestModels.conformanceModel());
        JsonNode golden =
                new ObjectMapper().readTree(TestModels.conformanceGolden().toFile());
        List<int[]> prompts = new ArrayList<>();
        for (JsonNode p : golden.get("prompts")) {
            prompts.add(ints(p.get("token_ids")));
        }
        Scored fp32 = score(model, CpuPrecision.FP32, prompts);
        for (CpuPrecision mode : CpuPrecision.values()) {
            Scored s = mode == CpuPrecision.FP32 ? fp32 : score(model, mode, prompts);
            double lp = 0, logit = 0;
            boolean sameArgmax = true, sameExperts = true;
            for (int i = 0; i < prompts.size(); i++) {
                JsonNode p = golden.get("prompts").get(i);
                SequenceScore sc = s.scores().get(i);
                JsonNode lps = p.get("next_token_logprobs");
                for (int k = 0; k < lps.size(); k++) {
                    lp = Math.max(
                            lp, Math.abs(sc.tokenLogprobs()[k + 1] - lps.get(k).asDouble()));
                }
                JsonNode gl = p.get("last_logits");
                float[] last = sc.logits()[prompts.get(i).length - 1];
                for (int v = 0; v < gl.size(); v++) {
                    logit = Math.max(logit, Math.abs(last[v] - gl.get(v).asDouble()));
                }
                sameArgmax &= Arrays.equals(ints(p.get("argmax")), sc.argmax());
                int topK = model.config().numExpertsPerTok();
                JsonNode re = p.get("routed_experts");
                for (int l = 0; l < re.size(); l++) {
                    for (int pos = 0; pos < prompts.get(i).length; pos++) {
                        sameExperts &= Arrays.equals(
                                ints(re.get(l).get(pos)),
                                Arrays.copyOfRange(s.routes().get(i)[l], pos * topK, (pos + 1) * topK));
                    }
                }
            }
            double vsFp32 = maxDiff(s, fp32);
            System.out.printf(
                    "conformance model, %s: max |dlogprob| vs golden %.3g, max |dlast_logit| vs golden %.3g,"
                            + " max |d| vs fp32 %.3g, argmax %s, routed experts %s%n",
                    mode.id(), lp, logit, vsFp32, sameArgmax ? "equal" : "DIFFER", sameExperts ? "equal" : "DIFFER");
            if (mode == CpuPrecision.BF16X3) {
                assertTrue(lp <= TOL, "bf16x3: max |d logprob| vs golden " + lp);
                assertTrue(logit <= TOL, "bf16x3: max |d last logit| vs golden " + logit);
                assertTrue(vsFp32 <= TOL, "bf16x3: max |d| vs fp32 " + vsFp32);
                assertTrue(sameArgmax && sameExperts, "bf16x3: argmax or routed experts differ from golden");
            }
        }
    }

    static void demoModelInEachPrecision(Path dir) {
        DeepseekV3Model m = DeepseekV3Model.load(dir);
        // Past one 32-row tile, past a K block of 256 inputs, and past YaRN's original positions (64).
        List<int[]> prompts = InvarianceTest.prompts(m.vocabSize(), 3, 1, 17, 100, 200);
        Scored fp32 = score(m, CpuPrecision.FP32, prompts);
        for (CpuPrecision mode : new CpuPrecision[] {CpuPrecision.BF16X3, CpuPrecision.BF16X2, CpuPrecision.BF16}) {
            Scored s = score(m, mode, prompts);
            double d = maxDiff(s, fp32);
            System.out.printf("%s, %s: max |d logprob or logit| vs fp32 %.3g%n", dir.getFileName(), mode.id(), d);
            if (mode == CpuPrecision.BF16X3) {
                assertTrue(d <= TOL, dir.getFileName() + ": bf16x3 vs fp32 max |d| " + d);
                for (int i = 0; i < prompts.size(); i++) {
                    assertArrayEquals(
                            fp32.scores().get(i).argmax(), s.scores().get(i).argmax(), "argmax of prompt " + i);
                }
            }
        }
    }

    @Test
    void bf16DemoModel() {
        demoModelInEachPrecision(DemoModels.tinyBf16());
    }

    @Test
    void fp8DemoModel() {
        demoModelInEachPrecision(DemoModels.tinyFp8());
    }

    @Test
    void int4DemoModel() {
        demoModelInEachPrecision(DemoModels.tinyInt4());
    }

    /** In bf16x3, a row's scores have the same bits alone on one thread and in a batch on two. */
    @Test
    void batchMatesAndThreadsDoNotChangeBitsInBf16x3() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        List<int[]> seqs = InvarianceTest.prompts(m.vocabSize(), 7, 1, 5, 37, 70, 130, 300);
        List<SequenceScore> batched;
        try (CpuOps two = new CpuOps(2, CpuPrecision.BF16X3)) {
            batched = InvarianceTest.score(m, two, seqs);
        }
        try (CpuOps one = new CpuOps(1, CpuPrecision.BF16X3)) {
            for (int i = 0; i < seqs.size(); i++) {
                SequenceScore alone =
                        InvarianceTest.score(m, one, List.of(seqs.get(i))).get(0);
                InvarianceTest.assertSameBits(alone, batched.get(i), "sequence " + i);
            }
        }
    }
}
