package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Runs killed (SIGKILL) at random points and resumed with the same or a changed model, input or option end in one of
 * two ways only: the resume is refused (only when something changed, and then nothing is touched), or the output
 * equals a clean run's of what the resume was given, row for row and byte for byte. The kill point is a random time
 * or the random k-th committed slice; the seed is printed and -Dscorch.test.seed replays it, -Dscorch.test.rounds
 * runs more rounds.
 */
@Timeout(900)
class ScoreJobKillResumeRandomTest {
    static final int ROWS = 240;
    static final ObjectMapper JSON = new ObjectMapper();

    enum Change {
        NONE,
        MODEL,
        INPUT,
        TOP_K
    }

    @TempDir
    Path tmp;

    @Test
    void killedRunsEitherResumeToACleanRunOrAreRefused() throws Exception {
        long seed = Long.getLong("scorch.test.seed", System.nanoTime());
        int rounds = Integer.getInteger("scorch.test.rounds", 2);
        System.out.println("kill-resume test: seed " + seed + " (-Dscorch.test.seed=" + seed + " replays it)");
        Random r = new Random(seed);

        Path modelA = tmp.resolve("model-a");
        new DemoModelWriter(DemoPreset.TINY, false, true, 99).write(modelA);
        Path modelB = tmp.resolve("model-b");
        new DemoModelWriter(DemoPreset.TINY, false, true, 7).write(modelB);
        List<String> rows = new ArrayList<>();
        Random data = new Random(11);
        for (int i = 0; i < ROWS; i++) {
            rows.add(SparkTests.row(
                    "q" + i, SparkTests.randomTokens(data, 32 + data.nextInt(33), DemoPreset.TINY.vocabSize())));
        }
        List<String> edited = new ArrayList<>(rows);
        edited.set(ROWS / 2, SparkTests.row("q" + ROWS / 2, new long[] {3, 1, 4, 1, 5, 9, 2, 6}));

        // What each resume must equal when it is not refused: a clean run of what it was given.
        Map<Change, Map<String, JsonNode>> clean = new TreeMap<>();
        for (Change c : Change.values()) {
            Path in = SparkTests.writeJsonl(
                    tmp.resolve("clean-in-" + c + "/prompts.jsonl"), c == Change.INPUT ? edited : rows);
            Path out = tmp.resolve("clean-" + c);
            SparkTests.spec(c == Change.MODEL ? modelB : modelA, in, out)
                    .outputFormat("jsonl")
                    .topK(c == Change.TOP_K ? 2 : 0)
                    .run();
            clean.put(c, rowsOf(out));
        }
        assertNotEquals(clean.get(Change.NONE), clean.get(Change.MODEL));
        assertNotEquals(clean.get(Change.NONE), clean.get(Change.INPUT));
        assertNotEquals(clean.get(Change.NONE), clean.get(Change.TOP_K));

        List<String> outcomes = new ArrayList<>();
        for (int round = 0; round < rounds; round++) {
            Path in = SparkTests.writeJsonl(tmp.resolve("in-" + round + "/prompts.jsonl"), rows);
            Path out = tmp.resolve("out-" + round);
            Path partial = tmp.resolve("_out-" + round + ".scorch-partial");
            boolean bySlices = r.nextBoolean();
            int slicesBeforeKill = 1 + r.nextInt(3);
            long delayMs = 500 + r.nextInt(12_000);
            Path log = tmp.resolve("cli-" + round + ".log");
            Process p = CliProcess.start(
                    log,
                    tmp.resolve("scratch-" + round),
                    List.of(
                            "score",
                            "--model",
                            modelA.toString(),
                            "--input",
                            in.toString(),
                            "--output",
                            out.toString(),
                            "--slices",
                            "4",
                            "--partitions",
                            "2",
                            "--threads",
                            "1",
                            "--output-format",
                            "jsonl"));
            long t0 = System.nanoTime();
            String killedAt = null;
            try {
                while (p.isAlive() && killedAt == null) {
                    long ms = (System.nanoTime() - t0) / 1_000_000;
                    if (bySlices ? partFiles(partial) >= 2L * slicesBeforeKill : ms >= delayMs) {
                        p.destroyForcibly();
                        killedAt = bySlices ? "after slice " + slicesBeforeKill : "at " + ms + " ms";
                    } else if (ms > 240_000) {
                        throw new AssertionError("the run did not finish in 240 s:\n" + CliProcess.tail(log));
                    } else {
                        Thread.sleep(5);
                    }
                }
                p.waitFor(60, TimeUnit.SECONDS);
            } finally {
                p.destroyForcibly();
            }
            if (killedAt == null) {
                assertEquals(0, p.exitValue(), "the run failed:\n" + CliProcess.tail(log));
                killedAt = "never (it finished)";
            }

            Change change = Change.values()[r.nextInt(Change.values().length)];
            if (change == Change.INPUT) {
                Files.write(in, (String.join("\n", edited) + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
            }
            Map<String, String> before = snapshot(out, partial);
            String outcome;
            try {
                ScoreSummary s = SparkTests.spec(change == Change.MODEL ? modelB : modelA, in, out)
                        .outputFormat("jsonl")
                        .topK(change == Change.TOP_K ? 2 : 0)
                        .resume(true)
                        .run();
                assertEquals(
                        clean.get(change),
                        rowsOf(out),
                        "round " + round + " (seed " + seed + "): killed " + killedAt + ", resumed with change "
                                + change + ": the output differs from a clean run's");
                outcome = "resumed (" + s.skippedByResume() + " rows kept, " + s.rows() + " scored)";
            } catch (IllegalArgumentException e) {
                assertNotEquals(
                        Change.NONE,
                        change,
                        "round " + round + " (seed " + seed + "): a resume with nothing changed was refused: " + e);
                assertTrue(e.getMessage().contains("--resume continues only the run"), e.getMessage());
                assertEquals(before, snapshot(out, partial), "a refused resume touches nothing");
                outcome = "refused";
            }
            outcomes.add("killed " + killedAt + ", change " + change + ": " + outcome);
        }
        outcomes.forEach(o -> System.out.println("kill-resume test: " + o));
    }

    /** Committed part files in a run's partial folder (not under _temporary). */
    static long partFiles(Path dir) throws IOException {
        return ScoreJobResumeTest.committedParts(dir).size();
    }

    /** The output's rows as JSON, by id; fails on a duplicate id. */
    static Map<String, JsonNode> rowsOf(Path out) throws IOException {
        Map<String, JsonNode> m = new TreeMap<>();
        for (Path part : ScoreJobResumeTest.committedParts(out)) {
            for (String line : Files.readAllLines(part)) {
                if (line.isBlank()) {
                    continue;
                }
                JsonNode n = JSON.readTree(line);
                if (m.put(n.path("id").asText(), n) != null) {
                    throw new AssertionError("id " + n.path("id").asText() + " appears twice in " + out);
                }
            }
        }
        return m;
    }

    /** Every file of the output and its partial folder, with its content. */
    static Map<String, String> snapshot(Path... dirs) throws IOException {
        Map<String, String> m = new TreeMap<>();
        for (Path d : dirs) {
            if (Files.exists(d)) {
                ScoreJobRunIdentityTest.tree(d).forEach((f, sha) -> m.put(d.getFileName() + "/" + f, sha));
            }
        }
        return m;
    }
}
