package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.NumberFormats;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * Weight row segments decoded to fp32 in vector registers: the raw BF16 halves or FP8 codes are bulk-copied out of
 * the mapping, then widened L at a time. The values are bit for bit those of {@link Linear#row} (which decodes
 * element by element), at a fraction of its cost; other dtypes go through {@link Linear#row}.
 */
final class RowDecoder {
  static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
  static final VectorSpecies<Integer> I = VectorSpecies.of(int.class, F.vectorShape());
  static final int L = F.length();
  /** L halves and L bytes, for BF16 and FP8 widened to L ints; null where no such shape exists. */
  static final VectorSpecies<Short> H = L >= 4 ? VectorSpecies.of(short.class, VectorShape.forBitSize(16 * L)) : null;
  static final VectorSpecies<Byte> B = L >= 8 ? VectorSpecies.of(byte.class, VectorShape.forBitSize(8 * L)) : null;
  /** E4M3 bits moved into an fp32 exponent are 2^120 too small: 2^(e - 127) instead of 2^(e - 7). */
  static final float FP8_RESCALE = 0x1p120f;

  private final short[] halves;
  private final byte[] codes;
  // The staged block: raw values of W[stagedRow0 + j, stagedK0 + k] at j * stagedKn + k.
  private final int stageRows;
  private final int stageCols;
  private final short[] stagedHalves;
  private final byte[] stagedCodes;
  /**
   * FP8 block scales × 2^120 of the staged rows for the K block {@link NativeCpu#fp8Rows} decodes: row j's blocks at
   * j * blocks (room for stageCols / L + 1 blocks a row).
   */
  private final float[] stagedScales;
  private Linear stagedW;
  private int stagedRow0;
  private int stagedK0;
  private int stagedKn;
  // A block staged in place: the mapping holding it (null when copied), the byte of W[stagedRow0, stagedK0] in it, and
  // the elements from one row to the next (in_features).
  private java.nio.MappedByteBuffer stagedMapping;
  private long stagedMappedAt;
  private int stagedRowStride;

  /** A decoder for segments of at most maxLen elements (its buffers are its own: one per thread). */
  RowDecoder(int maxLen) {
    this(maxLen, 0, 0);
  }

  /** As {@link #RowDecoder(int)}, also staging blocks of up to stageRows rows × stageCols inputs ({@link #stage}). */
  RowDecoder(int maxLen, int stageRows, int stageCols) {
    halves = new short[maxLen];
    codes = new byte[maxLen];
    this.stageRows = stageRows;
    this.stageCols = stageCols;
    stagedHalves = new short[stageRows * stageCols];
    stagedCodes = new byte[stageRows * stageCols];
    stagedScales = new float[stageRows * (stageCols / L + 1)];
  }

  /** True when FP8 rows of w decode in registers (block columns a multiple of L, scales that cannot overflow). */
  static boolean fp8InRegisters(Linear w) {
    return w.dtype() == DType.F8_E4M3 && B != null && w.blockCols() % L == 0 && w.maxScaleInv() * FP8_RESCALE < Float.MAX_VALUE;
  }

  /** dst[off .. off + n) = W[row, k0 .. k0 + n) in fp32, as {@link Linear#row} gives it. */
  void decode(Linear w, int row, int k0, int n, float[] dst, int off) {
    if (w.dtype() == DType.BF16 && H != null && w.rawHalves(row, k0, halves, n)) {
      bf16(halves, 0, n, dst, off);
    } else if (fp8InRegisters(w) && k0 % L == 0) {
      w.rawCodes(row, k0, codes, n);
      fp8Row(w, row, k0, codes, 0, n, dst, off);
    } else {
      w.row(row, k0, n, dst, off);
    }
  }

  /**
   * Copies the raw BF16 halves or FP8 codes of W[row0 .. row0 + rows, k0 .. k0 + kn) out of the mapping, in one
   * sequential copy where the block is whole rows: weights the hardware streams in, where segment by segment reads
   * (rows lie in.length apart) wait on memory segment after segment. Returns whether {@link #decodeStaged} serves the
   * block; where it does not (other dtypes, an odd mapping), the caller decodes through {@link #decode}.
   */
  boolean stage(Linear w, int row0, int rows, int k0, int kn) {
    return stage(w, row0, rows, k0, kn, false);
  }

  /**
   * As above; with inPlace (for {@link NativeCpu}'s decoders, which read the mapping, and report a file that shrank
   * under it rather than crash) the block is not copied where it lies whole in one mapping: {@link #decodeStagedRows}
   * then decodes it straight from the checkpoint's pages, which saves a pass over the weights (1.013x and 1.016x at
   * 2048 x 1024 x 1024 and 2048 x 4096 x 1024, medians of 21 alternating rounds on a noisy machine).
   */
  boolean stage(Linear w, int row0, int rows, int k0, int kn, boolean inPlace) {
    if (rows > stageRows || kn > stageCols) {
      throw new IllegalArgumentException(rows + " x " + kn + " block; the stage holds " + stageRows + " x " + stageCols);
    }
    stagedW = null;
    stagedMapping = null;
    boolean bf16 = w.dtype() == DType.BF16 && H != null;
    if (inPlace && NativeCpu.mappedReadsGuarded() && rows > 0 && (bf16 || fp8InRegisters(w) && k0 % L == 0)) {
      int n = (rows - 1) * w.in() + kn;
      java.nio.MappedByteBuffer m = w.rawMapping(row0, k0, n);
      long at = m == null ? 0 : w.rawMappedAt(row0, k0, n);
      if (m != null && (!bf16 || at % 2 == 0)) { // BF16 halves read as 16-bit values: an even byte
        stagedMapping = m;
        stagedMappedAt = at;
        stagedRowStride = w.in();
        stagedW = w;
        stagedRow0 = row0;
        stagedK0 = k0;
        stagedKn = kn;
        return true;
      }
    }
    boolean whole = k0 == 0 && kn == w.in();
    if (w.dtype() == DType.BF16 && H != null) {
      if (whole) {
        if (!w.rawHalves(row0, 0, stagedHalves, 0, rows * kn)) {
          return false;
        }
      } else {
        for (int j = 0; j < rows; j++) {
          if (!w.rawHalves(row0 + j, k0, stagedHalves, j * kn, kn)) {
            return false;
          }
        }
      }
    } else if (fp8InRegisters(w) && k0 % L == 0) {
      if (whole) {
        w.rawCodes(row0, 0, stagedCodes, 0, rows * kn);
      } else {
        for (int j = 0; j < rows; j++) {
          w.rawCodes(row0 + j, k0, stagedCodes, j * kn, kn);
        }
      }
    } else {
      return false;
    }
    stagedW = w;
    stagedRow0 = row0;
    stagedK0 = k0;
    stagedKn = kn;
    return true;
  }

  /** Whether the block {@link #stage} took stays in place in the mapping (not copied). */
  boolean stagedInPlace() {
    return stagedMapping != null;
  }

  /**
   * dst[off .. off + n) = W[row0 + j, k0 .. k0 + n) of the block {@link #stage} copied, the same bits as
   * {@link #decode}. For FP8, k0 is a multiple of L.
   */
  void decodeStaged(int j, int k0, int n, float[] dst, int off) {
    if (stagedMapping != null) {
      throw new IllegalStateException("a block staged in place decodes through decodeStagedRows with the native decoders");
    }
    int so = j * stagedKn + (k0 - stagedK0);
    if (stagedW.dtype() == DType.BF16) {
      bf16(stagedHalves, so, n, dst, off);
    } else {
      fp8Row(stagedW, stagedRow0 + j, k0, stagedCodes, so, n, dst, off);
    }
  }

  /**
   * dst[j·n .. j·n + n) = W[row0 + j, k0 .. k0 + n) of the block {@link #stage} copied, for j &lt; rows: in {@link NativeCpu}'s
   * decoder where nativeDecode is set (it must be available), else row by row through {@link #decodeStaged}. The same bits
   * either way.
   */
  void decodeStagedRows(int rows, int k0, int n, float[] dst, boolean nativeDecode) {
    if (!nativeDecode) {
      for (int j = 0; j < rows; j++) {
        decodeStaged(j, k0, n, dst, j * n);
      }
      return;
    }
    int so = k0 - stagedK0;
    if (stagedW.dtype() == DType.BF16) {
      if (stagedMapping != null) {
        if (!NativeCpu.bf16RowsMapped(stagedMapping, stagedMappedAt + 2L * so, stagedRowStride, rows, n, dst)) {
          throw stagedW.rawMappingFault(stagedRow0, k0, (long) (rows - 1) * stagedRowStride + n);
        }
      } else {
        NativeCpu.bf16Rows(stagedHalves, so, stagedKn, rows, n, dst);
      }
      return;
    }
    // Each row's scales for the blocks of inputs k0 .. k0 + n (the first one from lead on).
    int bc = stagedW.blockCols();
    int lead = k0 % bc;
    int blocks = (lead + n + bc - 1) / bc;
    for (int j = 0; j < rows; j++) {
      for (int b = 0; b < blocks; b++) {
        stagedScales[j * blocks + b] = stagedW.blockScale(stagedRow0 + j, k0 - lead + b * bc) * FP8_RESCALE;
      }
    }
    if (stagedMapping != null) {
      if (!NativeCpu.fp8RowsMapped(stagedMapping, stagedMappedAt + so, stagedRowStride, rows, n, stagedScales, blocks, lead, bc, dst)) {
        throw stagedW.rawMappingFault(stagedRow0, k0, (long) (rows - 1) * stagedRowStride + n);
      }
    } else {
      NativeCpu.fp8Rows(stagedCodes, so, stagedKn, rows, n, stagedScales, blocks, lead, bc, dst);
    }
  }

  /** dst[off .. off + n) = BF16 halves src[so .. so + n) widened: each half is a float's high 16 bits. */
  private static void bf16(short[] src, int so, int n, float[] dst, int off) {
    int k = 0;
    for (; k + L <= n; k += L) {
      IntVector v = (IntVector) ShortVector.fromArray(H, src, so + k).convertShape(VectorOperators.S2I, I, 0);
      v.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().intoArray(dst, off + k);
    }
    for (; k < n; k++) {
      dst[off + k] = Float.intBitsToFloat(src[so + k] << 16);
    }
  }

  /** dst[off .. off + n) = W[row, k0 .. k0 + n) from its E4M3 codes src[so ..], one block of inputs (one scale) at a time. */
  private static void fp8Row(Linear w, int row, int k0, byte[] src, int so, int n, float[] dst, int off) {
    int bc = w.blockCols();
    for (int k = 0; k < n; ) {
      // Whole vectors, then the block's tail one by one.
      int end = Math.min(n, ((k0 + k) / bc + 1) * bc - k0);
      float scale = w.blockScale(row, k0 + k);
      FloatVector sc = FloatVector.broadcast(F, scale * FP8_RESCALE);
      for (; k + L <= end; k += L) {
        fp8(src, so + k, sc).intoArray(dst, off + k);
      }
      for (; k < end; k++) {
        dst[off + k] = NumberFormats.e4m3ToFloat(src[so + k]) * scale;
      }
    }
  }

  /**
   * L E4M3 codes to fp32 times their block scale (pre-multiplied by 2^120): sign to bit 31, exponent and
   * mantissa to bits 26..20, so the float is the code's value × 2^-120 exactly (subnormals included); the one
   * product with the scale rounds as {@link Linear#row}'s does. Codes 0x7f / 0xff are NaN.
   */
  static FloatVector fp8(byte[] codes, int off, FloatVector scale) {
    IntVector c = (IntVector) ByteVector.fromArray(B, codes, off).convertShape(VectorOperators.B2I, I, 0);
    IntVector mag = c.and(0x7f);
    IntVector bits = mag.lanewise(VectorOperators.LSHL, 20).or(c.and(0x80).lanewise(VectorOperators.LSHL, 24));
    bits = bits.blend(0x7fc00000, mag.eq(0x7f));
    return bits.reinterpretAsFloats().mul(scale);
  }
}
