package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.score.SparkTests.Scored;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The score job on local[2] over a Kimi-K2-Thinking-style INT4 checkpoint and its K2.5-wrapped twin (the same tensors
 * under language_model., a vision tower beside them): every row's scores identical, bit for bit, and identical across
 * partitions, batch budgets and thread counts as for BF16.
 */
class ScoreJobQuantizedTest {
    @TempDir
    static Path tmp;

    static Path int4;
    static Path k25;
    static Path bf16;
    static Path input;
    static int rows;

    @BeforeAll
    static void models() throws IOException {
        int4 = tmp.resolve("int4");
        k25 = tmp.resolve("int4-k25");
        bf16 = tmp.resolve("bf16");
        new DemoModelWriter(DemoPreset.TINY, DemoModelWriter.Weights.INT4, true, false, 4242).write(int4);
        new DemoModelWriter(DemoPreset.TINY, DemoModelWriter.Weights.INT4, true, true, 4242).write(k25);
        new DemoModelWriter(DemoPreset.TINY, DemoModelWriter.Weights.BF16, true, false, 4242).write(bf16);
        List<String> lines = new ArrayList<>();
        Random r = new Random(25);
        int id = 0;
        for (int len : new int[] {1, 2, 7, 33, 64, 65, 100, 130}) {
            lines.add(SparkTests.row(id++, SparkTests.randomTokens(r, len, 512)));
        }
        lines.add("{\"id\":\"text\",\"prompt\":\"The quick brown fox\",\"continuation\":\" jumps over the lazy dog\"}");
        lines.add("{\"id\":\"oov\",\"token_ids\":[1,99999]}");
        rows = lines.size();
        input = SparkTests.writeJsonl(tmp.resolve("in/rows.jsonl"), lines);
    }

    static Map<String, Scored> score(Path model, String name, int partitions, int maxBatchTokens, int threads) {
        Path out = tmp.resolve(name);
        ScoreSummary s = SparkTests.spec(model, input, out)
                .partitions(partitions)
                .maxBatchTokens(maxBatchTokens)
                .threads(threads)
                .topK(3)
                .run();
        assertEquals(rows, s.rows(), name);
        assertEquals(1, s.errors(), name + ": the out-of-vocabulary row");
        Map<String, Scored> got = SparkTests.readOutput(out, "parquet");
        assertEquals(rows, got.size(), name);
        return got;
    }

    static void assertSameScores(Map<String, Scored> a, Map<String, Scored> b, String what) {
        assertEquals(a.keySet(), b.keySet(), what);
        for (String id : a.keySet()) {
            Scored x = a.get(id);
            Scored y = b.get(id);
            assertEquals(x.error(), y.error(), what + ": error of " + id);
            assertEquals(x.tokenIds(), y.tokenIds(), what + ": token_ids of " + id);
            // List<Float>.equals compares bit patterns.
            assertEquals(x.tokenLogprobs(), y.tokenLogprobs(), what + ": token_logprobs of " + id);
            assertEquals(
                    x.sum() == null ? null : Double.doubleToLongBits(x.sum()),
                    y.sum() == null ? null : Double.doubleToLongBits(y.sum()),
                    what + ": sum_logprob of " + id);
            assertEquals(x.perplexity(), y.perplexity(), what + ": perplexity of " + id);
        }
    }

    @Test
    void int4AndItsK25TwinScoreIdenticallyAcrossLayouts() {
        Map<String, Scored> base = score(int4, "int4-p2", 2, 4096, 1);
        Map<String, Scored> wrapped = score(k25, "k25-p2", 2, 4096, 1);
        assertSameScores(base, wrapped, "INT4 vs its K2.5 twin");
        assertSameScores(
                base, score(k25, "k25-p3-b64-t2", 3, 64, 2), "K2.5 twin, 3 partitions, 64-token batches, 2 threads");
        assertSameScores(
                base, score(int4, "int4-p1-b200-t2", 1, 200, 2), "INT4, 1 partition, 200-token batches, 2 threads");
        assertNull(base.get("text").error(), base.get("text").error());
        assertTrue(base.get("oov").error().contains("99999"), base.get("oov").error());
        assertNotEquals(base.get("text").model(), wrapped.get("text").model(), "two folders, two models");
        // The INT4 model is a quantisation of the BF16 one of the same seed, not the same model.
        Map<String, Scored> plain = score(bf16, "bf16-p2", 2, 4096, 1);
        assertNotEquals(plain.get("6").tokenLogprobs(), base.get("6").tokenLogprobs());
    }
}
