package dev.scorch.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.backend.GpuMemoryBudget;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.jobs.ScorchCli;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** gpu-budget: the arithmetic of conf/gpu-cluster.conf from config.json alone, exit 1 when the model does not fit. */
class GpuBudgetCommandTest {
    static final Path CONFIG = Path.of("..", "conf", "examples", "deepseekv3-16b");

    static String[] run(int expectedExit, String... args) {
        PrintStream old = System.out;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        System.setOut(new PrintStream(buf, true, StandardCharsets.UTF_8));
        int rc;
        try {
            rc = ScorchCli.run("gpu-budget", args);
        } finally {
            System.setOut(old);
        }
        String out = buf.toString(StandardCharsets.UTF_8);
        assertEquals(expectedExit, rc, out);
        return out.split("\n");
    }

    @Test
    void theConfsExampleFitsAnH100AndReportsItsLargestBatch() {
        String[] lines = run(0, "--model", CONFIG.toString(), "--gpu-gb", "80");
        GpuMemoryBudget b =
                GpuMemoryBudget.of(ModelConfig.read(CONFIG.resolve("config.json")), GemmPrecision.BF16X3, false);
        assertTrue(lines[0].contains("weights 29.73 GiB"), lines[0]);
        assertTrue(
                lines[1].startsWith("engine needs 29.73 GiB weights + 12.85 GiB activations (16384 tokens)"), lines[1]);
        assertTrue(
                lines[1].contains("the GPU has 74.51 GiB, the RAPIDS pool takes 22.35 GiB: 8.13 GiB to spare"),
                lines[1]);
        int fit = b.maxBatchTokens(80_000_000_000L - 24_000_000_000L - 1_000_000_000L);
        assertEquals(String.format("largest batch that fits: %,d tokens", fit), lines[2].trim());
    }

    @Test
    void aBatchTooBigForTheGpuExitsOne() {
        String[] lines = run(1, "--model", CONFIG.toString(), "--gpu-gb", "40", "--gpu-precision", "fp32");
        assertTrue(lines[1].contains(": short by "), lines[1]);
    }
}
