package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.score.SparkTests.Scored;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A run killed after some slices were committed is finished by --resume: the CLI runs in its own JVM and
 * is killed (SIGKILL) as soon as a slice's part files appear in its partial folder, where a run writes until it
 * commits; a resumed run in this JVM scores the rest and puts the output in place. The result holds every input id
 * exactly once, with the scores of a clean run.
 */
@Timeout(300)
class ScoreJobResumeTest {
    static final int ROWS = 160;

    @TempDir
    Path tmp;

    /** Committed part files: in the output folder itself, not under _temporary. */
    static List<Path> committedParts(Path out) throws IOException {
        if (!Files.isDirectory(out)) {
            return List.of();
        }
        try (Stream<Path> s = Files.list(out)) {
            return s.filter(p -> p.getFileName().toString().startsWith("part-")).toList();
        }
    }

    static long lines(List<Path> files) throws IOException {
        long n = 0;
        for (Path f : files) {
            try (Stream<String> s = Files.lines(f)) {
                n += s.filter(l -> !l.isBlank()).count();
            }
        }
        return n;
    }

    @Test
    void killedRunIsFinishedByResume() throws Exception {
        Path model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 99).write(model);
        List<String> rows = new ArrayList<>();
        Random r = new Random(3);
        for (int i = 0; i < ROWS; i++) {
            rows.add(SparkTests.row(
                    "q" + i, SparkTests.randomTokens(r, 32 + r.nextInt(33), DemoPreset.TINY.vocabSize())));
        }
        Path in = SparkTests.writeJsonl(tmp.resolve("in/prompts.jsonl"), rows);
        Path out = tmp.resolve("out");
        Path partial = tmp.resolve("_out.scorch-partial"); // where a run writes until it commits

        Path log = tmp.resolve("cli.log");
        long t0 = System.nanoTime();
        Process p = CliProcess.start(
                log,
                tmp.resolve("cli-scratch"),
                List.of(
                        "score",
                        "--model",
                        model.toString(),
                        "--input",
                        in.toString(),
                        "--output",
                        out.toString(),
                        "--slices",
                        "4",
                        "--partitions",
                        "2",
                        "--output-format",
                        "jsonl"));
        // A watcher kills the CLI (SIGKILL) the moment a slice's part files appear outside _temporary.
        AtomicBoolean killed = new AtomicBoolean();
        Thread watcher = new Thread(
                () -> {
                    try {
                        while (p.isAlive()) {
                            if (!committedParts(partial).isEmpty()) {
                                p.destroyForcibly();
                                killed.set(true);
                                System.out.printf(
                                        "resume test: first slice committed after %.1f s%n",
                                        (System.nanoTime() - t0) / 1e9);
                                return;
                            }
                            Thread.sleep(10);
                        }
                    } catch (IOException | InterruptedException e) {
                        p.destroyForcibly();
                    }
                },
                "resume-test-killer");
        watcher.setDaemon(true);
        watcher.start();
        String outcome;
        long committedRowsAtKill;
        Map<String, Scored> clean;
        try {
            // Meanwhile, the reference: a clean run in this JVM.
            Path cleanOut = tmp.resolve("clean");
            SparkTests.spec(model, in, cleanOut).outputFormat("jsonl").run();
            clean = SparkTests.readOutput(cleanOut, "jsonl");
            assertEquals(ROWS, clean.size());

            if (!p.waitFor(150, TimeUnit.SECONDS)) {
                throw new AssertionError("no slice committed within 150 s; CLI output:\n" + CliProcess.tail(log));
            }
            watcher.join(10_000);
            committedRowsAtKill = lines(committedParts(killed.get() ? partial : out));
            if (killed.get()) {
                outcome = "killed mid-run with " + committedRowsAtKill + " of " + ROWS + " rows committed";
            } else {
                assertEquals(0, p.exitValue(), "the CLI failed:\n" + CliProcess.tail(log));
                outcome = "the CLI finished all slices before the kill";
            }
        } finally {
            if (p.isAlive()) {
                p.destroyForcibly();
            }
        }
        System.out.printf("resume test: %s (CLI ran %.1f s)%n", outcome, (System.nanoTime() - t0) / 1e9);
        assertTrue(committedRowsAtKill > 0 && committedRowsAtKill <= ROWS, outcome);

        ScoreSummary resumed = SparkTests.spec(model, in, out)
                .outputFormat("jsonl")
                .resume(true)
                .run();
        assertEquals(committedRowsAtKill, resumed.skippedByResume(), "rows already committed are skipped");
        assertEquals(ROWS - committedRowsAtKill, resumed.rows(), "only the rest is scored");
        assertEquals(0, resumed.errors());
        Map<String, Scored> got = SparkTests.readOutput(out, "jsonl"); // fails on a duplicate id
        assertEquals(ROWS, got.size(), "one row per input id");

        assertEquals(clean.keySet(), got.keySet());
        for (String id : clean.keySet()) {
            Scored a = clean.get(id);
            Scored b = got.get(id);
            assertNull(b.error(), id);
            assertEquals(a.tokenIds(), b.tokenIds(), id);
            assertEquals(a.tokenLogprobs(), b.tokenLogprobs(), "token_logprobs of " + id);
            assertEquals(a.sum(), b.sum(), "sum_logprob of " + id);
        }

        // Resuming a finished run scores nothing and changes nothing.
        ScoreSummary again = SparkTests.spec(model, in, out)
                .outputFormat("jsonl")
                .resume(true)
                .run();
        assertEquals(0, again.rows());
        assertEquals(ROWS, again.skippedByResume());
        assertEquals(ROWS, SparkTests.readOutput(out, "jsonl").size());
    }
}
