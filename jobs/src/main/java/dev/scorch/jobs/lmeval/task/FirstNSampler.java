package dev.scorch.jobs.lmeval.task;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * lm-eval's {@code first_n} sampler: the pool's first n documents in order, after leaving out every document
 * equal to the one being scored (when given). Asking for more than the pool holds is an error.
 */
public final class FirstNSampler implements FewshotSampler {
    @Override
    public List<Map<String, Object>> sample(List<Map<String, Object>> docs, Map<String, Object> doc, int n) {
        List<Map<String, Object>> pool = docs;
        if (doc != null) {
            pool = new ArrayList<>();
            for (Map<String, Object> d : docs) {
                if (!d.equals(doc)) {
                    pool.add(d);
                }
            }
        }
        if (n > pool.size()) {
            throw new IllegalArgumentException(
                    "first_n sampler: " + n + " few-shot examples asked for, " + pool.size() + " available");
        }
        return List.copyOf(pool.subList(0, n));
    }
}
