package dev.scorch.jobs.cli;

import dev.scorch.jobs.DemoModel;
import dev.scorch.jobs.eval.EvalJob;
import dev.scorch.jobs.eval.EvalReport;
import dev.scorch.jobs.lmeval.LmEvalJob;
import dev.scorch.jobs.lmeval.LmEvalSpec;
import dev.scorch.jobs.lmeval.task.DataFiles;
import dev.scorch.udfs.api.Bounds;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
        name = "lm-eval",
        mixinStandardHelpOptions = true,
        description = {
            "Runs EleutherAI lm-evaluation-harness task YAMLs unchanged against a checkpoint on Spark, with lm-eval's",
            "flags by their names: all loglikelihood requests in one score job, all generate_until requests in one",
            "generate job. Writes OUTPUT_PATH/results_TIMESTAMP.json (and with --log_samples",
            "OUTPUT_PATH/samples_TASK_TIMESTAMP.jsonl) in lm-eval's layout, and every task's and group's metrics to the",
            "eval history table OUTPUT_PATH/history/. With --compare-to it exits 3 when a metric dropped by more than",
            "--tolerance (2: the run failed). Built-in tasks: conf/evals/lm-eval (see docs/lm-eval.md)."
        },
        footer = {
            "",
            "Examples:",
            "  bin/scorch lm-eval --model demo --tasks scorch_demo --output_path out/lm-eval --log_samples",
            "  bin/scorch lm-eval --model /data/ckpt --tasks mmlu --include_path ~/lm-eval/tasks \\",
            "      --dataset_dir cais/mmlu=hdfs:///data/mmlu --num_fewshot 5 --output_path hdfs:///evals/mmlu \\",
            "      --run-id ckpt-0412 --compare-to ckpt-0405 --master spark://head:7077"
        })
public final class LmEvalCommand implements Callable<Integer> {
    @Mixin
    SparkOptions spark;

    @Option(
            names = "--model",
            required = true,
            description = "Checkpoint folder, or 'demo' for the built-in demo model (random weights).")
    String model;

    @Option(
            names = "--tasks",
            required = true,
            split = ",",
            description = "Task, group or tag names, or task YAML paths, comma-separated.")
    List<String> tasks;

    @Option(names = "--include_path", description = "A folder of more task YAMLs (repeatable).")
    List<Path> includePath = new ArrayList<>();

    @Option(names = "--num_fewshot", description = "Few-shot examples per prompt; overrides each task's num_fewshot.")
    Integer numFewshot;

    @Option(
            names = "--limit",
            description = "Documents per task: a count, or below 1.0 a fraction (rounded up). For tests only, as in"
                    + " lm-eval.")
    Double limit;

    @Option(
            names = "--output_path",
            required = true,
            description = "Output folder: results_*.json, samples_*.jsonl and history/ (any Hadoop FileSystem URI).")
    String outputPath;

    @Option(names = "--log_samples", description = "Also write every document's requests, responses and metrics.")
    boolean logSamples;

    @Option(
            names = "--seed",
            description = "Seeds for python, numpy, torch and the few-shot sampler: one value for all four, or four"
                    + " comma-separated (None for unset). Default: 0,1234,1234,1234.")
    String seed;

    @Option(
            names = "--gen_kwargs",
            description = "Generation kwargs k=v,k=v overriding every generate_until task's (until, max_gen_toks,"
                    + " do_sample, temperature).")
    String genKwargs;

    @Option(
            names = "--apply_chat_template",
            arity = "0..1",
            fallbackValue = "",
            paramLabel = "TEMPLATE_NAME",
            description = "Render the prompts with the model's chat template (the one named, when the tokenizer has"
                    + " several; else its default).")
    String applyChatTemplate;

    @Option(
            names = "--fewshot_as_multiturn",
            arity = "0..1",
            fallbackValue = "true",
            paramLabel = "BOOL",
            description = "Few-shot examples as user/assistant turns (true, 1, yes; anything else is false). Default:"
                    + " on with --apply_chat_template, which it needs.")
    String fewshotAsMultiturn;

    @Option(
            names = "--system_instruction",
            description = "Text put before each prompt (before the description); with a chat template, the system"
                    + " message.")
    String systemInstruction;

    @Option(
            names = "--dataset_dir",
            description = "NAME[/CONFIG]=PATH: a hub dataset of a task (its dataset_path[/dataset_name]) read from a"
                    + " folder of split files (repeatable).")
    List<String> datasetDir = new ArrayList<>();

    @Option(names = "--bootstrap_iters", description = "Bootstrap resamples for stderrs. Default: 100000.")
    Integer bootstrapIters;

    @Option(names = "--run-id", description = "This run's id in the history. Default: the start time.")
    String runId;

