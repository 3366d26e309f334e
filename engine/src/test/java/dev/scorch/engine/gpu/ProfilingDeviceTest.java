package dev.scorch.engine.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.testing.TestModels;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The profiler counts every device call of a forward pass; the counts pin down how many GEMMs a layer runs. */
class ProfilingDeviceTest {
    @Test
    void countsTheGemmsOfOneScoringPass() {
        Path dir = TestModels.conformanceModel();
        ModelConfig c = ModelConfig.read(dir.resolve("config.json"));
        ProfilingDevice prof = new ProfilingDevice(new HostDevice());
        try (GpuModel m = GpuModel.load(new ModelWeights(Checkpoint.open(dir), c), prof, GemmPrecision.FP32)) {
            int[][] routes = new int[2][];
            new GpuScorer(m).score(List.of(ScoreRequest.of(new int[] {1, 2, 3, 4, 5})), routes);
            // Per layer: qkv_a (stacked), q_b, kv_b, o_proj; a dense MLP runs gate_up + down; an MoE layer runs its
            // router
            // and the shared expert's two, and its routed experts as two grouped GEMMs (gate_up, down). Then lm_head
            // once.
            int expected = 0;
            int moe = 0;
            for (int l = 0; l < c.numHiddenLayers(); l++) {
                expected += 4;
                if (c.isMoeLayer(l)) {
                    expected += 1 + (c.nSharedExperts() > 0 ? 2 : 0);
                    moe++;
                } else {
                    expected += 2;
                }
            }
            expected += 1;
            assertEquals(expected, prof.stats().get("gemm").calls);
            assertEquals(2 * moe, prof.stats().get("gemmGrouped").calls);
            assertEquals(c.numHiddenLayers(), prof.stats().get("mlaAttention").calls);
            assertTrue(prof.stats().get("gemm").nanos > 0);
        }
    }
}
