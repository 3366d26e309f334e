package dev.scorch.jobs.lmeval;

import dev.scorch.jobs.lmeval.task.LmRequest;
import dev.scorch.jobs.lmeval.task.OutputType;
import dev.scorch.jobs.lmeval.task.Py;
import dev.scorch.jobs.lmeval.task.TaskConfig;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/** Per-document metrics of a task under each filter, and their aggregates and stderrs as lm-eval computes them. */
final class TaskScoring {
    private TaskScoring() {}

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

    static TaskScores scores(TaskPlan p) {
        TaskScores ts = new TaskScores();
        TaskConfig cfg = p.cfg;
        int repeats = cfg.repeats();
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
                List<PlannedRequest> reqs = p.requests.get(d);
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
                        for (PlannedRequest q : reqs) {
                            resps.add(Collections.nCopies(repeats, List.of(Py.str(q.ll), q.greedy ? "True" : "False")));
                            filtered.add(List.of(Py.str(q.ll), q.greedy ? "True" : "False"));
                        }
                    }
                    case LOGLIKELIHOOD -> {
                        PlannedRequest q = reqs.get(0);
                        for (TaskConfig.MetricSpec m : cfg.metricList()) {
                            metrics.put(m.metric(), m.metric().equals("acc") ? (q.greedy ? 1.0 : 0.0) : q.ll);
                        }
                        resps.add(Collections.nCopies(repeats, List.of(Py.str(q.ll), q.greedy ? "True" : "False")));
                        filtered.add(List.of(Py.str(q.ll), q.greedy ? "True" : "False"));
                    }
                    case LOGLIKELIHOOD_ROLLING -> {
                        PlannedRequest q = reqs.get(0);
                        String text = q.request.continuation();
                        long words = WORDS.split(text, -1).length;
                        long bytes = text.getBytes(StandardCharsets.UTF_8).length;
                        for (TaskConfig.MetricSpec m : cfg.metricList()) {
                            metrics.put(m.metric(), q.ll);
                            ws.computeIfAbsent(m.metric(), x -> new ArrayList<>())
                                    .add(m.metric().equals("word_perplexity") ? words : bytes);
                        }
                        resps.add(Collections.nCopies(repeats, Py.str(q.ll)));
                        filtered.add(Py.str(q.ll));
                    }
                    case GENERATE_UNTIL -> {
                        List<String> texts = reqs.stream().map(q -> q.text).toList(); // one per repeat
                        List<String> f = fe.apply(texts);
                        List<String> refs;
                        if (cfg.docToChoice() != null && target instanceof Number g) {
                            refs = List.of(Py.str(p.renderer.docToChoice(doc).get(g.intValue())));
                        } else if (target instanceof List<?> l) {
                            refs = l.stream().map(Py::str).toList();
                        } else {
                            refs = List.of(Py.str(target));
                        }
                        boolean multipleTargets = target instanceof List<?>;
                        for (TaskConfig.MetricSpec m : cfg.metricList()) {
                            ExactMatch em = exactMatch(m);
                            metrics.put(
                                    m.metric(),
                                    fe.yieldsOne() ? em.score(f.get(0), refs) : em.scoreAll(f, refs, multipleTargets));
                        }
                        resps.add(texts);
                        filtered.add(fe.yieldsOne() ? f.get(0) : f);
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

    static Map<String, Object> sample(
            int docId,
            Map<String, Object> doc,
            Object target,
            List<PlannedRequest> reqs,
            List<Object> resps,
            List<Object> filtered,
            String filter,
            Map<String, Object> metrics) {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("doc_id", docId);
        s.put("doc", doc);
        s.put("target", Py.str(target));
        Map<String, Object> args = new LinkedHashMap<>();
        List<LmRequest> distinct = new ArrayList<>(); // a generate_until request's repeats are one instance
        for (PlannedRequest q : reqs) {
            if (distinct.isEmpty() || distinct.get(distinct.size() - 1) != q.request) {
                distinct.add(q.request);
            }
        }
        for (int i = 0; i < distinct.size(); i++) {
            LmRequest r = distinct.get(i);
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

    static List<Aggregate> aggregate(TaskPlan p, TaskScores ts, Aggregations agg, int bootstrapIters) {
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

    static Object num(double v) {
        return Double.isNaN(v) ? "N/A" : (Object) v;
    }
}
