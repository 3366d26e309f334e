package dev.scorch.udfs.pipeline;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** The layer split and the task address a stage listens on. */
class PipelinePartitionTest {
    @Test
    void layersAreContiguousAndEven() {
        // Kimi K2 / DeepSeek-V3: 61 layers over two nodes, then three.
        assertArrayEquals(new int[] {0, 30}, PipelinePartition.layers(61, 2, 0));
        assertArrayEquals(new int[] {30, 61}, PipelinePartition.layers(61, 2, 1));
        assertArrayEquals(new int[] {0, 20}, PipelinePartition.layers(61, 3, 0));
        assertArrayEquals(new int[] {20, 40}, PipelinePartition.layers(61, 3, 1));
        assertArrayEquals(new int[] {40, 61}, PipelinePartition.layers(61, 3, 2));
        assertArrayEquals(new int[] {1, 2}, PipelinePartition.layers(3, 3, 1));
        assertEquals(
                "4 pipeline stages for 3 layers: each stage needs a layer",
                assertThrows(IllegalArgumentException.class, () -> PipelinePartition.layers(3, 4, 0))
                        .getMessage());
    }

    @Test
    void theHostOfATaskAddress() {
        assertEquals("10.0.0.7", PipelinePartition.host("10.0.0.7:41234"));
        assertEquals("node-2.cluster", PipelinePartition.host("node-2.cluster:7078"));
        assertEquals("fe80::1", PipelinePartition.host("[fe80::1]:7078"));
    }
}
