package dev.scorch.jobs.lmeval;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.jobs.PartitionedRun;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.jobs.eval.EvalJob;
import dev.scorch.jobs.eval.EvalReport;
import dev.scorch.jobs.eval.EvalSpec;
import dev.scorch.jobs.eval.History;
import dev.scorch.jobs.eval.TaskRun;
import dev.scorch.jobs.lmeval.task.DataFiles;
import dev.scorch.jobs.lmeval.task.DocRenderer;
import dev.scorch.jobs.lmeval.task.DocTemplates;
import dev.scorch.jobs.lmeval.task.LmRequest;
import dev.scorch.jobs.lmeval.task.OutputType;
import dev.scorch.jobs.lmeval.task.Py;
import dev.scorch.jobs.lmeval.task.TaskConfig;
import dev.scorch.jobs.lmeval.task.TaskRegistry;
import dev.scorch.jobs.output.FileKinds;
import dev.scorch.jobs.output.OutputFolder;
import dev.scorch.jobs.output.OutputLease;
import dev.scorch.jobs.output.PathGuard;
import dev.scorch.udfs.api.CheckedModel;
import dev.scorch.udfs.api.GenerateParams;
import dev.scorch.udfs.api.ScorchModel;
import dev.scorch.udfs.api.ScoreParams;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Pattern;
import org.apache.hadoop.fs.FileSystem;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

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

    private static final Set<String> MC_METRICS =
            Set.of("acc", "acc_norm", "acc_bytes", "acc_mutual_info", "exact_match");

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

    // ------------------------------------------------------------------ plan

    /** One request with its token sequences (one, or a rolling request's windows) and, after the jobs, its response. */
    static final class Req {
        final LmRequest request;
        final List<LmTokens.Scored> sequences = new ArrayList<>();
        int[] prompt; // generate_until
        int maxGenToks;
        List<String> until;
        double temperature;
        double ll;
        boolean greedy = true;
        String text;

        Req(LmRequest request) {
            this.request = request;
        }
    }

    /** One task: its config, renderer, documents (after --limit) and requests per document. */
    static final class Plan {
        final TaskConfig cfg;
        final DocRenderer renderer;
        final List<Map<String, Object>> docs;
        final int original;
        final int nShot;
        final List<List<Req>> requests = new ArrayList<>();
        final TaskConfig.GenerationKwargs gen;

        Plan(
                TaskConfig cfg,
                DocRenderer renderer,
                List<Map<String, Object>> docs,
                int original,
                int nShot,
                TaskConfig.GenerationKwargs gen) {
            this.cfg = cfg;
            this.renderer = renderer;
            this.docs = docs;
            this.original = original;
            this.nShot = nShot;
            this.gen = gen;
        }
    }

    public static EvalReport run(SparkSession spark, LmEvalSpec spec) throws IOException {
        refuseUnsupported(spec);
        String runId = spec.runId();
        if (runId == null || !runId.matches("[A-Za-z0-9][A-Za-z0-9_.-]*")) {
            throw new IllegalArgumentException(
                    "--run-id " + runId + ": use letters, digits, '_', '.' and '-', starting with a letter or digit");
        }
        long t0 = System.nanoTime();
        Instant started = Instant.now().truncatedTo(ChronoUnit.SECONDS);
        LocalDateTime startLocal = LocalDateTime.now();

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
                spec.systemInstruction(), spec.applyChatTemplate(), spec.fewshotAsMultiturn(), spec.numFewshot());
        List<Plan> plans = new ArrayList<>();
        for (TaskConfig cfg : leaves.values()) {
            plans.add(plan(spark, spec, cfg, templates, opts, tokens));
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
                score(spark, spec, model, plans);
                generate(spark, spec, model, plans, tokens);
            }
            // 3. Metrics, result files, history.
            return finish(spark, spec, fs, nodes, plans, checked, started, startLocal, t0);
        }
    }

    /** Options lm-eval has that this job does not do yet: refused rather than ignored. */
    static void refuseUnsupported(LmEvalSpec spec) {
        if (spec.applyChatTemplate() || spec.fewshotAsMultiturn()) {
            throw new IllegalArgumentException("--apply_chat_template and --fewshot_as_multiturn are not supported yet:"
                    + " run without them (plain-text prompts, as lm-eval's default)");
        }
        if (spec.limit() != null && !(spec.limit() > 0)) {
            throw new IllegalArgumentException("--limit " + spec.limit() + ": expected a count or a fraction above 0");
        }
    }

    static Plan plan(
            SparkSession spark,
            LmEvalSpec spec,
            TaskConfig cfg,
            DocTemplates templates,
            DocRenderer.PromptOptions opts,
            LmTokens tokens) {
        String at = "lm-eval task '" + cfg.task() + "' (" + cfg.file() + "): ";
        if (cfg.repeats() != 1) {
            throw new IllegalArgumentException(at + "repeats " + cfg.repeats() + " is not supported yet (only 1)");
        }
        for (TaskConfig.MetricSpec m : cfg.metricList()) {
            boolean ok = switch (cfg.outputType()) {
                case MULTIPLE_CHOICE -> MC_METRICS.contains(m.metric());
                case LOGLIKELIHOOD -> Set.of("perplexity", "acc").contains(m.metric());
                case LOGLIKELIHOOD_ROLLING ->
                    Set.of("word_perplexity", "byte_perplexity", "bits_per_byte")
                            .contains(m.metric());
                case GENERATE_UNTIL -> m.metric().equals("exact_match");
            };
            if (!ok) {
                throw new IllegalArgumentException(at + "metric '" + m.metric() + "' is not supported for output_type "
                        + cfg.outputType().id());
            }
        }
        if (cfg.outputType() != OutputType.GENERATE_UNTIL
                && !(cfg.filterList().size() == 1
                        && cfg.filterList().get(0).name().equals("none"))) {
            throw new IllegalArgumentException(
                    at + "filter_list is supported for generate_until tasks only (lm-eval filters responses)");
        }
        DataFiles files = DataFiles.resolve(cfg, spec.datasetDirs());
        List<Map<String, Object>> all = readDocs(spark, files.format(), files.split(cfg, cfg.evalSplit()));
        int n = all.size();
        if (spec.limit() != null) {
            n = spec.limit() < 1.0 ? (int) Math.ceil(all.size() * spec.limit()) : (int) Math.floor(spec.limit());
            n = Math.min(n, all.size());
        }
        List<Map<String, Object>> docs = all.subList(0, n);
        int nShot = opts.numFewshot() != null ? opts.numFewshot() : cfg.numFewshot() == null ? 0 : cfg.numFewshot();
        List<Map<String, Object>> pool = null;
        FewShotSampler<Map<String, Object>> sampler = null;
        if (nShot > 0) {
            String split = cfg.fewshotDocsSplit();
            pool = split == null
                    ? cfg.fewshotConfig().samples()
                    : split.equals(cfg.evalSplit()) ? all : readDocs(spark, files.format(), files.split(cfg, split));
            sampler = FewShotSampler.named(cfg.fewshotConfig().sampler(), pool, spec.fewshotSeed());
        }
        Set<String> features = all.isEmpty() ? Set.of() : all.get(0).keySet();
        DocRenderer renderer = new DocRenderer(cfg, features, pool, sampler, templates);
        TaskConfig.GenerationKwargs gen = generationKwargs(cfg, spec.genKwargs(), at);
        Plan plan = new Plan(cfg, renderer, docs, all.size(), nShot, gen);
        for (int d = 0; d < docs.size(); d++) {
            List<Req> reqs = new ArrayList<>();
            for (LmRequest r : renderer.requests(d, docs.get(d), opts)) {
                Req q = new Req(r);
                try {
                    switch (r.type()) {
                        case LOGLIKELIHOOD -> q.sequences.add(tokens.loglikelihood(r.context(), r.continuation()));
                        case LOGLIKELIHOOD_ROLLING -> q.sequences.addAll(tokens.rolling(r.continuation()));
                        case GENERATE_UNTIL -> {
                            q.maxGenToks = gen.maxGenToks();
                            q.until = gen.until();
                            q.temperature = gen.doSample() ? gen.temperature() : 0.0;
                            q.prompt = tokens.generationContext(r.context(), q.maxGenToks);
                        }
                        default -> throw new IllegalStateException("request type " + r.type());
                    }
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException(at + "document " + d + ": " + e.getMessage(), e);
                }
                reqs.add(q);
            }
            plan.requests.add(reqs);
        }
        return plan;
    }

    /** The task's generation_kwargs with --gen_kwargs over them (lm-eval updates the task's with the CLI's). */
    static TaskConfig.GenerationKwargs generationKwargs(TaskConfig cfg, Map<String, Object> cli, String at) {
        TaskConfig.GenerationKwargs g = cfg.generationKwargs();
        if (cfg.outputType() != OutputType.GENERATE_UNTIL) {
            return g;
        }
        Map<String, Object> all = new LinkedHashMap<>(g.all());
        if (cli != null) {
            all.putAll(cli);
        }
        for (String k : all.keySet()) {
            if (!Set.of("until", "max_gen_toks", "do_sample", "temperature").contains(k)) {
                throw new IllegalArgumentException(at + "generation_kwargs '" + k
                        + "' is not supported yet (until, max_gen_toks, do_sample, temperature are)");
            }
        }
        List<String> until = g.until();
        if (cli != null && cli.containsKey("until")) {
            Object u = cli.get("until");
            until = u instanceof List<?> l ? l.stream().map(String::valueOf).toList() : List.of(String.valueOf(u));
        }
        int maxGen = all.get("max_gen_toks") instanceof Number x ? x.intValue() : g.maxGenToks();
        double temp = all.get("temperature") instanceof Number x ? x.doubleValue() : g.temperature();
        Object ds = all.get("do_sample");
        boolean doSample = ds instanceof Boolean b ? b : g.doSample();
        if (doSample && temp > 0) {
            throw new IllegalArgumentException(at + "do_sample is not supported yet: Scorch's lm-eval runs greedy"
                    + " generation (lm-eval's sampled runs depend on torch's random stream, which Scorch does not"
                    + " reproduce)");
        }
        return new TaskConfig.GenerationKwargs(until, maxGen, doSample, temp, all);
    }

    /** A split's documents, its files read with Spark one after another, each in its rows' order. */
    static List<Map<String, Object>> readDocs(SparkSession spark, String format, List<Path> files) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Path f : files) {
            String p = f.toString();
            Dataset<Row> df = switch (format) {
                case "parquet" -> spark.read().parquet(p);
                case "csv" ->
                    spark.read()
                            .option("header", "true")
                            .option("inferSchema", "true")
                            .csv(p);
                default ->
                    spark.read().option("multiLine", startsWithBracket(f)).json(p);
            };
            List<String> order = jsonKeyOrder(f, format);
            for (Row r : df.collectAsList()) {
                Map<String, Object> doc = toMap(r);
                if (order != null) {
                    Map<String, Object> ordered = new LinkedHashMap<>();
                    for (String k : order) {
                        if (doc.containsKey(k)) {
                            ordered.put(k, doc.get(k));
                        }
                    }
                    ordered.putAll(doc);
                    doc = ordered;
                }
                out.add(doc);
            }
        }
        return out;
    }

    private static boolean startsWithBracket(Path f) {
        try (var in = Files.newBufferedReader(f, StandardCharsets.UTF_8)) {
            int c;
            while ((c = in.read()) >= 0) {
                if (!Character.isWhitespace(c)) {
                    return c == '[';
                }
            }
        } catch (IOException e) {
            return false;
        }
        return false;
    }

    /** The keys of a JSON file's first record in file order (Spark sorts inferred JSON columns); null if not JSON. */
    private static List<String> jsonKeyOrder(Path f, String format) {
        if (!format.equals("json")) {
            return null;
        }
        try (var in = Files.newBufferedReader(f, StandardCharsets.UTF_8);
                var parser = new com.fasterxml.jackson.databind.ObjectMapper()
                        .getFactory()
                        .createParser(in)) {
            var t = parser.nextToken();
            if (t == com.fasterxml.jackson.core.JsonToken.START_ARRAY) {
                t = parser.nextToken();
            }
            if (t != com.fasterxml.jackson.core.JsonToken.START_OBJECT) {
                return null;
            }
            List<String> keys = new ArrayList<>();
            while ((t = parser.nextToken()) == com.fasterxml.jackson.core.JsonToken.FIELD_NAME) {
                keys.add(parser.currentName());
                parser.nextToken();
                parser.skipChildren();
            }
            return keys;
        } catch (IOException e) {
            return null;
        }
    }

    static Map<String, Object> toMap(Row r) {
        Map<String, Object> m = new LinkedHashMap<>();
        String[] names = r.schema().fieldNames();
        for (int i = 0; i < names.length; i++) {
            m.put(names[i], plain(r.isNullAt(i) ? null : r.get(i)));
        }
        return m;
    }

    private static Object plain(Object v) {
        if (v instanceof Row row) {
            return toMap(row);
        }
        if (v instanceof scala.collection.Seq<?> seq) {
            List<Object> l = new ArrayList<>();
            for (int i = 0; i < seq.size(); i++) {
                l.add(plain(seq.apply(i)));
            }
            return l;
        }
        if (v instanceof scala.collection.Map<?, ?> sm) {
            Map<Object, Object> out = new LinkedHashMap<>();
            sm.foreach(t -> out.put(t._1(), plain(t._2())));
            return out;
        }
        if (v instanceof Integer || v instanceof Short || v instanceof Byte) {
            return ((Number) v).longValue();
        }
        if (v instanceof Float f) {
            return f.doubleValue();
        }
        return v;
    }

    // ------------------------------------------------------------------ the jobs

    static void score(SparkSession spark, LmEvalSpec spec, ScorchModel model, List<Plan> plans) {
        List<Row> rows = new ArrayList<>();
        Map<String, Req> byId = new HashMap<>();
        Map<String, LmTokens.Scored> seqById = new HashMap<>();
        for (Plan p : plans) {
            for (List<Req> doc : p.requests) {
                for (Req q : doc) {
                    for (LmTokens.Scored s : q.sequences) {
                        String id = String.valueOf(rows.size());
                        rows.add(RowFactory.create(id, EvalReport.longs(s.tokens())));
                        byId.put(id, q);
                        seqById.put(id, s);
                    }
                    q.ll = 0;
                }
            }
        }
        if (rows.isEmpty()) {
            return;
        }
        StructType schema = new StructType()
                .add("id", DataTypes.StringType)
                .add("token_ids", new ArrayType(DataTypes.LongType, false));
        ScoreParams params = new ScoreParams()
                .setTopK(1)
                .setMaxBatchTokens(spec.maxBatchTokens())
                .setThreads(spec.threads())
                .setBackend(BackendMode.CPU);
        Dataset<Row> in = spark.createDataFrame(rows, schema).repartition(spec.partitions());
        List<Row> out = model.score(in, params)
                .select("id", "token_logprobs", "top_logprobs", "error")
                .collectAsList();
        if (out.size() != rows.size()) {
            throw new IllegalStateException("the score job returned " + out.size() + " rows for " + rows.size());
        }
        for (Row r : out) {
            String id = r.getString(0);
            Req q = byId.get(id);
            LmTokens.Scored s = seqById.get(id);
            if (!r.isNullAt(3)) {
                throw new IllegalStateException("lm-eval task '" + q.request.task() + "' document " + q.request.docId()
                        + ": the score job failed: " + r.getString(3));
            }
            List<Object> lps = r.getList(1);
            List<Object> tops = r.getList(2);
            int[] t = s.tokens();
            for (int k = t.length - s.continuationLength(); k < t.length; k++) {
                q.ll += ((Number) lps.get(k)).doubleValue();
                @SuppressWarnings("unchecked")
                List<Row> top = (List<Row>)
                        (Object) scala.jdk.javaapi.CollectionConverters.asJava((scala.collection.Seq<Row>) tops.get(k));
                if (top.isEmpty() || ((Number) top.get(0).get(0)).intValue() != t[k]) {
                    q.greedy = false;
                }
            }
        }
    }

    static void generate(SparkSession spark, LmEvalSpec spec, ScorchModel model, List<Plan> plans, LmTokens tokens) {
        List<Row> rows = new ArrayList<>();
        Map<String, Req> byId = new HashMap<>();
        for (Plan p : plans) {
            for (List<Req> doc : p.requests) {
                for (Req q : doc) {
                    if (q.prompt != null) {
                        String id = String.valueOf(rows.size());
                        rows.add(RowFactory.create(
                                id,
                                EvalReport.longs(q.prompt),
                                q.maxGenToks,
                                q.until == null ? List.of() : q.until,
                                q.temperature));
                        byId.put(id, q);
                    }
                }
            }
        }
        if (rows.isEmpty()) {
            return;
        }
        StructType schema = new StructType()
                .add("id", DataTypes.StringType)
                .add("token_ids", new ArrayType(DataTypes.LongType, false))
                .add("max_new_tokens", DataTypes.IntegerType)
                .add("stop", new ArrayType(DataTypes.StringType, false))
                .add("temperature", DataTypes.DoubleType);
        GenerateParams params = new GenerateParams()
                .setSampling(SamplingParams.greedy())
                .setRowOverrides(true)
                .setMaxBatchTokens(spec.maxBatchTokens())
                .setThreads(spec.threads())
                .setBackend(BackendMode.CPU)
                .setGpuPrecision(GemmPrecision.BF16X3);
        Dataset<Row> in = spark.createDataFrame(rows, schema).repartition(spec.partitions());
        for (Row r : model.generate(in, params)
                .select("id", "completion_token_ids", "error")
                .collectAsList()) {
            Req q = byId.get(r.getString(0));
            if (!r.isNullAt(2)) {
                throw new IllegalStateException("lm-eval task '" + q.request.task() + "' document " + q.request.docId()
                        + ": the generate job failed: " + r.getString(2));
            }
            List<Object> ids = r.getList(1);
            int[] gen = new int[ids.size()];
            for (int k = 0; k < gen.length; k++) {
                gen[k] = ((Number) ids.get(k)).intValue();
            }
            q.text = tokens.completion(gen, q.until);
        }
    }

    // ------------------------------------------------------------------ metrics and files

    /** Per-document metric values of one task under one filter: metric -> values, and (ll, weight) for weighted ones. */
    static final class TaskScores {
        final Map<String, Map<String, List<Double>>> values = new LinkedHashMap<>(); // filter -> metric -> values
        final Map<String, Map<String, List<Long>>> weights = new LinkedHashMap<>();
        final List<Map<String, Object>> samples = new ArrayList<>();
    }

    private static final Pattern WORDS = Pattern.compile("\\s+", Pattern.UNICODE_CHARACTER_CLASS);

    static String aggregationOf(TaskConfig.MetricSpec m) {
        if (m.aggregation() != null) {
            return m.aggregation();
        }
        return switch (m.metric()) {
            case "perplexity" -> "perplexity";
            case "word_perplexity", "byte_perplexity" -> "weighted_perplexity";
            case "bits_per_byte" -> "bits_per_byte";
            default -> "mean";
        };
    }

    static boolean higherIsBetter(TaskConfig.MetricSpec m) {
        if (m.higherIsBetter() != null) {
            return m.higherIsBetter();
        }
        return !Set.of("perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte")
                .contains(m.metric());
    }

    static TaskScores scores(Plan p) {
        TaskScores ts = new TaskScores();
        TaskConfig cfg = p.cfg;
        List<FilterEnsemble> filters = new ArrayList<>();
        if (cfg.outputType() == OutputType.GENERATE_UNTIL) {
            for (TaskConfig.FilterSpec f : cfg.filterList()) {
                List<Map.Entry<String, Map<String, Object>>> steps = new ArrayList<>();
                for (TaskConfig.FilterStep s : f.steps()) {
                    steps.add(Map.entry(s.function(), s.kwargs() == null ? Map.of() : s.kwargs()));
                }
                filters.add(FilterEnsemble.of(f.name(), steps));
            }
        } else {
            filters.add(FilterEnsemble.none());
        }
        for (FilterEnsemble fe : filters) {
            Map<String, List<Double>> vals = new LinkedHashMap<>();
            Map<String, List<Long>> ws = new LinkedHashMap<>();
            ts.values.put(fe.name(), vals);
            ts.weights.put(fe.name(), ws);
            for (int d = 0; d < p.docs.size(); d++) {
                Map<String, Object> doc = p.docs.get(d);
                List<Req> reqs = p.requests.get(d);
                Map<String, Object> metrics = new LinkedHashMap<>();
                Object target = p.renderer.docToTarget(doc);
                List<Object> resps = new ArrayList<>();
                List<Object> filtered = new ArrayList<>();
                switch (cfg.outputType()) {
                    case MULTIPLE_CHOICE -> {
                        List<String> choices = p.renderer.docToChoice(doc).stream()
                                .map(Py::str)
                                .toList();
                        int k = choices.size();
                        Object text = p.renderer.docToText(doc);
                        boolean mi = text instanceof Number;
                        double[] lls = new double[k];
                        boolean[] greedy = new boolean[k];
                        for (int j = 0; j < k; j++) {
                            lls[j] = reqs.get(j).ll;
                            greedy[j] = reqs.get(j).greedy;
                        }
                        double[] uncond = null;
                        if (reqs.size() == 2 * k) {
                            uncond = new double[k];
                            for (int j = 0; j < k; j++) {
                                uncond[j] = reqs.get(k + j).ll;
                            }
                        }
                        List<Integer> golds = new ArrayList<>();
                        boolean multipleTarget = false;
                        if (mi) {
                            golds.add(MultipleChoiceScore.goldIndex(text, choices));
                        } else if (target instanceof List<?> l) {
                            multipleTarget = true;
                            for (Object o : l) {
                                golds.add(MultipleChoiceScore.goldIndex(o, choices));
                            }
                        } else {
                            golds.add(MultipleChoiceScore.goldIndex(target, choices));
                        }
                        MultipleChoiceScore s =
                                MultipleChoiceScore.of(choices, lls, greedy, golds, multipleTarget, uncond);
                        for (TaskConfig.MetricSpec m : cfg.metricList()) {
                            double v = switch (m.metric()) {
                                case "acc" -> s.acc();
                                case "acc_norm" -> s.accNorm();
                                case "acc_bytes" -> s.accBytes();
                                case "acc_mutual_info" -> s.accMutualInfo();
                                default -> s.exactMatch();
                            };
                            metrics.put(m.metric(), v);
                        }
                        for (Req q : reqs) {
                            resps.add(List.of(List.of(Py.str(q.ll), q.greedy ? "True" : "False")));
                            filtered.add(List.of(Py.str(q.ll), q.greedy ? "True" : "False"));
                        }
                    }
                    case LOGLIKELIHOOD -> {
                        Req q = reqs.get(0);
                        for (TaskConfig.MetricSpec m : cfg.metricList()) {
                            metrics.put(m.metric(), m.metric().equals("acc") ? (q.greedy ? 1.0 : 0.0) : q.ll);
                        }
                        resps.add(List.of(List.of(Py.str(q.ll), q.greedy ? "True" : "False")));
                        filtered.add(List.of(Py.str(q.ll), q.greedy ? "True" : "False"));
                    }
                    case LOGLIKELIHOOD_ROLLING -> {
                        Req q = reqs.get(0);
                        String text = q.request.continuation();
                        long words = WORDS.split(text, -1).length;
                        long bytes = text.getBytes(StandardCharsets.UTF_8).length;
                        for (TaskConfig.MetricSpec m : cfg.metricList()) {
                            metrics.put(m.metric(), q.ll);
                            ws.computeIfAbsent(m.metric(), x -> new ArrayList<>())
                                    .add(m.metric().equals("word_perplexity") ? words : bytes);
                        }
                        resps.add(List.of(Py.str(q.ll)));
                        filtered.add(Py.str(q.ll));
                    }
                    case GENERATE_UNTIL -> {
                        Req q = reqs.get(0);
                        List<String> f = fe.apply(List.of(q.text));
                        String result = f.isEmpty() ? "" : f.get(0);
                        List<String> refs;
                        if (cfg.docToChoice() != null && target instanceof Number g) {
                            refs = List.of(Py.str(p.renderer.docToChoice(doc).get(g.intValue())));
                        } else if (target instanceof List<?> l) {
                            refs = l.stream().map(Py::str).toList();
                        } else {
                            refs = List.of(Py.str(target));
                        }
                        for (TaskConfig.MetricSpec m : cfg.metricList()) {
                            metrics.put(m.metric(), exactMatch(m).score(result, refs));
                        }
                        resps.add(List.of(q.text));
                        filtered.add(fe.yieldsOne() ? result : f);
                    }
                }
                for (Map.Entry<String, Object> e : metrics.entrySet()) {
                    vals.computeIfAbsent(e.getKey(), x -> new ArrayList<>()).add((Double) e.getValue());
                }
                ts.samples.add(sample(d, doc, target, reqs, resps, filtered, fe.name(), metrics));
            }
        }
        return ts;
    }

    static ExactMatch exactMatch(TaskConfig.MetricSpec m) {
        Map<String, Object> kw = m.kwargs() == null ? Map.of() : m.kwargs();
        for (String k : kw.keySet()) {
            if (!Set.of("ignore_case", "ignore_punctuation", "ignore_numbers", "regexes_to_ignore")
                    .contains(k)) {
                throw new IllegalArgumentException("exact_match: argument '" + k + "' is not supported");
            }
        }
        Object r = kw.get("regexes_to_ignore");
        List<String> regexes = r == null
                ? List.of()
                : r instanceof List<?> l ? l.stream().map(String::valueOf).toList() : List.of(String.valueOf(r));
        return new ExactMatch(
                regexes,
                Boolean.TRUE.equals(kw.get("ignore_case")),
                Boolean.TRUE.equals(kw.get("ignore_punctuation")),
                Boolean.TRUE.equals(kw.get("ignore_numbers")));
    }

    private static Map<String, Object> sample(
            int docId,
            Map<String, Object> doc,
            Object target,
            List<Req> reqs,
            List<Object> resps,
            List<Object> filtered,
            String filter,
            Map<String, Object> metrics) {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("doc_id", docId);
        s.put("doc", doc);
        s.put("target", Py.str(target));
        Map<String, Object> args = new LinkedHashMap<>();
        for (int i = 0; i < reqs.size(); i++) {
            LmRequest r = reqs.get(i).request;
            Map<String, Object> a = new LinkedHashMap<>();
            switch (r.type()) {
                case LOGLIKELIHOOD -> {
                    a.put("arg_0", r.context());
                    a.put("arg_1", r.continuation());
                }
                case LOGLIKELIHOOD_ROLLING -> a.put("arg_0", r.continuation());
                default -> {
                    a.put("arg_0", r.context());
                    a.put("arg_1", r.generation().all());
                }
            }
            args.put("gen_args_" + i, a);
        }
        s.put("arguments", args);
        s.put("resps", resps);
        s.put("filtered_resps", filtered);
        s.put("filter", filter);
        s.put("metrics", new ArrayList<>(metrics.keySet()));
        LmRequest first = reqs.get(0).request;
        String prompt = first.type() == OutputType.LOGLIKELIHOOD_ROLLING ? first.continuation() : first.context();
        s.put("doc_hash", sha256(PyJson.dumps(doc, 2)));
        s.put("prompt_hash", sha256(prompt));
        s.put("target_hash", sha256(Py.str(target)));
        s.putAll(metrics);
        return s;
    }

    static String sha256(String s) {
        try {
            return HexFormat.of()
                    .formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A metric's aggregate and stderr (NaN for "N/A") over a task's values. */
    record Aggregate(String metric, String filter, double value, double stderr, long n, boolean higherIsBetter) {}

    static List<Aggregate> aggregate(Plan p, TaskScores ts, Aggregations agg, int bootstrapIters) {
        List<Aggregate> out = new ArrayList<>();
        for (var fe : ts.values.entrySet()) {
            for (TaskConfig.MetricSpec m : p.cfg.metricList()) {
                List<Double> vs = fe.getValue().get(m.metric());
                if (vs == null) {
                    continue;
                }
                double[] xs = vs.stream().mapToDouble(Double::doubleValue).toArray();
                String how = aggregationOf(m);
                double value;
                double se = Double.NaN;
                if (how.equals("weighted_perplexity") || how.equals("bits_per_byte")) {
                    long[] w = ts.weights.get(fe.getKey()).get(m.metric()).stream()
                            .mapToLong(Long::longValue)
                            .toArray();
                    value = how.equals("bits_per_byte") ? agg.bitsPerByte(xs, w) : agg.weightedPerplexity(xs, w);
                } else {
                    value = agg.aggregate(how, xs);
                    se = agg.stderr(how, xs, bootstrapIters).orElse(Double.NaN);
                }
                out.add(new Aggregate(m.metric(), fe.getKey(), value, se, xs.length, higherIsBetter(m)));
            }
        }
        return out;
    }

    private static Object num(double v) {
        return Double.isNaN(v) ? "N/A" : (Object) v;
    }

    private static EvalReport finish(
            SparkSession spark,
            LmEvalSpec spec,
            FileSystem fs,
            List<TaskRegistry.Node> nodes,
            List<Plan> plans,
            CheckedModel checked,
            Instant started,
            LocalDateTime startLocal,
            long t0)
            throws IOException {
        Aggregations agg = new Aggregations(PyFloatSum.PY312);
        Map<String, Object> results = new LinkedHashMap<>();
        Map<String, Object> groups = new LinkedHashMap<>();
        Map<String, Object> groupSubtasks = new LinkedHashMap<>();
        Map<String, Object> configs = new TreeMap<>();
        Map<String, Object> versions = new TreeMap<>();
        Map<String, Object> nShot = new TreeMap<>();
        Map<String, Object> higher = new TreeMap<>();
        Map<String, Object> nSamples = new LinkedHashMap<>();
        Map<String, TaskScores> scores = new LinkedHashMap<>();
        Map<String, List<Aggregate>> aggregates = new LinkedHashMap<>();
        Map<String, Map<String, Object>> metricsOf = new LinkedHashMap<>();
        for (Plan p : plans) {
            String name = p.cfg.task();
            TaskScores ts = scores(p);
            scores.put(name, ts);
            List<Aggregate> as = aggregate(p, ts, agg, spec.bootstrapIters());
            aggregates.put(name, as);
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("name", name);
            r.put("alias", p.cfg.taskAlias() != null ? p.cfg.taskAlias() : name);
            r.put("sample_len", p.docs.size());
            for (Aggregate a : as) {
                r.put(a.metric() + "," + a.filter(), a.value());
                r.put(a.metric() + "_stderr," + a.filter(), num(a.stderr()));
            }
            results.put(name, r);
            metricsOf.put(name, r);
            configs.put(name, dumpConfig(p));
            versions.put(name, p.cfg.version());
            nShot.put(name, p.nShot);
            Map<String, Object> hib = new LinkedHashMap<>();
            for (TaskConfig.MetricSpec m : p.cfg.metricList()) {
                hib.put(m.metric(), higherIsBetter(m));
            }
            higher.put(name, hib);
            nSamples.put(name, new LinkedHashMap<>(Map.of("original", p.original, "effective", p.docs.size())));
        }
        // Groups, children before parents.
        List<TaskRegistry.GroupNode> order = new ArrayList<>();
        for (TaskRegistry.Node n : nodes) {
            if (n instanceof TaskRegistry.GroupNode g) {
                postOrder(g, order, new LinkedHashSet<>());
            }
        }
        for (TaskRegistry.GroupNode g : order) {
            Map<String, Object> gm = groupMetrics(g, metricsOf, agg);
            results.put(g.name(), gm);
            metricsOf.put(g.name(), gm);
            if (!g.group().aggregateMetricList().isEmpty()) {
                groups.put(g.name(), gm);
            }
            groupSubtasks.put(
                    g.name(), g.children().stream().map(TaskRegistry.Node::name).toList());
            versions.put(
                    g.name(),
                    g.group().metadata() == null ? null : g.group().metadata().get("version"));
            // lm-eval propagates n-shot and higher_is_better to a group from its tasks
            Map<String, Object> hib = new LinkedHashMap<>();
            Integer shots = null;
            for (TaskConfig t : g.leaves()) {
                @SuppressWarnings("unchecked")
                Map<String, Object> th = (Map<String, Object>) higher.get(t.task());
                if (th != null) {
                    hib.putAll(th);
                }
                shots = shots == null ? (Integer) nShot.get(t.task()) : shots;
            }
            higher.put(g.name(), hib);
            nShot.put(g.name(), shots == null ? 0 : shots);
        }

        Map<String, Object> json = new LinkedHashMap<>();
        json.put("results", results);
        if (!groups.isEmpty()) {
            json.put("groups", groups);
        }
        json.put("group_subtasks", groupSubtasks);
        json.put("configs", configs);
        json.put("versions", versions);
        json.put("n-shot", nShot);
        json.put("higher_is_better", higher);
        json.put("n-samples", nSamples);
        Map<String, Object> config = new LinkedHashMap<>();
        config.put("model", "scorch");
        config.put("model_args", "pretrained=" + spec.model());
        config.put("model_name", checked.label());
        config.put("batch_size", "auto");
        config.put("batch_sizes", List.of());
        config.put("device", "cpu");
        config.put("use_cache", null);
        config.put("limit", spec.limit() == null ? null : (Object) limitValue(spec.limit()));
        config.put("bootstrap_iters", spec.bootstrapIters());
        config.put("gen_kwargs", spec.genKwargs());
        config.put("random_seed", spec.seeds().get(0));
        config.put("numpy_seed", spec.seeds().get(1));
        config.put("torch_seed", spec.seeds().get(2));
        config.put("fewshot_seed", spec.seeds().get(3));
        json.put("config", config);
        json.put("git_hash", null);
        json.put("date", started.getEpochSecond() + 0.0);
        Map<String, Object> hashes = new LinkedHashMap<>();
        if (spec.logSamples()) {
            for (var e : scores.entrySet()) {
                StringBuilder b = new StringBuilder();
                for (Map<String, Object> s : e.getValue().samples) {
                    b.append(s.get("doc_hash")).append(s.get("prompt_hash")).append(s.get("target_hash"));
                }
                hashes.put(e.getKey(), sha256(b.toString()));
            }
        }
        json.put("task_hashes", hashes);
        json.put("model_source", "scorch");
        json.put("model_name", checked.label());
        json.put("model_name_sanitized", checked.label().replaceAll("[/:@]", "__"));
        json.put("run_id", spec.runId());
        json.put("start_time", started.toString());
        json.put("total_evaluation_time_seconds", String.valueOf((System.nanoTime() - t0) / 1e9));

        String stamp = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH-mm-ss.SSSSSS", Locale.ROOT)
                .format(startLocal);
        String dir = spec.outputPath().replaceAll("/+$", "");
        write(fs, dir, "results_" + stamp + ".json", PyJson.dumps(json, 2));
        if (spec.logSamples()) {
            for (var e : scores.entrySet()) {
                StringBuilder b = new StringBuilder();
                for (Map<String, Object> s : e.getValue().samples) {
                    b.append(PyJson.dumps(s, null)).append('\n');
                }
                write(fs, dir, "samples_" + e.getKey() + "_" + stamp + ".jsonl", b.toString());
            }
        }

        // History rows: every task's and group's metrics, "metric,filter" as lm-eval names them.
        List<History.Entry> entries = new ArrayList<>();
        List<String> summary = new ArrayList<>();
        String runTime = DateTimeFormatter.ISO_INSTANT.format(started);
        String suiteHash = sha256(PyJson.dumps(configs, null));
        String modelLabel = checked.label();
        for (Plan p : plans) {
            String dataHash = sha256(PyJson.dumps(p.docs, null));
            for (Aggregate a : aggregates.get(p.cfg.task())) {
                entries.add(entry(
                        spec,
                        runTime,
                        suiteHash,
                        p.cfg.task(),
                        p.cfg.outputType().id(),
                        a.metric() + "," + a.filter(),
                        a.value(),
                        a.stderr(),
                        a.n(),
                        a.higherIsBetter(),
                        modelLabel,
                        dataHash));
                summary.add(String.format(
                        "%-24s %-24s %10.4f ± %-8s n=%d",
                        p.cfg.task(),
                        a.metric() + "," + a.filter(),
                        a.value(),
                        Double.isNaN(a.stderr()) ? "N/A" : String.format("%.4f", a.stderr()),
                        a.n()));
            }
        }
        for (TaskRegistry.GroupNode g : order) {
            Map<String, Object> gm = metricsOf.get(g.name());
            for (var e : gm.entrySet()) {
                String k = e.getKey();
                if (!k.contains(",") || k.contains("_stderr,") || !(e.getValue() instanceof Double v)) {
                    continue;
                }
                Object se = gm.get(k.replaceFirst(",", "_stderr,"));
                String metric = k.substring(0, k.indexOf(','));
                boolean hib = !Set.of("perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte")
                        .contains(metric);
                long n = ((Number) gm.getOrDefault("sample_len", 0)).longValue();
                entries.add(entry(
                        spec,
                        runTime,
                        suiteHash,
                        g.name(),
                        "group",
                        k,
                        v,
                        se instanceof Double d ? d : Double.NaN,
                        n,
                        hib,
                        modelLabel,
                        ""));
                summary.add(String.format("%-24s %-24s %10.4f", g.name(), k, v));
            }
        }
        History.write(spark, spec.outputPath(), entries);
        List<String> comparison = new ArrayList<>();
        List<String> regressions = new ArrayList<>();
        if (spec.compareTo() != null) {
            EvalSpec es = new EvalSpec(
                    spec.model(),
                    null,
                    spec.outputPath(),
                    spec.runId(),
                    spec.compareTo(),
                    spec.partitions(),
                    spec.threads(),
                    spec.weights(),
                    spec.maxBatchTokens());
            EvalJob.compare(spark, es, entries, comparison, regressions);
        }
        summary.add("results: " + dir + "/results_" + stamp + ".json");
        return new EvalReport(spec.runId(), summary, comparison, regressions, (System.nanoTime() - t0) / 1e9);
    }

    private static Object limitValue(double limit) {
        return limit < 1.0 ? (Object) limit : (Object) (long) limit;
    }

    private static History.Entry entry(
            LmEvalSpec spec,
            String runTime,
            String suiteHash,
            String task,
            String kind,
            String metric,
            double value,
            double stderr,
            long n,
            boolean hib,
            String model,
            String dataHash) {
        String method = Double.isNaN(stderr) ? "N/A" : "lm-eval";
        return new History.Entry(
                spec.runId(),
                runTime,
                "lm-eval",
                suiteHash,
                task,
                kind,
                new TaskRun.Metric(metric, value, stderr, method, n, 0, hib),
                spec.tolerance(),
                model,
                model.substring(model.indexOf('@') + 1),
                dataHash);
    }

    private static void postOrder(TaskRegistry.GroupNode g, List<TaskRegistry.GroupNode> out, Set<String> seen) {
        for (TaskRegistry.Node c : g.children()) {
            if (c instanceof TaskRegistry.GroupNode cg) {
                postOrder(cg, out, seen);
            }
        }
        if (seen.add(g.name()) && out.stream().noneMatch(x -> x.name().equals(g.name()))) {
            out.add(g);
        }
    }

    /** lm-eval's Group.aggregate: per aggregate_metric_list entry and filter, the size-weighted mean and pooled stderr. */
    static Map<String, Object> groupMetrics(
            TaskRegistry.GroupNode g, Map<String, Map<String, Object>> metricsOf, Aggregations agg) {
        Map<String, Object> gm = new LinkedHashMap<>();
        gm.put("alias", g.group().groupAlias() != null ? g.group().groupAlias() : g.name());
        gm.put("name", g.name());
        if (g.group().aggregateMetricList().isEmpty()) {
            return gm;
        }
        List<String> leaves =
                g.leaves().stream().map(TaskConfig::task).distinct().toList();
        long total = 0;
        for (String t : leaves) {
            Map<String, Object> m = metricsOf.get(t);
            total += m == null ? 0 : ((Number) m.getOrDefault("sample_len", 0)).longValue();
        }
        gm.put("sample_len", total);
        Map<String, Object> sampleCount = new LinkedHashMap<>();
        for (TaskRegistry.AggregateMetric am : g.group().aggregateMetricList()) {
            List<String> filters = am.filterList();
            if (filters == null) {
                Set<String> found = new java.util.TreeSet<>();
                for (String t : leaves) {
                    Map<String, Object> m = metricsOf.get(t);
                    if (m != null) {
                        for (String k : m.keySet()) {
                            if (k.startsWith(am.metric() + ",")) {
                                found.add(k.substring(am.metric().length() + 1));
                            }
                        }
                    }
                }
                filters = new ArrayList<>(found);
            }
            for (String f : filters) {
                String key = am.metric() + "," + f;
                String seKey = am.metric() + "_stderr," + f;
                List<Double> values = new ArrayList<>();
                List<Object> stderrs = new ArrayList<>();
                List<Long> sizes = new ArrayList<>();
                for (String t : leaves) {
                    Map<String, Object> m = metricsOf.get(t);
                    if (m != null && m.get(key) instanceof Double v) {
                        values.add(v);
                        sizes.add(((Number) m.getOrDefault("sample_len", 0)).longValue());
                        if (m.get(seKey) != null) {
                            stderrs.add(m.get(seKey));
                        }
                    }
                }
                if (values.isEmpty()) {
                    continue;
                }
                double[] vs = values.stream().mapToDouble(Double::doubleValue).toArray();
                long[] ns = sizes.stream().mapToLong(Long::longValue).toArray();
                gm.put(key, agg.groupMean(vs, ns, am.weightBySize()));
                sampleCount.put(key, sizes.stream().mapToLong(Long::longValue).sum());
                if (stderrs.size() == values.size() && stderrs.stream().allMatch(x -> x instanceof Double)) {
                    double[] ses = stderrs.stream().mapToDouble(x -> (Double) x).toArray();
                    gm.put(seKey, agg.pooledStderr(ses, ns));
                } else {
                    gm.put(seKey, "N/A");
                }
            }
        }
        if (!sampleCount.isEmpty()) {
            gm.put("sample_count", sampleCount);
        }
        return gm;
    }

    /** The task's configuration as lm-eval's dump_config lists it (the fields Scorch reads, lm-eval's names). */
    static Map<String, Object> dumpConfig(Plan p) {
        TaskConfig c = p.cfg;
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("task", c.task());
        if (c.taskAlias() != null) {
            m.put("task_alias", c.taskAlias());
        }
        if (c.tags() != null && !c.tags().isEmpty()) {
            m.put("tag", c.tags());
        }
        m.put("dataset_path", c.datasetPath());
        if (c.datasetName() != null) {
            m.put("dataset_name", c.datasetName());
        }
        if (c.datasetKwargs() != null) {
            m.put("dataset_kwargs", c.datasetKwargs());
        }
        putIf(m, "training_split", c.trainingSplit());
        putIf(m, "validation_split", c.validationSplit());
        putIf(m, "test_split", c.testSplit());
        putIf(m, "fewshot_split", c.fewshotSplit());
        m.put("doc_to_text", c.docToText());
        m.put("doc_to_target", c.docToTarget());
        putIf(m, "doc_to_choice", c.docToChoice());
        putIf(m, "gen_prefix", c.genPrefix());
        m.put("description", c.description());
        m.put("target_delimiter", c.targetDelimiter());
        m.put("fewshot_delimiter", c.fewshotDelimiter());
        if (c.fewshotConfig() != null) {
            Map<String, Object> fc = new LinkedHashMap<>();
            fc.put("sampler", c.fewshotConfig().sampler());
            putIf(fc, "split", c.fewshotConfig().split());
            m.put("fewshot_config", fc);
        }
        m.put("num_fewshot", p.nShot);
        List<Object> metrics = new ArrayList<>();
        for (TaskConfig.MetricSpec ms : c.metricList()) {
            Map<String, Object> x = new LinkedHashMap<>();
            x.put("metric", ms.metric());
            x.put("aggregation", aggregationOf(ms));
            x.put("higher_is_better", higherIsBetter(ms));
            if (ms.kwargs() != null) {
                x.putAll(ms.kwargs());
            }
            metrics.add(x);
        }
        m.put("metric_list", metrics);
        m.put("output_type", c.outputType().id());
        if (p.gen != null) {
            m.put("generation_kwargs", p.gen.all());
        }
        m.put("repeats", c.repeats());
        List<Object> filters = new ArrayList<>();
        for (TaskConfig.FilterSpec f : c.filterList()) {
            List<Object> steps = new ArrayList<>();
            for (TaskConfig.FilterStep s : f.steps()) {
                Map<String, Object> x = new LinkedHashMap<>();
                x.put("function", s.function());
                if (s.kwargs() != null) {
                    x.putAll(s.kwargs());
                }
                steps.add(x);
            }
            filters.add(Map.of("name", f.name(), "filter", steps));
        }
        m.put("filter_list", filters);
        m.put("should_decontaminate", false);
        m.put("metadata", c.metadata());
        return m;
    }

    private static void putIf(Map<String, Object> m, String k, Object v) {
        if (v != null) {
            m.put(k, v);
        }
    }

    /** Writes a file of the output folder: beside it under a hidden name first, then renamed into place. */
    private static void write(FileSystem fs, String dir, String name, String text) throws IOException {
        org.apache.hadoop.fs.Path target = new org.apache.hadoop.fs.Path(dir, name);
        if (fs.exists(target)) {
            throw new IllegalStateException(target + " exists already; Scorch does not replace it");
        }
        org.apache.hadoop.fs.Path tmp = new org.apache.hadoop.fs.Path(dir, "." + name + ".tmp");
        if (fs.exists(tmp)) {
            FileKinds.requireOnlyFilesAndFolders(fs, tmp, "--output_path", tmp.toString());
            fs.delete(tmp, false);
        }
        try (OutputStream out = fs.create(tmp, false)) {
            out.write(text.getBytes(StandardCharsets.UTF_8));
        }
        if (!fs.rename(tmp, target)) {
            throw new IOException("could not rename " + tmp + " to " + target);
        }
    }
}
