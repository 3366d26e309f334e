package dev.scorch.engine.demo;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.engine.testing.DemoModels;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The demo model's weight scales give usable outputs: logits spread out, and greedy text that is not one repeated token. */
class DemoModelOutputTest {
    @Test
    void logitsAreSpreadAndGreedyOutputVaries() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        try (CpuOps ops = new CpuOps(2)) {
            Scorer scorer = new Scorer(m.on(ops));
            int[] tokens = {1, 2, 3, 4, 5};
            int[] generated = new int[24];
            for (int step = 0; step < generated.length; step++) {
                SequenceScore s = scorer.score(List.of(new ScoreRequest(tokens, tokens.length, 0, LogitsMode.LAST)))
                        .get(0);
                float[] logits = s.logits()[0];
                double mean = 0;
                double sq = 0;
                for (float v : logits) {
                    mean += v;
                    sq += v * v;
                }
                mean /= logits.length;
                double std = Math.sqrt(sq / logits.length - mean * mean);
                assertTrue(std > 0.5 && std < 20, "logit std " + std + " at step " + step);
                generated[step] = s.argmax()[tokens.length - 1];
                tokens = Arrays.copyOf(tokens, tokens.length + 1);
                tokens[tokens.length - 1] = generated[step];
            }
            long distinct = Arrays.stream(generated).distinct().count();
            assertTrue(
                    distinct >= 4,
                    "greedy output " + Arrays.toString(generated) + " has only " + distinct + " distinct tokens");
        }
    }
}
