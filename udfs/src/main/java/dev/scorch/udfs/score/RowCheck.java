package dev.scorch.udfs.score;

import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.LogitsMode;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.complex.ListVector;

/**
 * Validation of one input row's token ids, read straight from its Arrow list: an int[] to score, or the problem; and of
 * its scores, which must all be finite.
 */
public final class RowCheck {
    private RowCheck() {}

    /** Row i of a list<bigint> vector: its ids as int[], or a String naming the first problem (position and limit). */
    static Object tokens(ListVector ids, int i, int vocab, int maxPositions) {
        if (ids.isNull(i)) {
            return "token_ids is null";
        }
        int start = ids.getElementStartIndex(i);
        int n = ids.getElementEndIndex(i) - start;
        if (n == 0) {
            return "token_ids is empty";
        }
        if (n > maxPositions) {
            return n + " tokens exceed the model's max_position_embeddings " + maxPositions;
        }
        BigIntVector data = (BigIntVector) ids.getDataVector();
        int[] out = new int[n];
        for (int k = 0; k < n; k++) {
            if (data.isNull(start + k)) {
                return "token id at position " + k + " is null";
            }
            long id = data.get(start + k);
            if (id < 0 || id >= vocab) {
                return outOfVocabulary(id, k, vocab);
            }
            out[k] = (int) id;
        }
        return out;
    }

    /** The same check on a Spark array&lt;bigint&gt; (an input row read without Arrow). */
    public static Object tokens(org.apache.spark.sql.catalyst.util.ArrayData ids, int vocab, int maxPositions) {
        int n = ids.numElements();
        if (n == 0) {
            return "token_ids is empty";
        }
        if (n > maxPositions) {
            return n + " tokens exceed the model's max_position_embeddings " + maxPositions;
        }
        int[] out = new int[n];
        for (int k = 0; k < n; k++) {
            if (ids.isNullAt(k)) {
                return "token id at position " + k + " is null";
            }
            long id = ids.getLong(k);
            if (id < 0 || id >= vocab) {
                return outOfVocabulary(id, k, vocab);
            }
            out[k] = (int) id;
        }
        return out;
    }

    /** Tokenised text: the same length and vocabulary limits (a tokenizer may know ids the model does not). */
    public static String tokenized(int[] ids, int vocab, int maxPositions) {
        if (ids.length > maxPositions) {
            return ids.length + " tokens exceed the model's max_position_embeddings " + maxPositions;
        }
        for (int k = 0; k < ids.length; k++) {
            if (ids[k] < 0 || ids[k] >= vocab) {
                return outOfVocabulary(ids[k], k, vocab);
            }
        }
        return null;
    }

    /** Why scores are not returned for a row whose model produced NaN or infinity. */
    static final String NON_FINITE = ": the checkpoint's weights or config produce NaN/Inf";

    /**
     * The first score of sequence seq that is not finite (its log-probs at scored positions, their top-k alternatives,
     * the logits rows it keeps), named by kind and token position; null when all are finite. NaN or infinity there is
     * the model's fault (NaN/Inf weights, or config values that overflow), never a result.
     */
    static String scores(BatchScores s, int seq, LogitsMode logits) {
        float[] lp = s.tokenLogprobs();
        int t0 = s.tokenStart(seq);
        int n = s.length(seq);
        for (int k = 0; k < n; k++) {
            if (s.isScored(seq, k) && !Float.isFinite(lp[t0 + k])) {
                return "non-finite log-probs at token " + k + NON_FINITE;
            }
        }
        int topK = s.topK(seq);
        for (int k = 0; k < n && topK > 0; k++) {
            if (s.isScored(seq, k)) {
                int o = s.topOffset(seq, k);
                for (int j = 0; j < topK; j++) {
                    if (!Float.isFinite(s.topLogprobs()[o + j])) {
                        return "non-finite top-k log-probs at token " + k + NON_FINITE;
                    }
                }
            }
        }
        int rows = s.logitsRows(seq);
        for (int r = 0; r < rows; r++) {
            int o = s.logitsOffset(seq, r);
            for (int v = 0; v < s.vocab(); v++) {
                if (!Float.isFinite(s.logits()[o + v])) {
                    return "non-finite logits at token " + (logits == LogitsMode.LAST ? n - 1 : r) + NON_FINITE;
                }
            }
        }
        return null;
    }

    private static String outOfVocabulary(long id, int k, int vocab) {
        return "token id " + id + " at position " + k + " is outside the vocabulary [0, " + vocab + ")";
    }
}
