package dev.scorch.jobs.lmeval;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * One lm-eval run (bin/scorch lm-eval, or {@link LmEvalJob#run} from the API), lm-eval's options by their meaning.
 *
 * @param tasks             --tasks: task, group or tag names, or YAML paths
 * @param includePaths      --include_path folders, indexed after the built-in conf/evals/lm-eval (theirs win)
 * @param numFewshot        --num_fewshot (null: each task's)
 * @param limit             --limit: below 1.0 a fraction of each task's documents (rounded up), else a count; null: all
 * @param outputPath        --output_path: results_TIMESTAMP.json, samples_TASK_TIMESTAMP.jsonl and history/
 * @param seeds             --seed's four values (python, numpy, torch, few-shot), each null for None
 * @param genKwargs         --gen_kwargs parsed (null: none); they override each generate_until task's
 * @param systemInstruction --system_instruction (null: none)
 * @param applyChatTemplate --apply_chat_template [NAME]: null off, "" the model's default template, else its name
 * @param fewshotAsMultiturn --fewshot_as_multiturn: null not given (then on with a chat template, as in lm-eval)
 * @param datasetDirs       --dataset_dir NAME[/CONFIG]=PATH
 * @param tolerance         the largest drop of any metric that --compare-to lets pass
 * @param bootstrapIters    lm-eval's bootstrap_iters (100000)
 */
public record LmEvalSpec(
        Path model,
        List<String> tasks,
        List<Path> includePaths,
        Integer numFewshot,
        Double limit,
        String outputPath,
        boolean logSamples,
        List<Long> seeds,
        Map<String, Object> genKwargs,
        String systemInstruction,
        String applyChatTemplate,
        Boolean fewshotAsMultiturn,
        Map<String, Path> datasetDirs,
        String runId,
        String compareTo,
        double tolerance,
        int bootstrapIters,
        int partitions,
        int threads,
        String weights,
        int maxBatchTokens) {

    /** lm-eval's default --seed: 0,1234,1234,1234. */
    public static final List<Long> DEFAULT_SEEDS = List.of(0L, 1234L, 1234L, 1234L);

    /** Whether prompts go through the model's chat template. */
    public boolean chat() {
        return applyChatTemplate != null;
    }

    /** --fewshot_as_multiturn as lm-eval resolves it: given, else on exactly when a chat template is applied. */
    public boolean multiturn() {
        return fewshotAsMultiturn != null ? fewshotAsMultiturn : chat();
    }

    /** The value lm-eval records as fewshot_as_multiturn: given, else true with a chat template, else null. */
    public Boolean recordedMultiturn() {
        return fewshotAsMultiturn != null ? fewshotAsMultiturn : chat() ? Boolean.TRUE : null;
    }

    /** The few-shot sampler's seed (the fourth --seed value); lm-eval's default 1234 when None. */
    public long fewshotSeed() {
        Long s = seeds.size() > 3 ? seeds.get(3) : null;
        return s == null ? FewShotSampler.DEFAULT_SEED : s;
    }
}
