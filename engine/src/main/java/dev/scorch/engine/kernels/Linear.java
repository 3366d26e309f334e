package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.Tensor;

/**
 * A linear layer's weight [out_features, in_features] as it lies in the checkpoint (BF16, F16, F32, or
 * F8_E4M3 with one weight_scale_inv per block). Nothing is decoded ahead of time: kernels ask for a row
 * segment in fp32 when they pack it, so the model's heap stays small.
 */
public final class Linear {
  private final String name;
  private final Tensor weight;
  private final DType dtype;
  private final int out;
  private final int in;
  // FP8 only: weight_scale_inv [ceil(out / blockRows), ceil(in / blockCols)], decoded (it is tiny).
  private final float[] scaleInv;
  private final int blockRows;
  private final int blockCols;
  private final int scaleCols;
  private final float maxScaleInv;

  public Linear(Tensor weight, Tensor scaleInv, int blockRows, int blockCols) {
    this.name = weight.name();
    this.weight = weight;
    this.dtype = weight.dtype();
    this.out = weight.dim(0);
    this.in = weight.dim(1);
    if (dtype == DType.F8_E4M3) {
      this.scaleInv = scaleInv.toFloatArray();
      this.blockRows = blockRows;
      this.blockCols = blockCols;
      this.scaleCols = scaleInv.dim(1);
      float max = 0f;
      for (float v : this.scaleInv) {
        max = Math.max(max, Math.abs(v));
      }
      this.maxScaleInv = max;
    } else {
      this.scaleInv = null;
      this.blockRows = 0;
      this.blockCols = 0;
      this.scaleCols = 0;
      this.maxScaleInv = 0f;
    }
  }

  public Linear(Tensor weight) {
    this(weight, null, 0, 0);
  }

  public String name() {
    return name;
  }

  public DType dtype() {
    return dtype;
  }

  /** out_features (N). */
  public int out() {
    return out;
  }

  /** in_features (K). */
  public int in() {
    return in;
  }

  /** Bytes of weight (and scales) one full pass over this layer reads. */
  public long weightBytes() {
    return (long) out * in * dtype.bytes() + (scaleInv == null ? 0 : scaleInv.length * 4L);
  }

  /** Decodes W[row, k0 .. k0 + n) to fp32 into dst[off ..], applying FP8 block scales. */
  public void row(int row, int k0, int n, float[] dst, int off) {
    weight.toFloat((long) row * in + k0, dst, off, n);
    if (scaleInv != null) {
      // One scale per run of inputs inside a block (the same product per element as a lookup each).
      int sRow = (row / blockRows) * scaleCols;
      for (int i = 0; i < n; ) {
        int block = (k0 + i) / blockCols;
        int end = Math.min(n, (block + 1) * blockCols - k0);
        float scale = scaleInv[sRow + block];
        for (; i < end; i++) {
          dst[off + i] *= scale;
        }
      }
    }
  }

  // Raw copies of n consecutive elements from W[row, k] (row-major, so a copy may run on into the next rows), for
  // kernels that decode in registers. They allocate nothing; the BF16 ones return false (nothing read) where the
  // mapping's alignment does not allow the typed copy, and the caller decodes through row() instead.

  /** BF16 (or F16): the raw 16-bit values of n elements from W[row, k]. */
  public boolean rawHalves(int row, int k, short[] dst, int n) {
    return rawHalves(row, k, dst, 0, n);
  }

  /** As {@link #rawHalves(int, int, short[], int)} into dst[off .. off + n). */
  public boolean rawHalves(int row, int k, short[] dst, int off, int n) {
    return weight.rawShorts(2 * ((long) row * in + k), dst, off, n);
  }

  /** BF16 (or F16): n ints, each the raw pair (element 2i in the low half, 2i + 1 in the high half) from W[row, k], k even. */
  public boolean rawHalfPairs(int row, int k, int[] dst, int n) {
    return weight.rawInts(2 * ((long) row * in + k), dst, n);
  }

  /** F8_E4M3: the n codes from W[row, k]. */
  public void rawCodes(int row, int k, byte[] dst, int n) {
    rawCodes(row, k, dst, 0, n);
  }

  /** As {@link #rawCodes(int, int, byte[], int)} into dst[off .. off + n). */
  public void rawCodes(int row, int k, byte[] dst, int off, int n) {
    weight.rawBytes((long) row * in + k, dst, off, n);
  }

  /**
   * BF16 or FP8: the mapping holding the raw values of W[row, k] and the n - 1 elements after it (rows run on into the
   * next), for decoders that read them in place at {@link #rawMappedAt}; null where they cross a mapping border.
   */
  public java.nio.MappedByteBuffer rawMapping(int row, int k, int n) {
    int e = weight.dtype().bytes();
    return weight.mapping(e * ((long) row * in + k), e * n);
  }

  /** The error for raw values of W[row, k] and the n - 1 after it that the native decoder could not read in place. */
  public RuntimeException rawMappingFault(int row, int k, long n) {
    int e = weight.dtype().bytes();
    return weight.readFault(e * ((long) row * in + k), e * n, "the native decoder, in place");
  }

  /** The byte of {@link #rawMapping}'s buffer where W[row, k] lies. */
  public long rawMappedAt(int row, int k, int n) {
    int e = weight.dtype().bytes();
    return weight.mappedAt(e * ((long) row * in + k), e * n);
  }

  /** FP8: input columns per scale block (0 for other dtypes). */
  public int blockCols() {
    return blockCols;
  }

  /** FP8: the weight_scale_inv that W[row, k] is multiplied by. */
  public float blockScale(int row, int k) {
    return scaleInv[(row / blockRows) * scaleCols + k / blockCols];
  }

  /** FP8: the largest |weight_scale_inv| (0 for other dtypes). */
  public float maxScaleInv() {
    return maxScaleInv;
  }

  /** The whole weight in fp32, for tests and small matrices only. */
  public float[] toFloat() {
    float[] w = new float[Math.multiplyExact(out, in)];
    for (int r = 0; r < out; r++) {
      row(r, 0, in, w, r * in);
    }
    return w;
  }
}
