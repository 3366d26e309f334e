package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.NumberFormats;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorShuffle;
import jdk.incubator.vector.VectorSpecies;

/**
 * Weight row segments decoded to fp32 in vector registers: the raw BF16 halves, FP8 codes or INT4 words are bulk-copied
 * out of the mapping, then widened L at a time. The values are bit for bit those of {@link Linear#row} (which decodes
 * element by element), at a fraction of its cost; other dtypes go through {@link Linear#row}.
 */
final class RowDecoder {
    static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    static final VectorSpecies<Integer> I = VectorSpecies.of(int.class, F.vectorShape());
    static final int L = F.length();
    /**
     * Which dtypes decode in vectors here ({@link KernelSelection}: L ≥ 4 for BF16, 8 for FP8 and INT4). Where the native
     * decoders are picked these still serve the blocks those do not take.
     */
    private static final KernelSelection KERNELS = KernelSelection.current();
    /** L halves and L bytes, for BF16 and FP8 widened to L ints; null where no such shape exists. */
    static final VectorSpecies<Short> H = KERNELS.bf16Decoder().impl() != KernelSelection.Impl.SCALAR
            ? VectorSpecies.of(short.class, VectorShape.forBitSize(16 * L))
            : null;

    static final VectorSpecies<Byte> B = KERNELS.fp8Decoder().impl() != KernelSelection.Impl.SCALAR
            ? VectorSpecies.of(byte.class, VectorShape.forBitSize(8 * L))
            : null;
    /** E4M3 bits moved into an fp32 exponent are 2^120 too small: 2^(e - 127) instead of 2^(e - 7). */
    static final float FP8_RESCALE = 0x1p120f;
    /**
     * INT4 in vectors of L ≥ 8 lanes from L / 8 packed words: lane i takes word i / 8 (INT4_WORDS), shifted left by
     * 28 - 4·(i % 8) (INT4_SHIFTS) to put its nibble in bits 28..31; null where vectors are narrower.
     */
    static final VectorShuffle<Integer> INT4_WORDS =
            KERNELS.int4Decoder().impl() != KernelSelection.Impl.SCALAR ? VectorShuffle.fromOp(I, i -> i / 8) : null;

    static final IntVector INT4_SHIFTS = INT4_WORDS != null
            ? IntVector.zero(I)
                    .addIndex(1)
                    .lanewise(VectorOperators.AND, 7)
                    .lanewise(VectorOperators.MUL, -4)
                    .add(28)
            : null;
    /** Words read past the last one a vector of INT4 inputs needs (L of them are loaded for L / 8): buffers leave room. */
    static final int INT4_SLACK = L;

