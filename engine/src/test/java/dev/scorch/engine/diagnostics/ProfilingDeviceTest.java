package dev.scorch.engine.diagnostics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.generation.DecodingModel;
import dev.scorch.engine.generation.StageDecodingModel;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
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
        try (GpuModel m = GpuModel.load(new ModelWeights(Checkpoint.open(dir), c), prof.device(), GemmPrecision.FP32)) {
            int[][] routes = new int[2][];
            new Scorer(m).score(List.of(ScoreRequest.of(new int[] {1, 2, 3, 4, 5})), routes);
            // Per layer: qkv_a (stacked), q_b, kv_b, o_proj; a dense MLP runs gate_up + down; an MoE layer runs its
            // router and the shared expert's two, and its routed experts as two grouped GEMMs over all experts
            // (gate_up with SwiGLU, down) after one permutation. Then lm_head once.
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
            assertEquals(moe, prof.stats().get("moePermute").calls);
            assertEquals(moe, prof.stats().get("gemmExpertsSwiglu").calls);
            assertEquals(moe, prof.stats().get("gemmExperts").calls);
            assertNull(prof.stats().get("gemmGrouped"));
            assertEquals(c.numHiddenLayers(), prof.stats().get("mlaAttention").calls);
            assertTrue(prof.stats().get("gemm").nanos > 0);
        }
    }
    /**
     * A decode step attends in the absorbed form: one mlaDecode per layer and sequence, no prefill-form attention and no
     * kv_b_proj GEMM (whose rows would grow with the cache).
     */
    @Test
    void aDecodeStepRunsTheAbsorbedFormAndNoKvBProjGemm() {
        Path dir = TestModels.conformanceModel();
        ModelConfig c = ModelConfig.read(dir.resolve("config.json"));
        ProfilingDevice prof = new ProfilingDevice(new HostDevice());
        try (GpuModel m = GpuModel.load(new ModelWeights(Checkpoint.open(dir), c), prof.device(), GemmPrecision.FP32)) {
            StageDecodingModel d = new StageDecodingModel(m);
            DecodingModel.Cache[] caches = {d.newCache(16), d.newCache(16)};
            d.prefill(List.of(new int[] {1, 2, 3, 4, 5}, new int[] {9}), List.of(caches));
            prof.reset();
            d.decode(new int[] {6, 10}, caches);
            // Per layer: qkv_a (stacked), q_b, o_proj, then the MLP's or MoE's as above; lm_head once.
            int expected = 0;
            for (int l = 0; l < c.numHiddenLayers(); l++) {
                expected += 3 + (c.isMoeLayer(l) ? 1 + (c.nSharedExperts() > 0 ? 2 : 0) : 2);
            }
            expected += 1;
            assertEquals(expected, prof.stats().get("gemm").calls);
            assertEquals(2 * c.numHiddenLayers(), prof.stats().get("mlaDecode").calls);
            assertNull(prof.stats().get("mlaAttention"));
        }
    }
}
