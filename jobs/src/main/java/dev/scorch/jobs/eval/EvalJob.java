package dev.scorch.jobs.eval;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.jobs.PartitionedRun;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.jobs.output.FileKinds;
import dev.scorch.jobs.output.OutputFolder;
import dev.scorch.jobs.output.OutputLease;
import dev.scorch.jobs.output.PathGuard;
import dev.scorch.jobs.output.WriteMode;
import dev.scorch.udfs.api.CheckedModel;
import dev.scorch.udfs.api.GenerateParams;
import dev.scorch.udfs.api.ScorchModel;
import dev.scorch.udfs.api.ScoreParams;
import java.io.IOException;
import java.time.Instant;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The eval job: every task of a suite against one checkpoint, loaded once ({@link ScorchModel}): one scoring of the
 * multiple_choice and perplexity tasks' sequences, one greedy generation for the generate_match prompts, then per-example
 * rows under {@code OUTPUT/runs/RUN_ID/TASK/}, one summary row per task and metric appended to {@code OUTPUT/history/},
 * and with a base run a comparison whose regressions set the exit code. Runs as {@code bin/scorch eval} or
 * {@code spark-submit --class dev.scorch.jobs.eval.EvalJob scorch-jobs.jar ...}.
 */
public final class EvalJob {
    private EvalJob() {}

    public static void main(String[] args) {
        System.exit(ScorchCli.run("eval", args));
    }

    /** What an eval output folder holds besides Scorch's marker. */
    private static final Pattern OUTPUT_NAMES = Pattern.compile("runs|history|_scorch\\.json|\\._scorch\\.json\\.crc");

    /** A run id names a folder under runs/: letters, digits, '_', '.', '-', starting with a letter or digit (no "..", no '/'). */
    static void requireRunId(String id) {
        if (id == null || !id.matches("[A-Za-z0-9][A-Za-z0-9_.-]*")) {
            throw new IllegalArgumentException(
                    "--run-id " + id + ": use letters, digits, '_', '.' and '-', starting with a letter or digit");
        }
    }

    /** A run id from the time: 20261129T223000Z. */
    public static String defaultRunId(Instant now) {
        return DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'")
                .withZone(java.time.ZoneOffset.UTC)
                .format(now);
    }

    public static EvalReport run(SparkSession spark, EvalSpec spec) throws IOException {
        requireRunId(spec.runId());
        long t0 = System.nanoTime();
        Instant started = Instant.now().truncatedTo(ChronoUnit.SECONDS);
        // 1. The suite and the data, read and checked on the driver; text is tokenised here with the model's tokenizer.
        EvalSuite suite = EvalSuite.read(spec.suite());
        Tokenizer tokenizer = Tokenizers.load(spec.model()).orElse(null);
        List<TaskRun> tasks = new ArrayList<>();
        for (EvalSuite.Task t : suite.tasks()) {
            tasks.add(
                    switch (t.kind()) {
                        case MULTIPLE_CHOICE ->
                            new MultipleChoiceTask(EvalData.load(spark, t, tokenizer, "context", "choices", "gold"));
                        case PERPLEXITY -> new PerplexityTask(EvalData.load(spark, t, tokenizer, "text"));
                        case GENERATE_MATCH ->
                            new GenerateMatchTask(EvalData.load(spark, t, tokenizer, "prompt", "reference"));
                    });
        }
        CheckedModel checked = CheckedModel.of(spec.model());
        // The output holds runs/ and history/ and nothing of the user's; a run (a rerun of an id too) is written beside
        // runs/RUN_ID and swapped in when it is complete.
        FileSystem fs =
                new Path(spec.output()).getFileSystem(spark.sparkContext().hadoopConfiguration());
        PathGuard guard =
                new PathGuard(fs).input("the model folder", spec.model()).input("the suite", spec.suite());
        for (EvalSuite.Task t : suite.tasks()) {
            guard.input("the data of task " + t.name(), t.data());
        }
        guard.check("--output", spec.output());
        FileKinds.requireOnlyFilesAndFolders(fs, new Path(spec.output()), "--output", spec.output());
        // One eval job at a time adds to an output: its history table and runs/ are written by the lease's holder.
        try (OutputLease lease =
                OutputLease.acquire(fs, new Path(spec.output()), "eval", PartitionedRun.leasePolicy(spark))) {
            dev.scorch.jobs.ExecutorWait.await(spark);
            return run(spark, spec, suite, tasks, checked, lease, t0, started);
        }
    }

