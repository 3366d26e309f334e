package dev.scorch.jobs.notebooks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.scoring.LogitsMode;
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
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The notebooks in notebooks/ run headless (python3 + nbclient, notebooks/run_notebook.py) against output this test
 * produces, so a notebook that breaks fails the build. Without pyarrow (Debian has none) a notebook reads Parquet
 * through `scorch sql`, run here as a java process on this JVM's class path (SCORCH_SQL_CMD), not bin/scorch.
 */
class NotebooksTest {
  static final String APT_PACKAGES = "python3-nbclient python3-nbformat python3-ipykernel python3-pandas python3-matplotlib";
  static final long NOTEBOOK_TIMEOUT_S = 600;

  @TempDir Path tmp;

  @Test
  void scoreResultsRunsOnARealScoreOutput() throws Exception {
    Path scores = writeScoreOutput(SparkTests.spark(), tmp);
    String executed = runNotebook("score_results.ipynb", Map.of("SCORCH_SCORES", scores.toString()));
    // The error rows are listed, not plotted.
    assertTrue(executed.contains("prompt is empty") && executed.contains("outside the vocabulary"), "error rows listed");
  }

  @Test
  void evalHistoryRunsOnAHistoryTable() throws Exception {
    Path evals = tmp.resolve("evals");
    writeEvalHistoryStandIn(SparkTests.spark(), evals);
    String executed = runNotebook("eval_history.ipynb", Map.of("SCORCH_EVAL", evals.toString()));
    assertTrue(executed.contains("comparing run-002 -> run-003"), "the last two runs are compared by default");
    assertTrue(executed.contains("DROP"), "run-003's acc drop is marked");
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
    ScoreSummary s = ScoreJob.run(spark, new ScoreSpec(model, input.toString(), null, out.toString(), "parquet", 2, 4096, 256, 256L << 20, 0,
        LogitsMode.NONE, "id", "token_ids", "prompt", "continuation", "shared-path", 1, 1, false, false));
    assertTrue(s.line().contains("13 rows (2 errors"), s.line());
    return out;
  }

  /**
   * A stand-in for the eval job's history table, written from its schema: 3 runs x 2 tasks, Parquet partitioned by
   * run_id under evalDir/history. run-003 drops hellaswag acc by far more than its stderr. Replace with the eval job
   * once it exists.
   */
  static void writeEvalHistoryStandIn(SparkSession spark, Path evalDir) {
    StructType schema = new StructType()
        .add("run_id", DataTypes.StringType).add("run_time", DataTypes.StringType)
        .add("suite", DataTypes.StringType).add("suite_hash", DataTypes.StringType)
        .add("task", DataTypes.StringType).add("kind", DataTypes.StringType).add("metric", DataTypes.StringType)
        .add("value", DataTypes.DoubleType).add("stderr", DataTypes.DoubleType).add("stderr_method", DataTypes.StringType)
        .add("n", DataTypes.LongType).add("errors", DataTypes.LongType)
        .add("model", DataTypes.StringType).add("model_hash", DataTypes.StringType).add("data_hash", DataTypes.StringType);
    String[][] runs = {{"run-001", "2026-01-05T09:00:00Z", "demo-a"}, {"run-002", "2026-01-12T09:00:00Z", "demo-b"},
        {"run-003", "2026-01-19T09:00:00Z", "demo-c"}};
    double[][] acc = {{0.412, 0.430, 0.371}, {0.455, 0.468, 0.462}}; // acc, acc_norm per run
    double[][] ppl = {{48.2, 41.7, 39.9}, {5.59, 5.38, 5.32}}; // perplexity, bits_per_byte per run
    List<Row> rows = new ArrayList<>();
    for (int r = 0; r < runs.length; r++) {
      String[] run = runs[r];
      String model = run[2] + "@" + Integer.toHexString(run[2].hashCode());
      rows.add(historyRow(run, model, "hellaswag_mini", "multiple_choice", "acc", acc[0][r], Math.sqrt(acc[0][r] * (1 - acc[0][r]) / 1000),
          "binomial", r == 2 ? 1 : 0));
      rows.add(historyRow(run, model, "hellaswag_mini", "multiple_choice", "acc_norm", acc[1][r],
          Math.sqrt(acc[1][r] * (1 - acc[1][r]) / 1000), "binomial", r == 2 ? 1 : 0));
      rows.add(historyRow(run, model, "wikitext_mini", "perplexity", "perplexity", ppl[0][r], 0.6, "bootstrap", 0));
      rows.add(historyRow(run, model, "wikitext_mini", "perplexity", "bits_per_byte", ppl[1][r], 0.02, "bootstrap", 0));
    }
    spark.createDataFrame(rows, schema).repartition(1).write().partitionBy("run_id").parquet(evalDir.resolve("history").toString());
  }

  private static Row historyRow(String[] run, String model, String task, String kind, String metric, double value, double stderr,
      String stderrMethod, long errors) {
    return RowFactory.create(run[0], run[1], "demo-suite", "5u17e", task, kind, metric, value, stderr, stderrMethod, 1000L, errors,
        model, model.substring(model.indexOf('@') + 1), "da7a");
  }

  /** Runs notebooks/NAME headless; fails with the notebook's error output when a cell fails. Returns the executed notebook. */
  String runNotebook(String name, Map<String, String> env) throws Exception {
    Path repo = repoRoot();
    String python = python();
    Path executed = tmp.resolve("executed-" + name);
    ProcessBuilder pb = new ProcessBuilder(python, repo.resolve("notebooks/run_notebook.py").toString(), repo.resolve("notebooks").resolve(name).toString(),
        "--timeout", String.valueOf(NOTEBOOK_TIMEOUT_S), "--out", executed.toString());
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
    Files.write(argFile, args.stream().map(a -> "\"" + a.replace("\\", "\\\\").replace("\"", "\\\"") + "\"").toList());
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
        Process p = new ProcessBuilder(py, "-c", "import nbclient, nbformat, ipykernel, pandas, matplotlib").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        if (p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0) {
          return py;
        }
        tried.append("\n  ").append(py).append(": ").append(out.isEmpty() ? "exit " + p.exitValue() : out.lines().reduce((a, b) -> b).orElse(""));
      } catch (IOException e) {
        tried.append("\n  ").append(py).append(": ").append(e.getMessage());
      }
    }
    fail("the notebook tests need python3 with nbclient, nbformat, ipykernel, pandas and matplotlib. On Debian/Ubuntu:\n"
        + "  sudo apt-get install -y --no-install-recommends " + APT_PACKAGES + "\n(or set SCORCH_PYTHON to a python that has them). Tried:" + tried);
    return null;
  }

  /** The repository root: the first folder from the working directory (Surefire: jobs/) upwards holding notebooks/run_notebook.py. */
  static Path repoRoot() {
    for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
      if (Files.isRegularFile(p.resolve("notebooks/run_notebook.py"))) {
        return p;
      }
    }
    throw new IllegalStateException("notebooks/run_notebook.py not found above " + Path.of("").toAbsolutePath());
  }
}
