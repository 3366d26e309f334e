package dev.scorch.engine.runtime;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.function.Function;
import java.util.function.ToIntFunction;

/**
 * Cuts a window of sequences into batches under a token budget: the window is sorted by length (so
 * batch mates are alike and the largest batches are of short rows), then filled in order until the next
 * sequence would pass the budget. A sequence longer than the budget gets a batch of its own.
 */
public final class TokenBudgetBatcher {
    private TokenBudgetBatcher() {}

    public static <T> List<List<T>> batches(List<T> window, ToIntFunction<T> tokens, int maxBatchTokens) {
        if (maxBatchTokens < 1) {
            throw new IllegalArgumentException("maxBatchTokens must be >= 1, got " + maxBatchTokens);
        }
        List<T> sorted = new ArrayList<>(window);
        sorted.sort(Comparator.comparingInt(tokens)); // stable: equal lengths keep their input order
        List<List<T>> out = new ArrayList<>();
        List<T> current = new ArrayList<>();
        long used = 0;
        for (T item : sorted) {
            int n = tokens.applyAsInt(item);
            if (!current.isEmpty() && used + n > maxBatchTokens) {
                out.add(current);
                current = new ArrayList<>();
                used = 0;
            }
            current.add(item);
            used += n;
        }
        if (!current.isEmpty()) {
            out.add(current);
        }
        return out;
    }

    /**
     * Batches for a scorer that computes shared prefixes once ({@code PrefixSharingScorer}): the window in token order,
     * so sequences with the same leading tokens are neighbours and land in one batch, cut where the tokens a sequence
     * does not share with the one before it (the work it adds) would pass maxBatchTokens, or its whole tokens (the
     * latent caches the batch holds) would pass {@value #SHARED_CACHE_FACTOR} times maxBatchTokens.
     */
    public static <T> List<List<T>> bySharedPrefix(List<T> window, Function<T, int[]> tokens, int maxBatchTokens) {
        if (maxBatchTokens < 1) {
            throw new IllegalArgumentException("maxBatchTokens must be >= 1, got " + maxBatchTokens);
        }
        List<T> sorted = new ArrayList<>(window);
        sorted.sort((a, b) -> Arrays.compare(tokens.apply(a), tokens.apply(b))); // stable among equal sequences
        List<List<T>> out = new ArrayList<>();
        List<T> current = new ArrayList<>();
        long work = 0;
        long held = 0;
        int[] previous = new int[0];
        for (T item : sorted) {
            int[] t = tokens.apply(item);
            int mismatch = Arrays.mismatch(previous, t);
            int own = t.length - (mismatch < 0 ? t.length : mismatch);
            if (!current.isEmpty()
                    && (work + own > maxBatchTokens || held + t.length > (long) SHARED_CACHE_FACTOR * maxBatchTokens)) {
                out.add(current);
                current = new ArrayList<>();
                work = 0;
                held = 0;
            }
            current.add(item);
            work += own;
            held += t.length;
            previous = t;
        }
        if (!current.isEmpty()) {
            out.add(current);
        }
        return out;
    }

    /** The whole tokens of a shared-prefix batch, at most, over its token budget. */
    public static final int SHARED_CACHE_FACTOR = 16;
}
