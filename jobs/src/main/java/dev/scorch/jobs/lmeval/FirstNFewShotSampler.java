package dev.scorch.jobs.lmeval;

import java.util.ArrayList;
import java.util.List;

/**
 * lm-eval's first_n sampler: the pool's first n documents in order, after dropping every document equal to the
 * evaluation document when one is given. It draws no random numbers.
 */
public final class FirstNFewShotSampler<T> implements FewShotSampler<T> {
    private final List<T> pool;

    public FirstNFewShotSampler(List<T> pool) {
        this.pool = List.copyOf(pool);
    }

    @Override
    public List<T> sample(int n, T evalDoc) {
        List<T> candidates = pool;
        if (evalDoc != null) {
            candidates = new ArrayList<>(pool.size());
            for (T d : pool) {
                if (!d.equals(evalDoc)) {
                    candidates.add(d);
                }
            }
        }
        if (n < 0 || n > candidates.size()) {
            throw new IllegalArgumentException(
                    "number of few-shot samples requested (" + n + ") exceeds the " + candidates.size() + " available");
        }
        return List.copyOf(candidates.subList(0, n));
    }
}
