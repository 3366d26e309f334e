package dev.scorch.udfs.pipeline;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.backend.GpuPlan;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.GemmPrecision;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * The stages' layer split: in proportion to the GPUs' room where every stage holds GPUs (uneven nodes get uneven
 * shares), evenly for HostDevice stages, and the same on every task from the exchanged devices.
 */
class StageSplitTest {
    private static final ModelConfig V3 =
            ModelConfig.read(Path.of("..", "conf", "examples", "deepseek-v3", "config.json"));
    private static final ModelConfig TINY =
            ModelConfig.read(Path.of("..", "testdata", "conformance", "tiny-k2-bf16", "model", "config.json"));
    /** No RAPIDS pool, no extra reserve: a GPU leaves the engine its memory less the CUDA reserve. */
    private static final Function<StageSplit.Devices, GpuPlan.Settings> PLAIN =
            d -> new GpuPlan.Settings(d.gpuBytes(), d.gpus(), 0, 0, 4096);

    @Test
    void layersGoInProportionToRoomByTheirBytes() {
        long[] ten = {10, 10, 10, 10, 10, 10};
        // Room 3 : 1 -> bytes 45 : 15: layers 0-3 (their middles at 5..35 of 60, below 45), then 4-5.
        assertArrayEquals(new int[] {4, 2}, StageSplit.proportional(ten, 0, 6, new long[] {30, 10}, 1));
        // Even room over layers of 1, 1, 1, 10, 10, 10 bytes: half is 16.5 of 33; layer 3's middle is at 8, layer 4's
        // at
        // 18.
        assertArrayEquals(
                new int[] {4, 2},
                StageSplit.proportional(new long[] {1, 1, 1, 10, 10, 10}, 0, 6, new long[] {1, 1}, 1));
        // Each stage gets at least one layer however lopsided the room; a GPU may get none.
        assertArrayEquals(new int[] {5, 1}, StageSplit.proportional(ten, 0, 6, new long[] {1000, 1}, 1));
        assertArrayEquals(new int[] {1, 5}, StageSplit.proportional(ten, 0, 6, new long[] {0, 5}, 1));
        assertArrayEquals(new int[] {0, 2, 2}, StageSplit.proportional(ten, 2, 6, new long[] {0, 10, 10}, 0));
        // HostDevice stages and mixed ones: evenly by count, the later devices taking the extra layers.
        assertArrayEquals(new int[] {1, 1, 2}, StageSplit.evenly(4, 3));
        assertArrayEquals(new int[] {1, 1, 0}, StageSplit.evenly(2, 3));
    }

    @Test
    void hostDeviceStagesSplitEvenly() {
        StageSplit.Devices host = new StageSplit.Devices(0, 0);
        assertEquals(
                "[[1], [1], [1]]",
                Arrays.deepToString(StageSplit.of(List.of(host, host, host), TINY, GemmPrecision.BF16X3, 64, PLAIN)));
        // A stage without GPUs makes the whole split even; a stage's GPUs then share its layers evenly too.
        assertEquals(
                "[[1, 0], [2]]",
                Arrays.deepToString(StageSplit.of(
                        List.of(new StageSplit.Devices(2, 80_000_000_000L), host),
                        TINY,
                        GemmPrecision.BF16X3,
                        64,
                        PLAIN)));
        assertEquals(
                "4 pipeline stages for 3 layers: each stage needs a layer",
                assertThrows(
                                IllegalArgumentException.class,
                                () -> StageSplit.of(
                                        List.of(host, host, host, host), TINY, GemmPrecision.BF16X3, 64, PLAIN))
                        .getMessage());
    }

    @Test
    void unevenNodesGetLayersByTheirGpusRoom() {
        // DeepSeek-V3 in FP8 (61 layers: 3 dense of 0.58 GB, 58 MoE of 11.51 GB; 669.5 GB) on a node of 8 x H200 (141
        // GB) and a node of 8 x H100 (80 GB). A GPU's room is its memory less the 0.54 GB CUDA reserve and a
        // 4,096-token
        // batch's scratch (11.3 GB): 129.2 GB an H200, 68.2 an H100, less the embedding (1.85 GB) on the first GPU and
        // the head (1.85 GB) on the last: 1,031.6 GB against 543.6 GB, 65.5 % of the room on the H200 node, 438.7 GB
        // of layers: 3 dense and 38 MoE layers (439.1 GB, the last one's middle below the share) against 20.
        int[][] split = StageSplit.of(
                List.of(new StageSplit.Devices(8, 141_000_000_000L), new StageSplit.Devices(8, 80_000_000_000L)),
                V3,
                GemmPrecision.BF16X3,
                4096,
                PLAIN);
        assertEquals(41, Arrays.stream(split[0]).sum(), Arrays.deepToString(split));
        assertEquals(20, Arrays.stream(split[1]).sum(), Arrays.deepToString(split));
        // Within a node the GPUs' room is even but for the embedding (1.9 GB, on the first) and the head (on the last),
        // and a layer counts by its bytes: 54.8 GB an H200, so the first takes the 3 dense layers and 5 MoE ones, the
        // others 4 or 5 MoE layers; 28.8 GB an H100: 2 or 3.
        assertEquals(8, split[0][0], Arrays.deepToString(split));
        for (int g = 1; g < 8; g++) {
            assertTrue(split[0][g] == 4 || split[0][g] == 5, Arrays.deepToString(split));
            assertTrue(split[1][g] == 2 || split[1][g] == 3, Arrays.deepToString(split));
        }
        // Two single-GPU nodes do not hold 671 GB: the first GPU that overflows is named.
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> StageSplit.of(
                        List.of(new StageSplit.Devices(1, 80_000_000_000L), new StageSplit.Devices(1, 80_000_000_000L)),
                        V3,
                        GemmPrecision.BF16X3,
                        4096,
                        PLAIN));
        assertTrue(e.getMessage().startsWith("pipeline stage 0: layers [0, "), e.getMessage());
        assertTrue(e.getMessage().endsWith("the stages' GPUs do not hold the model (see bin/scorch gpu-budget)"));
    }

    @Test
    void everyTaskComputesTheSameSplitFromTheExchange() throws Exception {
        // Three tasks with different GPUs each tell theirs through the (in-memory) allGather and split alone.
        List<StageSplit.Devices> mine = List.of(
                new StageSplit.Devices(8, 141_000_000_000L),
                new StageSplit.Devices(4, 141_000_000_000L),
                new StageSplit.Devices(8, 80_000_000_000L));
        TestRings.Exchange ex = new TestRings.Exchange(3);
        List<CompletableFuture<int[][]>> tasks = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            int index = i;
            tasks.add(CompletableFuture.supplyAsync(() -> {
                try {
                    return StageSplit.of(
                            StageSplit.exchange(ex.of(index), mine.get(index)), V3, GemmPrecision.BF16X3, 4096, PLAIN);
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }));
        }
        int[][] first = tasks.get(0).get();
        for (CompletableFuture<int[][]> t : tasks) {
            assertEquals(Arrays.deepToString(first), Arrays.deepToString(t.get()));
        }
        assertEquals(8, first[0].length);
        assertEquals(4, first[1].length);
        assertEquals(61, Arrays.stream(first).flatMapToInt(Arrays::stream).sum());
        assertTrue(Arrays.stream(first[1]).sum() < Arrays.stream(first[0]).sum(), "half the GPUs, fewer layers");
    }
}
