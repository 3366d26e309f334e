package dev.scorch.jobs.generate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.generate.GenerateJobTest.Generated;
import dev.scorch.jobs.generate.GenerateJobTest.Spec;
import dev.scorch.jobs.score.SparkTests;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The generate job on local[2] over a Kimi-K2-Thinking-style INT4 checkpoint and its K2.5-wrapped twin: greedy and
 * seeded-sampled completions (token ids, text, log-probs) identical between the two and across partitions, batch
 * sizes and threads.
 */
class GenerateJobQuantizedTest {
    @TempDir
    static Path models;

    @TempDir
    Path tmp;

    static Path int4;
    static Path k25;

    @BeforeAll
    static void write() throws IOException {
        int4 = models.resolve("int4");
        k25 = models.resolve("int4-k25");
        new DemoModelWriter(DemoPreset.TINY, DemoModelWriter.Weights.INT4, true, false, 4242).write(int4);
        new DemoModelWriter(DemoPreset.TINY, DemoModelWriter.Weights.INT4, true, true, 4242).write(k25);
    }

    Path input() {
        return SparkTests.writeJsonl(
                tmp.resolve("in.jsonl"),
                List.of(
                        "{\"id\":\"t1\",\"token_ids\":[5,17,300,42]}",
                        "{\"id\":\"t2\",\"token_ids\":[9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,1],\"seed\":99}",
                        "{\"id\":\"p1\",\"prompt\":\"The quick brown fox\"}",
                        "{\"id\":\"p2\",\"prompt\":\"Models write text and\",\"temperature\":0.3,\"max_new_tokens\":5}",
                        "{\"id\":\"c1\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello there\"}]}"));
    }

    Map<String, Generated> run(
            Path model, String name, boolean sampled, int partitions, int threads, int maxBatchSeqs) {
        Path out = tmp.resolve(name);
        Spec s = new Spec(model, input(), out);
        s.maxNewTokens = 10;
        s.logprobs = true;
        s.ignoreEos = true;
        s.partitions = partitions;
        s.threads = threads;
        s.maxBatchSeqs = maxBatchSeqs;
        if (sampled) {
            s.temperature = 0.9;
            s.topK = 50;
            s.topP = 0.95;
            s.seed = 7;
            s.n = 2;
        }
        s.run();
        return GenerateJobTest.read(out, "parquet");
    }

    static void assertSame(Map<String, Generated> a, Map<String, Generated> b, String what) {
        assertEquals(a.keySet(), b.keySet(), what);
        for (String k : a.keySet()) {
            Generated x = a.get(k);
            Generated y = b.get(k);
            assertNull(x.error(), what + ", " + k + ": " + x.error());
            assertEquals(x.tokenIds(), y.tokenIds(), what + ": tokens of " + k);
            assertEquals(x.completion(), y.completion(), what + ": text of " + k);
            assertEquals(x.logprobs(), y.logprobs(), what + ": log-probs of " + k);
            assertEquals(x.finishReason(), y.finishReason(), what + ": finish reason of " + k);
        }
    }

    @Test
    void greedyAndSampledCompletionsOfTheInt4ModelAndItsK25TwinAreIdentical() {
        Map<String, Generated> greedy = run(int4, "greedy-int4", false, 2, 1, 32);
        assertEquals(5, greedy.size());
        assertSame(greedy, run(k25, "greedy-k25", false, 2, 1, 32), "greedy, INT4 vs K2.5 twin");
        assertSame(
                greedy,
                run(k25, "greedy-k25-narrow", false, 1, 2, 1),
                "greedy, K2.5 twin, 1 partition, 1 sequence a batch, 2 threads");
        Map<String, Generated> sampled = run(int4, "sampled-int4", true, 3, 2, 32);
        assertEquals(10, sampled.size());
        assertSame(
                sampled,
                run(k25, "sampled-k25", true, 1, 1, 1),
                "sampled, INT4 (3 partitions) vs K2.5 twin (1 sequence a batch)");
        assertTrue(
                greedy.get("p1#0").completion() != null
                        && !greedy.get("p1#0").completion().isEmpty(),
                "text rows decode to text");
        assertEquals(10, greedy.get("t1#0").completionTokens());
        assertNotEquals(sampled.get("t1#0").tokenIds(), sampled.get("t1#1").tokenIds(), "two samples, two streams");
    }
}
