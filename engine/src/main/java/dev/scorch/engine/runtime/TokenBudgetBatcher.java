package dev.scorch.engine.runtime;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
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
}
