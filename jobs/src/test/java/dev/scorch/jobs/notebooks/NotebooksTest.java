package dev.scorch.jobs.notebooks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.jobs.CliRun;
import dev.scorch.jobs.eval.EvalJob;
import dev.scorch.jobs.eval.EvalReport;
import dev.scorch.jobs.eval.EvalSpec;
import dev.scorch.jobs.score.ScoreJob;
import dev.scorch.jobs.score.ScoreSpec;
import dev.scorch.jobs.score.ScoreSummary;
import dev.scorch.jobs.score.SparkTests;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The notebooks in notebooks/ run headless (python3 + nbclient, notebooks/run_notebook.py) against output this test
 * produces, so a notebook that breaks fails the build. Without pyarrow (Debian has none) a notebook reads Parquet
 * through `scorch sql`, run here as a java process on this JVM's class path (SCORCH_SQL_CMD), not bin/scorch.
 */
class NotebooksTest {
    static final String APT_PACKAGES =
            "python3-nbclient python3-nbformat python3-ipykernel python3-pandas python3-matplotlib";
    static final long NOTEBOOK_TIMEOUT_S = 600;

    @TempDir
    Path tmp;

    @Test
    void scoreResultsRunsOnARealScoreOutput() throws Exception {
        Path scores = writeScoreOutput(SparkTests.spark(), tmp);
        String executed = runNotebook("score_results.ipynb", Map.of("SCORCH_SCORES", scores.toString()));
        // The error rows are listed, not plotted.
        assertTrue(
                executed.contains("prompt is empty") && executed.contains("outside the vocabulary"),
                "error rows listed");
    }

    @Test
    void evalHistoryRunsOnAHistoryTable() throws Exception {
        writeEvalHistory(SparkTests.spark(), tmp);
        String executed = runNotebook(
                "eval_history.ipynb", Map.of("SCORCH_EVAL", tmp.resolve("evals").toString()));
        assertTrue(executed.contains("comparing run-001 -> run-002"), "the last two runs are compared by default");
        assertTrue(executed.contains("DROP"), "run-002's acc drop is marked");
        assertTrue(executed.contains("REGRESSION"), "the job's tolerance gate is shown too");
    }

    @Test
    void evalHistoryShowsLmEvalTasksAndGroups() throws Exception {
        Path out = tmp.resolve("lm-eval");
        for (String run : List.of("lm-a", "lm-b")) {
            CliRun r = CliRun.of(
                    "lm-eval",
                    "--model",
                    "demo",
                    "--tasks",
                    "scorch_demo",
                    "--limit",
                    "2",
                    "--output_path",
                    out.toString(),
                    "--run-id",
                    run,
                    "--bootstrap_iters",
                    "100");
            assertEquals(0, r.exit(), r.err());
        }
        String executed = runNotebook("eval_history.ipynb", Map.of("SCORCH_EVAL", out.toString()));
        assertTrue(executed.contains("comparing lm-a -> lm-b"), "the two lm-eval runs are compared");
        assertTrue(executed.contains("lm-eval run lm-b"), "the latest lm-eval run's table");
        for (String shown : List.of("capitals_mc", "acc_norm", "strict-match", "byte_perplexity", "Groups")) {
            assertTrue(executed.contains(shown), shown + " in the lm-eval table");
        }
    }

