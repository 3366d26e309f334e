package dev.scorch.engine.kernels;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * The native CPU micro-kernel (engine/src/main/c/scorch_cpu.c through JNI): PackedGemm's 2 × 6 register tile over one
 * K block of a row task, compiled by a C compiler for AVX2 + FMA. Same fused multiply-adds in the same order as
 * the Java kernel, so the same bits; C2 leaves spills and scalar address work in the Java loop that the C compiler
 * does not. Beside it, the rest of a call's per-element work: the decoders of a K block's staged BF16 and FP8 weight
 * rows, bit for bit RowDecoder's (at 16 rows of x a weight is decoded for 32 flops, so decoding costs as much as the
 * tile there), and the transpose of x into tiles. Loaded once per JVM from the jar (x86-64 Linux, where the build had
 * a C compiler) and used only where the CPU has AVX2 and FMA; -Dscorch.native=false turns it off. Elsewhere
 * PackedGemm runs its Java kernel.
 */
public final class NativeCpu {
  private static final String RESOURCE = "native/libscorch_cpu.so";
  private static final String STATUS;
  private static final boolean AVAILABLE;

  static {
    String status;
    boolean ok = false;
    try {
      status = load();
      ok = status == null;
    } catch (IOException | LinkageError | SecurityException e) {
      status = "not loaded: " + e;
    }
    AVAILABLE = ok;
    STATUS = ok ? "loaded" : status;
  }

  private NativeCpu() {}

  /** Whether PackedGemm's blocks run in the native kernel on this JVM. */
  public static boolean available() {
    return AVAILABLE;
  }

  /** What runs, or why the native kernel does not: for bench and report headers. */
  public static String status() {
    return STATUS;
  }

  /** Null when loaded and supported; else why not. */
  private static String load() throws IOException {
    if ("false".equals(System.getProperty("scorch.native"))) {
      return "off (-Dscorch.native=false)";
    }
    String os = System.getProperty("os.name", "");
    String arch = System.getProperty("os.arch", "");
    if (!os.startsWith("Linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
      return "no native kernel for " + os + " " + arch;
    }
    try (InputStream in = NativeCpu.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        return "not in this build (it had no C compiler)";
      }
      // System.load needs a file: one per JVM, removed at exit.
      Path lib = Files.createTempFile("scorch_cpu", ".so");
      lib.toFile().deleteOnExit();
      Files.copy(in, lib, StandardCopyOption.REPLACE_EXISTING);
      System.load(lib.toString());
    }
    return supported() ? null : "this CPU lacks AVX2 or FMA";
  }

  /**
   * One K block of a row task (see {@code kernel_block} in scorch_cpu.c): for every tile t of xᵀ from xtOff and every
   * group g of 6 decoded weight rows in wb (row j at j·kc), c[j·mPad + t·16 + i] = (first ? 0 : c[..]) + Σ_k xᵀ · w.
   * With y (the last K block), the sums of the task's mb rows and nn weight rows go to
   * y[(rowBase + i)·nDim + n0 + j] instead. The arrays' bounds are checked here: the C side trusts them.
   */
  static void kernelBlock(float[] xt, int xtOff, int tiles, int kDim, int k0, int kc, float[] wb, int groups, float[] c,
                          int mPad, boolean first, float[] y, int rowBase, int mb, int nDim, int n0, int nn) {
    if (xtOff < 0 || k0 < 0 || kc < 0 || k0 + kc > kDim || tiles < 0 || groups < 0 || mPad < tiles * PackedGemm.MR
        || (long) xtOff + (long) tiles * kDim * PackedGemm.MR > xt.length
        || (long) groups * 6 * kc > wb.length || (long) groups * 6 * mPad > c.length
        || y != null && (rowBase < 0 || mb < 0 || mb > tiles * PackedGemm.MR || n0 < 0 || nn < 0 || nn > groups * 6
            || n0 + nn > nDim || (long) (rowBase + mb) * nDim > y.length)) {
      throw new IndexOutOfBoundsException("kernel block out of its arrays: xt " + xt.length + " from " + xtOff + ", "
          + tiles + " tiles x " + kDim + ", wb " + wb.length + ", " + groups + " groups x " + kc + ", c " + c.length
          + " at stride " + mPad + (y == null ? "" : ", y " + y.length + " rows " + rowBase + " + " + mb + " x " + nDim
          + " from column " + n0 + " + " + nn));
    }
    kernelBlock0(xt, xtOff, tiles, kDim, k0, kc, wb, groups, c, mPad, first, y, rowBase, mb, nDim, n0, nn);
  }

