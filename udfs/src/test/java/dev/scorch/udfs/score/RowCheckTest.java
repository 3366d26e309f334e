package dev.scorch.udfs.score;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import java.util.Arrays;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.types.Types;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** RowCheck reads each row's ids straight from an Arrow list&lt;bigint&gt; and names the first problem. */
class RowCheckTest {
    static final int VOCAB = 512;
    static final int MAX_POS = 8;

    BufferAllocator allocator;
    ListVector ids;

    @BeforeEach
    void open() {
        allocator = new RootAllocator(64 << 20);
        ids = ListVector.empty("token_ids", allocator);
        ids.addOrGetVector(FieldType.nullable(Types.MinorType.BIGINT.getType()));
        ids.allocateNew();
    }

    @AfterEach
    void close() {
        ids.close();
        allocator.close();
    }

    /** Fills the vector: a null list for a null row, null elements where a row holds null. */
    void rows(List<List<Long>> rows) {
        BigIntVector data = (BigIntVector) ids.getDataVector();
        for (int i = 0; i < rows.size(); i++) {
            List<Long> r = rows.get(i);
            if (r == null) {
                ids.setNull(i);
                continue;
            }
            int off = ids.startNewValue(i);
            for (int k = 0; k < r.size(); k++) {
                if (r.get(k) == null) {
                    data.setNull(off + k);
                } else {
                    data.setSafe(off + k, r.get(k));
                }
            }
            ids.endValue(i, r.size());
        }
        ids.setValueCount(rows.size());
    }

    Object check(int row) {
        return RowCheck.tokens(ids, row, VOCAB, MAX_POS);
    }

    static List<Long> longs(long... v) {
        return Arrays.stream(v).boxed().toList();
    }

    @Test
    void goodRowsBecomeIntArraysAtTheirOwnOffsets() {
        rows(Arrays.asList(longs(1, 2, 3), null, longs(511, 0), longs(), longs(7, 7, 7, 7, 7, 7, 7, 7)));
        assertArrayEquals(new int[] {1, 2, 3}, (int[]) check(0));
        assertArrayEquals(new int[] {511, 0}, (int[]) check(2));
        assertArrayEquals(
                new int[] {7, 7, 7, 7, 7, 7, 7, 7}, (int[]) check(4), "exactly max_position_embeddings tokens is fine");
    }

    @Test
    void nullAndEmptyRows() {
        rows(Arrays.asList(null, longs(), longs(4)));
        assertEquals("token_ids is null", check(0));
        assertEquals("token_ids is empty", check(1));
        assertInstanceOf(int[].class, check(2));
    }

    @Test
    void tooManyTokens() {
        rows(List.of(longs(1, 2, 3, 4, 5, 6, 7, 8, 9)));
        assertEquals("9 tokens exceed the model's max_position_embeddings 8", check(0));
    }

    @Test
    void idsOutsideTheVocabulary() {
        rows(List.of(
                longs(1, 512), longs(-1, 3), longs(3, 4, 1L << 32), longs(5, (1L << 32) + 5), longs(Long.MIN_VALUE)));
        assertEquals("token id 512 at position 1 is outside the vocabulary [0, 512)", check(0));
        assertEquals("token id -1 at position 0 is outside the vocabulary [0, 512)", check(1));
        assertEquals(
                "token id 4294967296 at position 2 is outside the vocabulary [0, 512)", check(2), "no wrap to int");
        assertEquals(
                "token id 4294967301 at position 1 is outside the vocabulary [0, 512)",
                check(3),
                "no wrap to a valid int");
        assertEquals("token id " + Long.MIN_VALUE + " at position 0 is outside the vocabulary [0, 512)", check(4));
    }

    @Test
    void nullElement() {
        rows(List.of(Arrays.asList(5L, null, 6L)));
        assertEquals("token id at position 1 is null", check(0));
    }

    @Test
    void theFirstProblemIsReported() {
        rows(List.of(Arrays.asList(9999L, null), Arrays.asList(null, 9999L), longs(1, 2, 3, 4, 5, 6, 7, 8, 9999)));
        assertEquals("token id 9999 at position 0 is outside the vocabulary [0, 512)", check(0));
        assertEquals("token id at position 0 is null", check(1));
        assertEquals("9 tokens exceed the model's max_position_embeddings 8", check(2), "length is checked before ids");
    }

    /** Scores of one 3-token sequence (top 2, all logits rows, vocab 4) with position p's row, lse and target logit as given. */
    private static BatchScores scored(float[][] rows, double[] lse) {
        BatchScores s = new BatchScores();
        ScoreRequest r = new ScoreRequest(new int[] {1, 2, 3}, 1, 2, LogitsMode.ALL);
        s.reset(List.of(r), 4);
        for (int p = 0; p < 3; p++) {
            int target = s.target(0, p);
            s.accept(0, p, lse[p], 0, target >= 0 ? rows[p][target] : Float.NaN, rows[p], 0);
        }
        return s;
    }

    @Test
    void nonFiniteScoresAreNamedByKindAndToken() {
        float[] fine = {0f, 1f, 2f, 3f};
        double lse = 3.44;
        assertEquals(
                null,
                RowCheck.scores(
                        scored(new float[][] {fine, fine, fine}, new double[] {lse, lse, lse}), 0, LogitsMode.ALL));
        // A NaN log-sum-exp at position 1: the log-prob of token 2 is NaN.
        assertEquals(
                "non-finite log-probs at token 2" + RowCheck.NON_FINITE,
                RowCheck.scores(
                        scored(new float[][] {fine, fine, fine}, new double[] {lse, Double.NaN, lse}),
                        0,
                        LogitsMode.ALL));
        // An infinite logit that is not the target: the log-prob is finite, the top-k's first alternative is not.
        float[] inf = {0f, 1f, 2f, Float.POSITIVE_INFINITY};
        assertEquals(
                "non-finite top-k log-probs at token 1" + RowCheck.NON_FINITE,
                RowCheck.scores(
                        scored(new float[][] {inf, fine, fine}, new double[] {lse, lse, lse}), 0, LogitsMode.ALL));
        // The last position predicts nothing: only its logits row holds the NaN.
        float[] nan = {0f, Float.NaN, 2f, 3f};
        assertEquals(
                "non-finite logits at token 2" + RowCheck.NON_FINITE,
                RowCheck.scores(
                        scored(new float[][] {fine, fine, nan}, new double[] {lse, lse, lse}), 0, LogitsMode.ALL));
    }
}
