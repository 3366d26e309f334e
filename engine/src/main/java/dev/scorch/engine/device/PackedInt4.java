package dev.scorch.engine.device;

import dev.scorch.engine.checkpoint.NumberFormats;
import dev.scorch.engine.kernels.Linear;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * An INT4 group-quantised weight [rows, cols] resident on a device as the checkpoint packs it (compressed-tensors
 * pack-quantized, {@link Linear.Format#INT4_GROUP}): 4 bits a weight plus one scale per group of groupSize inputs.
 * A GEMM dequantises it, a tile of at most {@link DequantPlan#TILE_ELEMS} weights at a time, into a device scratch right
 * before multiplying: W[r, c] = q · scale[r, c / groupSize] with q = nibble − 8, the fp32 product the CPU's
 * {@code Linear.row} computes (exact for BF16 and F16 scales). How the GEMM then multiplies, by precision
 * ({@link #plan}):
 * <ul>
 *   <li>FP32: the fp32 weights, one fp32 GEMM: the same numbers as the weight uploaded dequantised in fp32.</li>
 *   <li>BF16X3: W is split into two BF16 parts, hi = bf16(W) and lo = bf16(W − hi), which hold it exactly when the
 *       scale has at most 13 significant bits ({@link #splitExact}: every BF16 or F16 scale; q has at most 3, so W at
 *       most 16); x into its three BF16 parts as for any BF16 weight; five tensor-core GEMMs, hi·(p0, p1, p2) and
 *       lo·(p0, p1), summed in fp32 in that order. Left out is lo·p2, under 2⁻²⁶ of |W·x| a product: fp32-grade, as
 *       BF16X3 is for BF16 weights. Scales with more bits (F32 ones) make W up to 24 bits, beyond two BF16 parts: then
 *       the fp32 GEMM, as in FP32.</li>
 *   <li>BF16X2: hi·(p0, p1) and lo·p0 (three GEMMs): W to 16 bits and x to 16 bits, BF16X2's grade.</li>
 *   <li>BF16: hi·p0, one GEMM: the same numbers as the weight uploaded dequantised in BF16.</li>
 * </ul>
 * The scratch holds one tile: 4 bytes a weight (fp32, or hi and lo), 2 in BF16 mode.
 *
 * @param packed     I32 [rows, ceil(cols / 8)]: input c in bits 4·(c % 8) .. 4·(c % 8) + 3 of word c / 8, as q + 8
 * @param scales     [rows, ceil(cols / groupSize)]: BF16 when every scale is a BF16 value (as in published
 *                   checkpoints), else F32
 * @param splitExact whether every scale has at most 13 significant bits
 */
public record PackedInt4(Buf packed, Buf scales, int rows, int cols, int groupSize, boolean splitExact) {
    public PackedInt4 {
        if (rows <= 0 || cols <= 0 || groupSize <= 0) {
            throw new IllegalArgumentException("INT4 weight [" + rows + ", " + cols + "] in groups of " + groupSize);
        }
        packed.need(Buf.Kind.I32, (long) rows * wordsPerRow(cols), "INT4 packed words");
        if (scales.kind() != Buf.Kind.BF16 && scales.kind() != Buf.Kind.F32
                || scales.length() < (long) rows * groupsPerRow(cols, groupSize)) {
            throw new IllegalArgumentException("INT4 scales: needs " + (long) rows * groupsPerRow(cols, groupSize)
                    + " BF16 or F32 elements, got " + scales.length() + " " + scales.kind());
        }
    }

    static int wordsPerRow(int cols) {
        return (cols + 7) / 8;
    }

    static int groupsPerRow(int cols, int groupSize) {
        return (cols + groupSize - 1) / groupSize;
    }

    public int wordsPerRow() {
        return wordsPerRow(cols);
    }

    public int groupsPerRow() {
        return groupsPerRow(cols, groupSize);
    }

    /** Device bytes: packed words and scales. */
    public long bytes() {
        return packed.bytes() + scales.bytes();
    }

    /** Checks that this is a weight [n, k]. */
    public void check(int n, int k) {
        if (rows != n || cols != k) {
            throw new IllegalArgumentException(
                    "gemm w: an INT4 weight [" + rows + ", " + cols + "] used as [" + n + ", " + k + "]");
        }
    }

    /**
     * How a GEMM multiplies a dequantised tile ({@link DequantPlan}): the fp32 GEMM in FP32, and in BF16X3 when the
     * scales are not {@link #splitExact}; else hi (and lo, from BF16X2 on) with x's BF16 parts.
     */
    public DequantPlan plan(GemmPrecision precision) {
        int parts = precision.inputParts();
        if (parts == 0 || parts == 3 && !splitExact) {
            return DequantPlan.FP32;
        }
        return new DequantPlan(false, Math.min(2, parts), parts);
    }

    /** Whether every scale lies in a BF16 (its low 16 bits are zero). */
    static boolean allBf16(float[] scales) {
        for (float s : scales) {
            if ((Float.floatToRawIntBits(s) & 0xFFFF) != 0) {
                return false;
            }
        }
        return true;
    }

    /** Whether every scale has at most 13 significant bits (the low 11 of its 23 fraction bits zero). */
    public static boolean allSplitExact(float[] scales) {
        for (float s : scales) {
            if ((Float.floatToRawIntBits(s) & 0x7FF) != 0) {
                return false;
            }
        }
        return true;
    }

    /** The low BF16 part of a weight whose high part is hi: bf16(w − hi), 0 where hi is not finite (no NaN from inf − inf). */
    public static float lo(float w, float hi) {
        return Float.isFinite(hi) ? NumberFormats.roundToBf16(w - hi) : 0f;
    }

    /** Whether stacked are all INT4 with one group size and one in_features: what {@link #upload} keeps packed. */
    public static boolean packable(Linear... stacked) {
        return Linear.alike(Linear.Format.INT4_GROUP, Linear::groupSize, stacked);
    }

    /** INT4 linears stacked along out, uploaded packed ({@link Device#int4Weight}); see {@link #packable}. */
    public static Buf upload(Device dev, Linear... stacked) {
        if (!packable(stacked)) {
            throw new IllegalArgumentException(
                    "not INT4 weights of one group size and in_features: " + stacked[0].name());
        }
        int in = stacked[0].in();
        int words = wordsPerRow(in);
        int groups = groupsPerRow(in, stacked[0].groupSize());
        long rowsLong = Linear.outFeatures(stacked);
        if (rowsLong * words > Integer.MAX_VALUE - 8 || rowsLong * groups > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("INT4 weight " + stacked[0].name() + " (" + stacked.length
                    + " stacked): " + rowsLong + " rows of " + words + " words are more than one upload holds");
        }
        int rows = (int) rowsLong;
        int[] packed = new int[rows * words];
        float[] scales = new float[rows * groups];
        int at = 0;
        for (Linear l : stacked) {
            int[] w = packedWords(l);
            System.arraycopy(w, 0, packed, at * words, w.length);
            l.groupScales(0, 0, scales, at * groups, l.out() * groups);
            at += l.out();
        }
        return dev.int4Weight(packed, scales, rows, in, stacked[0].groupSize());
    }

    /** The whole weight_packed tensor of an INT4 linear, as ints. */
    private static int[] packedWords(Linear l) {
        int n = Math.multiplyExact(l.out(), l.wordsPerRow());
        int[] w = new int[n];
        if (!l.rawWords(0, 0, w, n)) { // a mapping not aligned for typed reads: bytes, then little-endian words
            byte[] b = new byte[Math.multiplyExact(n, 4)];
            l.packedTensor().rawBytes(0, b, b.length);
            ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(w);
        }
        return w;
    }
}
