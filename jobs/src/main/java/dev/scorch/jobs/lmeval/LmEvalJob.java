package dev.scorch.jobs.lmeval;

import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.jobs.PartitionedRun;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.jobs.eval.EvalReport;
import dev.scorch.jobs.lmeval.task.DocRenderer;
import dev.scorch.jobs.lmeval.task.DocTemplates;
import dev.scorch.jobs.lmeval.task.TaskConfig;
import dev.scorch.jobs.lmeval.task.TaskRegistry;
import dev.scorch.jobs.output.FileKinds;
import dev.scorch.jobs.output.OutputFolder;
import dev.scorch.jobs.output.OutputLease;
import dev.scorch.jobs.output.PathGuard;
import dev.scorch.udfs.api.CheckedModel;
import dev.scorch.udfs.api.ScorchModel;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.hadoop.fs.FileSystem;
import org.apache.spark.sql.SparkSession;

/**
 * lm-eval tasks on Spark: the task and group YAMLs of EleutherAI's lm-evaluation-harness, run against one checkpoint
 * with the requests, metrics and result files lm-eval's Hugging Face backend gives. On the driver: the tasks resolved
 * ({@link TaskRegistry}), each task's split files read with Spark into documents in file order, --limit applied, the
 * contexts built in document order (one few-shot random stream per task), the requests tokenised ({@link LmTokens}).
 * On the cluster: every loglikelihood request of every task (multiple_choice choices, loglikelihood_rolling windows)
 * in one score job, every generate_until request in one generate job. Then per document the metrics, per task and
 * group the aggregations and stderrs ({@link Aggregations}), written to OUTPUT/results_TIMESTAMP.json (and with
 * --log_samples OUTPUT/samples_TASK_TIMESTAMP.jsonl) in lm-eval's layout, and to the eval history table OUTPUT/history/
 * so that --compare-to gates a run as it gates an eval suite.
 */
public final class LmEvalJob {
    private LmEvalJob() {}

    public static void main(String[] args) {
        System.exit(ScorchCli.run("lm-eval", args));
    }

    /** What an lm-eval output folder holds besides Scorch's marker. */
    static final Pattern OUTPUT_NAMES = Pattern.compile(
            "history|results_[0-9T.-]+\\.json|samples_.+_[0-9T.-]+\\.jsonl|_scorch\\.json|\\._scorch\\.json\\.crc"
                    + "|\\.(results|samples)_.+\\.crc");

    /** The built-in task folder: conf/evals/lm-eval under the working folder or its parent (bin/scorch, the tests). */
    public static Path builtinTasks() {
        String home = System.getProperty("scorch.home", System.getenv("SCORCH_HOME"));
        List<Path> candidates = new ArrayList<>();
        if (home != null) {
            candidates.add(Path.of(home, "conf/evals/lm-eval"));
        }
        candidates.add(Path.of("conf/evals/lm-eval"));
        candidates.add(Path.of("../conf/evals/lm-eval"));
        for (Path p : candidates) {
            if (Files.isDirectory(p)) {
                return p.toAbsolutePath().normalize();
            }
        }
        return null;
    }

    public static EvalReport run(SparkSession spark, LmEvalSpec spec) throws IOException {
        refuseUnsupported(spec);
        String runId = spec.runId();
        if (runId == null || !runId.matches("[A-Za-z0-9][A-Za-z0-9_.-]*")) {
            throw new IllegalArgumentException(
                    "--run-id " + runId + ": use letters, digits, '_', '.' and '-', starting with a letter or digit");
        }
        ResultFiles.Start start = ResultFiles.Start.now();

        // 1. Tasks, data and requests, on the driver.
        List<Path> dirs = new ArrayList<>();
        Path builtin = builtinTasks();
        if (builtin != null) {
            dirs.add(builtin);
        }
        dirs.addAll(spec.includePaths());
        TaskRegistry registry = TaskRegistry.scan(dirs);
        List<TaskRegistry.Node> nodes = registry.resolve(spec.tasks());
        Map<String, TaskConfig> leaves = new LinkedHashMap<>();
        for (TaskRegistry.Node n : nodes) {
            List<TaskConfig> ts =
                    n instanceof TaskRegistry.GroupNode g ? g.leaves() : List.of(((TaskRegistry.TaskNode) n).config());
            for (TaskConfig t : ts) {
                leaves.putIfAbsent(t.task(), t);
            }
        }
        CheckedModel checked = CheckedModel.of(spec.model());
        Tokenizer tokenizer = Tokenizers.load(spec.model())
                .orElseThrow(() -> new IllegalArgumentException(
                        "--model " + spec.model() + " has no tokenizer; lm-eval tasks are text"));
        LmTokens tokens = new LmTokens(tokenizer, checked.info().config().maxPositionEmbeddings());
        DocTemplates templates = new DocTemplates();
        DocRenderer.PromptOptions opts = new DocRenderer.PromptOptions(
                spec.systemInstruction(), spec.chat(), spec.multiturn(), spec.numFewshot());
        ChatFormat chat = spec.chat() ? ChatFormat.select(spec.model(), tokenizer, spec.applyChatTemplate()) : null;
        List<TaskPlan> plans = new ArrayList<>();
        for (TaskConfig cfg : leaves.values()) {
            plans.add(TaskPlan.plan(spark, spec, cfg, templates, opts, chat, tokens, checked.generationConfig()));
        }

        FileSystem fs = new org.apache.hadoop.fs.Path(spec.outputPath())
                .getFileSystem(spark.sparkContext().hadoopConfiguration());
        PathGuard guard = new PathGuard(fs).input("the model folder", spec.model());
        guard.check("--output_path", spec.outputPath());
        FileKinds.requireOnlyFilesAndFolders(
                fs, new org.apache.hadoop.fs.Path(spec.outputPath()), "--output_path", spec.outputPath());
        try (OutputLease lease = OutputLease.acquire(
                fs, new org.apache.hadoop.fs.Path(spec.outputPath()), "lm-eval", PartitionedRun.leasePolicy(spark))) {
            dev.scorch.jobs.ExecutorWait.await(spark);
            OutputFolder.claim(fs, spec.outputPath(), "lm-eval", OUTPUT_NAMES);
            // 2. One score job and one generate job for all tasks.
            try (ScorchModel model = ScorchModel.ship(spark, checked, spec.weights())) {
                RequestJobs.score(spark, spec, model, plans);
                GenerateUntil.run(spark, spec, model, plans, tokens);
            }
            // 3. Metrics, result files, history.
            return ResultFiles.finish(spark, spec, nodes, plans, checked, chat, start);
        }
    }

    /** Option combinations lm-eval refuses, refused here too. */
    static void refuseUnsupported(LmEvalSpec spec) {
        if (Boolean.TRUE.equals(spec.fewshotAsMultiturn()) && !spec.chat()) {
            throw new IllegalArgumentException("--fewshot_as_multiturn needs --apply_chat_template (as in lm-eval)");
        }
        if (spec.limit() != null && !(spec.limit() > 0)) {
            throw new IllegalArgumentException("--limit " + spec.limit() + ": expected a count or a fraction above 0");
        }
    }
}
