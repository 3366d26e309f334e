package dev.scorch.jobs.lmeval;

import dev.scorch.engine.config.GenerationConfig;
import dev.scorch.engine.tokenizer.ChatTemplate;
import dev.scorch.jobs.lmeval.task.DataFiles;
import dev.scorch.jobs.lmeval.task.DocRenderer;
import dev.scorch.jobs.lmeval.task.DocTemplates;
import dev.scorch.jobs.lmeval.task.LmRequest;
import dev.scorch.jobs.lmeval.task.OutputType;
import dev.scorch.jobs.lmeval.task.TaskConfig;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.SparkSession;

/**
 * One task, planned on the driver: its config, renderer, documents (after --limit) and requests per document. A
 * generate_until request is planned {@code repeats} times (lm-eval's cloned instances), the others once: their scores
 * do not change from one repeat to the next.
 */
final class TaskPlan {
    /** The metrics lm-eval computes for a multiple_choice task. */
    private static final Set<String> MC_METRICS =
            Set.of("acc", "acc_norm", "acc_bytes", "acc_mutual_info", "exact_match");

    final TaskConfig cfg;
    final DocRenderer renderer;
    final List<Map<String, Object>> docs;
    final int original;
    final int nShot;
    final List<List<PlannedRequest>> requests = new ArrayList<>();
    final TaskConfig.GenerationKwargs gen;
    final HfSampling sampling;

    TaskPlan(
            TaskConfig cfg,
            DocRenderer renderer,
            List<Map<String, Object>> docs,
            int original,
            int nShot,
            TaskConfig.GenerationKwargs gen,
            HfSampling sampling) {
        this.cfg = cfg;
        this.renderer = renderer;
        this.docs = docs;
        this.original = original;
        this.nShot = nShot;
        this.gen = gen;
        this.sampling = sampling;
    }

    static TaskPlan plan(
            SparkSession spark,
            LmEvalSpec spec,
            TaskConfig cfg,
            DocTemplates templates,
            DocRenderer.PromptOptions opts,
            ChatFormat chat,
            LmTokens tokens,
            GenerationConfig checkpoint) {
        String at = "lm-eval task '" + cfg.task() + "' (" + cfg.file() + "): ";
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
        List<Map<String, Object>> all = TaskDocs.readDocs(spark, files.format(), files.split(cfg, cfg.evalSplit()));
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
                    : split.equals(cfg.evalSplit())
                            ? all
                            : TaskDocs.readDocs(spark, files.format(), files.split(cfg, split));
            sampler = FewShotSampler.named(cfg.fewshotConfig().sampler(), pool, spec.fewshotSeed());
        }
        Set<String> features = all.isEmpty() ? Set.of() : all.get(0).keySet();
        DocRenderer renderer = new DocRenderer(cfg, features, pool, sampler, templates);
        TaskConfig.GenerationKwargs gen = generationKwargs(cfg, spec.genKwargs(), at);
        HfSampling sampling = gen == null ? HfSampling.GREEDY : HfSampling.of(gen, checkpoint, at);
        TaskPlan plan = new TaskPlan(cfg, renderer, docs, all.size(), nShot, gen, sampling);
        for (int d = 0; d < docs.size(); d++) {
            List<PlannedRequest> reqs = new ArrayList<>();
            Map<LmRequest.ChatPrompt, String> rendered = new IdentityHashMap<>(); // a document's choices share one
            for (LmRequest r : renderer.requests(d, docs.get(d), opts)) {
                try {
                    if (r.chat() != null) {
                        r = r.withContext(rendered.computeIfAbsent(
                                r.chat(), c -> chat.apply(c.messages(), c.addGenerationPrompt())));
                    }
                } catch (IllegalArgumentException | ChatTemplate.ChatTemplateException e) {
                    throw new IllegalArgumentException(at + "document " + d + ": chat template: " + e.getMessage(), e);
                }
                PlannedRequest q = new PlannedRequest(r);
                try {
                    switch (r.type()) {
                        case LOGLIKELIHOOD -> q.sequences.add(tokens.loglikelihood(r.context(), r.continuation()));
                        case LOGLIKELIHOOD_ROLLING -> q.sequences.addAll(tokens.rolling(r.continuation()));
                        case GENERATE_UNTIL -> {
                            q.maxGenToks = gen.maxGenToks();
                            q.until = gen.until();
                            q.temperature = sampling.sample() ? sampling.temperature() : 0.0;
                            q.prompt = tokens.generationContext(r.context(), q.maxGenToks);
                        }
                        default -> throw new IllegalStateException("request type " + r.type());
                    }
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException(at + "document " + d + ": " + e.getMessage(), e);
                }
                reqs.add(q);
                for (int k = 1; k < r.repeats() && r.type() == OutputType.GENERATE_UNTIL; k++) {
                    PlannedRequest again = new PlannedRequest(r);
                    again.prompt = q.prompt;
                    again.maxGenToks = q.maxGenToks;
                    again.until = q.until;
                    again.temperature = q.temperature;
                    reqs.add(again);
                }
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
            if (!Set.of("until", "max_gen_toks", "do_sample", "temperature", "top_k", "top_p")
                    .contains(k)) {
                throw new IllegalArgumentException(at + "generation_kwargs '" + k
                        + "' is not supported yet (until, max_gen_toks, do_sample, temperature, top_k, top_p are)");
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
        if (ds != null && !(ds instanceof Boolean)) {
            throw new IllegalArgumentException(at + "generation_kwargs do_sample " + ds + ": expected true or false");
        }
        return new TaskConfig.GenerationKwargs(until, maxGen, doSample, temp, all);
    }
}
