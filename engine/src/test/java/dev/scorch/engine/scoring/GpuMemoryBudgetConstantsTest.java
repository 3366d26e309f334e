package dev.scorch.engine.scoring;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.scorch.engine.backend.GpuMemoryBudget;
import org.junit.jupiter.api.Test;

/** GpuMemoryBudget mirrors a package-private constant of GpuScorer; this keeps the two equal. */
class GpuMemoryBudgetConstantsTest {
    @Test
    void logitsChunkIsGpuScorers() {
        assertEquals(GpuScorer.LOGITS_CHUNK_FLOATS, GpuMemoryBudget.LOGITS_CHUNK_FLOATS);
    }
}
