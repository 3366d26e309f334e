package dev.scorch.engine.backend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.GemmPrecision;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The plans gpu-budget --plan prints, from the published configs in conf/examples: parameter counts against the
 * published totals, checkpoint bytes against hand arithmetic, and every plan's invariants.
 */
class GpuPlanTest {
    static final List<String> MODELS =
            List.of("kimi-k2-instruct", "kimi-k2-thinking", "deepseek-v3", "moonlight-16b-a3b");

    static ModelConfig config(String name) {
        return ModelConfig.read(Path.of("..", "conf", "examples", name, "config.json"));
    }

    static GpuPlan.Settings settings(double gb) {
        return new GpuPlan.Settings((long) (gb * 1e9), 8, 0.05, 1_000_000_000L, 4096);
    }

    static void near(double published, long counted, double tolerance, String what) {
        assertTrue(Math.abs(counted - published) <= tolerance * published, what + ": " + counted + " vs " + published);
    }

    @Test
    void parameterCountsMatchThePublishedTotals() {
        // Exact: embedding, 61 (27) blocks and lm_head as config.json declares them; DeepSeek-V3's MTP layer (layer 61,
        // the 14B of its published 685B) is not a layer the model runs, so not counted.
        ModelConfig k2 = config("kimi-k2-instruct");
        ModelConfig v3 = config("deepseek-v3");
        ModelConfig moon = config("moonlight-16b-a3b");
        assertEquals(1_026_408_232_448L, WeightLayout.parameters(k2));
        assertEquals(32_861_500_928L, WeightLayout.activeParameters(k2));
        assertEquals(WeightLayout.parameters(k2), WeightLayout.parameters(config("kimi-k2-thinking")));
        assertEquals(671_026_419_200L, WeightLayout.parameters(v3));
        assertEquals(37_552_297_472L, WeightLayout.activeParameters(v3));
        assertEquals(15_960_110_208L, WeightLayout.parameters(moon));
        assertEquals(2_914_776_192L, WeightLayout.activeParameters(moon));
        // Published: DeepSeek-V3 671B total, 37B active (a token reads one embedding row, so the table is not active).
        near(671e9, WeightLayout.parameters(v3), 0.001, "DeepSeek-V3 total");
        long v3Embedding = (long) v3.vocabSize() * v3.hiddenSize();
        near(37e9, WeightLayout.activeParameters(v3) - v3Embedding, 0.015, "DeepSeek-V3 active"); // 36.6B
        // Kimi K2's report: 1.04T total, 32B active; the config's tensors count 1.026T (1.3% under; Moonshot's figure
        // is rounded from a count this file does not show), 31.7B active without the embedding table.
        near(1.04e12, WeightLayout.parameters(k2), 0.015, "Kimi K2 total");
        long k2Embedding = (long) k2.vocabSize() * k2.hiddenSize();
        near(32e9, WeightLayout.activeParameters(k2) - k2Embedding, 0.01, "Kimi K2 active");
        // Moonlight-16B-A3B: 16B total, 3B active (the name's rounding: 2.91B with the embedding table).
        near(16e9, WeightLayout.parameters(moon), 0.01, "Moonlight total");
        near(3e9, WeightLayout.activeParameters(moon), 0.03, "Moonlight active");
    }

