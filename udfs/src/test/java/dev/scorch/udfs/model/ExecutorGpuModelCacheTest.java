package dev.scorch.udfs.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.gpu.GemmPrecision;
import dev.scorch.engine.gpu.GpuScorer;
import dev.scorch.engine.gpu.HostDevice;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The executor cache's GPU models: one per (content hash, GPU ordinal, precision), loaded from the CPU model's
 * folder and shared by every later caller. HostDevice stands in for the GPU.
 */
class ExecutorGpuModelCacheTest {
    @TempDir
    static Path tmp;

    static ModelSource source;

    @BeforeAll
    static void writeModel() throws IOException {
        Path model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 11).write(model);
        source = new SharedPathSource(model.toString(), ModelManifest.of(model));
    }

    @Test
    void oneGpuModelPerHashOrdinalAndPrecisionSharedByLaterCallers() {
        List<Integer> opened = new CopyOnWriteArrayList<>();
        int loads = ExecutorModelCache.gpuLoads();
        GpuScorer a = ExecutorModelCache.gpuScorer(source, 0, GemmPrecision.FP32, o -> {
            opened.add(o);
            return new HostDevice();
        });
        GpuScorer again = ExecutorModelCache.gpuScorer(source, 0, GemmPrecision.FP32, o -> {
            opened.add(o);
            return new HostDevice();
        });
        assertSame(a, again);
        GpuScorer otherPrecision = ExecutorModelCache.gpuScorer(source, 0, GemmPrecision.BF16, o -> {
            opened.add(o);
            return new HostDevice();
        });
        GpuScorer otherGpu = ExecutorModelCache.gpuScorer(source, 1, GemmPrecision.FP32, o -> {
            opened.add(o);
            return new HostDevice();
        });
        assertNotSame(a, otherPrecision);
        assertNotSame(a, otherGpu);
        assertEquals(List.of(0, 0, 1), opened, "a device is opened once per GPU model, on its ordinal");
        assertEquals(loads + 3, ExecutorModelCache.gpuLoads());
        assertEquals(GemmPrecision.BF16, otherPrecision.model().precision());

        // The GPU model is the CPU model's checkpoint: fp32 scores agree with the CPU engine's.
        LoadedModel cpu = ExecutorModelCache.load(source);
        List<ScoreRequest> reqs = List.of(new ScoreRequest(new int[] {3, 70, 200, 9, 41}, 1, 0, LogitsMode.NONE));
        List<SequenceScore> want;
        try (CpuOps ops = new CpuOps(1)) {
            want = new Scorer(cpu.model(), ops).score(reqs);
        }
        SequenceScore got = a.score(reqs).get(0);
        assertEquals(want.get(0).sumLogprob(), got.sumLogprob(), 1e-3);

        // Evicting the model closes its GPU copies; the next caller loads a fresh one.
        assertTrue(ExecutorModelCache.evict(source.manifest().contentHash()));
        GpuScorer fresh = ExecutorModelCache.gpuScorer(source, 0, GemmPrecision.FP32, o -> new HostDevice());
        assertNotSame(a, fresh);
        ExecutorModelCache.evict(source.manifest().contentHash());
    }
}
