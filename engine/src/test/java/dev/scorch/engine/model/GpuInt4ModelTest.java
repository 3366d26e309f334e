package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.backend.GpuMemoryBudget;
import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.diagnostics.GpuConformance;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.engine.testing.DemoModels;
import dev.scorch.engine.testing.Fp64Reference;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The Kimi-K2-Thinking-style INT4 demo (routed experts in INT4 groups of 32, the rest BF16) on the GPU path through
 * {@link HostDevice}: experts resident packed, scores against the CPU engine per GEMM precision, against the same model
 * with its INT4 weights dequantised at load (equal numbers in FP32 and BF16), batch invariance, and the K2.5-wrapped
 * twin. The fp64 reference check of the HostDevice FP32 path is {@code QuantizedConformanceTest}'s.
 */
class GpuInt4ModelTest {
    static Path int4;
    static List<ScoreRequest> requests;
    static List<SequenceScore> cpu;

    @BeforeAll
    static void cpuScores() {
        int4 = DemoModels.tinyInt4();
        int vocab = ModelWeights.open(int4).config().vocabSize();
        Random r = new Random(25);
        requests = new ArrayList<>();
        for (int len : new int[] {1, 3, 17, 70}) { // 70: past original_max_position_embeddings (64), YaRN's blend
            int[] t = new int[len];
            for (int i = 0; i < len; i++) {
                t[i] = r.nextInt(vocab);
            }
            requests.add(ScoreRequest.of(t));
        }
        try (CpuOps ops = new CpuOps(2)) {
            cpu = new Scorer(DeepseekV3Model.load(int4).on(ops)).score(requests);
        }
    }

    static double maxDiff(List<SequenceScore> a, List<SequenceScore> b) {
        double d = 0;
        for (int i = 0; i < a.size(); i++) {
            d = Math.max(
                    d, GpuConformance.maxDiff(a.get(i).tokenLogprobs(), b.get(i).tokenLogprobs()));
        }
        return d;
    }

    static List<SequenceScore> score(Path dir, Device dev, GemmPrecision p) {
        try (GpuModel m = GpuModel.load(ModelWeights.open(dir), dev, p)) {
            return new Scorer(m).score(requests);
        }
    }

    /**
     * HostDevice vs the CPU engine (fast path, 2 threads). Measured max |dlogprob|: FP32 5.7e-6, BF16X3 8.6e-6, BF16X2
     * 6.5e-5; BF16 0.6 (every GEMM input rounded to BF16, as for a BF16 model: reported, bounded loosely).
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"FP32, 1e-4", "BF16X3, 1e-4", "BF16X2, 1e-3", "BF16, 1"})
    void scoresMatchTheCpuEngine(GemmPrecision p, double tol) {
        double d = maxDiff(cpu, score(int4, new HostDevice(), p));
        System.out.printf("INT4 demo, HostDevice %s vs CPU: max |dlogprob| %.3g%n", p, d);
        assertTrue(d <= tol, p + ": max |dlogprob| " + d);
    }

    /**
     * The exact modes against the fp64 forward of the dequantised weights ({@link Fp64Reference}, the test's own loops):
     * within 1e-4 as the CPU engine is (measured: FP32 7.5e-6, BF16X3 4.8e-6).
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"FP32", "BF16X3"})
    void exactModesMeetTheFp64Reference(GemmPrecision p) {
        Fp64Reference ref = new Fp64Reference(int4);
        List<SequenceScore> got = score(int4, new HostDevice(), p);
        double d = 0;
        for (int i = 0; i < requests.size(); i++) {
            double[] want = ref.nextTokenLogprobs(requests.get(i).tokens());
            for (int k = 0; k < want.length; k++) {
                d = Math.max(d, Math.abs(got.get(i).tokenLogprobs()[k + 1] - want[k]));
            }
        }
        System.out.printf("INT4 demo, HostDevice %s vs fp64 reference: max |dlogprob| %.3g%n", p, d);
        assertTrue(d <= 1e-4, p + ": max |dlogprob| " + d);
    }

    /**
     * The packed experts against the same model with its INT4 weights dequantised on the host at load: the same log-probs
     * in FP32 and BF16 (both multiply the same numbers); in BF16X3 the dequantised upload rounds each weight to BF16, so
     * the packed model (hi + lo) stays at the CPU's numbers and the dequantised one does not.
     */
    @Test
    void packedExpertsGiveTheDequantisedModelsNumbers() {
        for (GemmPrecision p : new GemmPrecision[] {GemmPrecision.FP32, GemmPrecision.BF16}) {
            List<SequenceScore> packed = score(int4, new HostDevice(), p);
            List<SequenceScore> dense = score(int4, DenseWeightsDevice.create(), p);
            for (int i = 0; i < requests.size(); i++) {
                assertArrayEquals(dense.get(i).tokenLogprobs(), packed.get(i).tokenLogprobs(), p + " request " + i);
            }
        }
        double packed = maxDiff(cpu, score(int4, new HostDevice(), GemmPrecision.BF16X3));
        double dense = maxDiff(cpu, score(int4, DenseWeightsDevice.create(), GemmPrecision.BF16X3));
        System.out.printf("INT4 demo BF16X3 vs CPU: packed %.3g, dequantised to BF16 at load %.3g%n", packed, dense);
        assertTrue(packed * 100 < dense, "packed " + packed + ", dequantised " + dense);
    }

    /** Batched and alone give the same bits, and the K2.5-wrapped twin the same scores. */
    @Test
    void batchInvariantAndTheK25TwinScoresTheSame() {
        try (GpuModel m = GpuModel.load(ModelWeights.open(int4), new HostDevice(), GemmPrecision.BF16X3)) {
            Scorer scorer = new Scorer(m);
            List<SequenceScore> batched = scorer.score(requests);
            for (int i = 0; i < requests.size(); i++) {
                assertArrayEquals(
                        scorer.score(List.of(requests.get(i))).get(0).tokenLogprobs(),
                        batched.get(i).tokenLogprobs(),
                        "request " + i);
            }
            List<SequenceScore> k25 = score(DemoModels.tinyInt4K25(), new HostDevice(), GemmPrecision.BF16X3);
            for (int i = 0; i < requests.size(); i++) {
                assertArrayEquals(
                        batched.get(i).tokenLogprobs(), k25.get(i).tokenLogprobs(), "K2.5 twin, request " + i);
            }
        }
    }

    /** Routed experts are resident packed: the device holds what the budget counts, less than the dequantised model. */
    @Test
    void expertsStayPackedOnTheDevice() {
        ModelWeights w = ModelWeights.open(int4);
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
            assertEquals(b.weightBytes(), packed, p.name());
            // Each routed expert weight [out, in]: 4 bits + a BF16 scale per 32 instead of the precision's bytes.
            long expertElems = 0;
            for (WeightLayout.Spec s : WeightLayout.of(w.config())) {
                expertElems += s.routedExpert() ? s.numel() : 0;
            }
            assertEquals(
                    dense - packed, expertElems * p.weightBytes() - expertElems / 2 - expertElems / 32 * 2, p.name());
        }
    }
}