    @Test
    void checkpointBytesAreTheHandArithmetic() {
        // Kimi-K2-Instruct, a MoE layer: FP8 linears, 1 byte a weight + an fp32 scale per 128 x 128 block.
        long qA = 1536L * 7168 + 12 * 56 * 4;
        long qB = 12288L * 1536 + 96 * 12 * 4;
        long kvA = 576L * 7168 + 5 * 56 * 4;
        long kvB = 16384L * 512 + 128 * 4 * 4;
        long o = 7168L * 8192 + 56 * 64 * 4;
        long norms = (7168 + 7168 + 1536 + 512) * 2L; // BF16
        long router = 384L * 7168 * 2 + 384 * 4; // BF16 gate, fp32 e_score_correction_bias
        long expertMatrix = 2048L * 7168 + 16 * 56 * 4; // gate, up and down alike
        long k2Layer = qA + qB + kvA + kvB + o + norms + router + 385 * 3 * expertMatrix; // 384 routed + 1 shared
        CheckpointBytes k2 = CheckpointBytes.of(config("kimi-k2-instruct"));
        assertEquals(k2Layer, k2.layers()[1]);
        assertEquals(k2Layer, k2.layers()[60]);
        assertEquals(163840L * 7168 * 2, k2.embedding());
        assertEquals(163840L * 7168 * 2 + 7168 * 2, k2.head());

        // Kimi-K2-Thinking: the routed experts INT4 (4 bits in int32 words, a BF16 scale per 32, I64[2] shape), the
        // rest BF16.
        long attention = (1536L * 7168 + 12288L * 1536 + 576L * 7168 + 16384L * 512 + 7168L * 8192) * 2;
        long int4Matrix = 2048L * (7168 / 8) * 4 + 2048L * (7168 / 32) * 2 + 16; // [2048, 7168]; [7168, 2048] alike
        assertEquals(7168L * (2048 / 8) * 4 + 7168L * (2048 / 32) * 2 + 16, int4Matrix);
        long thinkingLayer = attention + norms + router + 3 * 2048L * 7168 * 2 + 384 * 3 * int4Matrix;
        CheckpointBytes thinking = CheckpointBytes.of(config("kimi-k2-thinking"));
        assertEquals(thinkingLayer, thinking.layers()[1]);
        // The dense layer 0 (ignored by the quantization: BF16).
        assertEquals(attention + norms + 3 * 18432L * 7168 * 2, thinking.layers()[0]);

        // Moonlight: all BF16 but the router bias.
        CheckpointBytes moon = CheckpointBytes.of(config("moonlight-16b-a3b"));
        ModelConfig m = config("moonlight-16b-a3b");
        assertEquals(2 * WeightLayout.parameters(m) + 2L * 26 * 64, moon.total());
    }

    @Test
    void everyPlanPlacesEachLayerOnceInOrderWithinEachGpu() {
        for (String name : MODELS) {
            ModelConfig c = config(name);
            for (double gb : new double[] {80, 141}) {
                GpuPlan.Settings s = settings(gb);
                GpuPlan p = GpuPlan.of(c, GemmPrecision.BF16X3, s);
                String what = name + " on " + gb + " GB";
                int next = 0;
                for (int g = 0; g < p.gpus(); g++) {
                    GpuPlan.Stage st = p.stages().get(g);
                    assertEquals(g, st.gpu(), what);
                    assertEquals(g / 8, st.node(), what);
                    assertEquals(next, st.firstLayer(), what + ": GPU " + g + " starts where the previous ended");
                    next = st.endLayer();
                    assertEquals(g == 0, st.embedding(), what);
                    assertEquals(g == p.gpus() - 1, st.head(), what);
                    long weights = p.weights().layers(st.firstLayer(), st.endLayer())
                            + (st.embedding() ? p.weights().embedding() : 0)
                            + (st.head() ? p.weights().head() : 0);
                    assertEquals(weights, st.weightBytes(), what);
                    long used = weights + p.scratchBytes() + p.kvTokens() * st.layers() * p.kvBytesPerTokenLayer();
                    assertTrue(used <= s.engineBytes(g), what + ": GPU " + g + " over budget");
                    assertEquals(
                            s.gpuBytes()
                                    - (g % 8 == 0 ? (long) (0.05 * s.gpuBytes()) : 0)
                                    - 1_000_000_000L
                                    - (512L << 20),
                            s.engineBytes(g));
                    assertTrue(p.batchCap() >= s.batchTokens(), what);
                }
                assertEquals(c.numHiddenLayers(), next, what + ": every layer placed");
                assertTrue(p.gpus() <= p.nodes() * 8 && p.gpus() > (p.nodes() - 1) * 8, what);
                // The fewest GPUs: the first gpusNeeded GPUs, packed in order, leave none of the layers over.
                assertTrue(p.gpusNeeded() <= p.nodes() * 8 && p.gpusNeeded() > (p.nodes() - 1) * 8, what);
            }
        }
    }

    @Test
    void aGpuTooSmallForOneLayerHasNoPlan() {
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> GpuPlan.of(config("kimi-k2-instruct"), GemmPrecision.BF16X3, settings(24)));
        assertTrue(
                e.getMessage().startsWith("no GPU of 24.0 GB holds even one stage: the largest layer is 17.07 GB"),
                e.getMessage());
    }
}
