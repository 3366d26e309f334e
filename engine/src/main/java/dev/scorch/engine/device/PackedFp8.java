package dev.scorch.engine.device;

import dev.scorch.engine.checkpoint.NumberFormats;
import dev.scorch.engine.kernels.Linear;
import java.util.Arrays;

/**
 * An FP8 E4M3 block-scaled weight [rows, cols] resident on a device as the checkpoint stores it (DeepSeek's
 * weight_scale_inv, compressed-tensors' float-quantized weight_scale; {@link Linear.Format#FP8_BLOCK}): one byte a
 * weight plus one fp32 scale per block of blockCols inputs of a row's scale row. W[r, c] = e4m3(code[r, c]) ·
 * scales[scaleRows[r], c / blockCols], the fp32 product the CPU's {@code Linear.row} computes. A GEMM dequantises it a
 * tile of at most {@link DequantPlan#TILE_ELEMS} weights at a time into a device scratch right before multiplying
 * ({@link #plan}):
 * <ul>
 *   <li>FP32: the fp32 weights, one fp32 GEMM: the same numbers as the weight uploaded dequantised in fp32.</li>
 *   <li>BF16X3: W split into the BF16 parts that hold it exactly, w0 = bf16(W), w1 = bf16(W − w0), w2 = W − w0 − w1
 *       ({@link #weightParts}: an e4m3 code has at most 4 significant bits, so W has at most 4 more than its scale:
 *       one part for scales of at most 4 significant bits, two up to 12 (every BF16 scale, as compressed-tensors
 *       exports store), three beyond (DeepSeek's fp32 weight_scale_inv, amax / 448)); x into its three BF16 parts; the
 *       tensor-core GEMMs w_a · p_b with a + b &lt; 3 (six with three weight parts), summed in fp32. What is left out is
 *       2⁻²⁴ of |W·x| a product: fp32-grade, as BF16X3 is for BF16 weights.</li>
 *   <li>BF16X2: w0 · (p0, p1) and w1 · p0: W and x to 16 bits, BF16X2's grade.</li>
 *   <li>BF16: w0 · p0, one GEMM: the same numbers as the weight uploaded dequantised in BF16.</li>
 * </ul>
 * The scratch holds one tile: 4 bytes a weight in FP32, 2 a weight part otherwise (BF16X3 with fp32 scales: 6).
 * Scale rows are given per weight row rather than per block of rows, so that stacked weights (q_a_proj with
 * kv_a_proj_with_mqa, whose 576 rows end inside a 128-row block) keep each one's blocks; rows whose scales equal the
 * row before's share its scale row, so a 128 x 128-block weight holds ceil(rows / 128) of them.
 *
 * @param codes       I32 [ceil(rows · cols / 4)]: the E4M3 codes row-major, four a word, code i in byte i % 4 (little
 *                    endian) of word i / 4
 * @param scales      F32 [scale rows, ceil(cols / blockCols)]
 * @param scaleRows   I32 [rows]: the scale row of each weight row
 * @param weightParts BF16 parts that hold every W exactly (1 to 3)
 */
public record PackedFp8(Buf codes, Buf scales, Buf scaleRows, int rows, int cols, int blockCols, int weightParts) {
    public PackedFp8 {
        if (rows <= 0 || cols <= 0 || blockCols <= 0 || weightParts < 1 || weightParts > 3) {
            throw new IllegalArgumentException("FP8 weight [" + rows + ", " + cols + "] in blocks of " + blockCols
                    + " columns, " + weightParts + " weight parts");
        }
        codes.need(Buf.Kind.I32, words(rows, cols), "FP8 codes");
        scales.need(Buf.Kind.F32, scaleColsOf(cols, blockCols), "FP8 scales");
        scaleRows.need(Buf.Kind.I32, rows, "FP8 scale rows");
    }

    static long words(int rows, int cols) {
        return ((long) rows * cols + 3) / 4;
    }

    static int scaleColsOf(int cols, int blockCols) {
        return (cols + blockCols - 1) / blockCols;
    }

    /** Scales a scale row holds (ceil(cols / blockCols)). */
    public int scaleCols() {
        return scaleColsOf(cols, blockCols);
    }

    /** Device bytes: codes, scales and scale rows. */
    public long bytes() {
        return codes.bytes() + scales.bytes() + scaleRows.bytes();
    }

    /** Checks that this is a weight [n, k]. */
    public void check(int n, int k) {
        if (rows != n || cols != k) {
            throw new IllegalArgumentException(
                    "gemm w: an FP8 weight [" + rows + ", " + cols + "] used as [" + n + ", " + k + "]");
        }
    }

