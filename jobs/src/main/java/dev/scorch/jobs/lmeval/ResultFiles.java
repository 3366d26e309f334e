package dev.scorch.jobs.lmeval;

import dev.scorch.jobs.eval.EvalJob;
import dev.scorch.jobs.eval.EvalReport;
import dev.scorch.jobs.eval.EvalSpec;
import dev.scorch.jobs.eval.History;
import dev.scorch.jobs.eval.TaskRun;
import dev.scorch.jobs.lmeval.task.TaskConfig;
import dev.scorch.jobs.lmeval.task.TaskRegistry;
import dev.scorch.jobs.output.FileKinds;
import dev.scorch.udfs.api.CheckedModel;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.hadoop.fs.FileSystem;
import org.apache.spark.sql.SparkSession;

/** lm-eval's result files (results and samples), the eval history rows and the run's report. */
final class ResultFiles {
    private ResultFiles() {}

    /**
     * When a run started, read once: the instant (lm-eval's start_time and date), the local time (its file names) and
     * the nano clock its elapsed time is measured from.
     */
    record Start(Instant instant, LocalDateTime local, long nanos) {
        static Start now() {
            long nanos = System.nanoTime();
            return new Start(
                    Instant.now().truncatedTo(java.time.temporal.ChronoUnit.SECONDS), LocalDateTime.now(), nanos);
        }
    }

    static EvalReport finish(
            SparkSession spark,
            LmEvalSpec spec,
            List<TaskRegistry.Node> nodes,
            List<TaskPlan> plans,
            CheckedModel checked,
            ChatFormat chat,
            Start start)
            throws IOException {
        Instant started = start.instant();
        LocalDateTime startLocal = start.local();
        long t0 = start.nanos();
        FileSystem fs = new org.apache.hadoop.fs.Path(spec.outputPath())
                .getFileSystem(spark.sparkContext().hadoopConfiguration());
        Aggregations agg = new Aggregations(PyFloatSum.PY312);
        Map<String, Object> results = new LinkedHashMap<>();
        Map<String, Object> groups = new LinkedHashMap<>();
        Map<String, Object> groupSubtasks = new LinkedHashMap<>();
        Map<String, Object> configs = new TreeMap<>();
        Map<String, Object> versions = new TreeMap<>();
        Map<String, Object> nShot = new TreeMap<>();
        Map<String, Object> higher = new TreeMap<>();
        Map<String, Object> nSamples = new LinkedHashMap<>();
        Map<String, TaskScoring.TaskScores> scores = new LinkedHashMap<>();
        Map<String, List<TaskScoring.Aggregate>> aggregates = new LinkedHashMap<>();
        Map<String, Map<String, Object>> metricsOf = new LinkedHashMap<>();
        for (TaskPlan p : plans) {
            String name = p.cfg.task();
            TaskScoring.TaskScores ts = TaskScoring.scores(p);
            scores.put(name, ts);
            List<TaskScoring.Aggregate> as = TaskScoring.aggregate(p, ts, agg, spec.bootstrapIters());
            aggregates.put(name, as);
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("name", name);
            r.put("alias", p.cfg.taskAlias() != null ? p.cfg.taskAlias() : name);
            r.put("sample_len", p.docs.size());
            for (TaskScoring.Aggregate a : as) {
                r.put(a.metric() + "," + a.filter(), a.value());
                r.put(a.metric() + "_stderr," + a.filter(), TaskScoring.num(a.stderr()));
            }
            results.put(name, r);
            metricsOf.put(name, r);
            configs.put(name, dumpConfig(p));
            versions.put(name, p.cfg.version());
            nShot.put(name, p.nShot);
            Map<String, Object> hib = new LinkedHashMap<>();
            for (TaskConfig.MetricSpec m : p.cfg.metricList()) {
                hib.put(m.metric(), TaskScoring.higherIsBetter(m));
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
                hashes.put(e.getKey(), TaskScoring.sha256(b.toString()));
            }
        }
        json.put("task_hashes", hashes);
        json.put("model_source", "scorch");
        json.put("model_name", checked.label());
        json.put("model_name_sanitized", checked.label().replaceAll("[/:@]", "__"));
        String system = spec.systemInstruction();
        json.put("system_instruction", system);
        json.put("system_instruction_sha", system == null || system.isEmpty() ? null : TaskScoring.sha256(system));
        json.put("fewshot_as_multiturn", spec.recordedMultiturn());
        String template = chat == null || chat.source().isEmpty() ? null : chat.source();
        json.put("chat_template", template);
        json.put("chat_template_sha", template == null ? null : TaskScoring.sha256(template));
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
        String suiteHash = TaskScoring.sha256(PyJson.dumps(configs, null));
        String modelLabel = checked.label();
        for (TaskPlan p : plans) {
            String dataHash = TaskScoring.sha256(PyJson.dumps(p.docs, null));
            for (TaskScoring.Aggregate a : aggregates.get(p.cfg.task())) {
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

    static Object limitValue(double limit) {
        return limit < 1.0 ? (Object) limit : (Object) (long) limit;
    }

    static History.Entry entry(
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

    static void postOrder(TaskRegistry.GroupNode g, List<TaskRegistry.GroupNode> out, Set<String> seen) {
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
    static Map<String, Object> dumpConfig(TaskPlan p) {
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
            x.put("aggregation", TaskScoring.aggregationOf(ms));
            x.put("higher_is_better", TaskScoring.higherIsBetter(ms));
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

    static void putIf(Map<String, Object> m, String k, Object v) {
        if (v != null) {
            m.put(k, v);
        }
    }

    /** Writes a file of the output folder: beside it under a hidden name first, then renamed into place. */
    static void write(FileSystem fs, String dir, String name, String text) throws IOException {
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
