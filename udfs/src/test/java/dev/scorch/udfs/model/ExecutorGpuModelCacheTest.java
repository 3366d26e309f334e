package dev.scorch.udfs.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.backend.GpuPlan;
import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.IntFunction;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The executor cache's GPU models: one per (content hash, set of GPU ordinals, precision), loaded from the CPU model's
 * folder and shared by every later caller; a pipeline over several GPUs. HostDevice stands in for the GPUs.
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
        Scorer a = ExecutorModelCache.gpuScorer(source, 0, GemmPrecision.FP32, o -> {
            opened.add(o);
            return new HostDevice();
        });
        Scorer again = ExecutorModelCache.gpuScorer(source, 0, GemmPrecision.FP32, o -> {
            opened.add(o);
            return new HostDevice();
        });
        assertSame(a, again);
        Scorer otherPrecision = ExecutorModelCache.gpuScorer(source, 0, GemmPrecision.BF16, o -> {
            opened.add(o);
            return new HostDevice();
        });
        Scorer otherGpu = ExecutorModelCache.gpuScorer(source, 1, GemmPrecision.FP32, o -> {
            opened.add(o);
            return new HostDevice();
        });
        assertNotSame(a, otherPrecision);
        assertNotSame(a, otherGpu);
        assertEquals(List.of(0, 0, 1), opened, "a device is opened once per GPU model, on its ordinal");
        assertEquals(loads + 3, ExecutorModelCache.gpuLoads());
        assertEquals(GemmPrecision.BF16, otherPrecision.model().stage().precision());

        // The GPU model is the CPU model's checkpoint: fp32 scores agree with the CPU engine's.
        LoadedModel cpu = ExecutorModelCache.load(source);
        List<ScoreRequest> reqs = List.of(new ScoreRequest(new int[] {3, 70, 200, 9, 41}, 1, 0, LogitsMode.NONE));
        List<SequenceScore> want;
        try (CpuOps ops = new CpuOps(1)) {
            want = new Scorer(cpu.model().on(ops)).score(reqs);
        }
        SequenceScore got = a.score(reqs).get(0);
        assertEquals(want.get(0).sumLogprob(), got.sumLogprob(), 1e-3);

        // Evicting the model closes its GPU copies; the next caller loads a fresh one.
        assertTrue(ExecutorModelCache.evict(source.manifest().contentHash()));
        Scorer fresh = ExecutorModelCache.gpuScorer(source, 0, GemmPrecision.FP32, o -> new HostDevice());
        assertNotSame(a, fresh);
        ExecutorModelCache.evict(source.manifest().contentHash());
    }

    @Test
    void aTaskOwningSeveralGpusGetsAPipelineSharedByTasksOnTheSameGpus() {
        List<Integer> opened = new CopyOnWriteArrayList<>();
        IntFunction<Device> devices = o -> {
            opened.add(o);
            return new HostDevice();
        };
        int loads = ExecutorModelCache.gpuLoads();
        Scorer two = ExecutorModelCache.gpuScorer(source, List.of(0, 1), GemmPrecision.FP32, devices);
        Scorer sameSet = ExecutorModelCache.gpuScorer(source, List.of(1, 0), GemmPrecision.FP32, devices);
        Scorer three = ExecutorModelCache.gpuScorer(source, List.of(0, 1, 2), GemmPrecision.FP32, devices);
        Scorer otherTwo = ExecutorModelCache.gpuScorer(source, List.of(2, 3), GemmPrecision.FP32, devices);
        Scorer one = ExecutorModelCache.gpuScorer(source, List.of(0), GemmPrecision.FP32, devices);
        assertSame(two, sameSet, "the same GPUs in another order: the same pipeline");
        assertNotSame(two, three);
        assertNotSame(two, otherTwo);
        assertEquals(
                2, assertInstanceOf(GpuPipeline.class, two.stages()).stages().size());
        assertEquals(
                3, assertInstanceOf(GpuPipeline.class, three.stages()).stages().size());
        assertEquals(
                2,
                assertInstanceOf(GpuPipeline.class, otherTwo.stages()).stages().size());
        assertInstanceOf(GpuModel.class, one.stages(), "one GPU: a GpuModel, as before");
        assertEquals(List.of(0, 1, 0, 1, 2, 2, 3, 0), opened, "one device per GPU of each set, in ordinal order");
        assertEquals(loads + 4, ExecutorModelCache.gpuLoads());

        // The pipeline scores as the one-GPU model does, bit for bit (HostDevice's kernels: see GpuPipelineTest).
        List<ScoreRequest> reqs = List.of(
                new ScoreRequest(new int[] {3, 70, 200, 9, 41}, 1, 0, LogitsMode.NONE),
                new ScoreRequest(new int[] {8, 1, 77}, 1, 0, LogitsMode.NONE));
        List<SequenceScore> want = one.score(reqs);
        List<SequenceScore> got = three.score(reqs);
        for (int i = 0; i < reqs.size(); i++) {
            assertEquals(want.get(i).sumLogprob(), got.get(i).sumLogprob(), 0.0);
        }

        // Evicting closes every device of every pipeline; the next task loads afresh.
        ExecutorModelCache.evict(source.manifest().contentHash());
        assertNotSame(two, ExecutorModelCache.gpuScorer(source, List.of(0, 1), GemmPrecision.FP32, devices));
        ExecutorModelCache.evict(source.manifest().contentHash());
    }

    @Test
    void aGpuThatFailsToOpenFailsTheTaskNamingItsAddress() {
        List<Integer> closed = new CopyOnWriteArrayList<>();
        IntFunction<Device> devices = o -> {
            if (o == 2) {
                throw new IllegalStateException("cudaSetDevice(2): invalid device ordinal");
            }
            return closing(new HostDevice(), () -> closed.add(o));
        };
        int loads = ExecutorModelCache.gpuLoads();
        IllegalStateException e = assertThrows(
                IllegalStateException.class,
                () -> ExecutorModelCache.gpuScorer(source, List.of(0, 1, 2, 3), GemmPrecision.FP32, devices));
        assertEquals(
                "cannot open GPU 2 (one of the task's GPUs [0, 1, 2, 3]): cudaSetDevice(2): invalid device ordinal",
                e.getMessage());
        assertEquals(List.of(0, 1), closed, "the GPUs opened before it are closed");
        assertEquals(loads, ExecutorModelCache.gpuLoads());

        IllegalStateException alone = assertThrows(
                IllegalStateException.class,
                () -> ExecutorModelCache.gpuScorer(source, List.of(2), GemmPrecision.FP32, devices));
        assertEquals("cannot open GPU 2: cudaSetDevice(2): invalid device ordinal", alone.getMessage());

        // Nothing was cached: the next task on those GPUs tries again.
        Scorer later =
                ExecutorModelCache.gpuScorer(source, List.of(0, 1, 2, 3), GemmPrecision.FP32, o -> new HostDevice());
        assertEquals(4, later.stages().stages().size());
        ExecutorModelCache.evict(source.manifest().contentHash());
    }

    @Test
    void aPipelinesSplitCountsTheRapidsPoolAsGpuBudgetDoes() {
        List<Device> devs = List.of(new HostDevice(), new HostDevice());
        long total = devs.get(0).totalBytes();
        assertEquals(
                new GpuPlan.Settings(total, 2, 0, 0, GpuPipeline.MICRO_BATCH_TOKENS),
                ExecutorModelCache.pipelineSettings(devs, new SparkConf(false)),
                "no RAPIDS plugin: no pool, no RAPIDS reserve");
        SparkConf rapids = new SparkConf(false)
                .set("spark.plugins", "com.example.Other, com.nvidia.spark.SQLPlugin")
                .set("spark.rapids.memory.gpu.allocFraction", "0.1")
                .set("spark.rapids.memory.gpu.reserve", "2000m");
        assertEquals(
                new GpuPlan.Settings(total, 2, 0.1, 2000L << 20, GpuPipeline.MICRO_BATCH_TOKENS),
                ExecutorModelCache.pipelineSettings(devs, rapids));
        assertEquals(
                new GpuPlan.Settings(total, 2, 0.05, 1_000_000_000L, GpuPipeline.MICRO_BATCH_TOKENS),
                ExecutorModelCache.pipelineSettings(
                        devs, new SparkConf(false).set("spark.plugins", "com.nvidia.spark.SQLPlugin")),
                "unset: gpu-budget --plan's defaults");
    }

    /** dev, running onClose when closed. */
    static Device closing(HostDevice dev, Runnable onClose) {
        return (Device) Proxy.newProxyInstance(
                Device.class.getClassLoader(), new Class<?>[] {Device.class}, (p, m, args) -> {
                    if (m.getName().equals("close")) {
                        onClose.run();
                    }
                    try {
                        return m.invoke(dev, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }
}