    /** How a GEMM multiplies a dequantised tile: see the class comment. */
    public DequantPlan plan(GemmPrecision precision) {
        int parts = precision.inputParts();
        return parts == 0 ? DequantPlan.FP32 : new DequantPlan(false, Math.min(weightParts, parts), parts);
    }

    /**
     * BF16 parts that hold code · s exactly for every E4M3 code and every scale s (normal fp32 products): 1 when each
     * scale has at most 4 significant bits, 2 up to 12, else 3.
     */
    public static int weightParts(float[] scales) {
        int parts = 1;
        for (float s : scales) {
            int bits = Float.floatToRawIntBits(s);
            if ((bits & 0xFFF) != 0) {
                return 3;
            }
            if ((bits & 0xFFFFF) != 0) {
                parts = 2;
            }
        }
        return parts;
    }

    /** Part a of w's split: bf16 of what parts 0 .. a − 1 left; 0 once a part is not finite (no NaN from inf − inf). */
    public static float part(float w, int a) {
        float rest = w;
        float p = NumberFormats.roundToBf16(rest);
        for (int i = 0; i < a; i++) {
            if (!Float.isFinite(p)) {
                return 0f;
            }
            rest -= p;
            p = NumberFormats.roundToBf16(rest);
        }
        return p;
    }

    /**
     * An FP8 weight [rows, cols] from its codes (row-major bytes) and scales [ceil(rows / blockRows), ceil(cols /
     * blockCols)] as a checkpoint stores them, uploaded packed ({@link Device#fp8Weight}).
     */
    public static Buf upload(
            Device dev, byte[] codes, float[] scales, int rows, int cols, int blockRows, int blockCols) {
        int[] words = new int[(int) words(rows, cols)];
        for (int i = 0; i < codes.length; i++) {
            words[i >>> 2] |= (codes[i] & 0xFF) << (8 * (i & 3));
        }
        int[] scaleRows = new int[rows];
        for (int r = 0; r < rows; r++) {
            scaleRows[r] = r / blockRows;
        }
        return dev.fp8Weight(words, scales, scaleRows, rows, cols, blockCols);
    }

    /** Whether stacked are all FP8 blocks with one in_features and one block width: what {@link #upload} keeps packed. */
    public static boolean packable(Linear... stacked) {
        return Linear.alike(Linear.Format.FP8_BLOCK, Linear::blockCols, stacked);
    }

    /** FP8 linears stacked along out, uploaded packed ({@link Device#fp8Weight}); see {@link #packable}. */
    public static Buf upload(Device dev, Linear... stacked) {
        if (!packable(stacked)) {
            throw new IllegalArgumentException(
                    "not FP8 weights of one block width and in_features: " + stacked[0].name());
        }
        int in = stacked[0].in();
        int blockCols = stacked[0].blockCols();
        int scaleCols = scaleColsOf(in, blockCols);
        long rowsLong = Linear.outFeatures(stacked);
        if (words(1, in) * rowsLong > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("FP8 weight " + stacked[0].name() + " (" + stacked.length + " stacked): "
                    + rowsLong + " rows of " + in + " codes are more than one upload holds");
        }
        int rows = (int) rowsLong;
        int[] codes = new int[(int) words(rows, in)];
        int[] scaleRows = new int[rows];
        float[] scales = new float[scaleCols * 8];
        int scaleRowCount = 0;
        float[] row = new float[scaleCols];
        byte[] b = new byte[in];
        long at = 0; // code index
        int r = 0;
        for (Linear l : stacked) {
            for (int lr = 0; lr < l.out(); lr++, r++) {
                l.rawCodes(lr, 0, b, in);
                for (int c = 0; c < in; c++, at++) {
                    codes[(int) (at >>> 2)] |= (b[c] & 0xFF) << (8 * (int) (at & 3));
                }
                for (int s = 0; s < scaleCols; s++) {
                    row[s] = l.blockScale(lr, s * blockCols);
                }
                int prev = (scaleRowCount - 1) * scaleCols;
                if (scaleRowCount == 0 || !Arrays.equals(row, 0, scaleCols, scales, prev, prev + scaleCols)) {
                    if ((scaleRowCount + 1) * scaleCols > scales.length) {
                        scales = Arrays.copyOf(scales, Math.max(2 * scales.length, (scaleRowCount + 1) * scaleCols));
                    }
                    System.arraycopy(row, 0, scales, scaleRowCount * scaleCols, scaleCols);
                    scaleRowCount++;
                }
                scaleRows[r] = scaleRowCount - 1;
            }
        }
        return dev.fp8Weight(codes, Arrays.copyOf(scales, scaleRowCount * scaleCols), scaleRows, rows, in, blockCols);
    }
}