    @Option(names = "--compare-to", description = "An earlier run id in the same history to compare with.")
    String compareTo;

    @Option(names = "--tolerance", description = "Largest drop of a metric --compare-to lets pass. Default: 0.02.")
    Double tolerance;

    @Option(names = "--max-batch-tokens", description = "Token budget of one engine batch. Default: 4096.")
    Integer maxBatchTokens;

    @Option(
            names = {
                "--batch_size",
                "--device",
                "--use_cache",
                "--model_args",
                "--write_out",
                "--check_integrity",
                "--predict_only",
                "--hf_hub_log_args",
                "--wandb_args",
                "--samples",
                "--confirm_run_unsafe_code",
                "--metadata",
                "--cache_requests"
            },
            hidden = true,
            description = "lm-eval options Scorch does not take: refused.")
    List<String> unsupported = new ArrayList<>();

    /** --seed: one value for all four, or four comma-separated values, each an integer or None. */
    static List<Long> seeds(String s) {
        if (s == null) {
            return LmEvalSpec.DEFAULT_SEEDS;
        }
        List<String> parts = Arrays.asList(s.split(",", -1));
        if (parts.size() == 1) {
            parts = List.of(s, s, s, s);
        }
        if (parts.size() != 4) {
            throw new IllegalArgumentException("--seed " + s + ": expected one value or four comma-separated values");
        }
        List<Long> out = new ArrayList<>();
        for (String p : parts) {
            String t = p.strip();
            if (t.equals("None")) {
                out.add(null);
                continue;
            }
            try {
                out.add(Long.parseLong(t));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("--seed " + s + ": '" + t + "' is not an integer or None", e);
            }
        }
        return java.util.Collections.unmodifiableList(out);
    }

    /** lm-eval's reading of --fewshot_as_multiturn's value: true, 1 or yes (any case), else false. */
    static boolean flag(String v) {
        return Set.of("true", "1", "yes").contains(v.toLowerCase(Locale.ROOT));
    }

    /** lm-eval's simple_parse_args_string: k=v pairs, values true/false, integers and floats typed. */
    static Map<String, Object> genKwargs(String s) {
        if (s == null || s.isBlank()) {
            return null;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        for (String kv : s.split(",")) {
            if (kv.isBlank()) {
                continue;
            }
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("--gen_kwargs " + s + ": '" + kv + "' is not k=v");
            }
            String k = kv.substring(0, eq).strip();
            String v = kv.substring(eq + 1).strip();
            Object val;
            if (v.equalsIgnoreCase("true")) {
                val = true;
            } else if (v.equalsIgnoreCase("false")) {
                val = false;
            } else if (v.matches("-?\\d+")) {
                val = Long.parseLong(v);
            } else {
                try {
                    val = Double.parseDouble(v);
                } catch (NumberFormatException e) {
                    val = v;
                }
            }
            out.put(k, val);
        }
        return out;
    }

    @Override
    public Integer call() throws Exception {
        if (!unsupported.isEmpty()) {
            throw new IllegalArgumentException(
                    "this lm-eval option is not supported by Scorch (see bin/scorch lm-eval --help): " + unsupported);
        }
        String id = runId != null ? runId : EvalJob.defaultRunId(Instant.now());
        spark.check();
        int batchTokens = spark.bounded("max-batch-tokens", maxBatchTokens, 4096, Bounds.BATCH_TOKENS);
        List<Long> seedList = seeds(seed);
        Map<String, Object> gen = genKwargs(genKwargs);
        Map<String, Path> dirs = DataFiles.parseDatasetDirs(datasetDir);
        if (bootstrapIters != null && bootstrapIters < 0) {
            throw new IllegalArgumentException("--bootstrap_iters must not be negative");
        }
        SparkSession session = spark.session("scorch lm-eval");
        try {
            LmEvalSpec spec = new LmEvalSpec(
                    DemoModel.resolve(model),
                    tasks.stream().map(String::strip).filter(t -> !t.isEmpty()).toList(),
                    includePath,
                    numFewshot,
                    limit,
                    outputPath,
                    logSamples,
                    seedList,
                    gen,
                    systemInstruction,
                    applyChatTemplate,
                    fewshotAsMultiturn == null ? null : flag(fewshotAsMultiturn),
                    dirs,
                    id,
                    compareTo,
                    tolerance == null ? 0.02 : tolerance,
                    bootstrapIters == null ? 100_000 : bootstrapIters,
                    spark.partitions(session),
                    spark.threads(session),
                    spark.weights(session),
                    batchTokens);
            EvalReport report = LmEvalJob.run(session, spec);
            report.print(System.out);
            return report.exitCode();
        } finally {
            spark.stop(session);
        }
    }
}
