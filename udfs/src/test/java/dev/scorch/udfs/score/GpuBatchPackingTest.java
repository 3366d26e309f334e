package dev.scorch.udfs.score;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.runtime.TokenBudgetBatcher;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A GPU task packs its window into batches of at least the GPU target's tokens (ScorePartition.gpuBatchTokens raises
 * the CPU-sized budget to it): each batch is filled until the next row would pass the budget, and no row's scores
 * change a bit against batches of the CPU's small budget, on HostDevice (the CUDA backend's plain-Java twin).
 */
class GpuBatchPackingTest {
    @TempDir
    Path tmp;

    @Test
    void packsUpToTheTargetWithoutChangingABit() throws Exception {
        Path dir = tmp.resolve("model");
        ModelConfig config = new DemoModelWriter(DemoPreset.TINY, false, true, 5).write(dir);
        SplittableRandom rnd = new SplittableRandom(7);
        List<int[]> rows = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            int[] t = new int[2 + rnd.nextInt(30)];
            for (int j = 0; j < t.length; j++) {
                t[j] = rnd.nextInt(config.vocabSize());
            }
            rows.add(t);
        }
        List<Integer> window = new ArrayList<>();
        for (int i = 0; i < rows.size(); i++) {
            window.add(i);
        }
        try (GpuModel m =
                GpuModel.load(new ModelWeights(Checkpoint.open(dir), config), new HostDevice(), GemmPrecision.BF16X3)) {
            Scorer scorer = new Scorer(m);
            int small = ScorePartition.gpuBatchTokens(m, 40, 1); // the asked budget: rows one or two at a time
            int target = ScorePartition.gpuBatchTokens(m, 40, 200); // raised to the GPU target
            assertEquals(40, small);
            assertEquals(200, target);
            SequenceScore[] alone =
                    score(scorer, rows, TokenBudgetBatcher.batches(window, i -> rows.get(i).length, small));
            List<List<Integer>> packed = TokenBudgetBatcher.batches(window, i -> rows.get(i).length, target);
            for (int b = 0; b + 1 < packed.size(); b++) { // every batch but the last is full: the next row would pass
                int tokens =
                        packed.get(b).stream().mapToInt(i -> rows.get(i).length).sum();
                int next = rows.get(packed.get(b + 1).get(0)).length;
                assertTrue(tokens <= target && tokens + next > target, "batch " + b + ": " + tokens + " + " + next);
            }
            assertTrue(packed.size() < 8, packed.size() + " batches"); // 40 rows of about 17 tokens: 4 of 200
            SequenceScore[] together = score(scorer, rows, packed);
            for (int i = 0; i < rows.size(); i++) {
                assertArrayEquals(alone[i].tokenLogprobs(), together[i].tokenLogprobs(), "row " + i);
                assertEquals(
                        Double.doubleToRawLongBits(alone[i].sumLogprob()),
                        Double.doubleToRawLongBits(together[i].sumLogprob()),
                        "row " + i);
            }
        }
    }

    private static SequenceScore[] score(Scorer scorer, List<int[]> rows, List<List<Integer>> batches) {
        SequenceScore[] out = new SequenceScore[rows.size()];
        for (List<Integer> batch : batches) {
            List<ScoreRequest> reqs = new ArrayList<>();
            for (int i : batch) {
                reqs.add(ScoreRequest.of(rows.get(i)));
            }
            List<SequenceScore> s = scorer.score(reqs, (int[][]) null);
            for (int b = 0; b < batch.size(); b++) {
                out[batch.get(b)] = s.get(b);
            }
        }
        return out;
    }
}
