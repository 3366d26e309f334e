package dev.scorch.jobs.lmeval;

import java.util.ArrayList;
import java.util.List;

/**
 * lm-eval's default ContextSampler: {@code rnd.sample(pool, n)}, or, given the evaluation document,
 * {@code rnd.sample(pool, n + 1)} with every draw equal to that document dropped and the first n kept. The draw is
 * n + 1 whether or not the document is in it, so the stream advances the same either way. One PyRandom (seeded with the
 * few-shot seed, {@link FewShotSampler#DEFAULT_SEED} by default) serves the whole task in document order.
 */
public final class RandomFewShotSampler<T> implements FewShotSampler<T> {
    private final List<T> pool;
    private final PyRandom rnd;

    public RandomFewShotSampler(List<T> pool, PyRandom rnd) {
        this.pool = List.copyOf(pool);
        this.rnd = rnd;
    }

    @Override
    public List<T> sample(int n, T evalDoc) {
        if (n < 0) {
            throw new IllegalArgumentException("number of few-shot samples must be >= 0, got " + n);
        }
        if (n == 0) {
            return List.of();
        }
        if (pool.isEmpty()) {
            throw new IllegalStateException("no few-shot documents available for sampling");
        }
        List<T> result;
        if (FewShotSampler.pyFalsy(evalDoc)) {
            result = rnd.sample(pool, n);
        } else {
            List<T> drawn = rnd.sample(pool, n + 1);
            result = new ArrayList<>(n);
            for (T d : drawn) {
                if (!d.equals(evalDoc) && result.size() < n) {
                    result.add(d);
                }
            }
        }
        if (result.size() != n) {
            throw new IllegalStateException("few-shot samples returned (" + result.size()
                    + ") not equal to the number requested (" + n + "): the evaluation document occurs more than once"
                    + " in the few-shot pool");
        }
        return result;
    }
}