    private static EvalReport run(
            SparkSession spark,
            EvalSpec spec,
            EvalSuite suite,
            List<TaskRun> tasks,
            CheckedModel checked,
            OutputLease lease,
            long t0,
            Instant started)
            throws IOException {
        FileSystem fs =
                new Path(spec.output()).getFileSystem(spark.sparkContext().hadoopConfiguration());
        OutputFolder.claim(fs, spec.output(), "eval", OUTPUT_NAMES);
        OutputFolder run = OutputFolder.open(
                        fs,
                        spec.output().replaceAll("/+$", "") + "/runs/" + spec.runId(),
                        "eval",
                        WriteMode.OVERWRITE_ANY,
                        new ObjectMapper()
                                .createObjectNode()
                                .put("run_id", spec.runId())
                                .put("suite", suite.name()),
                        null,
                        lease)
                .start();
        String runDir = run.target().toString();

        // 2. One scoring and one generation for all tasks.
        Map<String, TaskRun.Scored> scored;
        Map<String, TaskRun.Generated> generated;
        String modelLabel = checked.label();
        try (ScorchModel model = ScorchModel.ship(spark, checked, spec.weights())) {
            scored = score(spark, spec, model, tasks);
            generated = generate(spark, spec, model, tasks);
        }

        // 3. Per-example rows and summaries.
        List<History.Entry> entries = new ArrayList<>();
        List<String> summary = new ArrayList<>();
        String runTime = DateTimeFormatter.ISO_INSTANT.format(started);
        for (TaskRun t : tasks) {
            TaskRun.Result r = t.finish(scored, generated);
            spark.createDataFrame(r.examples(), r.exampleSchema())
                    .coalesce(1)
                    .write()
                    .mode(SaveMode.Overwrite)
                    .parquet(runDir + "/" + t.task().name());
            String dataHash = Hashes.sha256(t.task().data());
            for (TaskRun.Metric m : r.metrics()) {
                entries.add(new History.Entry(
                        spec.runId(),
                        runTime,
                        suite.name(),
                        suite.hash(),
                        t.task().name(),
                        t.task().kind().id(),
                        m,
                        t.task().tolerance(m.metric()),
                        modelLabel,
                        modelLabel.substring(modelLabel.indexOf('@') + 1),
                        dataHash));
                summary.add(String.format(
                        "%-24s %-18s %10.4f ± %-8.4f n=%d errors=%d",
                        t.task().name(), m.metric(), m.value(), m.stderr(), m.n(), m.errors()));
            }
        }
        run.commit();
        History.write(spark, spec.output(), entries);

        // 4. The comparison with a base run.
        List<String> comparison = new ArrayList<>();
        List<String> regressions = new ArrayList<>();
        if (spec.compareTo() != null) {
            compare(spark, spec, entries, comparison, regressions);
        }
        return new EvalReport(spec.runId(), summary, comparison, regressions, (System.nanoTime() - t0) / 1e9);
    }

    private static Map<String, TaskRun.Scored> score(
            SparkSession spark, EvalSpec spec, ScorchModel model, List<TaskRun> tasks) {
        List<Row> rows = new ArrayList<>();
        for (TaskRun t : tasks) {
            for (TaskRun.ScoreRow r : t.scoreRows()) {
                rows.add(RowFactory.create(r.id(), EvalReport.longs(r.tokens())));
            }
        }
        Map<String, TaskRun.Scored> out = new HashMap<>();
        if (rows.isEmpty()) {
            return out;
        }
        StructType schema = new StructType()
                .add("id", DataTypes.StringType)
                .add("token_ids", new ArrayType(DataTypes.LongType, false));
        ScoreParams params = new ScoreParams()
                .setMaxBatchTokens(spec.maxBatchTokens())
                .setThreads(spec.threads())
                .setBackend(BackendMode.CPU); // eval stays on CPU for now
        Dataset<Row> in = spark.createDataFrame(rows, schema).repartition(spec.partitions());
        for (Row r :
                model.score(in, params).select("id", "token_logprobs", "error").collectAsList()) {
            double[] lps = null;
            if (!r.isNullAt(1)) {
                List<Object> l = r.getList(1);
                lps = new double[l.size()];
                for (int k = 0; k < lps.length; k++) {
                    lps[k] = l.get(k) == null ? Double.NaN : ((Number) l.get(k)).doubleValue();
                }
            }
            out.put(r.getString(0), new TaskRun.Scored(lps, r.getString(2)));
        }
        return out;
    }

