package dev.scorch.engine.generation;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.diagnostics.GpuConformance;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.GpuKvCache;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.GpuStages;
import dev.scorch.engine.model.KvCache;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.testing.TestModels;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The generator on the GPU backend's model code ({@link StageDecodingModel} over {@link HostDevice}): continuous
 * batching, device KV caches and shared prefills give the golden greedy continuations, and seeded sampling gives
 * the CPU engine's tokens.
 */
class GpuGenerationTest {
    @Test
    void greedyMeetsTheGoldenContinuationsThreeSequencesAtATime() throws IOException {
        JsonNode golden =
                new ObjectMapper().readTree(TestModels.conformanceGolden().toFile());
        List<GenerationRequest> reqs = new ArrayList<>();
        for (JsonNode p : golden.get("prompts")) {
            reqs.add(new GenerationRequest(
                    GpuConformance.ints(p.get("token_ids")), SamplingParams.greedy(), 16, Set.of(), List.of(), 1, 0));
        }
        try (GpuModel m = GpuModel.load(
                ModelWeights.open(TestModels.conformanceModel()), new HostDevice(), GemmPrecision.BF16X3)) {
            HostDevice dev = (HostDevice) m.device();
            new Scorer(m).score(List.of(ScoreRequest.of(new int[] {1, 2}))); // makes the cos/sin table
            long before =
                    dev.freeBytes() + m.stage().scratchBytes(); // the scratch arenas may grow; caches must all go back
            List<List<Completion>> out = new Generator(
                            new StageDecodingModel(m), new Generator.Limits(Long.MAX_VALUE, 1 << 20, 3), null)
                    .generate(reqs);
            int i = 0;
            for (JsonNode p : golden.get("prompts")) {
                assertArrayEquals(
                        GpuConformance.ints(p.get("greedy_continuation")),
                        out.get(i++).get(0).tokenIds(),
                        "prompt " + i);
            }
            assertEquals(before, dev.freeBytes() + m.stage().scratchBytes(), "every device KV cache given back");
        }
    }

    @Test
    void seededSamplesWithSharedPrefillsMatchTheCpuEngine() {
        DeepseekV3Model cpu = DeepseekV3Model.load(TestModels.conformanceModel());
        List<GenerationRequest> reqs = new ArrayList<>();
        java.util.Random r = new java.util.Random(7);
        for (int i = 0; i < 4; i++) {
            int[] prompt = new int[2 + r.nextInt(20)];
            for (int k = 0; k < prompt.length; k++) {
                prompt[k] = r.nextInt(cpu.vocabSize());
            }
            reqs.add(new GenerationRequest(
                    prompt, SamplingParams.temperature(0.8, 100 + i), 8, Set.of(), List.of(), 2, 0));
        }
        List<List<Completion>> want;
        try (CpuOps ops = new CpuOps(2)) {
            want = new Generator(cpu, ops, Long.MAX_VALUE, null).generate(reqs);
        }
        try (GpuModel m =
                GpuModel.load(ModelWeights.open(TestModels.conformanceModel()), new HostDevice(), GemmPrecision.FP32)) {
            List<List<Completion>> got = new Generator(
                            new StageDecodingModel(m), Generator.Limits.ofCacheBytes(Long.MAX_VALUE), null)
                    .generate(reqs);
            for (int q = 0; q < reqs.size(); q++) {
                for (int s = 0; s < 2; s++) {
                    Completion a = want.get(q).get(s);
                    Completion b = got.get(q).get(s);
                    assertArrayEquals(a.tokenIds(), b.tokenIds(), "request " + q + " sample " + s);
                    for (int k = 0; k < a.logprobs().length; k++) {
                        assertTrue(
                                Math.abs(a.logprobs()[k] - b.logprobs()[k]) <= 1e-4,
                                "request " + q + " sample " + s + " step " + k);
                    }
                }
            }
        }
    }
    /** Prompts for the decode tests: lengths 1 (a first token), 7 and 23, random tokens. */
    private static List<int[]> prompts(int vocab) {
        java.util.Random r = new java.util.Random(11);
        List<int[]> out = new ArrayList<>();
        for (int len : new int[] {7, 1, 23}) {
            int[] p = new int[len];
            for (int k = 0; k < len; k++) {
                p[k] = r.nextInt(vocab);
            }
            out.add(p);
        }
        return out;
    }