    /** The score job on the tiny demo model: text rows of varied length, a one-token row and two error rows. */
    static Path writeScoreOutput(SparkSession spark, Path dir) throws IOException {
        Path model = dir.resolve("demo");
        new DemoModelWriter(DemoPreset.TINY, false, true, 4242).write(model);
        String[] texts = {
            "The cat sat on the mat.",
            "Paris is the capital of France, and Berlin is the capital of Germany.",
            "the the the the the the the the the the the the the the the the",
            "A language model assigns a probability to every token given the tokens before it; perplexity is the"
                    + " exponential of the mean negative log-probability over a document.",
            "zqx vvk jjw pfft",
            "Once upon a time there was a small village by the sea where fishermen mended their nets every evening.",
            "1 2 3 4 5 6 7 8 9 10",
            "Hello!",
            "Spark splits a table into partitions and runs one task per partition on the executors.",
            "Colorless green ideas sleep furiously.",
        };
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < texts.length; i++) {
            lines.add(String.format("{\"id\":\"doc-%02d\",\"prompt\":\"%s\"}", i, texts[i]));
        }
        lines.add("{\"id\":\"one-token\",\"token_ids\":[7]}");
        lines.add("{\"id\":\"empty\",\"prompt\":\"\"}");
        lines.add("{\"id\":\"bad-vocab\",\"token_ids\":[1,2,99999]}");
        Path input = SparkTests.writeJsonl(dir.resolve("in/docs.jsonl"), lines);
        Path out = dir.resolve("scores");
        ScoreSummary s = ScoreJob.run(
                spark,
                new ScoreSpec(
                        model.toString(),
                        input.toString(),
                        null,
                        out.toString(),
                        "parquet",
                        2,
                        4096,
                        256,
                        256L << 20,
                        0,
                        LogitsMode.NONE,
                        "id",
                        "token_ids",
                        "prompt",
                        "continuation",
                        "shared-path",
                        1,
                        1,
                        dev.scorch.jobs.output.WriteMode.NEW,
                        dev.scorch.engine.backend.BackendMode.AUTO,
                        dev.scorch.udfs.score.ScoreOptions.defaultGpuPrecision(),
                        dev.scorch.udfs.score.ScoreOptions.DEFAULT_GPU_BATCH_TOKENS,
                        0,
                        null));
        assertTrue(s.line().contains("13 rows (2 errors"), s.line());
        return out;
    }

    /**
     * Two real eval runs on the tiny demo model with the example suite's capitals and short-docs data: run-001 as
     * shipped; run-002 with every gold moved off run-001's predicted choice, so its acc falls to 0 by construction.
     */
    static void writeEvalHistory(SparkSession spark, Path dir) throws IOException {
        Path model = dir.resolve("demo-eval");
        new DemoModelWriter(DemoPreset.TINY, false, true, 4242).write(model);
        Path repo = repoRoot();
        Path evals = dir.resolve("evals");
        Path suiteA = writeSuite(dir.resolve("suite-a.yaml"), repo.resolve("conf/evals/data/capitals.jsonl"), repo);
        EvalReport first = EvalJob.run(
                spark, new EvalSpec(model, suiteA, evals.toString(), "run-001", null, 2, 1, "shared-path", 4096));
        assertTrue(
                first.summary().get(0).contains("acc")
                        && !first.summary().get(0).contains(" 0.0000 "),
                "run-001 gets some capitals right: " + first.summary());
        // Gold := a choice run-001 did not predict.
        Map<String, Integer> pred = new java.util.HashMap<>();
        for (Row r : spark.read()
                .parquet(evals.resolve("runs/run-001/capitals").toString())
                .collectAsList()) {
            pred.put(r.getAs("example_id"), r.<Integer>getAs("pred"));
        }
        com.fasterxml.jackson.databind.ObjectMapper json = new com.fasterxml.jackson.databind.ObjectMapper();
        List<String> moved = new ArrayList<>();
        for (String line : Files.readAllLines(repo.resolve("conf/evals/data/capitals.jsonl"))) {
            var row = (com.fasterxml.jackson.databind.node.ObjectNode) json.readTree(line);
            row.put(
                    "answer",
                    (pred.get(row.get("id").asText()) + 1) % row.get("options").size());
            moved.add(json.writeValueAsString(row));
        }
        Path capitalsB = dir.resolve("capitals-moved.jsonl");
        Files.write(capitalsB, moved);
        EvalReport second = EvalJob.run(
                spark,
                new EvalSpec(
                        model,
                        writeSuite(dir.resolve("suite-b.yaml"), capitalsB, repo),
                        evals.toString(),
                        "run-002",
                        "run-001",
                        2,
                        1,
                        "shared-path",
                        4096));
        assertEquals(3, second.exitCode(), String.join("\n", second.comparison()));
    }

    private static Path writeSuite(Path file, Path capitals, Path repo) throws IOException {
        return Files.writeString(
                file,
                String.join(
                        "\n",
                        "name: notebook-demo",
                        "tolerance: 0.02",
                        "tasks:",
                        "  - {name: capitals, kind: multiple_choice, data: " + capitals
                                + ", columns: {context: question, choices: options, gold: answer}}",
                        "  - {name: short-docs, kind: perplexity, data: " + repo.resolve("conf/evals/data/docs.jsonl")
                                + ", max_length: 64, stride: 32,"
                                + " tolerances: {perplexity: 5.0, bits_per_byte: 0.05}}"));
    }

    /** Runs notebooks/NAME headless; fails with the notebook's error output when a cell fails. Returns the executed notebook. */
    String runNotebook(String name, Map<String, String> env) throws Exception {
        Path repo = repoRoot();
        String python = python();
        Path executed = tmp.resolve("executed-" + name);
        ProcessBuilder pb = new ProcessBuilder(
                python,
                repo.resolve("notebooks/run_notebook.py").toString(),
                repo.resolve("notebooks").resolve(name).toString(),
                "--timeout",
                String.valueOf(NOTEBOOK_TIMEOUT_S),
                "--out",
                executed.toString());
        pb.directory(repo.toFile());
        pb.environment().putAll(env);
        pb.environment().put("SCORCH_REPO", repo.toString());
        pb.environment().put("SCORCH_SQL_CMD", sqlCommand());
        pb.environment().put("MPLBACKEND", "Agg");
        pb.environment().put("PYDEVD_DISABLE_FILE_VALIDATION", "1");
        pb.environment().remove("SCORCH_NB_SAVE_PNG"); // the committed PNGs are not rewritten by tests
        pb.redirectErrorStream(true);
        Path log = tmp.resolve(name + ".log");
        pb.redirectOutput(log.toFile());
        Process p = pb.start();
        if (!p.waitFor(NOTEBOOK_TIMEOUT_S + 60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            fail(name + " did not finish in " + (NOTEBOOK_TIMEOUT_S + 60) + " s:\n" + Files.readString(log));
        }
        String output = Files.readString(log, StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), name + " failed:\n" + output);
        return Files.readString(executed, StandardCharsets.UTF_8);
    }

    /** scorch sql on this JVM's class path: java @argfile (JVM flags, -cp, main class) sql. */
    String sqlCommand() throws IOException {
        List<String> args = new ArrayList<>(SparkTests.jvmFlags());
        args.add("-cp");
        args.add(SparkTests.classPath());
        args.add("dev.scorch.jobs.ScorchCli");
        Path argFile = tmp.resolve("scorch-sql.args");
        Files.write(
                argFile,
                args.stream()
                        .map(a -> "\"" + a.replace("\\", "\\\\").replace("\"", "\\\"") + "\"")
                        .toList());
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        return shellQuote(java.toString()) + " " + shellQuote("@" + argFile) + " sql";
    }

    private static String shellQuote(String s) {
        return "'" + s.replace("'", "'\\''") + "'";
    }

    /** The first of $SCORCH_PYTHON, python3, /usr/bin/python3 that imports nbclient and the notebooks' libraries. */
    static String python() throws Exception {
        List<String> candidates = new ArrayList<>();
        String env = System.getenv("SCORCH_PYTHON");
        if (env != null && !env.isBlank()) {
            candidates.add(env);
        }
        candidates.add("python3");
        candidates.add("/usr/bin/python3");
        StringBuilder tried = new StringBuilder();
        for (String py : candidates) {
            try {
                Process p = new ProcessBuilder(py, "-c", "import nbclient, nbformat, ipykernel, pandas, matplotlib")
                        .redirectErrorStream(true)
                        .start();
                String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
                if (p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0) {
                    return py;
                }
                tried.append("\n  ")
                        .append(py)
                        .append(": ")
                        .append(
                                out.isEmpty()
                                        ? "exit " + p.exitValue()
                                        : out.lines().reduce((a, b) -> b).orElse(""));
            } catch (IOException e) {
                tried.append("\n  ").append(py).append(": ").append(e.getMessage());
            }
        }
        fail(
                "the notebook tests need python3 with nbclient, nbformat, ipykernel, pandas and matplotlib. On Debian/Ubuntu:\n"
                        + "  sudo apt-get install -y --no-install-recommends " + APT_PACKAGES
                        + "\n(or set SCORCH_PYTHON to a python that has them). Tried:" + tried);
        return null;
    }

    /** The repository root: the first folder from the working directory (Surefire: jobs/) upwards holding notebooks/run_notebook.py. */
    static Path repoRoot() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("notebooks/run_notebook.py"))) {
                return p;
            }
        }
        throw new IllegalStateException(
                "notebooks/run_notebook.py not found above " + Path.of("").toAbsolutePath());
    }
}
