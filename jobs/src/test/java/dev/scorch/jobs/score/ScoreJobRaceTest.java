package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.udfs.score.TestOnlyHold;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two `scorch score --overwrite` runs started together on one output, each with its own model and input: one takes
 * the output's lease and is held in its first task (the test-only hold) until the other has ended, so they overlap
 * on any machine; the other is refused at once (exit 2) naming the holder. The output then holds the winner's rows,
 * each exactly once, equal to a clean run's, and its `_scorch.json` names the winner's model and input.
 */
@Timeout(600)
class ScoreJobRaceTest {
    static final int ROWS = 600;

    @TempDir
    Path tmp;

    @Test
    void twoJobsOnOneOutputOneIsRefusedTheOtherWritesEveryRowOnce() throws Exception {
        Path[] models = {tmp.resolve("model-a"), tmp.resolve("model-b")};
        new DemoModelWriter(DemoPreset.TINY, false, true, 99).write(models[0]);
        new DemoModelWriter(DemoPreset.TINY, false, true, 7).write(models[1]);
        Path[] inputs = new Path[2];
        for (int j = 0; j < 2; j++) {
            List<String> rows = new ArrayList<>();
            Random r = new Random(20 + j);
            for (int i = 0; i < ROWS; i++) {
                rows.add(SparkTests.row(
                        (j == 0 ? "a" : "b") + i,
                        SparkTests.randomTokens(r, 16 + r.nextInt(17), DemoPreset.TINY.vocabSize())));
            }
            inputs[j] = SparkTests.writeJsonl(tmp.resolve("in-" + j + "/prompts.jsonl"), rows);
        }
        Path out = tmp.resolve("out");
        Path holds = Files.createDirectories(tmp.resolve("holds"));

        Process[] p = new Process[2];
        Path[] logs = new Path[2];
        for (int j = 0; j < 2; j++) {
            logs[j] = tmp.resolve("cli-" + j + ".log");
            p[j] = CliProcess.start(
                    logs[j],
                    tmp.resolve("scratch-" + j),
                    List.of(
                            "score",
                            "--model",
                            models[j].toString(),
                            "--input",
                            inputs[j].toString(),
                            "--output",
                            out.toString(),
                            "--overwrite",
                            "--slices",
                            "2",
                            "--threads",
                            "1",
                            "--output-format",
                            "jsonl",
                            "--spark-conf",
                            TestOnlyHold.DIR + "=" + holds,
                            "--spark-conf",
                            TestOnlyHold.PARTITIONS + "=0"));
        }
        int loser = -1;
        try {
            // The refused run ends while the winner is held in its first task.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(240);
            while (loser < 0 && System.nanoTime() < deadline) {
                for (int j = 0; j < 2 && loser < 0; j++) {
                    if (!p[j].isAlive()) {
                        loser = j;
                    }
                }
                Thread.sleep(20);
            }
            assertTrue(loser >= 0, "neither run ended within 240 s:\n" + CliProcess.tail(logs[0]));
            int winner = 1 - loser;
            assertEquals(2, p[loser].exitValue(), "the second writer is refused:\n" + CliProcess.tail(logs[loser]));
            String refusal = Files.readString(logs[loser]);
            assertTrue(
                    refusal.contains("is being written by another job") && refusal.contains("pid " + p[winner].pid()),
                    "the refusal names the holder (pid " + p[winner].pid() + "):\n" + CliProcess.tail(logs[loser]));
            assertTrue(p[winner].isAlive(), "the winner was still held:\n" + CliProcess.tail(logs[winner]));

            Files.createFile(holds.resolve("release-0"));
            assertTrue(p[winner].waitFor(240, TimeUnit.SECONDS), "the winner did not finish");
            assertEquals(0, p[winner].exitValue(), "the winner fails:\n" + CliProcess.tail(logs[winner]));

            Path clean = tmp.resolve("clean");
            SparkTests.spec(models[winner], inputs[winner], clean)
                    .outputFormat("jsonl")
                    .run();
            Map<String, JsonNode> got = ScoreJobKillResumeRandomTest.rowsOf(out); // fails on a duplicate id
            assertEquals(ROWS, got.size(), "every row of the winner's input once");
            assertEquals(ScoreJobKillResumeRandomTest.rowsOf(clean), got, "the winner's rows, as a clean run's");

            JsonNode marker =
                    new ObjectMapper().readTree(out.resolve("_scorch.json").toFile());
            assertTrue(marker.path("complete").asBoolean(), marker.toString());
            assertEquals(inputs[winner].toString(), marker.path("input").asText(), "_scorch.json names the input");
            assertEquals(
                    got.values().iterator().next().path("model").asText(),
                    marker.path("model").asText(),
                    "_scorch.json names the model the rows came from");
            assertTrue(Files.notExists(tmp.resolve("_out.scorch-lease")), "the winner released its lease");
        } finally {
            for (Process q : p) {
                q.destroyForcibly();
            }
        }
    }
}
