package dev.scorch.udfs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.backend.GpuMemoryBudget;
import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.scoring.LogitsMode;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A CUDA task's batch budget: the asked one, capped by what the device's free memory holds beside the weights. */
class GpuBatchTokensTest {
    @TempDir
    Path tmp;

    /** HostDevice reporting free bytes as told: a GPU with little memory left. */
    static Device withFree(HostDevice host, AtomicLong free) {
        return (Device) Proxy.newProxyInstance(
                Device.class.getClassLoader(), new Class<?>[] {Device.class}, (p, m, args) -> {
                    if (m.getName().equals("freeBytes")) {
                        return free.get();
                    }
                    try {
                        return m.invoke(host, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    @Test
    void capsTheBatchAtWhatFreeMemoryHolds() throws IOException {
        Path dir = tmp.resolve("model");
        ModelConfig config = new DemoModelWriter(DemoPreset.TINY, false, true, 3).write(dir);
        AtomicLong free = new AtomicLong(Long.MAX_VALUE / 4);
        try (GpuModel m = GpuModel.load(
                new ModelWeights(Checkpoint.open(dir), config), withFree(new HostDevice(), free), GemmPrecision.BF16)) {
            assertEquals(4096, ScorePartition.gpuBatchTokens(m, 4096, 1), "plenty free: the asked budget");
            assertEquals(16384, ScorePartition.gpuBatchTokens(m, 4096, 16384), "plenty free: raised to the target");
            assertEquals(20000, ScorePartition.gpuBatchTokens(m, 20000, 16384), "an asked budget above the target");

            GpuMemoryBudget b =
                    GpuMemoryBudget.of(config, GemmPrecision.BF16, false); // HostDevice runs one GEMM per expert
            // Free memory plus the arena the model holds is exactly 300 tokens' scratch and the reserve.
            free.set(b.activationBytes(300)
                    + GpuMemoryBudget.DEFAULT_RESERVE_BYTES
                    - m.stage().scratchBytes());
            assertEquals(300, ScorePartition.gpuBatchTokens(m, 4096, 1));
            assertEquals(300, ScorePartition.gpuBatchTokens(m, 200, 16384), "the target, capped by the budget");
            assertEquals(200, ScorePartition.gpuBatchTokens(m, 200, 1), "a smaller asked budget stays");
            assertEquals(250, ScorePartition.gpuBatchTokens(m, 200, 250), "raised to a target the budget holds");
            // One token less free: the budget's cap follows it.
            free.set(free.get() - 1);
            assertEquals(299, ScorePartition.gpuBatchTokens(m, 4096, 16384));

            free.set(GpuMemoryBudget.DEFAULT_RESERVE_BYTES / 2);
            IllegalStateException e =
                    assertThrows(IllegalStateException.class, () -> ScorePartition.gpuBatchTokens(m, 4096, 1));
            assertTrue(e.getMessage().contains("less than a one-token batch needs"), e.getMessage());
        }
    }

    @Test
    void aPipelinesCapIsItsTightestStages() throws IOException {
        Path dir = tmp.resolve("model");
        ModelConfig config = new DemoModelWriter(DemoPreset.TINY, false, true, 3).write(dir);
        AtomicLong free0 = new AtomicLong(Long.MAX_VALUE / 4);
        AtomicLong free1 = new AtomicLong(Long.MAX_VALUE / 4);
        try (GpuPipeline p = GpuPipeline.load(
                new ModelWeights(Checkpoint.open(dir), config),
                List.of(withFree(new HostDevice(), free0), withFree(new HostDevice(), free1)),
                GemmPrecision.BF16,
                new int[] {config.numHiddenLayers(), 0})) {
            assertEquals(4096, ScorePartition.gpuBatchTokens(p, 4096, 1), "plenty free: the asked budget");
            GpuMemoryBudget b = GpuMemoryBudget.of(config, GemmPrecision.BF16, false);
            long stage1Scratch = p.stages().get(1).scratchBytes();
            // The second stage (lm_head alone) has room for 300 tokens of a whole model's pass, the first for 500.
            free1.set(b.activationBytes(300) + GpuMemoryBudget.DEFAULT_RESERVE_BYTES - stage1Scratch);
            free0.set(b.activationBytes(500)
                    + GpuMemoryBudget.DEFAULT_RESERVE_BYTES
                    - p.stages().get(0).scratchBytes());
            assertEquals(300, ScorePartition.gpuBatchTokens(p, 4096, 1));
            free0.set(b.activationBytes(200)
                    + GpuMemoryBudget.DEFAULT_RESERVE_BYTES
                    - p.stages().get(0).scratchBytes());
            assertEquals(200, ScorePartition.gpuBatchTokens(p, 4096, 16384), "now the first stage is the tightest");

            free1.set(GpuMemoryBudget.DEFAULT_RESERVE_BYTES / 2);
            IllegalStateException e =
                    assertThrows(IllegalStateException.class, () -> ScorePartition.gpuBatchTokens(p, 4096, 1));
            assertTrue(
                    e.getMessage()
                            .startsWith("pipeline stage of layers [" + config.numHiddenLayers() + ", "
                                    + config.numHiddenLayers() + ") on "),
                    e.getMessage());
            assertTrue(e.getMessage().contains("less than a one-token batch needs"), e.getMessage());
        }
    }

    @Test
    void optionsCarryBackendAndPrecisionToExecutors() throws Exception {
        ScoreOptions o = new ScoreOptions(512, 64, 2, LogitsMode.LAST, 1, BackendMode.CUDA, GemmPrecision.FP32, 8192);
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
            out.writeObject(o);
        }
        try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
            assertEquals(o, in.readObject());
        }
        ScoreOptions defaults = new ScoreOptions(512, 64, 0, LogitsMode.NONE, 1);
        assertEquals(BackendMode.AUTO, defaults.backend());
        assertEquals(GemmPrecision.parse(ScoreOptions.DEFAULT_GPU_PRECISION), defaults.gpuPrecision());
        assertEquals(ScoreOptions.DEFAULT_GPU_BATCH_TOKENS, defaults.gpuBatchTokens());
        assertThrows(
                IllegalArgumentException.class,
                () -> new ScoreOptions(512, 64, 0, LogitsMode.NONE, 1, BackendMode.AUTO, GemmPrecision.FP32, 0));
    }
}
