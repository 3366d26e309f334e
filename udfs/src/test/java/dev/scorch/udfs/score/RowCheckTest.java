package dev.scorch.udfs.score;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

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
    assertArrayEquals(new int[] {7, 7, 7, 7, 7, 7, 7, 7}, (int[]) check(4), "exactly max_position_embeddings tokens is fine");
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
    rows(List.of(longs(1, 512), longs(-1, 3), longs(3, 4, 1L << 32), longs(5, (1L << 32) + 5), longs(Long.MIN_VALUE)));
    assertEquals("token id 512 at position 1 is outside the vocabulary [0, 512)", check(0));
    assertEquals("token id -1 at position 0 is outside the vocabulary [0, 512)", check(1));
    assertEquals("token id 4294967296 at position 2 is outside the vocabulary [0, 512)", check(2), "no wrap to int");
    assertEquals("token id 4294967301 at position 1 is outside the vocabulary [0, 512)", check(3), "no wrap to a valid int");
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
}
