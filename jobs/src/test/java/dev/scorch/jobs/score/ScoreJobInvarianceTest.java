package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.jobs.score.SparkTests.Scored;
import dev.scorch.jobs.score.SparkTests.Spec;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A row's scores depend only on the row: bit-identical whatever the partitioning, the engine batch budget,
 * the window size and the engine thread count.
 */
class ScoreJobInvarianceTest {
    @TempDir
    static Path tmp;

    static Path input;
    static int rows;

    @BeforeAll
    static void writeInput() {
        List<String> lines = new ArrayList<>();
        int id = 0;
        for (long[] p : SparkTests.goldenPrompts()) {
            lines.add(SparkTests.row(id++, p));
        }
        Random r = new Random(42);
        int[] lengths = {1, 2, 3, 5, 8, 13, 21, 34, 55, 63, 64, 65, 89, 127, 128, 129, 144, 17, 9, 40, 70, 31, 6, 100};
        for (int len : lengths) {
            lines.add(SparkTests.row(id++, SparkTests.randomTokens(r, len, 512)));
        }
        rows = lines.size();
        input = SparkTests.writeJsonl(tmp.resolve("in/rows.jsonl"), lines);
    }

    static Map<String, Scored> score(String name, Spec spec) {
        ScoreSummary s = spec.output(tmp.resolve(name)).run();
        assertEquals(rows, s.rows(), name);
        assertEquals(0, s.errors(), name);
        Map<String, Scored> out = SparkTests.readOutput(tmp.resolve(name), spec.outputFormat);
        assertEquals(rows, out.size(), name);
        return out;
    }

    static Spec spec() {
        return SparkTests.spec(SparkTests.conformanceModel(), input, tmp.resolve("unused"));
    }

    @Test
    void bitIdenticalAcrossPartitionsBudgetsWindowsAndThreads() {
        Map<String, Scored> base =
                score("p1-b4096-t1", spec().partitions(1).maxBatchTokens(4096).threads(1));
        Map<String, Scored> p4 =
                score("p4-b64-t2", spec().partitions(4).maxBatchTokens(64).threads(2));
        Map<String, Scored> p3 = score(
                "p3-b200-w5-t1",
                spec().partitions(3).maxBatchTokens(200).windowRows(5).threads(1));
        Map<String, Scored> p1 = score(
                "p1-b64-w7-t2-jsonl",
                spec().partitions(1).maxBatchTokens(64).windowRows(7).threads(2).outputFormat("jsonl"));
        for (Map.Entry<String, Scored> e : base.entrySet()) {
            Scored b = e.getValue();
            assertNull(b.error(), e.getKey());
            assertTrue(b.tokenLogprobs().size() == b.numTokens());
            for (var other : List.of(
                    Map.entry("4 partitions, 64-token batches, 2 threads", p4),
                    Map.entry("3 partitions, 200-token batches, 5-row windows", p3),
                    Map.entry("1 partition, 64-token batches, 7-row windows, 2 threads, JSONL out", p1))) {
                Scored o = other.getValue().get(e.getKey());
                assertNotNull(o, other.getKey() + ": id " + e.getKey() + " missing");
                assertEquals(b.tokenIds(), o.tokenIds(), other.getKey() + ": id " + e.getKey());
                // List<Float>.equals compares Float.equals: bit patterns, not a tolerance.
                assertEquals(
                        b.tokenLogprobs(), o.tokenLogprobs(), other.getKey() + ": token_logprobs of id " + e.getKey());
                assertEquals(
                        Double.doubleToLongBits(b.sum()),
                        Double.doubleToLongBits(o.sum()),
                        other.getKey() + ": sum_logprob of id " + e.getKey());
                assertEquals(b.mean(), o.mean(), other.getKey() + ": mean_logprob of id " + e.getKey());
                assertEquals(b.perplexity(), o.perplexity(), other.getKey() + ": perplexity of id " + e.getKey());
            }
        }
    }
}