  /**
   * BF16 rows to fp32 (see {@code decode_bf16}): dst[j·n + k] = the float whose high half is src[so + j·srcStride + k],
   * for j &lt; rows and k &lt; n. The same bits as RowDecoder's Java vectors.
   */
  static void bf16Rows(short[] src, int so, int srcStride, int rows, int n, float[] dst) {
    if (so < 0 || rows < 0 || n < 0 || srcStride < n || rows > 0 && (long) so + (long) (rows - 1) * srcStride + n > src.length
        || (long) rows * n > dst.length) {
      throw new IndexOutOfBoundsException("bf16 rows out of their arrays: src " + src.length + " from " + so + ", " + rows
          + " rows of " + n + " at stride " + srcStride + ", dst " + dst.length);
    }
    bf16Rows0(src, so, srcStride, rows, n, dst);
  }

  /**
   * FP8 E4M3 rows to fp32 times their block scales (see {@code decode_fp8}): dst[j·n + k] = code src[so + j·srcStride + k]
   * times scales[j·blocksPerRow + (lead + k) / bc], which the caller has multiplied by 2^120 ({@link RowDecoder#FP8_RESCALE}).
   * lead (the first element's place in its block) and bc are multiples of 8. The same bits as RowDecoder's Java vectors.
   */
  static void fp8Rows(byte[] src, int so, int srcStride, int rows, int n, float[] scales, int blocksPerRow, int lead, int bc,
                      float[] dst) {
    if (so < 0 || rows < 0 || n < 0 || srcStride < n || bc < 8 || bc % 8 != 0 || lead < 0 || lead >= bc || lead % 8 != 0
        || rows > 0 && (long) so + (long) (rows - 1) * srcStride + n > src.length || (long) rows * n > dst.length
        || blocksPerRow < (lead + n + bc - 1) / bc || (long) rows * blocksPerRow > scales.length) {
      throw new IndexOutOfBoundsException("fp8 rows out of their arrays: src " + src.length + " from " + so + ", " + rows
          + " rows of " + n + " at stride " + srcStride + ", scales " + scales.length + " (" + blocksPerRow
          + " per row, blocks of " + bc + " from " + lead + "), dst " + dst.length);
    }
    fp8Rows0(src, so, srcStride, rows, n, scales, blocksPerRow, lead, bc, dst);
  }

  /**
   * xᵀ of one tile of PackedGemm (see {@code transpose_tile}): xt[xtOff + k·16 + r] = x[xOff + r·kDim + k] for r &lt; rows,
   * 0 for rows ≤ r &lt; 16, k &lt; kDim.
   */
  static void transposeTile(float[] x, int xOff, int rows, int kDim, float[] xt, int xtOff) {
    if (xOff < 0 || xtOff < 0 || kDim < 0 || rows < 0 || rows > PackedGemm.MR || (long) xOff + (long) rows * kDim > x.length
        || (long) xtOff + (long) kDim * PackedGemm.MR > xt.length) {
      throw new IndexOutOfBoundsException("transposed tile out of its arrays: x " + x.length + " from " + xOff + ", " + rows
          + " rows of " + kDim + ", xt " + xt.length + " from " + xtOff);
    }
    transposeTile0(x, xOff, rows, kDim, xt, xtOff);
  }

  private static native boolean supported();

  private static native void transposeTile0(float[] x, int xOff, int rows, int kDim, float[] xt, int xtOff);

  private static native void bf16Rows0(short[] src, int so, int srcStride, int rows, int n, float[] dst);

  private static native void fp8Rows0(byte[] src, int so, int srcStride, int rows, int n, float[] scales, int blocksPerRow,
                                      int lead, int bc, float[] dst);

  private static native void kernelBlock0(float[] xt, int xtOff, int tiles, int kDim, int k0, int kc, float[] wb, int groups,
                                          float[] c, int mPad, boolean first, float[] y, int rowBase, int mb, int nDim, int n0,
                                          int nn);
}
