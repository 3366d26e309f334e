package dev.scorch.engine.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class TokenBudgetBatcherTest {

    /** A sequence of some length; identity matters (two items of one length are different items). */
    record Item(String name, int len) {}

    static List<Item> items(int... lens) {
        List<Item> out = new ArrayList<>();
        for (int i = 0; i < lens.length; i++) {
            out.add(new Item("s" + i, lens[i]));
        }
        return out;
    }

    static List<List<Item>> batch(List<Item> window, int budget) {
        return TokenBudgetBatcher.batches(window, Item::len, budget);
    }

    static int tokens(List<Item> batch) {
        return batch.stream().mapToInt(Item::len).sum();
    }

    /** Every invariant at once: each item exactly once, batches non-empty, within budget unless a lone long item,
     *  sorted by length (stable), and greedy (a batch is closed only when the next item would not fit). */
    static void assertValid(List<Item> window, int budget, List<List<Item>> batches) {
        Map<Item, Integer> seen = new IdentityHashMap<>();
        List<Item> flat = new ArrayList<>();
        for (List<Item> b : batches) {
            assertTrue(!b.isEmpty(), "an empty batch");
            if (b.size() > 1) { // only a lone item may exceed the budget
                assertTrue(
                        tokens(b) <= budget, "batch of " + tokens(b) + " tokens over the budget " + budget + ": " + b);
            }
            for (Item it : b) {
                seen.merge(it, 1, Integer::sum);
                flat.add(it);
            }
        }
        assertEquals(window.size(), flat.size(), "items in = items out");
        for (Item it : window) {
            assertEquals(1, seen.getOrDefault(it, 0), it + " must appear exactly once");
        }
        for (int i = 1; i < flat.size(); i++) {
            Item a = flat.get(i - 1);
            Item b = flat.get(i);
            assertTrue(a.len() <= b.len(), "not sorted by length: " + a + " before " + b);
            if (a.len() == b.len()) {
                assertTrue(
                        window.indexOf(a) < window.indexOf(b),
                        "equal lengths must keep their input order: " + a + ", " + b);
            }
        }
        for (int k = 0; k + 1 < batches.size(); k++) {
            int next = batches.get(k + 1).get(0).len();
            assertTrue(
                    tokens(batches.get(k)) + next > budget,
                    "batch " + k + " (" + tokens(batches.get(k)) + " tokens) was closed although the next item (" + next
                            + ") fits");
        }
    }

    @Test
    void fillsBatchesUpToTheBudget() {
        List<Item> w = items(30, 10, 20, 40, 10);
        List<List<Item>> b = batch(w, 50);
        assertValid(w, 50, b);
        // sorted: 10, 10, 20, 30, 40 -> [10, 10, 20] (40), [30] (+40 > 50), [40]
        assertEquals(List.of(3, 1, 1), b.stream().map(List::size).toList());
        assertEquals(40, tokens(b.get(0)));
    }

    @Test
    void budgetExactlyReachedStaysInOneBatch() {
        List<Item> w = items(25, 25, 25, 25);
        List<List<Item>> b = batch(w, 50);
        assertValid(w, 50, b);
        assertEquals(List.of(2, 2), b.stream().map(List::size).toList());
    }

    @Test
    void tooLongSequenceGetsABatchOfItsOwn() {
        List<Item> w = items(5, 500, 7, 300, 6);
        List<List<Item>> b = batch(w, 64);
        assertValid(w, 64, b);
        assertEquals(3, b.size());
        assertEquals(List.of(w.get(0), w.get(4), w.get(2)), b.get(0));
        assertEquals(List.of(w.get(3)), b.get(1), "300 tokens alone");
        assertEquals(List.of(w.get(1)), b.get(2), "500 tokens alone");
    }

    @Test
    void budgetOfOneTokenMakesOneBatchPerSequence() {
        List<Item> w = items(3, 1, 2, 1);
        List<List<Item>> b = batch(w, 1);
        assertValid(w, 1, b);
        assertEquals(4, b.size());
    }

    @Test
    void equalLengthsKeepInputOrder() {
        List<Item> w = items(8, 8, 8, 8, 8, 8);
        List<List<Item>> b = batch(w, 16);
        assertValid(w, 16, b);
        assertEquals(List.of(List.of(w.get(0), w.get(1)), List.of(w.get(2), w.get(3)), List.of(w.get(4), w.get(5))), b);
    }

    @Test
    void emptyWindowMakesNoBatches() {
        assertEquals(List.of(), batch(List.of(), 10));
    }

    @Test
    void theWindowIsNotModified() {
        List<Item> w = items(9, 1, 5);
        List<Item> copy = List.copyOf(w);
        batch(w, 6);
        assertEquals(copy, w);
        for (int i = 0; i < w.size(); i++) {
            assertSame(copy.get(i), w.get(i));
        }
    }

    @Test
    void nonPositiveBudgetIsRejected() {
        assertThrows(IllegalArgumentException.class, () -> batch(items(1), 0));
        assertThrows(IllegalArgumentException.class, () -> batch(items(1), -5));
    }

    @Test
    void randomWindowsKeepEveryInvariant() {
        Random r = new Random(11);
        for (int trial = 0; trial < 500; trial++) {
            int n = r.nextInt(60);
            int[] lens = new int[n];
            for (int i = 0; i < n; i++) {
                lens[i] = 1 + (r.nextInt(10) == 0 ? r.nextInt(2000) : r.nextInt(100));
            }
            int budget = 1 + r.nextInt(r.nextBoolean() ? 128 : 4096);
            List<Item> w = items(lens);
            assertValid(w, budget, batch(w, budget));
        }
    }

    /**
     * Shared-prefix batches: in token order, so sequences with the same leading tokens are neighbours; a batch is cut
     * where the tokens a sequence does not share with the one before it would pass the budget, or the whole tokens
     * would pass SHARED_CACHE_FACTOR budgets.
     */
    @Test
    void sharedPrefixBatchesAreInTokenOrderAndCountOnlyUnsharedTokens() {
        int[] a1 = {1, 2, 3, 4, 5, 9};
        int[] b1 = {7, 7, 7, 7, 1};
        int[] a2 = {1, 2, 3, 4, 5, 8};
        int[] b2 = {7, 7, 7, 7, 2};
        List<int[]> window = List.of(a1, b1, a2, b2);
        // a2, a1 share 5 tokens: together they add 6 + 1; b1, b2 add 5 + 1; budget 7 holds each pair alone
        List<List<int[]>> got = TokenBudgetBatcher.bySharedPrefix(window, t -> t, 7);
        assertEquals(2, got.size());
        assertEquals(List.of(a2, a1), got.get(0));
        assertEquals(List.of(b1, b2), got.get(1));
        // budget 13: all four (6 + 1 + 5 + 1 = 13), in token order
        assertEquals(List.of(List.of(a2, a1, b1, b2)), TokenBudgetBatcher.bySharedPrefix(window, t -> t, 13));
        // whole tokens capped at 16 budgets: 17 copies of a 1-token sequence at budget 1 make two batches
        List<int[]> same = new ArrayList<>();
        for (int i = 0; i < 17; i++) {
            same.add(new int[] {4});
        }
        List<List<int[]>> capped = TokenBudgetBatcher.bySharedPrefix(same, t -> t, 1);
        assertEquals(2, capped.size());
        assertEquals(TokenBudgetBatcher.SHARED_CACHE_FACTOR, capped.get(0).size());
        assertThrows(IllegalArgumentException.class, () -> TokenBudgetBatcher.bySharedPrefix(window, t -> t, 0));
    }
}
