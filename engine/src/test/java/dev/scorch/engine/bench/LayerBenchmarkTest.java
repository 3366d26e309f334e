package dev.scorch.engine.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.GpuStages;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.runtime.PackedBatch;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.IntConsumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The per-layer clock: called at every layer boundary in order, changing no bit, on the CPU engine and HostDevice. */
class LayerBenchmarkTest {
    @TempDir
    Path tmp;

    @Test
    void clocksEveryLayerOnBothBackends() throws Exception {
        Path dir = tmp.resolve("model");
        ModelConfig c = new DemoModelWriter(DemoPreset.TINY, false, true, 3).write(dir);
        int layers = c.numHiddenLayers();
        assertTrue(layers >= 2 && !c.isMoeLayer(0) && c.isMoeLayer(layers - 1), "a dense and a MoE layer");
        PackedBatch batch = PackedBatch.of(List.of(new int[] {1, 5, 9, 2}, new int[] {7, 3}));
        DeepseekV3Model m = DeepseekV3Model.load(dir);
        try (CpuOps ops = new CpuOps(1)) {
            clocksEveryLayer(m.on(ops), batch);
        }
        try (GpuModel g =
                GpuModel.load(new ModelWeights(Checkpoint.open(dir), c), new HostDevice(), GemmPrecision.BF16X3)) {
            clocksEveryLayer(g, batch);
        }
    }

    private static void clocksEveryLayer(GpuStages model, PackedBatch batch) {
        ModelConfig c = model.config();
        int layers = c.numHiddenLayers();
        float[] plain = hidden(model, batch, null);
        List<Integer> seen = new ArrayList<>();
        float[] clocked = hidden(model, batch, seen::add);
        assertEquals(List.of(0, 1, 2, 3, 4, 5, 6, 7, 8, 9).subList(0, layers + 1), seen);
        assertArrayEquals(plain, clocked);

        LayerBenchmark.Result r = LayerBenchmark.run(model, 2, 8, 0, 1, 1, 2, 0);
        assertEquals(layers, r.layerSeconds().length);
        for (double s : r.layerSeconds()) {
            assertTrue(s > 0, Arrays.toString(r.layerSeconds()));
        }
        assertTrue(r.restSeconds() >= 0 && r.decodeStepSeconds() > 0, r.toString());
        assertEquals(r.layerSeconds()[0], r.meanLayerSeconds(c, false));
    }

    /** The final-normed hidden states [T, hidden] of batch, boundary (or null) called at every layer boundary. */
    private static float[] hidden(GpuStages model, PackedBatch batch, IntConsumer boundary) {
        float[] out = new float[batch.numTokens() * model.config().hiddenSize()];
        model.run(
                List.of(new GpuStages.Micro(batch, null, null, boundary)),
                (micro, last, pass, h) -> last.device().read(h, out, 0, out.length));
        return out;
    }
}
