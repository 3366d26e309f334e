package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.scoring.BatchScorer;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.engine.testing.DemoModels;
import dev.scorch.engine.testing.Fp64Reference;
import dev.scorch.engine.testing.TestModels;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Quantized checkpoints held to an independent reference: {@link Fp64Reference} dequantises the INT4 triples (and FP8
 * blocks) from their raw bytes in its own loops and runs a float64 forward of the reference code; the engine's
 * next-token log-probs must be within 1e-4 of it on the CPU fast, scalar and reference paths and on the GPU path
 * through {@link HostDevice}, for the Kimi-K2-Thinking-style INT4 demo, its K2.5-wrapped twin and the compressed-tensors
 * FP8 demo. The reference itself is first held to the conformance golden file (a float64 re-implementation in Python).
 */
class QuantizedConformanceTest {
    static final double TOL = 1e-4;
    private static final Map<Path, double[][]> REFERENCE = new ConcurrentHashMap<>();

    /** Prompts past original_max_position_embeddings (64), so YaRN's blend matters; seeded. */
    static List<int[]> prompts(int vocab) {
        return InvarianceTest.prompts(vocab, 2025, 1, 2, 9, 40, 100);
    }

    static double[][] reference(Path dir) {
        return REFERENCE.computeIfAbsent(dir, d -> {
            Fp64Reference ref = new Fp64Reference(d);
            List<int[]> ps = prompts(ref.config().vocabSize());
            double[][] out = new double[ps.size()][];
            for (int i = 0; i < ps.size(); i++) {
                out[i] = ref.nextTokenLogprobs(ps.get(i));
            }
            return out;
        });
    }

    /** max |engine − reference| over every next-token log-prob of the prompts. */
    static double maxDiff(Path dir, BatchScorer scorer) {
        List<int[]> ps = prompts(ModelWeights.open(dir).config().vocabSize());
        double[][] want = reference(dir);
        List<ScoreRequest> reqs = new ArrayList<>();
        for (int[] p : ps) {
            reqs.add(ScoreRequest.of(p));
        }
        double max = 0;
        for (int i = 0; i < ps.size(); i++) {
            // One by one and all in one batch: each must meet the reference.
            SequenceScore alone = scorer.score(List.of(reqs.get(i))).get(0);
            for (int k = 0; k < want[i].length; k++) {
                max = Math.max(max, Math.abs(alone.tokenLogprobs()[k + 1] - want[i][k]));
            }
        }
        List<SequenceScore> batched = scorer.score(reqs);
        for (int i = 0; i < ps.size(); i++) {
            for (int k = 0; k < want[i].length; k++) {
                max = Math.max(max, Math.abs(batched.get(i).tokenLogprobs()[k + 1] - want[i][k]));
            }
        }
        return max;
    }

    /** The reference meets the golden file: it is a faithful float64 forward before it judges anything. */
    @Test
    void referenceMeetsTheGoldenFile() throws Exception {
        JsonNode golden =
                new ObjectMapper().readTree(TestModels.conformanceGolden().toFile());
        Fp64Reference ref = new Fp64Reference(TestModels.conformanceModel());
        double max = 0;
        int n = 0;
        for (JsonNode p : golden.get("prompts")) {
            int[] tokens = ConformanceTest.ints(p.get("token_ids"));
            double[] got = ref.nextTokenLogprobs(tokens);
            JsonNode lps = p.get("next_token_logprobs");
            assertEquals(lps.size(), got.length);
            for (int k = 0; k < got.length; k++, n++) {
                max = Math.max(max, Math.abs(got[k] - lps.get(k).asDouble()));
            }
        }
        System.out.printf("fp64 reference vs golden: max |dlogprob| %.3g over %d log-probs%n", max, n);
        assertTrue(n > 50, "log-probs compared: " + n);
        assertTrue(max < 1e-6, "fp64 reference vs golden: " + max);
    }

    static Stream<Arguments> cpuPaths() {
        List<Arguments> a = new ArrayList<>();
        for (String model : List.of("int4", "int4-k25", "fp8-ct")) {
            a.add(Arguments.of(model, "fast, 2 threads", (Supplier<CpuOps>) () -> new CpuOps(2)));
            a.add(Arguments.of(model, "scalar, 2 threads", (Supplier<CpuOps>) () -> new CpuOps(2, false)));
        }
        return a.stream();
    }

    static Path model(String name) {
        return switch (name) {
            case "int4" -> DemoModels.tinyInt4();
            case "int4-k25" -> DemoModels.tinyInt4K25();
            case "fp8-ct" -> DemoModels.tinyFp8Ct();
            default -> throw new IllegalArgumentException(name);
        };
    }

    @ParameterizedTest(name = "{0}, {1}")
    @MethodSource("cpuPaths")
    void cpuPathsMeetTheFp64Reference(String model, String path, Supplier<CpuOps> opsFactory) {
        Path dir = model(model);
        DeepseekV3Model m = DeepseekV3Model.load(dir);
        try (CpuOps ops = opsFactory.get()) {
            double d = maxDiff(dir, new Scorer(m.on(ops)));
            System.out.printf("%s, %s vs fp64 reference: max |dlogprob| %.3g%n", model, path, d);
            assertTrue(d <= TOL, model + ", " + path + ": max |dlogprob| " + d);
        }
    }

    /** The GPU backend's model code on HostDevice (the CUDA kernels' plain-loop twin), fp32 GEMMs. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("gpuModels")
    void gpuPathThroughHostDeviceMeetsTheFp64Reference(String model) {
        Path dir = model(model);
        try (GpuModel m = GpuModel.load(ModelWeights.open(dir), new HostDevice(), GemmPrecision.FP32)) {
            double d = maxDiff(dir, new Scorer(m));
            System.out.printf("%s, HostDevice fp32 vs fp64 reference: max |dlogprob| %.3g%n", model, d);
            assertTrue(d <= TOL, model + ", HostDevice: max |dlogprob| " + d);
        }
    }

    static Stream<String> gpuModels() {
        return Stream.of("int4", "int4-k25", "fp8-ct");
    }

    /** The models under test are what they claim: routed experts INT4 groups (or FP8 blocks), read through the triple. */
    @Test
    void theModelsHoldTheFormatsUnderTest() {
        for (String name : List.of("int4", "int4-k25")) {
            ModelWeights w = ModelWeights.open(model(name));
            assertEquals(
                    Linear.Format.INT4_GROUP,
                    w.linear("model.layers.2.mlp.experts.6.down_proj.weight").format(),
                    name);
            assertEquals(
                    Linear.Format.PLAIN,
                    w.linear("model.layers.2.mlp.shared_experts.down_proj.weight")
                            .format(),
                    name);
        }
        ModelWeights fp8 = ModelWeights.open(model("fp8-ct"));
        assertEquals(
                Linear.Format.FP8_BLOCK,
                fp8.linear("model.layers.2.mlp.experts.6.down_proj.weight").format());
        assertEquals(
                Linear.Format.PLAIN,
                fp8.linear("model.layers.2.self_attn.kv_a_proj_with_mqa.weight").format());
    }
}
