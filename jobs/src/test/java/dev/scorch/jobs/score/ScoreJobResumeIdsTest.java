package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * --resume keys on each input row's locator (file:row), not on its id: with ids repeated and null, a run that lost a
 * slice's part file is finished to every input row exactly once, each with a clean run's scores.
 */
class ScoreJobResumeIdsTest {
    @TempDir
    Path tmp;

    /** source_row -> "id|error|token_logprobs" of every output row; fails on a source_row seen twice. */
    static Map<String, String> rowsBySource(Path out) {
        Map<String, String> m = new HashMap<>();
        for (Row r : SparkTests.spark()
                .read()
                .parquet(out.toString())
                .select("source_row", "id", "error", "token_logprobs")
                .collectAsList()) {
            String prev = m.put(r.getString(0), r.get(1) + "|" + r.get(2) + "|" + r.get(3));
            if (prev != null) {
                throw new AssertionError("input row " + r.getString(0) + " appears twice in " + out);
            }
        }
        return m;
    }

    @Test
    void duplicateAndNullIdsAreResumedExactlyOnce() throws IOException {
        Path model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 11).write(model);
        // The review's input: 47 rows, 4 with the same id, 3 with a null id.
        Random r = new Random(5);
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < 47; i++) {
            String id = i < 4 ? "\"same\"" : i < 7 ? "null" : "\"r" + i + "\"";
            lines.add("{\"id\":" + id + ",\"token_ids\":"
                    + java.util.Arrays.toString(SparkTests.randomTokens(r, 5 + r.nextInt(20), 512)) + "}");
        }
        Path in = SparkTests.writeJsonl(tmp.resolve("in/rows.jsonl"), lines);

        Path clean = tmp.resolve("clean");
        SparkTests.spec(model, in, clean).run();
        Map<String, String> want = rowsBySource(clean);
        assertEquals(47, want.size(), "one row per input row");
        assertEquals(
                3, want.values().stream().filter(v -> v.contains("id is null")).count());

        Path out = tmp.resolve("out");
        SparkTests.spec(model, in, out).slices(4).run();
        // Lose the part files of one slice, as a crash between a slice's tasks would.
        Path lost;
        try (Stream<Path> s = Files.list(out)) {
            lost = s.filter(p -> p.getFileName().toString().startsWith("part-"))
                    .sorted()
                    .findFirst()
                    .orElseThrow();
        }
        long lostRows = SparkTests.spark().read().parquet(lost.toString()).count();
        Files.delete(lost);
        Files.deleteIfExists(lost.resolveSibling("." + lost.getFileName() + ".crc"));
        assertTrue(lostRows > 0);

        ScoreSummary resumed = SparkTests.spec(model, in, out).resume(true).run();
        assertEquals(47 - lostRows, resumed.skippedByResume());
        assertEquals(lostRows, resumed.rows(), "only the lost rows are redone");
        assertEquals(want, rowsBySource(out), "every input row once, with the clean run's results");
    }

    @Test
    void resumeRefusesAnInputThatIsNotTheOneTheRunStartedWith() throws IOException {
        Path model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 11).write(model);
        Path in = SparkTests.writeJsonl(
                tmp.resolve("in/a.jsonl"),
                List.of("{\"id\":1,\"token_ids\":[1,2,3]}", "{\"id\":2,\"token_ids\":[4,5]}"));
        Path out = tmp.resolve("out");
        SparkTests.spec(model, in, out).run();
        Path other = SparkTests.writeJsonl(tmp.resolve("in2/b.jsonl"), List.of("{\"id\":1,\"token_ids\":[1,2,3]}"));
        String msg = assertThrows(
                        IllegalArgumentException.class,
                        () -> SparkTests.spec(model, other, out).resume(true).run())
                .getMessage();
        assertTrue(msg.contains("a.jsonl is gone") && msg.contains("b.jsonl is new"), msg);
    }
}