    /**
     * Decode logits of the GPU model code on HostDevice (fp32) against the CPU engine's scalar absorbed decode
     * ({@code DeepseekV3Model.decode} on CpuOps without SIMD, the order of sums HostDevice.mlaDecode follows), three
     * sequences stepped together for 12 steps on the CPU's greedy tokens. Measured: max |dlogit| 1.05e-5, max |dlogprob|
     * 1.27e-5 (GEMMs and norms sum in other orders; the attention is the same to the bit).
     */
    @Test
    void decodeLogitsMatchTheCpuEnginesAbsorbedDecode() {
        DeepseekV3Model cpu = DeepseekV3Model.load(TestModels.conformanceModel());
        int vocab = cpu.vocabSize();
        List<int[]> prompts = prompts(vocab);
        int steps = 12;
        double maxLogit = 0;
        double maxLogprob = 0;
        try (CpuOps ops = new CpuOps(2, false);
                GpuModel m = GpuModel.load(
                        ModelWeights.open(TestModels.conformanceModel()), new HostDevice(), GemmPrecision.FP32)) {
            int n = prompts.size();
            KvCache[] cc = new KvCache[n];
            GpuKvCache[] gc = new GpuKvCache[n];
            for (int s = 0; s < n; s++) {
                cc[s] = new KvCache(cpu.config(), prompts.get(s).length + steps);
                gc[s] = m.stage().newCache(prompts.get(s).length + steps);
            }
            StageDecodingModel d = new StageDecodingModel(cpu.on(ops));
            DecodingModel.Cache[] wrapped = new DecodingModel.Cache[n];
            for (int s = 0; s < n; s++) {
                wrapped[s] = new StageDecodingModel.StageCache(new LatentCache[] {cc[s]});
            }
            float[] want = d.prefill(prompts, Arrays.asList(wrapped));
            float[] got = nextTokenLogits(m, PackedBatch.of(prompts), gc);
            for (int step = 0; step < steps; step++) {
                int[] next = new int[n];
                for (int s = 0; s < n; s++) {
                    next[s] = LogSoftmax.argmax(want, s * vocab, vocab);
                }
                want = d.decode(next, wrapped).clone();
                int[] pos = new int[n];
                int[] start = new int[n];
                int[] len = new int[n];
                for (int s = 0; s < n; s++) {
                    pos[s] = gc[s].length();
                    start[s] = s;
                    len[s] = 1;
                }
                got = nextTokenLogits(m, new PackedBatch(next, pos, start, len), gc);
                for (int s = 0; s < n; s++) {
                    double lw = LogSoftmax.logSumExp(want, s * vocab, vocab);
                    double lg = LogSoftmax.logSumExp(got, s * vocab, vocab);
                    for (int v = 0; v < vocab; v++) {
                        float a = want[s * vocab + v];
                        float b = got[s * vocab + v];
                        maxLogit = Math.max(maxLogit, Math.abs(a - b));
                        maxLogprob = Math.max(maxLogprob, Math.abs((a - lw) - (b - lg)));
                    }
                }
            }
            for (GpuKvCache c : gc) {
                c.close();
            }
        }
        System.out.printf(
                "HostDevice fp32 decode vs CPU scalar absorbed decode: max |dlogit| %.3g, max |dlogprob| %.3g%n",
                maxLogit, maxLogprob);
        assertTrue(maxLogprob <= 1e-4, "max |dlogprob| " + maxLogprob);
        assertTrue(maxLogit <= 1e-4, "max |dlogit| " + maxLogit);
    }

    /**
     * A sequence's decode does not depend on its batch mates: three sequences stepped together give, bit for bit, the
     * logits each gives stepped alone, and so does a step packed beside another sequence's prefill.
     */
    @Test
    void batchedDecodeEqualsAloneBitwise() {
        try (GpuModel m = GpuModel.load(
                ModelWeights.open(TestModels.conformanceModel()), new HostDevice(), GemmPrecision.BF16X3)) {
            StageDecodingModel d = new StageDecodingModel(m);
            int vocab = m.config().vocabSize();
            List<int[]> prompts = prompts(vocab);
            int n = prompts.size();
            int[][] tokens = {{5, 9, 300}, {17, 17, 2}, {480, 1, 44}, {3, 250, 99}};
            float[][][] alone = new float[n][tokens.length][];
            for (int s = 0; s < n; s++) {
                try (DecodingModel.Cache c = d.newCache(64)) {
                    d.prefill(List.of(prompts.get(s)), List.of(c));
                    for (int k = 0; k < tokens.length; k++) {
                        alone[s][k] = d.decode(new int[] {tokens[k][s]}, new DecodingModel.Cache[] {c})
                                .clone();
                    }
                }
            }
            DecodingModel.Cache[] caches = new DecodingModel.Cache[n];
            for (int s = 0; s < n; s++) {
                caches[s] = d.newCache(64);
            }
            d.prefill(prompts, Arrays.asList(caches));
            for (int k = 0; k < tokens.length; k++) {
                float[] together = d.decode(tokens[k], caches);
                for (int s = 0; s < n; s++) {
                    assertArrayEquals(
                            alone[s][k],
                            Arrays.copyOfRange(together, s * vocab, (s + 1) * vocab),
                            "sequence " + s + " step " + k);
                }
            }
            // A decode row packed with a new prompt's prefill into an empty cache: sequence 0's next step, alone on a
            // copy of its cache and beside prompt 2.
            try (DecodingModel.Cache copy = d.newCache(64);
                    GpuKvCache fresh = m.stage().newCache(64)) {
                copy.copyFrom(caches[0]);
                float[] aloneNext = d.decode(new int[] {77}, new DecodingModel.Cache[] {copy});
                int[] p2 = prompts.get(2);
                int[] tok = new int[1 + p2.length];
                int[] pos = new int[tok.length];
                tok[0] = 77;
                pos[0] = caches[0].length();
                for (int i = 0; i < p2.length; i++) {
                    tok[1 + i] = p2[i];
                    pos[1 + i] = i;
                }
                float[] mixed = nextTokenLogits(
                        m,
                        new PackedBatch(tok, pos, new int[] {0, 1}, new int[] {1, p2.length}),
                        new GpuKvCache[] {(GpuKvCache) ((StageDecodingModel.StageCache) caches[0]).kv()[0], fresh});
                assertArrayEquals(aloneNext, Arrays.copyOf(mixed, vocab), "decode row beside a prefill");
            }
            for (DecodingModel.Cache c : caches) {
                c.close();
            }
        }
    }

