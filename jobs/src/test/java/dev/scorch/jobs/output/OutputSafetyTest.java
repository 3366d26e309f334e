package dev.scorch.jobs.output;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.CliRun;
import dev.scorch.jobs.score.SparkTests;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The jobs as a hostile or careless user runs them: every output that could reach the user's own files is refused
 * (exit 2) with the files as they were, and a run that fails leaves the previous output intact.
 */
class OutputSafetyTest {
    @TempDir
    static Path tmp;

    static Path model;
    static Path input;

    @BeforeAll
    static void files() throws IOException {
        model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 7).write(model);
        List<String> rows = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            rows.add("{\"id\":" + i + ",\"token_ids\":[" + (1 + i) + "," + (20 + i) + "," + (40 + i) + "," + (60 + i)
                    + "]}");
        }
        input = SparkTests.writeJsonl(tmp.resolve("in/prompts.jsonl"), rows);
        SparkTests.spark();
    }

    static CliRun score(String in, String out, String... more) {
        List<String> a = new ArrayList<>(
                List.of("score", "--model", model.toString(), "--input", in, "--output", out, "--master", "local[2]"));
        a.addAll(List.of(more));
        return CliRun.of(a.toArray(new String[0]));
    }

    /** Every file under dir with its bytes, to show nothing changed. */
    static Map<String, String> snapshot(Path dir) throws IOException {
        Map<String, String> m = new TreeMap<>();
        if (Files.isRegularFile(dir)) {
            m.put(dir.toString(), Files.readString(dir, java.nio.charset.StandardCharsets.ISO_8859_1));
            return m;
        }
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.filter(Files::isRegularFile).toList()) {
                m.put(dir.relativize(p).toString(), Files.readString(p, java.nio.charset.StandardCharsets.ISO_8859_1));
            }
        }
        return m;
    }

    @Test
    void anOutputThatIsOrHoldsTheInputOrTheModelIsRefusedAndNothingIsDeleted() throws IOException {
        Map<String, String> in = snapshot(input.getParent());
        Map<String, String> m = snapshot(model);
        CliRun.assertRefused(
                score(input.toString(), input.toString(), "--overwrite", "--force-overwrite"), "is the input");
        CliRun.assertRefused(
                score(input.toString(), input.getParent().toString(), "--overwrite", "--force-overwrite"),
                "contains the input");
        CliRun.assertRefused(
                score(
                        input.getParent().toString(),
                        input.getParent().resolve("scores").toString(),
                        "--overwrite"),
                "lies inside the input");
        CliRun.assertRefused(
                score(input.toString(), model.toString(), "--overwrite", "--force-overwrite"), "is the model folder");
        CliRun.assertRefused(
                score(input.toString(), model.resolve("scores").toString(), "--overwrite"),
                "lies inside the model folder");
        CliRun.assertRefused(
                score(
                        input.toString(),
                        input.getParent().resolve("sub/..").toString(),
                        "--overwrite",
                        "--force-overwrite"),
                "contains the input");
        CliRun.assertRefused(score(input.toString(), ".", "--overwrite", "--force-overwrite"), "the working folder");
        CliRun.assertRefused(score(input.toString(), "/", "--overwrite", "--force-overwrite"), "root");
        CliRun.assertRefused(
                score(input.toString(), System.getProperty("user.home"), "--overwrite", "--force-overwrite"),
                "home folder");
        assertEquals(in, snapshot(input.getParent()));
        assertEquals(m, snapshot(model));
    }

    @Test
    void aFolderOfTheUsersIsNotOverwrittenWithoutTheSecondFlag() throws IOException {
        Path x = Files.createDirectories(tmp.resolve("x/sub"));
        Files.writeString(x.getParent().resolve("notes.txt"), "mine");
        Map<String, String> before = snapshot(x.getParent());
        CliRun r = score(input.toString(), x + "/..", "--overwrite");
        CliRun.assertRefused(r, "which Scorch did not write");
        assertTrue(r.err().contains("--force-overwrite"), r.err());
        assertEquals(before, snapshot(x.getParent()));
    }

    @Test
    void aMisspelledInputLeavesThePreviousResultsAlone() throws IOException {
        Path out = tmp.resolve("results-1");
        assertEquals(0, score(input.toString(), out.toString()).exit());
        Map<String, String> before = snapshot(out);
        CliRun.assertRefused(score(input + ".typo", out.toString(), "--overwrite"), "--input");
        assertEquals(before, snapshot(out));
        assertFalse(Files.exists(OutputFolderPaths.partial(out)), "nothing started");
    }

    @Test
    void aRunThatFailsLeavesTheOldOutputAsItWasAndResumeFinishesIt() throws Exception {
        Path out = tmp.resolve("results-2");
        assertEquals(
                0,
                score(input.toString(), out.toString(), "--output-format", "jsonl")
                        .exit());
        Map<String, String> before = snapshot(out);
        Path partial = OutputFolderPaths.partial(out);

        // Cancel the job as soon as a task of the run itself starts (after the input was read and the output opened).
        SparkSession spark = SparkTests.spark();
        SparkListener canceller = new SparkListener() {
            @Override
            public void onTaskStart(SparkListenerTaskStart taskStart) {
                if (Files.exists(partial)) {
                    new Thread(() -> spark.sparkContext().cancelAllJobs()).start();
                }
            }
        };
        spark.sparkContext().addSparkListener(canceller);
        CliRun failed;
        try {
            failed = score(input.toString(), out.toString(), "--output-format", "jsonl", "--overwrite", "--top-k", "2");
        } finally {
            spark.sparkContext().removeSparkListener(canceller);
        }
        assertEquals(2, failed.exit(), failed.err());
        assertEquals(before, snapshot(out), "the old output as it was");
        assertTrue(Files.isDirectory(partial), "the failed run's partial folder is kept for --resume");

        CliRun resumed =
                score(input.toString(), out.toString(), "--output-format", "jsonl", "--resume", "--top-k", "2");
        assertEquals(0, resumed.exit(), resumed.err());
        assertFalse(Files.exists(partial));
        String rows = String.join("", snapshot(out).values());
        assertTrue(rows.contains("top_logprobs"), "the new run's rows replaced the old");
    }

    @Test
    void generateRefusesItsInputAsOutput() throws IOException {
        Map<String, String> before = snapshot(input);
        CliRun r = CliRun.of(
                "generate",
                "--model",
                model.toString(),
                "--input",
                input.toString(),
                "--output",
                input.toString(),
                "--overwrite",
                "--force-overwrite",
                "--master",
                "local[2]");
        CliRun.assertRefused(r, "is the input");
        assertEquals(before, snapshot(input));
    }

    @Test
    void evalRefusesRunIdsThatLeaveRunsAndTheModelFolder() throws IOException {
        Path evals = Files.createDirectories(tmp.resolve("evals"));
        Path suite = Path.of("../conf/evals/demo-suite.yaml").toAbsolutePath();
        Map<String, String> m = snapshot(model);
        for (String id : List.of("..", ".", "../..", "a/b", "_partial")) {
            CliRun.assertRefused(
                    CliRun.of(
                            "eval",
                            "--model",
                            model.toString(),
                            "--suite",
                            suite.toString(),
                            "--output",
                            evals.toString(),
                            "--run-id",
                            id,
                            "--master",
                            "local[2]"),
                    "--run-id");
        }
        CliRun.assertRefused(
                CliRun.of(
                        "eval",
                        "--model",
                        model.toString(),
                        "--suite",
                        suite.toString(),
                        "--output",
                        model.toString(),
                        "--master",
                        "local[2]"),
                "is the model folder");
        assertEquals(m, snapshot(model));
    }

    @Test
    void tokenizeNeverTruncatesItsInputAndReplacesOnlyItsOwnOutput() throws IOException {
        Path texts =
                SparkTests.writeJsonl(tmp.resolve("tok/texts.jsonl"), List.of("{\"id\":1,\"text\":\"hello world\"}"));
        Map<String, String> before = snapshot(texts);
        CliRun.assertRefused(
                CliRun.of(
                        "tokenize",
                        "--tokenizer",
                        model.toString(),
                        "--input",
                        texts.toString(),
                        "--output",
                        texts.toString(),
                        "--overwrite",
                        "--force-overwrite"),
                "is the input");
        CliRun.assertRefused(
                CliRun.of(
                        "tokenize",
                        "--tokenizer",
                        model.toString(),
                        "--input",
                        texts.toString(),
                        "--output",
                        texts.getParent().resolve("../tok/texts.jsonl").toString(),
                        "--overwrite",
                        "--force-overwrite"),
                "is the input");
        assertEquals(before, snapshot(texts));

        Path ids = texts.resolveSibling("ids.jsonl");
        assertEquals(
                0,
                CliRun.of(
                                "tokenize",
                                "--tokenizer",
                                model.toString(),
                                "--input",
                                texts.toString(),
                                "--output",
                                ids.toString())
                        .exit());
        CliRun.assertRefused(
                CliRun.of(
                        "tokenize",
                        "--tokenizer",
                        model.toString(),
                        "--input",
                        texts.toString(),
                        "--output",
                        ids.toString()),
                "--overwrite");
        assertEquals(
                0,
                CliRun.of(
                                "tokenize",
                                "--tokenizer",
                                model.toString(),
                                "--input",
                                texts.toString(),
                                "--output",
                                ids.toString(),
                                "--overwrite")
                        .exit());
        assertTrue(Files.readString(ids).contains("\"num_tokens\""));

        Path notes = Files.writeString(texts.resolveSibling("notes.txt"), "not tokenize output\n");
        CliRun.assertRefused(
                CliRun.of(
                        "tokenize",
                        "--tokenizer",
                        model.toString(),
                        "--input",
                        texts.toString(),
                        "--output",
                        notes.toString(),
                        "--overwrite"),
                "--force-overwrite");
        assertEquals("not tokenize output\n", Files.readString(notes));
    }

    @Test
    void makeDemoModelWritesOnlyNewOrItsOwnFolders() throws IOException {
        Path real = Files.createDirectories(tmp.resolve("real-checkpoint"));
        Files.writeString(real.resolve("config.json"), "{\"the\": \"real one\"}");
        CliRun.assertRefused(
                CliRun.of("make-demo-model", "--out", real.toString()), "was not written by make-demo-model");
        assertEquals("{\"the\": \"real one\"}", Files.readString(real.resolve("config.json")));
        Path demo = tmp.resolve("demo-again");
        assertEquals(0, CliRun.of("make-demo-model", "--out", demo.toString()).exit());
        assertEquals(
                0,
                CliRun.of("make-demo-model", "--out", demo.toString(), "--seed", "3")
                        .exit(),
                "its own folder is written again");
    }

    /** Where a run into out keeps its partial rows. */
    static final class OutputFolderPaths {
        static Path partial(Path out) {
            return out.resolveSibling("_" + out.getFileName() + ".scorch-partial");
        }
    }
}
