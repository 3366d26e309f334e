package dev.scorch.engine.runtime;

import java.util.List;

/**
 * Sequences of different lengths packed end to end (varlen): no padding rows are computed, and attention
 * stays causal inside each sequence. Positions are numbered from each sequence's cached length.
 *
 * @param tokens   [T] token ids of all sequences, concatenated
 * @param positions [T] position id of each token
 * @param seqStart first row of each sequence in tokens
 * @param seqLen   tokens of each sequence
 */
public record PackedBatch(int[] tokens, int[] positions, int[] seqStart, int[] seqLen) {

  public static PackedBatch of(List<int[]> sequences) {
    int[] start = new int[sequences.size()];
    int[] len = new int[sequences.size()];
    int total = 0;
    for (int s = 0; s < sequences.size(); s++) {
      start[s] = total;
      len[s] = sequences.get(s).length;
      if (len[s] == 0) {
        throw new IllegalArgumentException("sequence " + s + " is empty");
      }
      total += len[s];
    }
    int[] tokens = new int[total];
    int[] positions = new int[total];
    for (int s = 0; s < sequences.size(); s++) {
      System.arraycopy(sequences.get(s), 0, tokens, start[s], len[s]);
      for (int i = 0; i < len[s]; i++) {
        positions[start[s] + i] = i;
      }
    }
    return new PackedBatch(tokens, positions, start, len);
  }

  /**
   * From a padded [B, T] batch with an attention mask (1 = token, 0 = padding), left or right padded as
   * Hugging Face batches are: padding is dropped and positions count real tokens only.
   */
  public static PackedBatch fromPadded(int[][] inputIds, int[][] attentionMask) {
    List<int[]> seqs = new java.util.ArrayList<>();
    for (int b = 0; b < inputIds.length; b++) {
      int n = 0;
      for (int m : attentionMask[b]) {
        n += m;
      }
      int[] s = new int[n];
      int k = 0;
      for (int t = 0; t < inputIds[b].length; t++) {
        if (attentionMask[b][t] != 0) {
          s[k++] = inputIds[b][t];
        }
      }
      seqs.add(s);
    }
    return of(seqs);
  }

  public int numTokens() {
    return tokens.length;
  }

  public int numSequences() {
    return seqLen.length;
  }

  public int maxLen() {
    int m = 0;
    for (int l : seqLen) {
      m = Math.max(m, l);
    }
    return m;
  }
}
