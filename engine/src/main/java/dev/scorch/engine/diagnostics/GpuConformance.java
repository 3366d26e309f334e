package dev.scorch.engine.diagnostics;

import com.fasterxml.jackson.databind.JsonNode;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.generation.Completion;
import dev.scorch.engine.generation.DecodingModel;
import dev.scorch.engine.generation.GenerationRequest;
import dev.scorch.engine.generation.Generator;
import dev.scorch.engine.generation.StageDecodingModel;
import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;

/**
 * A GPU model against a conformance golden file (shared/conformance/NAME/golden.json) and against the CPU
 * engine's scores: next-token log-probs, argmax, routed experts, batched vs alone, and the greedy continuation
 * decoded through the GPU KV cache. Used by the tests (on {@link HostDevice}) and by the device check.
 */
public final class GpuConformance {
    private GpuConformance() {}

    /**
     * @param maxLogprobDiff      max |log-prob − golden| over every scored token of every prompt
     * @param argmaxMismatches    positions whose argmax differs from the golden one
     * @param routeMismatches     (token, MoE layer) pairs whose expert set differs from the golden one
     * @param batchedVsAlone      max |log-prob batched − alone| (all prompts in one packed batch)
     * @param greedyEqual         prompts whose greedy continuation equals the golden one
     * @param prompts             prompts checked
     * @param firstGreedyMismatch a description of the first greedy continuation that differs, or null
     */
    public record Report(
            double maxLogprobDiff,
            int argmaxMismatches,
            int routeMismatches,
            double batchedVsAlone,
            int greedyEqual,
            int prompts,
            String firstGreedyMismatch) {
        @Override
        public String toString() {
            return String.format(
                    "max |dlogprob| vs golden %.3g, argmax mismatches %d, route mismatches %d, batched vs alone %.3g, "
                            + "greedy equal %d/%d%s",
                    maxLogprobDiff,
                    argmaxMismatches,
                    routeMismatches,
                    batchedVsAlone,
                    greedyEqual,
                    prompts,
                    firstGreedyMismatch == null ? "" : " (first mismatch: " + firstGreedyMismatch + ")");
        }
    }

    /**
     * @param greedyEqual prompts whose greedy continuation with decode graphs equals the golden one
     * @param sameBits    prompts whose tokens and log-probs with decode graphs equal those without
     * @param prompts     prompts checked
     */
    public record GraphsReport(int greedyEqual, int sameBits, int prompts) {
        @Override
        public String toString() {
            return "greedy golden with graphs " + greedyEqual + "/" + prompts + ", tokens and log-probs as without "
                    + sameBits + "/" + prompts;
        }
    }

    /**
     * The golden prompts' greedy continuations through the generator, four sequences at a time (the batch changes as
     * they finish and others join), with decode steps as device graphs ({@code DecodeGraphs}) and without.
     */
    public static GraphsReport withGraphs(GpuModel model, JsonNode golden) {
        List<GenerationRequest> reqs = new ArrayList<>();
        for (JsonNode p : golden.get("prompts")) {
            reqs.add(new GenerationRequest(
                    ints(p.get("token_ids")), SamplingParams.greedy(), 16, Set.of(), List.of(), 1, 0));
        }
        Generator.Limits limits = new Generator.Limits(Long.MAX_VALUE, 1 << 20, 4);
        List<List<Completion>> off = new Generator(new StageDecodingModel(model, false), limits, null).generate(reqs);
        List<List<Completion>> on = new Generator(new StageDecodingModel(model, true), limits, null).generate(reqs);
        int greedy = 0;
        int same = 0;
        for (int i = 0; i < reqs.size(); i++) {
            Completion a = off.get(i).get(0);
            Completion b = on.get(i).get(0);
            greedy +=
                    Arrays.equals(ints(golden.get("prompts").get(i).get("greedy_continuation")), b.tokenIds()) ? 1 : 0;
            same += Arrays.equals(a.tokenIds(), b.tokenIds()) && Arrays.equals(a.logprobs(), b.logprobs()) ? 1 : 0;
        }
        return new GraphsReport(greedy, same, reqs.size());
    }

