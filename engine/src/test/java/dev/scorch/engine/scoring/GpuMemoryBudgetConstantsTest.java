package dev.scorch.engine.scoring;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.scorch.engine.backend.GpuMemoryBudget;
import dev.scorch.engine.model.GpuStages;
import org.junit.jupiter.api.Test;

/** GpuMemoryBudget mirrors the logits chunk a scorer takes on a device (GpuStages); this keeps the two equal. */
class GpuMemoryBudgetConstantsTest {
    @Test
    void logitsChunkIsScorers() {
        assertEquals(GpuStages.LOGITS_CHUNK_FLOATS, GpuMemoryBudget.LOGITS_CHUNK_FLOATS);
    }
}