    private static Map<String, TaskRun.Generated> generate(
            SparkSession spark, EvalSpec spec, ScorchModel model, List<TaskRun> tasks) {
        List<Row> rows = new ArrayList<>();
        for (TaskRun t : tasks) {
            for (TaskRun.GenerateRow r : t.generateRows()) {
                rows.add(RowFactory.create(r.id(), EvalReport.longs(r.prompt()), r.maxNewTokens(), r.stop()));
            }
        }
        Map<String, TaskRun.Generated> out = new HashMap<>();
        if (rows.isEmpty()) {
            return out;
        }
        StructType schema = new StructType()
                .add("id", DataTypes.StringType)
                .add("token_ids", new ArrayType(DataTypes.LongType, false))
                .add("max_new_tokens", DataTypes.IntegerType)
                .add("stop", new ArrayType(DataTypes.StringType, false));
        GenerateParams params = greedyRows(spec.maxBatchTokens(), spec.threads());
        Dataset<Row> in = spark.createDataFrame(rows, schema).repartition(spec.partitions());
        for (Row r : model.generate(in, params)
                .select("id", "completion", "finish_reason", "error")
                .collectAsList()) {
            out.put(r.getString(0), new TaskRun.Generated(r.getString(1), r.getString(2), r.getString(3)));
        }
        return out;
    }

    /** Deltas against the base run; a drop larger than the task's tolerance for that metric is a regression. */
    public static void compare(
            SparkSession spark,
            EvalSpec spec,
            List<History.Entry> now,
            List<String> comparison,
            List<String> regressions)
            throws IOException {
        Map<String, Row> base = History.run(spark, spec.output(), spec.compareTo());
        if (base.isEmpty()) {
            throw new IllegalArgumentException(
                    "--compare-to " + spec.compareTo() + ": no such run in " + History.path(spec.output()));
        }
        int w = Math.max(10, Math.max(spec.compareTo().length(), spec.runId().length()));
        String num = "%" + w + ".4f";
        String col = "%" + w + "s";
        comparison.add(String.format(
                "%-24s %-18s " + col + " " + col + " %10s %10s  %s",
                "task",
                "metric",
                spec.compareTo(),
                spec.runId(),
                "delta",
                "tolerance",
                "status"));
        for (History.Entry e : now) {
            Row b = base.get(e.task() + "/" + e.metric().metric());
            if (b == null || b.isNullAt(b.fieldIndex("value"))) {
                comparison.add(String.format(
                        "%-24s %-18s " + col + " " + num + " %10s %10s  new",
                        e.task(),
                        e.metric().metric(),
                        "-",
                        e.metric().value(),
                        "-",
                        "-"));
                continue;
            }
            double was = b.getAs("value");
            double is = e.metric().value();
            double drop = e.metric().higherIsBetter() ? was - is : is - was;
            double tol = e.tolerance();
            boolean regressed = !(drop <= tol + 1e-12); // NaN counts as a regression
            String line = String.format(
                    "%-24s %-18s " + num + " " + num + " %+10.4f %10.4f  %s",
                    e.task(),
                    e.metric().metric(),
                    was,
                    is,
                    is - was,
                    tol,
                    regressed ? "REGRESSION" : "ok");
            comparison.add(line);
            if (regressed) {
                regressions.add(line);
            }
        }
    }

    /**
     * The eval jobs' generation: greedy whatever generation_config.json says (EOS still ends a completion), each row
     * giving its own max_new_tokens and stop strings, on the CPU backend.
     */
    public static GenerateParams greedyRows(int maxBatchTokens, int threads) {
        return new GenerateParams()
                .setSampling(SamplingParams.greedy())
                .setRowOverrides(true)
                .setMaxBatchTokens(maxBatchTokens)
                .setThreads(threads)
                .setBackend(BackendMode.CPU)
                .setGpuPrecision(GemmPrecision.BF16X3);
    }
}
