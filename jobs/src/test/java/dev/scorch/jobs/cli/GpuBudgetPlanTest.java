package dev.scorch.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.jobs.JobConfig;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * gpu-budget --plan for the four published configs in conf/examples on 8 x H100 and 8 x H200 nodes: GPUs, nodes, the
 * split and KV-cache tokens exactly, and conf/gpu-cluster-1node.conf and -2node.conf hold what the plans print.
 */
class GpuBudgetPlanTest {
    static String[] plan(String model, String gpu) {
        return GpuBudgetCommandTest.run(0, "--model", "../conf/examples/" + model, "--plan", "--gpu", gpu);
    }

    /** The plan's "needed" line, its split column and its KV-cache line. */
    static void assertPlan(String model, String gpu, String needed, String split, String kvTokens) {
        String[] lines = plan(model, gpu);
        String all = String.join("\n", lines);
        assertTrue(lines[1].contains(needed), all);
        int table = Arrays.asList(lines).indexOf("node gpu  layers            weights GB  KV tokens");
        StringBuilder got = new StringBuilder();
        for (int i = table + 1; lines[i].startsWith(" "); i++) {
            got.append(got.length() == 0 ? "" : " ").append(lines[i].trim().split(" +")[2]);
        }
        assertEquals(split, got.toString(), all);
        assertTrue(all.contains("KV-cache tokens left: " + kvTokens + " "), all);
    }

    @Test
    void kimiK2InstructFp8TakesTwoNodes() {
        // A MoE layer is 17.07 GB in FP8 (1 byte a weight, an fp32 scale per 128 x 128 block). An H100 leaves
        // 80 - 1.52 (reserves) - 10.08 (scratch of 4,096 tokens, the FP8 dequantisation tile included) = 68.4 GB:
        // 4 layers (68.27 GB); a node's first GPU 4 GB less (the RAPIDS pool): 3, or the embedding (2.35 GB), the
        // dense layer 0 (0.80 GB) and 3. Packed in order, 15 GPUs hold 4 + 7 x 4 + 3 + 6 x 4 = 59 of the 61 layers:
        // 16 GPUs, 2 nodes.
        assertPlan(
                "kimi-k2-instruct",
                "h100",
                "16 GPUs needed, 2 nodes; layers over 16 GPUs",
                "embed+0-3 4-7 8-11 12-15 16-19 20-23 24-27 28-31 32-34 35-38 39-42 43-46 47-50 51-54 55-58 59-60+head",
                "13,018");
        // An H200 leaves 129.6 GB: 7 layers (119.5 GB); 8 GPUs hold 56 of 61, so 9 GPUs, 2 nodes, split over 16.
        assertPlan(
                "kimi-k2-instruct",
                "h200",
                "9 GPUs needed, 2 nodes; layers over 16 GPUs",
                "embed+0-3 4-7 8-11 12-15 16-19 20-23 24-27 28-31 32-34 35-38 39-42 43-46 47-50 51-54 55-58 59-60+head",
                "6,631,941");
    }

    @Test
    void kimiK2ThinkingInt4() {
        assertPlan(
                "kimi-k2-thinking",
                "h100",
                "10 GPUs needed, 2 nodes; layers over 16 GPUs",
                "embed+0-3 4-7 8-11 12-15 16-19 20-23 24-27 28-31 32-34 35-38 39-42 43-46 47-50 51-54 55-58 59-60+head",
                "3,164,897");
        assertPlan(
                "kimi-k2-thinking",
                "h200",
                "5 GPUs needed, 1 node; layers over 8 GPUs",
                "embed+0-6 7-14 15-22 23-30 31-38 39-46 47-54 55-60+head",
                "2,763,316");
    }

    @Test
    void deepSeekV3Fp8() {
        assertPlan(
                "deepseek-v3",
                "h100",
                "12 GPUs needed, 2 nodes; layers over 16 GPUs",
                "embed+0-3 4-7 8-11 12-15 16-19 20-23 24-27 28-31 32-34 35-38 39-42 43-46 47-50 51-54 55-58 59-60+head",
                "2,290,564");
        assertPlan(
                "deepseek-v3",
                "h200",
                "6 GPUs needed, 1 node; layers over 8 GPUs",
                "embed+0-7 8-15 16-23 24-31 32-39 40-47 48-55 56-60+head",
                "1,956,491");
    }

    @Test
    void moonlightFitsOneGpuAndSaysSo() {
        for (String gpu : List.of("h100", "h200")) {
            String[] lines = plan("moonlight-16b-a3b", gpu);
            assertTrue(lines[1].contains("1 GPU needed, 1 node"), lines[1]);
            assertTrue(lines[3].startsWith("(one GPU holds the model: conf/gpu-cluster.conf"), lines[3]);
        }
        assertPlan(
                "moonlight-16b-a3b",
                "h100",
                "1 GPU needed",
                "embed+0-2 3-6 7-10 11-14 15-18 19-22 23-26 head",
                "7,586,858");
    }

    @Test
    void theConfFilesHoldWhatThePlansPrint() {
        for (String[] c :
                new String[][] {{"1node", "kimi-k2-thinking", "h200"}, {"2node", "kimi-k2-instruct", "h100"}}) {
            JobConfig conf = JobConfig.read(Path.of("..", "conf", "gpu-cluster-" + c[0] + ".conf"));
            String[] lines = plan(c[1], c[2]);
            int at = Arrays.asList(lines).indexOf("Spark settings (conf/gpu-cluster-" + c[0] + ".conf has the rest):");
            assertTrue(at > 0, String.join("\n", lines));
            for (int i = at + 1; i < lines.length; i++) {
                String[] kv = lines[i].split(" = ");
                Map<String, String> section = kv[0].startsWith("scorch.") ? conf.scorch() : conf.spark();
                String key = kv[0].startsWith("scorch.") ? kv[0].substring("scorch.".length()) : kv[0];
                assertEquals(kv[1], section.get(key), c[0] + ": " + kv[0]);
            }
        }
        JobConfig two = JobConfig.read(Path.of("..", "conf", "gpu-cluster-2node.conf"));
        assertEquals("8", two.spark().get("spark.executor.resource.gpu.amount"));
        assertEquals("8", two.spark().get("spark.task.resource.gpu.amount"));
        assertEquals("2", two.spark().get("spark.executor.instances"));
        assertEquals("false", two.spark().get("spark.dynamicAllocation.enabled"));
    }

    @Test
    void gpuNamesAndNumbers() {
        assertEquals(80, GpuBudgetCommand.gpuGb("H100"));
        assertEquals(141, GpuBudgetCommand.gpuGb("h200"));
        assertEquals(40.5, GpuBudgetCommand.gpuGb("40.5"));
    }
}
