package dev.scorch.engine.tokenizer;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The BPE merge loop shared by {@link HfTokenizer} and {@link TiktokenTokenizer}. A word starts as one symbol
 * per byte; the adjacent pair with the lowest merge rank is merged, one pair at a time and leftmost first
 * on ties (as both Hugging Face's priority queue and tiktoken's loop do), until no pair has a merge.
 * Results are cached per word.
 */
final class BytePairEncoder {
    /** Words at most this long go through the simple rescan loop; longer ones use a heap (O(n log n)). */
    private static final int SMALL_WORD = 48;
    /** Words longer than this are not cached; the cache is cleared when it reaches MAX_CACHE entries. */
    private static final int MAX_CACHED_LENGTH = 64;

    private static final int MAX_CACHE = 1 << 18;

    private final int[] byteToId;
    private final PairMap merges;
    private final ConcurrentHashMap<String, int[]> cache = new ConcurrentHashMap<>();

    /**
     * @param byteToId the id of each single byte's token (-1 when the vocabulary lacks it: such bytes are
     *     dropped, as Hugging Face BPE does without an unk token)
     * @param merges (left id, right id) to (rank, merged id)
     */
    BytePairEncoder(int[] byteToId, PairMap merges) {
        this.byteToId = byteToId.clone();
        this.merges = merges;
    }

    /** Appends the ids of one pre-tokenized word (its UTF-8 bytes are what gets merged). */
    void encode(String word, IntList out) {
        int[] hit = cache.get(word);
        if (hit != null) {
            out.addAll(hit);
            return;
        }
        encode(word, word.getBytes(StandardCharsets.UTF_8), out);
    }

    /** Appends the ids of one word given as bytes ({@code key} identifies it in the cache, may be null). */
    void encode(String key, byte[] bytes, IntList out) {
        if (bytes.length == 1) {
            int id = byteToId[bytes[0] & 0xFF];
            if (id >= 0) {
                out.add(id);
            }
            return;
        }
        boolean cacheable = key != null && bytes.length <= MAX_CACHED_LENGTH;
        if (cacheable) {
            int[] hit = cache.get(key);
            if (hit != null) {
                out.addAll(hit);
                return;
            }
        }
        int[] syms = new int[bytes.length];
        int n = 0;
        for (byte b : bytes) {
            int id = byteToId[b & 0xFF];
            if (id >= 0) {
                syms[n++] = id;
            }
        }
        int[] ids = n <= SMALL_WORD ? mergeSmall(syms, n) : mergeLarge(syms, n);
        if (cacheable) {
            if (cache.size() >= MAX_CACHE) {
                cache.clear();
            }
            cache.put(key, ids);
        }
        out.addAll(ids);
    }

    /** The merge result of a word given as initial symbol ids, by either loop (for tests). */
    int[] merge(int[] syms, boolean heap) {
        return heap ? mergeLarge(syms.clone(), syms.length) : mergeSmall(syms.clone(), syms.length);
    }

    /** Rescans the pair ranks each round and merges the leftmost lowest-rank pair. */
    private int[] mergeSmall(int[] syms, int n) {
        long[] pairRank = new long[Math.max(n, 1)];
        for (int i = 0; i + 1 < n; i++) {
            pairRank[i] = merges.get(syms[i], syms[i + 1]);
        }
        while (n > 1) {
            long best = PairMap.NONE;
            int at = -1;
            for (int i = 0; i + 1 < n; i++) {
                if (pairRank[i] < best) { // packed rank << 32 | id: ranks are unique per pair, so this orders by rank
                    best = pairRank[i];
                    at = i;
                }
            }
            if (at < 0) {
                break;
            }
            syms[at] = PairMap.id(best);
            System.arraycopy(syms, at + 2, syms, at + 1, n - at - 2);
            System.arraycopy(pairRank, at + 2, pairRank, at + 1, n - at - 2);
            n--;
            if (at > 0) {
                pairRank[at - 1] = merges.get(syms[at - 1], syms[at]);
            }
            if (at + 1 < n) {
                pairRank[at] = merges.get(syms[at], syms[at + 1]);
            }
        }
        return Arrays.copyOf(syms, n);
    }

