package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.backend.GpuMemoryBudget;
import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.generation.Completion;
import dev.scorch.engine.generation.GenerationRequest;
import dev.scorch.engine.generation.Generator;
import dev.scorch.engine.generation.StageDecodingModel;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.engine.testing.DemoModels;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The FP8 demos (DeepSeek's quant_method fp8: every linear F8_E4M3 with fp32 weight_scale_inv per 128 x 128 block; and
 * compressed-tensors float-quantized with BF16 weight_scale, q_a_proj and kv_a_proj_with_mqa left BF16) on the GPU path
 * through {@link HostDevice}, FP8 linears resident as their codes: scores against the CPU engine per GEMM precision and
 * against the same model with its FP8 weights dequantised at load ({@link DenseWeightsDevice}, the path before: equal
 * numbers in FP32 and BF16), greedy generation against the CPU engine's, and the device bytes against the budget.
 */
class GpuFp8ModelTest {
    static final Map<String, List<SequenceScore>> CPU = new ConcurrentHashMap<>();
    static final Map<String, List<ScoreRequest>> REQUESTS = new ConcurrentHashMap<>();

    static Path dir(String model) {
        return model.equals("fp8") ? DemoModels.tinyFp8() : DemoModels.tinyFp8Ct();
    }

    static synchronized List<ScoreRequest> requests(String model) {
        return REQUESTS.computeIfAbsent(model, m -> {
            int vocab = ModelWeights.open(dir(m)).config().vocabSize();
            Random r = new Random(28);
            List<ScoreRequest> out = new ArrayList<>();
            for (int len : new int[] {1, 3, 17, 70}) { // 70: past original_max_position_embeddings (64), YaRN's blend
                int[] t = new int[len];
                for (int i = 0; i < len; i++) {
                    t[i] = r.nextInt(vocab);
                }
                out.add(ScoreRequest.of(t));
            }
            return out;
        });
    }

    static synchronized List<SequenceScore> cpu(String model) {
        return CPU.computeIfAbsent(model, m -> {
            try (CpuOps ops = new CpuOps(2)) {
                return new Scorer(DeepseekV3Model.load(dir(m)).on(ops)).score(requests(m));
            }
        });
    }

    static List<SequenceScore> score(String model, Device dev, GemmPrecision p) {
        try (GpuModel m = GpuModel.load(ModelWeights.open(dir(model)), dev, p)) {
            return new Scorer(m).score(requests(model));
        }
    }

    /**
     * HostDevice vs the CPU engine (fast path, 2 threads), FP8 resident and, as before, dequantised at load. Measured max
     * |dlogprob| resident / dequantised at load: fp8 FP32 5.7e-6 / 5.7e-6, BF16X3 6.7e-6 / 1.06 (W rounded to BF16 flips
     * routes on the 70-token request), BF16X2 1.1e-4 / 1.06, BF16 0.46 / 0.46; fp8-ct FP32 8.6e-6 / 8.6e-6, BF16X3
     * 6.7e-6 / 4.0e-2, BF16X2 7.5e-5 / 4.0e-2, BF16 0.69 / 0.69.
     */
    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({
        "fp8, FP32, 1e-4",
        "fp8, BF16X3, 1e-4",
        "fp8, BF16X2, 1e-3",
        "fp8, BF16, 1",
        "fp8-ct, FP32, 1e-4",
        "fp8-ct, BF16X3, 1e-4",
        "fp8-ct, BF16X2, 1e-3",
        "fp8-ct, BF16, 1"
    })
    void scoresMatchTheCpuEngine(String model, GemmPrecision p, double tol) {
        double resident = GpuInt4ModelTest.maxDiff(cpu(model), score(model, new HostDevice(), p));
        double dense = GpuInt4ModelTest.maxDiff(cpu(model), score(model, DenseWeightsDevice.create(), p));
        System.out.printf(
                "%s demo, HostDevice %s vs CPU: max |dlogprob| FP8 resident %.3g, dequantised at load %.3g%n",
                model, p, resident, dense);
        assertTrue(resident <= tol, p + ": max |dlogprob| " + resident);
        assertTrue(resident <= dense * 1.01 + 1e-6, p + ": resident " + resident + ", dequantised " + dense);
    }

