package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.kernels.PackedGemm;
import dev.scorch.engine.kernels.RowDotGemm;
import dev.scorch.engine.testing.DemoModels;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Decode in each bf16 CPU precision (BF16 weights on VDPBF16PS in the decode row-dot as in prefill's tiles): decode
 * equals recomputation within the mode's error, and a sequence's logits are bitwise the same batched or alone, at one
 * and two threads. Bounds (max |Δ logit|, tiny demo models): bf16x3 1e-4 as fp32; bf16x2 1e-3 (measured 1.1e-4 to
 * 1.3e-4); bf16 8, the size of prefill's own bf16 error (measured 0.08 to 2.8). Runs where the CPU has the units.
 */
class DecodePrecisionTest {
    @BeforeEach
    void units() {
        assumeTrue(
                RowDotGemm.runs(CpuPrecision.BF16X3) && PackedGemm.runs(CpuPrecision.BF16X3),
                "no AVX512-BF16 decode kernel here");
    }

    static double bound(CpuPrecision p) {
        return switch (p) {
            case FP32, BF16X3 -> 1e-4;
            case BF16X2 -> 1e-3;
            case BF16 -> 8.0; // a bf16 rounding of x can flip a routed expert (tiny INT4 demo: 2.8)
        };
    }

    @Test
    void decodeMatchesRecomputationInEachMode() {
        for (Path dir : List.of(DemoModels.tinyBf16(), DemoModels.tinyFp8(), DemoModels.tinyInt4())) {
            for (CpuPrecision p : new CpuPrecision[] {CpuPrecision.BF16X3, CpuPrecision.BF16X2, CpuPrecision.BF16}) {
                double d = DecodeTest.decodeVsRecomputation(dir, p);
                assertTrue(d <= bound(p), dir.getFileName() + " " + p.id() + ": max |d logit| " + d);
            }
        }
    }

    @Test
    void batchedDecodeEqualsAloneBitwiseInEachMode() {
        for (CpuPrecision p : new CpuPrecision[] {CpuPrecision.BF16X3, CpuPrecision.BF16X2, CpuPrecision.BF16}) {
            DecodeTest.batchedDecodeEqualsAloneBitwise(DemoModels.tinyBf16(), p);
        }
    }

    /**
     * bf16x3 decode against fp32 decode, step by step on the same greedy path: within 1e-4 of every logit (fp32's own
     * tolerance against the golden log-probs), and the same argmax.
     */
    @Test
    void bf16x3DecodeIsWithinFp32sTolerance() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        int[] prompt = InvarianceTest.prompts(m.vocabSize(), 21, 40).get(0);
        int steps = 24;
        float[][] fp32 = greedy(m, prompt, steps, CpuPrecision.FP32, null);
        int[] path = new int[steps];
        for (int s = 0; s < steps; s++) {
            path[s] = LogSoftmax.argmax(fp32[s], 0, m.vocabSize());
        }
        float[][] bf16x3 = greedy(m, prompt, steps, CpuPrecision.BF16X3, path);
        double d = 0;
        for (int s = 0; s <= steps; s++) {
            for (int v = 0; v < m.vocabSize(); v++) {
                d = Math.max(d, Math.abs(fp32[s][v] - bf16x3[s][v]));
            }
            if (s < steps) {
                assertTrue(LogSoftmax.argmax(bf16x3[s], 0, m.vocabSize()) == path[s], "argmax at step " + s);
            }
        }
        System.out.printf("decode bf16x3 vs fp32, %d steps: max |dlogit| %.3g%n", steps, d);
        assertTrue(d <= 1e-4, "bf16x3 vs fp32 max |d logit| " + d);
    }

    /** The logits after the prompt and after each of steps tokens (path's, or the argmax where path is null). */
    static float[][] greedy(DeepseekV3Model m, int[] prompt, int steps, CpuPrecision p, int[] path) {
        float[][] out = new float[steps + 1][];
        try (CpuOps ops = new CpuOps(2, p)) {
            KvCache[] c = {new KvCache(m.config(), prompt.length + steps)};
            out[0] = DecodeTest.prefill(m, ops, List.of(prompt), c);
            for (int s = 0; s < steps; s++) {
                int next = path != null ? path[s] : LogSoftmax.argmax(out[s], 0, m.vocabSize());
                out[s + 1] = Arrays.copyOf(DecodeTest.decode(m, ops, new int[] {next}, c), m.vocabSize());
            }
        }
        return out;
    }
}