    private final short[] halves;
    private final byte[] codes;
    private final int[] words;
    private float[] scales = new float[0];
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
    // INT4: the staged words (row j's at j * stagedWords, the first holding input stagedK0 - stagedK0 % 8) and group
    // scales (row j's at j * stagedGroups, the first of group stagedG0), and one row's words on their way to the stage.
    private final int[] stagedInts;
    private final int[] rowWords;
    private float[] stagedGroupScales = new float[0];
    private int stagedWords;
    private int stagedG0;
    private int stagedGroups;
    private Linear stagedW;
    private int stagedRow0;
    private int stagedK0;
    private int stagedKn;
    // A block staged in place: the mapping holding it (null when copied), the byte of W[stagedRow0, stagedK0] in it,
    // and
    // the elements from one row to the next (in_features).
    private java.nio.MappedByteBuffer stagedMapping;
    // INT4 staged in place: the mapping of its group scales, and the byte of scale [stagedRow0, stagedG0] in it.
    private java.nio.MappedByteBuffer stagedScaleMapping;
    private long stagedScaleMappedAt;
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
        words = new int[maxLen / 8 + 2 + INT4_SLACK];
        this.stageRows = stageRows;
        this.stageCols = stageCols;
        stagedHalves = new short[stageRows * stageCols];
        stagedCodes = new byte[stageRows * stageCols];
        stagedScales = new float[stageRows * (stageCols / L + 1)];
        stagedInts = new int[stageRows * (stageCols / 8 + 2) + INT4_SLACK];
        rowWords = new int[stageCols / 8 + 2];
    }

    /** The longest segment {@link #decode} takes. */
    int maxLen() {
        return halves.length;
    }

    /** True when INT4 rows of w decode in vectors here (L ≥ 8: a vector starts on a word). */
    static boolean int4InRegisters(Linear w) {
        return w.format() == Linear.Format.INT4_GROUP && INT4_WORDS != null;
    }

    private float[] scales(int n) {
        return scales.length >= n ? scales : (scales = new float[n]);
    }

    /** True when FP8 rows of w decode in registers (block columns a multiple of L, scales that cannot overflow). */
    static boolean fp8InRegisters(Linear w) {
        return w.dtype() == DType.F8_E4M3
                && B != null
                && w.blockCols() % L == 0
                && w.maxScaleInv() * FP8_RESCALE < Float.MAX_VALUE;
    }

    /** dst[off .. off + n) = W[row, k0 .. k0 + n) in fp32, as {@link Linear#row} gives it. */
    void decode(Linear w, int row, int k0, int n, float[] dst, int off) {
        if (w.dtype() == DType.BF16 && H != null && w.rawHalves(row, k0, halves, n)) {
            bf16(halves, 0, n, dst, off);
        } else if (fp8InRegisters(w) && k0 % L == 0) {
            w.rawCodes(row, k0, codes, n);
            fp8Row(w, row, k0, codes, 0, n, dst, off);
        } else if (int4InRegisters(w)
                && n > 0
                && n <= halves.length /* maxLen: words holds them */
                && w.rawWords(row, k0 / 8, words, int4Words(k0, n))) {
            int group = w.groupSize();
            int groups = (k0 + n - 1) / group - k0 / group + 1;
            w.groupScales(row, k0 / group, scales(groups), 0, groups);
            int4Row(words, 0, k0 % 8, scales, 0, k0 % group, group, n, dst, off);
        } else {
            w.row(row, k0, n, dst, off);
        }
    }

    /** The packed words that inputs k0 .. k0 + n of a row lie in (n &gt; 0). */
    private static int int4Words(int k0, int n) {
        return (k0 + n - 1) / 8 - k0 / 8 + 1;
    }

    /**
     * Copies the raw BF16 halves, FP8 codes or INT4 words of W[row0 .. row0 + rows, k0 .. k0 + kn) out of the mapping, in one
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
     * then decodes it straight from the checkpoint's pages, which saves a pass over the weights.
     */
    boolean stage(Linear w, int row0, int rows, int k0, int kn, boolean inPlace) {
        if (rows > stageRows || kn > stageCols) {
            throw new IllegalArgumentException(
                    rows + " x " + kn + " block; the stage holds " + stageRows + " x " + stageCols);
        }
        stagedW = null;
        stagedMapping = null;
        stagedScaleMapping = null;
        if (int4InRegisters(w)) {
            return stageInt4(w, row0, rows, k0, kn, inPlace);
        }
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

    /**
     * {@link #stage} for INT4: the block's packed words and group scales left in place for the native decoder (which reads
     * both under its SIGBUS guard) where k0 is a word's first input and each lies in one mapping; else the words copied and
     * the scales decoded (1/8 of the words' bytes at BF16 and groups of 32).
     */
    private boolean stageInt4(Linear w, int row0, int rows, int k0, int kn, boolean inPlace) {
        if (rows == 0 || kn == 0) {
            return false;
        }
        boolean whole = k0 == 0 && kn == w.in();
        int group = w.groupSize();
        int g0 = k0 / group;
        int groups = (k0 + kn - 1) / group - g0 + 1;
        if (stagedGroupScales.length < rows * groups) {
            stagedGroupScales = new float[rows * groups];
        }
        int w0 = k0 / 8;
        int nw = int4Words(k0, kn);
        // In place, both the words and the scales: from the first to the last one the block reads, each in one mapping.
        long wordsSpan = (long) (rows - 1) * w.wordsPerRow() + nw;
        long scalesSpan = (long) (rows - 1) * w.groupScales() + groups;
        if (inPlace
                && NativeCpu.mappedReadsGuarded()
                && k0 % 8 == 0
                && wordsSpan <= Integer.MAX_VALUE / 4
                && scalesSpan <= Integer.MAX_VALUE / 4
                && NativeCpu.scaleTypeCode(w.scaleTensor().dtype()) >= 0) {
            java.nio.MappedByteBuffer m = w.packedMapping(row0, w0, (int) wordsSpan);
            java.nio.MappedByteBuffer sm = m == null ? null : w.groupScaleMapping(row0, g0, (int) scalesSpan);
            if (sm != null) {
                stagedMapping = m;
                stagedMappedAt = w.packedMappedAt(row0, w0, (int) wordsSpan);
                stagedRowStride = w.wordsPerRow();
                stagedScaleMapping = sm;
                stagedScaleMappedAt = w.groupScaleMappedAt(row0, g0, (int) scalesSpan);
            }
        }
        if (stagedMapping == null) {
            if (whole) {
                w.groupScales(row0, 0, stagedGroupScales, 0, rows * groups);
            } else {
                for (int j = 0; j < rows; j++) {
                    w.groupScales(row0 + j, g0, stagedGroupScales, j * groups, groups);
                }
            }
            if (whole) {
                if (!w.rawWords(row0, 0, stagedInts, rows * nw)) {
                    return false;
                }
            } else {
                for (int j = 0; j < rows; j++) {
                    if (!w.rawWords(row0 + j, w0, rowWords, nw)) {
                        return false;
                    }
                    System.arraycopy(rowWords, 0, stagedInts, j * nw, nw);
                }
            }
        }
        stagedWords = nw;
        stagedG0 = g0;
        stagedGroups = groups;
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
            throw new IllegalStateException(
                    "a block staged in place decodes through decodeStagedRows with the native decoders");
        }
        if (stagedW.format() == Linear.Format.INT4_GROUP) {
            int e = k0 - stagedK0 + stagedK0 % 8; // input k0's place in the staged row's words
            int group = stagedW.groupSize();
            int4Row(
                    stagedInts,
                    j * stagedWords + e / 8,
                    e % 8,
                    stagedGroupScales,
                    j * stagedGroups + k0 / group - stagedG0,
                    k0 % group,
                    group,
                    n,
                    dst,
                    off);
            return;
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
        if (stagedW.format() == Linear.Format.INT4_GROUP) {
            int4StagedRows(rows, k0, n, dst);
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
            if (!NativeCpu.fp8RowsMapped(
                    stagedMapping,
                    stagedMappedAt + so,
                    stagedRowStride,
                    rows,
                    n,
                    stagedScales,
                    blocks,
                    lead,
                    bc,
                    dst)) {
                throw stagedW.rawMappingFault(stagedRow0, k0, (long) (rows - 1) * stagedRowStride + n);
            }
        } else {
            NativeCpu.fp8Rows(stagedCodes, so, stagedKn, rows, n, stagedScales, blocks, lead, bc, dst);
        }
    }

    /** decodeStagedRows of an INT4 block in the native decoder (in Java where k0 is not a word's first input of a copied block). */
    private void int4StagedRows(int rows, int k0, int n, float[] dst) {
        int e = k0 - stagedK0 + stagedK0 % 8;
        int group = stagedW.groupSize();
        int scaleOff = k0 / group - stagedG0;
        if (stagedMapping != null) {
            if (e % 8 != 0) {
                throw new IllegalArgumentException(
                        "INT4 rows staged in place decode from a word's first input, not " + k0);
            }
            DType scaleType = stagedW.scaleTensor().dtype();
            int fault = NativeCpu.int4RowsMapped(
                    stagedMapping,
                    stagedMappedAt + 4L * (e / 8),
                    stagedRowStride,
                    rows,
                    n,
                    stagedScaleMapping,
                    stagedScaleMappedAt + (long) scaleType.bytes() * scaleOff,
                    scaleType,
                    stagedW.groupScales(),
                    k0 % group,
                    group,
                    stagedGroupScales,
                    dst);
            if (fault == 1) {
                throw stagedW.packedMappingFault(
                        stagedRow0, stagedK0 / 8 + e / 8, (long) (rows - 1) * stagedRowStride + int4Words(k0, n));
            } else if (fault == 2) {
                throw stagedW.groupScaleMappingFault(
                        stagedRow0,
                        k0 / group,
                        (long) (rows - 1) * stagedW.groupScales() + (k0 % group + n + group - 1) / group);
            }
        } else if (e % 8 == 0) {
            NativeCpu.int4Rows(
                    stagedInts,
                    e / 8,
                    stagedWords,
                    rows,
                    n,
                    stagedGroupScales,
                    scaleOff,
                    stagedGroups,
                    k0 % group,
                    group,
                    dst);
        } else {
            for (int j = 0; j < rows; j++) {
                decodeStaged(j, k0, n, dst, j * n);
            }
        }
    }

    /**
     * dst[off .. off + n) = INT4 inputs 0 .. n of a row segment: input k is nibble (first + k) % 8 of src[wo + (first + k) / 8],
     * less 8, times sc[so + (lead + k) / group] (lead: input 0's place in its group); src holds {@link #INT4_SLACK} words
     * past the last one read. Vectors start on a word and stay inside a group, the rest of a group goes one by one: each
     * value is the one product Linear.row makes. (The vector step is written out here: a helper taking vectors, where C2
     * does not inline it, boxes them.)
     */
    static void int4Row(
            int[] src, int wo, int first, float[] sc, int so, int lead, int group, int n, float[] dst, int off) {
        for (int k = 0; k < n; ) {
            int end = (int) Math.min(n, ((long) (lead + k) / group + 1) * group - lead);
            float scale = sc[so + (lead + k) / group];
            FloatVector vs = FloatVector.broadcast(F, scale);
            for (; k + L <= end && ((first + k) & 7) == 0; k += L) {
                // L inputs from the L / 8 words at wo + (first + k) / 8 (L words are loaded): each word xor 0x88888888
                // holds q as a
                // signed nibble, which the shifts sign-extend; the int converts exactly, and the one product rounds as
                // Linear.row's.
                IntVector q = IntVector.fromArray(I, src, wo + (first + k) / 8)
                        .rearrange(INT4_WORDS)
                        .lanewise(VectorOperators.XOR, 0x88888888)
                        .lanewise(VectorOperators.LSHL, INT4_SHIFTS)
                        .lanewise(VectorOperators.ASHR, 28);
                ((FloatVector) q.convert(VectorOperators.I2F, 0)).mul(vs).intoArray(dst, off + k);
            }
            for (; k < end; k++) {
                int e = first + k;
                dst[off + k] = (((src[wo + e / 8] >>> (4 * (e & 7))) & 0xF) - 8) * scale;
            }
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
