package dev.scorch.jobs.lmeval.task;

import java.util.List;
import java.util.Map;

/**
 * Picks the few-shot examples for one document (lm-eval's ContextSampler.sample). Implementations may keep
 * state between calls (lm-eval's default sampler draws from one seeded random stream, document after
 * document), so one instance serves one task, called in document order.
 */
public interface FewshotSampler {
    /**
     * @param docs the few-shot pool (fewshot_config.fewshot_indices already applied)
     * @param doc  the document being scored when it may be in the pool (fewshot split == test split), to be
     *             left out; else null
     * @param n    how many examples
     */
    List<Map<String, Object>> sample(List<Map<String, Object>> docs, Map<String, Object> doc, int n);
}
