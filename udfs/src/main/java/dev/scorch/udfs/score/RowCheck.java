package dev.scorch.udfs.score;

import java.util.List;

/** Validation of one input row's token ids: the first problem found, or null when the row can be scored. */
final class RowCheck {
  private RowCheck() {}

  /** Checks ids and converts them to int[]; errors name the position and the limit. */
  static Object tokens(List<?> ids, int vocab, int maxPositions) {
    if (ids == null) {
      return "token_ids is null";
    }
    if (ids.isEmpty()) {
      return "token_ids is empty";
    }
    if (ids.size() > maxPositions) {
      return ids.size() + " tokens exceed the model's max_position_embeddings " + maxPositions;
    }
    int[] out = new int[ids.size()];
    for (int i = 0; i < out.length; i++) {
      Object v = ids.get(i);
      if (v == null) {
        return "token id at position " + i + " is null";
      }
      long id = ((Number) v).longValue();
      if (id < 0 || id >= vocab) {
        return "token id " + id + " at position " + i + " is outside the vocabulary [0, " + vocab + ")";
      }
      out[i] = (int) id;
    }
    return out;
  }
}