    /** FP32 and BF16 multiply the same numbers resident or dequantised at load: the same log-probs, bit for bit. */
    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"fp8, FP32", "fp8, BF16", "fp8-ct, FP32", "fp8-ct, BF16"})
    void residentGivesTheDequantisedModelsNumbers(String model, GemmPrecision p) {
        List<SequenceScore> packed = score(model, new HostDevice(), p);
        List<SequenceScore> dense = score(model, DenseWeightsDevice.create(), p);
        for (int i = 0; i < packed.size(); i++) {
            assertArrayEquals(dense.get(i).tokenLogprobs(), packed.get(i).tokenLogprobs(), p + " request " + i);
        }
    }

    /**
     * Greedy continuations through the generator (StageDecodingModel: prefill, then the absorbed decode over device KV
     * caches, three sequences at a time) against the CPU engine's: 12 prompts of 8 new tokens each, all equal. Measured
     * resident / dequantised at load: fp8 BF16X3 12/12 / 12/12, FP32 12/12 / 12/12; fp8-ct BF16X3 12/12 / 9/12.
     */
    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"fp8, BF16X3", "fp8, FP32", "fp8-ct, BF16X3"})
    void greedyGenerationMatchesTheCpuEngine(String model, GemmPrecision p) {
        DeepseekV3Model cpu = DeepseekV3Model.load(dir(model));
        Random r = new Random(12);
        List<GenerationRequest> reqs = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            int[] prompt = new int[1 + r.nextInt(24)];
            for (int k = 0; k < prompt.length; k++) {
                prompt[k] = r.nextInt(cpu.vocabSize());
            }
            reqs.add(new GenerationRequest(prompt, SamplingParams.greedy(), 8, Set.of(), List.of(), 1, 0));
        }
        List<List<Completion>> want;
        try (CpuOps ops = new CpuOps(2)) {
            want = new Generator(cpu, ops, Long.MAX_VALUE, null).generate(reqs);
        }
        int equal = 0;
        int denseEqual = 0;
        for (Device dev : new Device[] {new HostDevice(), DenseWeightsDevice.create()}) {
            try (GpuModel m = GpuModel.load(ModelWeights.open(dir(model)), dev, p)) {
                List<List<Completion>> got = new Generator(
                                new StageDecodingModel(m), new Generator.Limits(Long.MAX_VALUE, 1 << 20, 3), null)
                        .generate(reqs);
                for (int i = 0; i < reqs.size(); i++) {
                    boolean same = java.util.Arrays.equals(
                            want.get(i).get(0).tokenIds(), got.get(i).get(0).tokenIds());
                    if (dev instanceof HostDevice) {
                        equal += same ? 1 : 0;
                    } else {
                        denseEqual += same ? 1 : 0;
                    }
                }
            }
        }
        System.out.printf(
                "%s demo %s greedy vs CPU: FP8 resident %d/12, dequantised at load %d/12%n",
                model, p, equal, denseEqual);
        assertEquals(12, equal, model + " " + p);
    }

    /** FP8 linears are resident as codes: the device holds what the budget counts, about half the BF16 bytes. */
    @Test
    void fp8LinearsStayFp8OnTheDevice() {
        for (String model : new String[] {"fp8", "fp8-ct"}) {
            ModelWeights w = ModelWeights.open(dir(model));
            for (GemmPrecision p : GemmPrecision.values()) {
                HostDevice dev = new HostDevice();
                long packed;
                try (GpuModel m = GpuModel.load(w, dev, p)) {
                    packed = m.stage().weightBytes();
                }
                long dense;
                try (GpuModel m = GpuModel.load(w, DenseWeightsDevice.create(), p)) {
                    dense = m.stage().weightBytes();
                }
                GpuMemoryBudget b = GpuMemoryBudget.of(w.config(), p, false);
                assertEquals(b.weightBytes(), packed, model + " " + p);
                long fp8Elems = 0;
                for (WeightLayout.Spec s : WeightLayout.of(w.config())) {
                    if ((s.kind() == WeightLayout.Kind.LINEAR || s.kind() == WeightLayout.Kind.LM_HEAD)
                            && w.linear(s.name()).format() == Linear.Format.FP8_BLOCK) {
                        fp8Elems += s.numel();
                    }
                }
                System.out.printf(
                        "%s demo %s: weights %,d bytes FP8 resident, %,d dequantised at load (%,d FP8 weights)%n",
                        model, p, packed, dense, fp8Elems);
                assertTrue(fp8Elems > 0, model);
                // Each FP8 weight: 1 byte (+ scales, scale rows and kv_b_proj's fp32 copy) instead of the precision's.
                assertTrue(dense - packed > fp8Elems * (p.weightBytes() - 1) * 8 / 10, model + " " + p);
            }
        }
    }
}
