package dev.scorch.engine.scoring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.bench.PrefillBenchmark;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.testing.DemoModels;
import org.junit.jupiter.api.Test;

class ScorerTest {

    /** The CPU model's workspace stays from call to call: it grows to the largest batch scored and a smaller batch leaves it as it is. */
    @Test
    void workspaceGrowsToTheLargestBatchAndIsKept() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        try (CpuOps ops = new CpuOps(2)) {
            Scorer scorer = new Scorer(m.on(ops));
            assertEquals(0, scorer.stages().scratchBytes(), "before any batch");
            scorer.score(PrefillBenchmark.randomRequests(m.vocabSize(), 2, 40, 1));
            long small = scorer.stages().scratchBytes();
            assertTrue(small > 0, "after a 2 x 40 batch: " + small);
            scorer.score(PrefillBenchmark.randomRequests(m.vocabSize(), 4, 100, 2));
            long large = scorer.stages().scratchBytes();
            assertTrue(large > small, "a 4 x 100 batch grows it: " + small + " -> " + large);
            scorer.score(PrefillBenchmark.randomRequests(m.vocabSize(), 1, 10, 3));
            assertEquals(large, scorer.stages().scratchBytes(), "a 1 x 10 batch after it");
        }
    }
}
