package dev.scorch.jobs.lmeval.task;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * One lm-eval task's configuration (lm-eval's TaskConfig), read from its YAML file with includes and group
 * overrides already merged. Field names and defaults are lm-eval's: target_delimiter " ", fewshot_delimiter
 * "\n\n", output_type generate_until, repeats 1, description "". A field lm-eval does not know is refused
 * (lm-eval fails on it too); so is every field whose value Scorch cannot honour without running Python
 * ({@code !function} anywhere, process_docs, process_results, custom_dataset, class, use_prompt) or at all
 * (doc_to_image, doc_to_audio, unsafe_code). Every refusal names the task, the file and the field.
 *
 * <p>doc_to_text, doc_to_target and doc_to_choice stay as written (a String: column or template; an Integer;
 * a List or Map of choices): which a String is depends on the data's columns, so {@link DocRenderer} decides.
 *
 * @param metricList        metric_list; lm-eval's defaults for the output type when the file has none
 *                          (aggregation and higherIsBetter then null: the metric's own defaults)
 * @param filterList        filter_list; lm-eval's default ("none": take_first) when the file has none
 * @param generationKwargs  for generate_until, lm-eval's defaults filled in; null for other output types
 *                          unless the file gives them
 * @param file              the task's YAML file (data paths are resolved against its folder)
 */
public record TaskConfig(
        String task,
        String taskAlias,
        List<String> tags,
        String datasetPath,
        String datasetName,
        Map<String, Object> datasetKwargs,
        String trainingSplit,
        String validationSplit,
        String testSplit,
        String fewshotSplit,
        OutputType outputType,
        Object docToText,
        Object docToTarget,
        Object docToChoice,
        String genPrefix,
        String targetDelimiter,
        String fewshotDelimiter,
        String description,
        Integer numFewshot,
        FewshotConfig fewshotConfig,
        List<MetricSpec> metricList,
        List<FilterSpec> filterList,
        GenerationKwargs generationKwargs,
        int repeats,
        Map<String, Object> metadata,
        Path file) {

    /** One metric_list entry: metric, aggregation, higher_is_better, and the rest as the metric's kwargs. */
    public record MetricSpec(String metric, String aggregation, Boolean higherIsBetter, Map<String, Object> kwargs) {}

    /** One filter_list entry: a name and its steps, each a function with kwargs (e.g. regex, regex_pattern). */
    public record FilterSpec(String name, List<FilterStep> steps) {}

    public record FilterStep(String function, Map<String, Object> kwargs) {}

    /**
     * generation_kwargs: until (a list), max_gen_toks, do_sample, temperature typed; {@code all} keeps every
     * key as given (others, e.g. top_p, are passed on for the generator to accept or refuse).
     */
    public record GenerationKwargs(
            List<String> until, int maxGenToks, boolean doSample, double temperature, Map<String, Object> all) {}

    /**
     * fewshot_config, filled from the task's fields as lm-eval fills it: split (fewshot_split), doc_to_text,
     * doc_to_choice, doc_to_target, gen_prefix, fewshot_delimiter and target_delimiter default to the task's;
     * sampler to "default" (lm-eval's random sampler).
     */
    public record FewshotConfig(
            String sampler,
            String split,
            List<Integer> fewshotIndices,
            List<Map<String, Object>> samples,
            Object docToText,
            Object docToChoice,
            Object docToTarget,
            String genPrefix,
            String fewshotDelimiter,
            String targetDelimiter) {}

    /** lm-eval's DEFAULT_METRIC_REGISTRY. */
    static List<String> defaultMetrics(OutputType t) {
        return switch (t) {
            case LOGLIKELIHOOD -> List.of("perplexity", "acc");
            case LOGLIKELIHOOD_ROLLING -> List.of("word_perplexity", "byte_perplexity", "bits_per_byte");
            case MULTIPLE_CHOICE -> List.of("acc", "acc_norm");
            case GENERATE_UNTIL -> List.of("exact_match");
        };
    }

    public static final int DEFAULT_MAX_GEN_TOKS = 256;

    /** metadata.version, or null. */
    public Object version() {
        return metadata.get("version");
    }

    /** The split whose documents are scored: test_split, else validation_split (lm-eval's eval_docs). */
    public String evalSplit() {
        if (testSplit != null) {
            return testSplit;
        }
        if (validationSplit != null) {
            return validationSplit;
        }
        throw new IllegalArgumentException(where(task, file) + "has neither test_split nor validation_split");
    }

    /**
     * Where the few-shot examples come from: fewshot_config's split (fewshot_split); else null when
     * fewshot_config.samples lists them; else training_split, validation_split, test_split, the first set.
     */
    public String fewshotDocsSplit() {
        if (fewshotConfig.split() != null) {
            return fewshotConfig.split();
        }
        if (fewshotConfig.samples() != null) {
            return null;
        }
        return trainingSplit != null ? trainingSplit : validationSplit != null ? validationSplit : testSplit;
    }

    /** Every field of lm-eval's TaskConfig. */
    static final Set<String> FIELDS = Set.of(
            "task",
            "task_alias",
            "tag",
            "custom_dataset",
            "dataset_path",
            "dataset_name",
            "dataset_kwargs",
            "training_split",
            "validation_split",
            "test_split",
            "fewshot_split",
            "process_docs",
            "doc_to_text",
            "doc_to_target",
            "doc_to_image",
            "doc_to_audio",
            "unsafe_code",
            "doc_to_choice",
            "process_results",
            "use_prompt",
            "description",
            "target_delimiter",
            "fewshot_delimiter",
            "fewshot_config",
            "num_fewshot",
            "metric_list",
            "output_type",
            "generation_kwargs",
            "repeats",
            "filter_list",
            "should_decontaminate",
            "doc_to_decontamination_query",
            "gen_prefix",
            "metadata");

    private static final Set<String> FEWSHOT_FIELDS = Set.of(
            "sampler",
            "split",
            "process_docs",
            "fewshot_indices",
            "samples",
            "doc_to_text",
            "doc_to_choice",
            "doc_to_target",
            "gen_prefix",
            "fewshot_delimiter",
            "target_delimiter");

    static String where(String task, Path file) {
        return "lm-eval task '" + task + "' (" + file + "): ";
    }

    /**
     * The configuration from a task's merged YAML mapping (structural keys group and task_list already
     * dropped by the registry). IllegalArgumentException naming task, file and field on any problem.
     */
    public static TaskConfig from(Map<String, Object> cfg, Path file) {
        Object taskObj = cfg.get("task");
        if (!(taskObj instanceof String task) || task.isBlank()) {
            throw new IllegalArgumentException(file + ": field 'task' must be the task's name, a string");
        }
        String at = where(task, file);
        if (cfg.containsKey("class")) {
            throw new IllegalArgumentException(at + "field 'class': a task defined by a Python class ("
                    + cfg.get("class") + ") cannot run: Scorch runs no Python");
        }
        for (String k : cfg.keySet()) {
            if (!FIELDS.contains(k)) {
                throw new IllegalArgumentException(
                        at + "unknown field '" + k + "' (lm-eval's TaskConfig has no such field)");
            }
        }
        refuseFunctions(at, "", cfg);
        for (String k : List.of("process_docs", "process_results", "custom_dataset", "use_prompt")) {
            if (cfg.get(k) != null) {
                throw new IllegalArgumentException(
                        at + "field '" + k + "': " + describe(cfg.get(k)) + " needs Python, which Scorch does not run");
            }
        }
        for (String k : List.of("doc_to_image", "doc_to_audio")) {
            if (cfg.get(k) != null) {
                throw new IllegalArgumentException(at + "field '" + k + "': multimodal tasks are not supported");
            }
        }
        if (cfg.get("unsafe_code") != null && !Boolean.FALSE.equals(cfg.get("unsafe_code"))) {
            throw new IllegalArgumentException(
                    at + "field 'unsafe_code': tasks that run model-written code are not supported");
        }
        Fields f = new Fields(at, cfg);
        OutputType outputType;
        String ot = f.string("output_type", "generate_until");
        try {
            outputType = OutputType.of(ot);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(at + "field 'output_type': " + e.getMessage());
        }
        String targetDelimiter = f.string("target_delimiter", " ");
        String fewshotDelimiter = f.string("fewshot_delimiter", "\n\n");
        Object docToText = f.prompt("doc_to_text");
        Object docToTarget = f.prompt("doc_to_target");
        Object docToChoice = f.choice("doc_to_choice");
        String genPrefix = f.string("gen_prefix", null);
        String fewshotSplit = f.string("fewshot_split", null);
        Integer numFewshot = f.integer("num_fewshot");
        if (numFewshot != null && numFewshot < 0) {
            throw new IllegalArgumentException(at + "field 'num_fewshot' must not be negative");
        }
        Integer repeats = f.integer("repeats");
        if (repeats != null && repeats < 1) {
            throw new IllegalArgumentException(at + "field 'repeats' must be at least 1");
        }
        Object meta = cfg.get("metadata");
        Map<String, Object> metadata = meta == null
                ? Map.of()
                : meta instanceof Map<?, ?> m ? stringKeys(at, "metadata", m) : Map.of("_metadata", meta);
        return new TaskConfig(
                task,
                f.string("task_alias", null),
                f.stringList("tag"),
                f.string("dataset_path", null),
                f.string("dataset_name", null),
                f.map("dataset_kwargs"),
                f.string("training_split", null),
                f.string("validation_split", null),
                f.string("test_split", null),
                fewshotSplit,
                outputType,
                docToText,
                docToTarget,
                docToChoice,
                genPrefix,
                targetDelimiter,
                fewshotDelimiter,
                f.string("description", ""),
                numFewshot,
                fewshot(
                        f,
                        at,
                        fewshotSplit,
                        fewshotDelimiter,
                        targetDelimiter,
                        genPrefix,
                        docToText,
                        docToChoice,
                        docToTarget),
                metrics(at, cfg.get("metric_list"), outputType),
                filters(at, cfg.get("filter_list")),
                generation(at, cfg.get("generation_kwargs"), outputType, fewshotDelimiter),
                repeats == null ? 1 : repeats,
                metadata,
                file);
    }

    private static String describe(Object v) {
        return v instanceof FunctionRef r ? "the Python function " + r.name() : "'" + v + "'";
    }

    /** Any !function anywhere in the task (metric, aggregation, filter, doc_to_*, sampler...) refuses it. */
    private static void refuseFunctions(String at, String path, Object v) {
        if (v instanceof FunctionRef r) {
            throw new IllegalArgumentException(at + "field '" + path + "' is the Python function " + r.name()
                    + " (!function): Scorch runs no Python");
        }
        if (v instanceof Map<?, ?> m) {
            for (Map.Entry<?, ?> e : m.entrySet()) {
                refuseFunctions(
                        at, path.isEmpty() ? String.valueOf(e.getKey()) : path + "." + e.getKey(), e.getValue());
            }
        } else if (v instanceof List<?> l) {
            for (int i = 0; i < l.size(); i++) {
                refuseFunctions(at, path + "[" + i + "]", l.get(i));
            }
        }
    }

    private static FewshotConfig fewshot(
            Fields task,
            String at,
            String split,
            String fewshotDelimiter,
            String targetDelimiter,
            String genPrefix,
            Object docToText,
            Object docToChoice,
            Object docToTarget) {
        Object raw = task.cfg.get("fewshot_config");
        Map<String, Object> m = raw == null ? Map.of() : task.map("fewshot_config");
        for (String k : m.keySet()) {
            if (!FEWSHOT_FIELDS.contains(k)) {
                throw new IllegalArgumentException(at + "unknown field 'fewshot_config." + k + "'");
            }
        }
        if (m.get("process_docs") != null) {
            throw new IllegalArgumentException(
                    at + "field 'fewshot_config.process_docs' needs Python, which Scorch does not run");
        }
        Fields f = new Fields(at, m, "fewshot_config.");
        List<Integer> indices = null;
        if (m.get("fewshot_indices") != null) {
            indices = new ArrayList<>();
            if (!(m.get("fewshot_indices") instanceof List<?> l)) {
                throw new IllegalArgumentException(
                        at + "field 'fewshot_config.fewshot_indices' must be a list of integers");
            }
            for (Object o : l) {
                if (!(o instanceof Integer i) || i < 0) {
                    throw new IllegalArgumentException(
                            at + "field 'fewshot_config.fewshot_indices' must be a list of integers");
                }
                indices.add(i);
            }
            indices = List.copyOf(indices);
        }
        List<Map<String, Object>> samples = null;
        if (m.get("samples") != null) {
            if (!(m.get("samples") instanceof List<?> l)) {
                throw new IllegalArgumentException(at + "field 'fewshot_config.samples' must be a list of documents");
            }
            samples = new ArrayList<>();
            for (int i = 0; i < l.size(); i++) {
                if (!(l.get(i) instanceof Map<?, ?> d)) {
                    throw new IllegalArgumentException(
                            at + "field 'fewshot_config.samples[" + i + "]' must be a mapping");
                }
                samples.add(stringKeys(at, "fewshot_config.samples[" + i + "]", d));
            }
            samples = Collections.unmodifiableList(samples);
        }
        return new FewshotConfig(
                f.string("sampler", "default"),
                m.containsKey("split") ? f.string("split", null) : split,
                indices,
                samples,
                m.containsKey("doc_to_text") ? f.prompt("doc_to_text") : docToText,
                m.containsKey("doc_to_choice") ? f.choice("doc_to_choice") : docToChoice,
                m.containsKey("doc_to_target") ? f.prompt("doc_to_target") : docToTarget,
                m.containsKey("gen_prefix") ? f.string("gen_prefix", null) : genPrefix,
                m.containsKey("fewshot_delimiter") ? f.string("fewshot_delimiter", null) : fewshotDelimiter,
                m.containsKey("target_delimiter") ? f.string("target_delimiter", null) : targetDelimiter);
    }

    private static List<MetricSpec> metrics(String at, Object raw, OutputType type) {
        List<MetricSpec> out = new ArrayList<>();
        if (raw == null) {
            for (String name : defaultMetrics(type)) {
                out.add(new MetricSpec(name, null, null, Map.of()));
            }
            return List.copyOf(out);
        }
        if (!(raw instanceof List<?> l)) {
            throw new IllegalArgumentException(at + "field 'metric_list' must be a list");
        }
        for (int i = 0; i < l.size(); i++) {
            String field = "metric_list[" + i + "]";
            if (!(l.get(i) instanceof Map<?, ?> m)) {
                throw new IllegalArgumentException(at + "field '" + field + "' must be a mapping");
            }
            Map<String, Object> mm = stringKeys(at, field, m);
            Fields f = new Fields(at, mm, field + ".");
            String metric = f.string("metric", null);
            if (metric == null) {
                throw new IllegalArgumentException(at + "field '" + field + ".metric' is missing");
            }
            if (Boolean.TRUE.equals(mm.get("hf_evaluate"))) {
                throw new IllegalArgumentException(
                        at + "field '" + field + ".hf_evaluate': Hugging Face evaluate metrics need Python");
            }
            Object hib = mm.get("higher_is_better");
            if (hib != null && !(hib instanceof Boolean)) {
                throw new IllegalArgumentException(at + "field '" + field + ".higher_is_better' must be true or false");
            }
            Map<String, Object> kwargs = new LinkedHashMap<>(mm);
            for (String k : List.of("metric", "aggregation", "higher_is_better", "hf_evaluate")) {
                kwargs.remove(k);
            }
            out.add(new MetricSpec(
                    metric, f.string("aggregation", null), (Boolean) hib, Collections.unmodifiableMap(kwargs)));
        }
        return List.copyOf(out);
    }

    private static List<FilterSpec> filters(String at, Object raw) {
        if (raw == null) {
            return List.of(new FilterSpec("none", List.of(new FilterStep("take_first", Map.of()))));
        }
        if (!(raw instanceof List<?> l)) {
            throw new IllegalArgumentException(at + "field 'filter_list' must be a list of {name, filter}");
        }
        List<FilterSpec> out = new ArrayList<>();
        for (int i = 0; i < l.size(); i++) {
            String field = "filter_list[" + i + "]";
            if (!(l.get(i) instanceof Map<?, ?> m) || !(m.get("name") instanceof String name)) {
                throw new IllegalArgumentException(at + "field '" + field + "' must be a mapping with a name");
            }
            if (!(m.get("filter") instanceof List<?> steps)) {
                throw new IllegalArgumentException(at + "field '" + field + ".filter' must be a list of steps");
            }
            List<FilterStep> fs = new ArrayList<>();
            for (int j = 0; j < steps.size(); j++) {
                String sf = field + ".filter[" + j + "]";
                if (!(steps.get(j) instanceof Map<?, ?> s) || !(s.get("function") instanceof String fn)) {
                    throw new IllegalArgumentException(at + "field '" + sf + "' must be a mapping with a function");
                }
                Map<String, Object> kwargs = new LinkedHashMap<>(stringKeys(at, sf, s));
                kwargs.remove("function");
                fs.add(new FilterStep(fn, Collections.unmodifiableMap(kwargs)));
            }
            out.add(new FilterSpec(name, List.copyOf(fs)));
        }
        return List.copyOf(out);
    }

    private static GenerationKwargs generation(String at, Object raw, OutputType type, String fewshotDelimiter) {
        if (raw == null) {
            if (type != OutputType.GENERATE_UNTIL) {
                return null;
            }
            Map<String, Object> all = new LinkedHashMap<>();
            all.put("temperature", 0.0);
            all.put("do_sample", false);
            all.put("max_gen_toks", DEFAULT_MAX_GEN_TOKS);
            all.put("until", List.of(fewshotDelimiter));
            return new GenerationKwargs(
                    List.of(fewshotDelimiter), DEFAULT_MAX_GEN_TOKS, false, 0.0, Collections.unmodifiableMap(all));
        }
        if (!(raw instanceof Map<?, ?> m)) {
            throw new IllegalArgumentException(at + "field 'generation_kwargs' must be a mapping");
        }
        Map<String, Object> all = new LinkedHashMap<>(stringKeys(at, "generation_kwargs", m));
        Fields f = new Fields(at, all, "generation_kwargs.");
        List<String> until;
        Object u = all.get("until");
        if (u == null) {
            until = List.of(fewshotDelimiter);
        } else if (u instanceof String s) {
            until = List.of(s);
        } else {
            until = f.stringList("until");
        }
        all.put("until", until);
        Integer max = f.integer("max_gen_toks");
        if (max != null && max < 1) {
            throw new IllegalArgumentException(at + "field 'generation_kwargs.max_gen_toks' must be at least 1");
        }
        Object ds = all.get("do_sample");
        if (ds != null && !(ds instanceof Boolean)) {
            throw new IllegalArgumentException(at + "field 'generation_kwargs.do_sample' must be true or false");
        }
        double temperature = 0.0;
        if (all.get("temperature") != null) {
            if (!(all.get("temperature") instanceof Number n)) {
                throw new IllegalArgumentException(at + "field 'generation_kwargs.temperature' must be a number");
            }
            temperature = n.doubleValue();
            all.put("temperature", temperature);
        }
        return new GenerationKwargs(
                until,
                max == null ? DEFAULT_MAX_GEN_TOKS : max,
                Boolean.TRUE.equals(ds),
                temperature,
                Collections.unmodifiableMap(all));
    }

    static Map<String, Object> stringKeys(String at, String field, Map<?, ?> m) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : m.entrySet()) {
            if (!(e.getKey() instanceof String k)) {
                throw new IllegalArgumentException(
                        at + "field '" + field + "' has a key " + e.getKey() + " that is not a string");
            }
            out.put(k, e.getValue());
        }
        return Collections.unmodifiableMap(out);
    }

    /** Typed reads of one mapping's fields, errors naming the field. */
    private static final class Fields {
        final String at;
        final Map<String, Object> cfg;
        final String prefix;

        Fields(String at, Map<String, Object> cfg) {
            this(at, cfg, "");
        }

        Fields(String at, Map<String, Object> cfg, String prefix) {
            this.at = at;
            this.cfg = cfg;
            this.prefix = prefix;
        }

        IllegalArgumentException bad(String k, String want) {
            return new IllegalArgumentException(at + "field '" + prefix + k + "' must be " + want + ", got "
                    + Py.typeName(cfg.get(k)) + " " + Py.repr(cfg.get(k)));
        }

        String string(String k, String dflt) {
            Object v = cfg.get(k);
            if (v == null) {
                return dflt;
            }
            if (v instanceof String s) {
                return s;
            }
            if (v instanceof Number || v instanceof Boolean) { // PyYAML would give a number: lm-eval uses it as text
                return Py.str(v);
            }
            throw bad(k, "a string");
        }

        Integer integer(String k) {
            Object v = cfg.get(k);
            if (v == null) {
                return null;
            }
            if (v instanceof Integer i) {
                return i;
            }
            throw bad(k, "an integer");
        }

        List<String> stringList(String k) {
            Object v = cfg.get(k);
            if (v == null) {
                return List.of();
            }
            if (v instanceof String s) {
                return List.of(s);
            }
            if (v instanceof List<?> l && l.stream().allMatch(x -> x instanceof String)) {
                List<String> out = new ArrayList<>();
                l.forEach(x -> out.add((String) x));
                return List.copyOf(out);
            }
            throw bad(k, "a string or a list of strings");
        }

        Map<String, Object> map(String k) {
            Object v = cfg.get(k);
            if (v == null) {
                return null;
            }
            if (v instanceof Map<?, ?> m) {
                return stringKeys(at, prefix + k, m);
            }
            throw bad(k, "a mapping");
        }

        /** doc_to_text / doc_to_target: a string (column or template), an integer, or (target) a list. */
        Object prompt(String k) {
            Object v = cfg.get(k);
            if (v == null || v instanceof String || v instanceof Integer) {
                return v;
            }
            if (v instanceof List<?> l) {
                return Collections.unmodifiableList(new ArrayList<>(l));
            }
            throw bad(k, "a column name, a template or an integer");
        }

        /** doc_to_choice: a string (column or template), a list, or a mapping (its values). */
        Object choice(String k) {
            Object v = cfg.get(k);
            if (v == null || v instanceof String) {
                return v;
            }
            if (v instanceof List<?> l) {
                return Collections.unmodifiableList(new ArrayList<>(l));
            }
            if (v instanceof Map<?, ?> m) {
                return stringKeys(at, prefix + k, m);
            }
            throw bad(k, "a column name, a template, a list or a mapping");
        }
    }

    public TaskConfig {
        Objects.requireNonNull(task, "task");
        tags = List.copyOf(tags);
        metadata = Collections.unmodifiableMap(new LinkedHashMap<>(metadata));
    }
}
