package dev.scorch.engine.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.generation.Completion;
import dev.scorch.engine.generation.GenerationRequest;
import dev.scorch.engine.generation.Generator;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.testing.TestModels;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The generator on the GPU backend's model code ({@link GpuDecodingModel} over {@link HostDevice}): continuous
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
            reqs.add(GenerationRequest.greedy(GpuConformance.ints(p.get("token_ids")), 16));
        }
        try (GpuModel m = GpuModel.load(
                ModelWeights.open(TestModels.conformanceModel()), new HostDevice(), GemmPrecision.BF16X3)) {
            HostDevice dev = (HostDevice) m.device();
            new GpuScorer(m).score(List.of(ScoreRequest.of(new int[] {1, 2}))); // makes the cos/sin table
            long before = dev.freeBytes() + m.scratchBytes(); // the scratch arenas may grow; caches must all go back
            List<List<Completion>> out = new Generator(
                            new GpuDecodingModel(m), new Generator.Limits(Long.MAX_VALUE, 1 << 20, 3), null)
                    .generate(reqs);
            int i = 0;
            for (JsonNode p : golden.get("prompts")) {
                assertArrayEquals(
                        GpuConformance.ints(p.get("greedy_continuation")),
                        out.get(i++).get(0).tokenIds(),
                        "prompt " + i);
            }
            assertEquals(before, dev.freeBytes() + m.scratchBytes(), "every device KV cache given back");
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
            reqs.add(
                    new GenerationRequest(prompt, SamplingParams.temperature(0.8, 100 + i), 8, Set.of(), List.of(), 2));
        }
        List<List<Completion>> want;
        try (CpuOps ops = new CpuOps(2)) {
            want = new Generator(cpu, ops, Long.MAX_VALUE, null).generate(reqs);
        }
        try (GpuModel m =
                GpuModel.load(ModelWeights.open(TestModels.conformanceModel()), new HostDevice(), GemmPrecision.FP32)) {
            List<List<Completion>> got = new Generator(
                            new GpuDecodingModel(m), Generator.Limits.ofCacheBytes(Long.MAX_VALUE), null)
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
}