    /** Linked list of symbols plus a heap of (rank, position); stale heap entries are skipped. */
    private int[] mergeLarge(int[] sym, int n) {
        int[] next = new int[n];
        int[] prev = new int[n];
        LongHeap heap = new LongHeap(n);
        for (int i = 0; i < n; i++) {
            next[i] = i + 1 < n ? i + 1 : -1;
            prev[i] = i - 1;
            if (i + 1 < n) {
                push(heap, sym, i, i + 1);
            }
        }
        while (!heap.isEmpty()) {
            long e = heap.poll();
            int i = (int) e;
            int j = next[i];
            if (sym[i] < 0 || j < 0) {
                continue;
            }
            long rm = merges.get(sym[i], sym[j]);
            if (rm == PairMap.NONE || PairMap.rank(rm) != (int) (e >>> 32)) {
                continue; // stale: the pair at i changed since this entry was pushed
            }
            sym[i] = PairMap.id(rm);
            sym[j] = -1;
            next[i] = next[j];
            if (next[j] >= 0) {
                prev[next[j]] = i;
            }
            if (prev[i] >= 0) {
                push(heap, sym, prev[i], i);
            }
            if (next[i] >= 0) {
                push(heap, sym, i, next[i]);
            }
        }
        int[] out = new int[n];
        int k = 0;
        for (int i = 0; i >= 0; i = next[i]) {
            out[k++] = sym[i];
        }
        return Arrays.copyOf(out, k);
    }

    private void push(LongHeap heap, int[] sym, int i, int j) {
        long rm = merges.get(sym[i], sym[j]);
        if (rm != PairMap.NONE) {
            heap.add(((long) PairMap.rank(rm) << 32) | i);
        }
    }

    /** Open-addressing map from a pair of ids to (rank, merged id), packed as rank << 32 | id. */
    static final class PairMap {
        static final long NONE = Long.MAX_VALUE;
        private long[] keys;
        private long[] values;
        private int size;
        private int mask;

        PairMap(int expected) {
            int cap = Integer.highestOneBit(Math.max(16, expected * 2 - 1)) << 1;
            keys = new long[cap];
            values = new long[cap];
            Arrays.fill(keys, -1L);
            mask = cap - 1;
        }

        static int rank(long v) {
            return (int) (v >>> 32);
        }

        static int id(long v) {
            return (int) v;
        }

        /** Adds a merge unless the pair already has one (the first, lowest rank wins, as in Hugging Face). */
        void putIfAbsent(int left, int right, int rank, int merged) {
            if (size * 2 >= keys.length) {
                grow();
            }
            long k = key(left, right);
            int i = slot(k);
            while (keys[i] != -1L) {
                if (keys[i] == k) {
                    return;
                }
                i = (i + 1) & mask;
            }
            keys[i] = k;
            values[i] = ((long) rank << 32) | (merged & 0xFFFFFFFFL);
            size++;
        }

        /** The packed (rank, merged id), or NONE. */
        long get(int left, int right) {
            long k = key(left, right);
            int i = slot(k);
            long probe;
            while ((probe = keys[i]) != -1L) {
                if (probe == k) {
                    return values[i];
                }
                i = (i + 1) & mask;
            }
            return NONE;
        }

        private static long key(int left, int right) {
            return ((long) left << 32) | (right & 0xFFFFFFFFL);
        }

        private int slot(long k) {
            long h = k * 0x9E3779B97F4A7C15L;
            return (int) (h >>> 40) & mask;
        }

        private void grow() {
            long[] oldKeys = keys;
            long[] oldValues = values;
            keys = new long[oldKeys.length * 2];
            values = new long[oldKeys.length * 2];
            Arrays.fill(keys, -1L);
            mask = keys.length - 1;
            for (int i = 0; i < oldKeys.length; i++) {
                if (oldKeys[i] != -1L) {
                    int s = slot(oldKeys[i]);
                    while (keys[s] != -1L) {
                        s = (s + 1) & mask;
                    }
                    keys[s] = oldKeys[i];
                    values[s] = oldValues[i];
                }
            }
        }
    }

    /** Binary min-heap of longs. */
    private static final class LongHeap {
        private long[] a;
        private int n;

        LongHeap(int capacity) {
            a = new long[Math.max(4, capacity)];
        }

        boolean isEmpty() {
            return n == 0;
        }

        void add(long v) {
            if (n == a.length) {
                a = Arrays.copyOf(a, n * 2);
            }
            int i = n++;
            while (i > 0) {
                int p = (i - 1) >>> 1;
                if (a[p] <= v) {
                    break;
                }
                a[i] = a[p];
                i = p;
            }
            a[i] = v;
        }

        long poll() {
            long top = a[0];
            long v = a[--n];
            int i = 0;
            while (true) {
                int c = 2 * i + 1;
                if (c >= n) {
                    break;
                }
                if (c + 1 < n && a[c + 1] < a[c]) {
                    c++;
                }
                if (v <= a[c]) {
                    break;
                }
                a[i] = a[c];
                i = c;
            }
            if (n > 0) {
                a[i] = v;
            }
            return top;
        }
    }
}