    /**
     * Decode through the device cache (absorbed form) against recomputing the whole prefix (prefill form), fp32: from
     * a 1-token and a 20-token prefill, every step to 40 tokens, and a 10-token extension of a 30-token cache in one
     * pass (the absorbed form, causal among the new tokens). Measured max |dlogit| 1.64e-5.
     */
    @Test
    void decodeMatchesRecomputation() {
        try (GpuModel m =
                GpuModel.load(ModelWeights.open(TestModels.conformanceModel()), new HostDevice(), GemmPrecision.FP32)) {
            int vocab = m.config().vocabSize();
            int[] seq = new int[40];
            java.util.Random r = new java.util.Random(5);
            for (int i = 0; i < seq.length; i++) {
                seq[i] = r.nextInt(vocab);
            }
            Scorer scorer = new Scorer(m);
            double maxD = 0;
            for (int prefillLen : new int[] {1, 20}) {
                try (GpuKvCache c = m.stage().newCache(seq.length)) {
                    GpuKvCache[] caches = {c};
                    float[] logits =
                            nextTokenLogits(m, PackedBatch.of(List.of(Arrays.copyOf(seq, prefillLen))), caches);
                    for (int len = prefillLen; ; len++) {
                        maxD = Math.max(
                                maxD, GpuConformance.maxDiff(lastLogits(scorer, Arrays.copyOf(seq, len)), logits));
                        if (len == seq.length) {
                            break;
                        }
                        logits = nextTokenLogits(
                                m,
                                new PackedBatch(new int[] {seq[len]}, new int[] {len}, new int[] {0}, new int[] {1}),
                                caches);
                    }
                }
            }
            try (GpuKvCache c = m.stage().newCache(seq.length)) {
                GpuKvCache[] caches = {c};
                nextTokenLogits(m, PackedBatch.of(List.of(Arrays.copyOf(seq, 30))), caches);
                int[] pos = new int[10];
                for (int i = 0; i < 10; i++) {
                    pos[i] = 30 + i;
                }
                float[] ext = nextTokenLogits(
                        m,
                        new PackedBatch(Arrays.copyOfRange(seq, 30, 40), pos, new int[] {0}, new int[] {10}),
                        caches);
                maxD = Math.max(maxD, GpuConformance.maxDiff(lastLogits(scorer, seq), ext));
            }
            System.out.printf("HostDevice fp32 decode vs recomputation: max |dlogit| %.3g%n", maxD);
            assertTrue(maxD <= 1e-4, "decode vs recomputation max |dlogit| " + maxD);
        }
    }

    /**
     * Runs batch (positions from each cache's length) through m, appending to the caches, and returns the next-token
     * logits [sequences, vocab] of each sequence's last token.
     */
    private static float[] nextTokenLogits(GpuModel m, PackedBatch batch, GpuKvCache[] caches) {
        float[] out = new float[batch.numSequences() * m.config().vocabSize()];
        m.run(
                List.of(new GpuStages.Micro(batch, new LatentCache[][] {caches}, null)),
                (micro, last, pass, hidden) -> last.lastTokenLogits(pass, batch, hidden, out, 0));
        return out;
    }

    private static float[] lastLogits(Scorer scorer, int[] tokens) {
        return scorer.score(List.of(new ScoreRequest(tokens, tokens.length, 0, LogitsMode.LAST)))
                .get(0)
                .logits()[0];
    }
}