    public static Report check(GpuModel model, JsonNode golden) {
        Scorer scorer = new Scorer(model);
        int moeLayers = 0;
        for (int l = 0; l < model.config().numHiddenLayers(); l++) {
            moeLayers += model.config().isMoeLayer(l) ? 1 : 0;
        }
        int topK = model.config().numExpertsPerTok();
        double maxLp = 0;
        int argmaxBad = 0;
        int routesBad = 0;
        List<ScoreRequest> all = new ArrayList<>();
        List<SequenceScore> alone = new ArrayList<>();
        for (JsonNode p : golden.get("prompts")) {
            int[] tokens = ints(p.get("token_ids"));
            ScoreRequest r = new ScoreRequest(tokens, 1, 0, LogitsMode.NONE);
            all.add(r);
            int[][] routes = new int[moeLayers][];
            SequenceScore s = scorer.score(List.of(r), routes).get(0);
            alone.add(s);
            JsonNode lps = p.get("next_token_logprobs");
            for (int k = 0; k < lps.size(); k++) {
                maxLp = Math.max(
                        maxLp, Math.abs(s.tokenLogprobs()[k + 1] - lps.get(k).asDouble()));
            }
            int[] argmax = ints(p.get("argmax"));
            for (int k = 0; k + 1 < tokens.length; k++) {
                argmaxBad += argmax[k] != s.argmax()[k] ? 1 : 0;
            }
            JsonNode re = p.get("routed_experts");
            for (int l = 0; l < moeLayers; l++) {
                for (int i = 0; i < tokens.length; i++) {
                    int[] want = ints(re.get(l).get(i));
                    Arrays.sort(want);
                    int[] got = Arrays.copyOfRange(routes[l], i * topK, (i + 1) * topK);
                    Arrays.sort(got);
                    routesBad += Arrays.equals(want, got) ? 0 : 1;
                }
            }
        }
        List<SequenceScore> batched = scorer.score(all);
        double batchDiff = 0;
        for (int s = 0; s < all.size(); s++) {
            batchDiff = Math.max(
                    batchDiff,
                    maxDiff(alone.get(s).tokenLogprobs(), batched.get(s).tokenLogprobs()));
        }
        int greedyOk = 0;
        String firstBad = null;
        int maxNew = golden.get("greedy_max_new").asInt();
        for (JsonNode p : golden.get("prompts")) {
            int[] prompt = ints(p.get("token_ids"));
            int[] want = ints(p.get("greedy_continuation"));
            int[] got = greedy(model, prompt, Math.min(maxNew, want.length));
            if (Arrays.equals(want, got)) {
                greedyOk++;
            } else if (firstBad == null) {
                firstBad = prompt.length + "-token prompt: " + Arrays.toString(got) + " vs " + Arrays.toString(want);
            }
        }
        return new Report(maxLp, argmaxBad, routesBad, batchDiff, greedyOk, all.size(), firstBad);
    }

    /**
     * Greedy decoding of steps tokens after prompt through a GPU KV cache (prefill, then one token per step), without
     * device graphs.
     */
    public static int[] greedy(GpuModel model, int[] prompt, int steps) {
        int vocab = model.config().vocabSize();
        int[] out = new int[steps];
        StageDecodingModel d = new StageDecodingModel(model, false);
        try (DecodingModel.Cache cache = d.newCache(prompt.length + steps)) {
            float[] logits = d.prefill(List.of(prompt), List.of(cache));
            for (int s = 0; s < steps; s++) {
                out[s] = LogSoftmax.argmax(logits, 0, vocab);
                if (s + 1 < steps) {
                    logits = d.decode(new int[] {out[s]}, new DecodingModel.Cache[] {cache});
                }
            }
        }
        return out;
    }

    /** Max |a − b| over the entries where both are numbers. */
    public static double maxDiff(float[] a, float[] b) {
        double d = 0;
        for (int i = 0; i < a.length; i++) {
            if (!Float.isNaN(a[i]) && !Float.isNaN(b[i])) {
                d = Math.max(d, Math.abs(a[i] - b[i]));
            }
        }
        return d;
    }

    /** A JSON array of ints (the golden file's token ids). */
    public static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).asInt();
        }
        return out;
    }
}
