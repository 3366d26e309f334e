package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.Tensor;

/**
 * A linear layer's weight [out_features, in_features] as it lies in the checkpoint (BF16, F16, F32, F8_E4M3 with one
 * weight_scale_inv per block, or compressed-tensors' INT4 groups). Nothing is decoded ahead of time: kernels ask for a
 * row segment in fp32 when they pack it, so the model's heap stays small.
 */
public final class Linear {
    /** How the weight is stored. */
    public enum Format {
        /** BF16, F16 or F32 values ({@link #dtype}). */
        PLAIN,
        /** F8_E4M3 codes times one weight_scale_inv per blockRows × blockCols block. */
        FP8_BLOCK,
        /**
         * compressed-tensors pack-quantized, symmetric: weight_packed I32 [out, ceil(in / 8)], input column j in bits
         * 4·(j % 8) .. 4·(j % 8) + 3 of word j / 8 as q + 8 (q in [-8, 7]); weight_scale [out, ceil(in / groupSize)];
         * W[o, j] = q · scale[o, j / groupSize], exact in fp32.
         */
        INT4_GROUP
    }

    private final String name;
    private final Format format;
    private final Tensor weight;
    private final DType dtype;
    private final int out;
    private final int in;
    // INT4 only: weight_scale [out, ceil(in / groupSize)], read from the mapping (1/8 of the packed bytes: too big to
    // decode).
    private final Tensor groupScale;
    private final int groupSize;
    // FP8 only: weight_scale_inv [ceil(out / blockRows), ceil(in / blockCols)], decoded (it is tiny).
    private final float[] scaleInv;
    private final int blockRows;
    private final int blockCols;
    private final int scaleCols;
    private final float maxScaleInv;

    public Linear(Tensor weight, Tensor scaleInv, int blockRows, int blockCols) {
        this.name = weight.name();
        this.format = weight.dtype() == DType.F8_E4M3 ? Format.FP8_BLOCK : Format.PLAIN;
        this.groupScale = null;
        this.groupSize = 0;
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

    /**
     * Whether stacked (at least one) are all of format f with one in_features and one value of blocking (a group size, a
     * block width): linears a device may stack along out as one weight.
     */
    public static boolean alike(Format f, java.util.function.ToIntFunction<Linear> blocking, Linear... stacked) {
        for (Linear l : stacked) {
            if (l.format() != f
                    || l.in() != stacked[0].in()
                    || blocking.applyAsInt(l) != blocking.applyAsInt(stacked[0])) {
                return false;
            }
        }
        return stacked.length > 0;
    }

    /** out_features summed over stacked. */
    public static long outFeatures(Linear... stacked) {
        long rows = 0;
        for (Linear l : stacked) {
            rows += l.out();
        }
        return rows;
    }

    /**
     * An INT4 weight [out, in] from its packed words and group scales (the checkpoint's X.weight_packed and X.weight_scale,
     * named X.weight here); shapes are checked against out, in and groupSize.
     */
    public static Linear int4(String name, Tensor packed, Tensor scale, int out, int in, int groupSize) {
        return new Linear(name, packed, scale, out, in, groupSize);
    }

    private Linear(String name, Tensor packed, Tensor scale, int out, int in, int groupSize) {
        if (packed.dtype() != DType.I32
                || packed.shape().length != 2
                || packed.dim(0) != out
                || packed.dim(1) != (in + 7) / 8) {
            throw new IllegalArgumentException(packed.name() + ": expected I32 [" + out + ", " + (in + 7) / 8
                    + "], got " + packed.dtype() + " " + java.util.Arrays.toString(packed.shape()));
        }
        if (groupSize <= 0
                || !scale.dtype().isFloating()
                || scale.dtype() == DType.F8_E4M3
                || scale.shape().length != 2
                || scale.dim(0) != out
                || scale.dim(1) != (in + groupSize - 1) / groupSize) {
            throw new IllegalArgumentException(
                    scale.name() + ": expected BF16, F16 or F32 [" + out + ", " + (in + groupSize - 1) / groupSize
                            + "], got " + scale.dtype() + " " + java.util.Arrays.toString(scale.shape()));
        }
        this.name = name;
        this.format = Format.INT4_GROUP;
        this.weight = packed;
        this.dtype = DType.I32;
        this.out = out;
        this.in = in;
        this.groupScale = scale;
        this.groupSize = groupSize;
        this.scaleInv = null;
        this.blockRows = 0;
        this.blockCols = 0;
        this.scaleCols = 0;
        this.maxScaleInv = 0f;
    }

    public String name() {
        return name;
    }

    /** The stored values' dtype: BF16/F16/F32, F8_E4M3, or I32 (INT4 packed words). */
    public DType dtype() {
        return dtype;
    }

    public Format format() {
        return format;
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
        if (format == Format.INT4_GROUP) {
            return weight.info().byteSize() + groupScale.info().byteSize();
        }
        return (long) out * in * dtype.bytes() + (scaleInv == null ? 0 : scaleInv.length * 4L);
    }

    /** Decodes W[row, k0 .. k0 + n) to fp32 into dst[off ..], applying FP8 block scales or INT4 group scales. */
    public void row(int row, int k0, int n, float[] dst, int off) {
        if (format == Format.INT4_GROUP) {
            int4Row(row, k0, n, dst, off);
            return;
        }
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

    /** The reference INT4 decoding, element by element: q = nibble - 8, times its group's scale. */
    private void int4Row(int row, int k0, int n, float[] dst, int off) {
        float[] scale = new float[1];
        int word = 0;
        int loadedGroup = -1;
        int loadedWord = -1;
        for (int i = 0; i < n; i++) {
            int j = k0 + i;
            if (j / 8 != loadedWord) {
                loadedWord = j / 8;
                word = rawWord(row, loadedWord);
            }
            if (j / groupSize != loadedGroup) {
                loadedGroup = j / groupSize;
                groupScale.toFloat((long) row * groupScales() + loadedGroup, scale, 0, 1);
            }
            int q = ((word >>> (4 * (j % 8))) & 0xF) - 8;
            dst[off + i] = q * scale[0];
        }
    }

    private int rawWord(int row, int w) {
        java.nio.ByteBuffer b =
                weight.bytes(4L * ((long) row * wordsPerRow() + w), 4).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        return b.getInt(b.position());
    }

    /** INT4: 32-bit words a row of weight_packed holds (ceil(in / 8)). */
    public int wordsPerRow() {
        return (in + 7) / 8;
    }

    /** INT4: inputs per scale (group_size; 0 for other formats). */
    public int groupSize() {
        return groupSize;
    }

    /** INT4: scales a row of weight_scale holds (ceil(in / group_size)). */
    public int groupScales() {
        return format == Format.INT4_GROUP ? (in + groupSize - 1) / groupSize : 0;
    }

    /** INT4: the packed words [row, w0 .. w0 + n) raw into dst[off ..]; false (nothing read) where the mapping is misaligned. */
    public boolean rawWords(int row, int w0, int[] dst, int n) {
        return weight.rawInts(4L * ((long) row * wordsPerRow() + w0), dst, n);
    }

    /**
     * INT4: the mapping holding the packed words [row, w0] and the n - 1 after it (rows run on into the next), for the
     * native decoders that read them in place at {@link #packedMappedAt}; null where they cross a mapping border.
     */
    public java.nio.MappedByteBuffer packedMapping(int row, int w0, int n) {
        return weight.mapping(4L * ((long) row * wordsPerRow() + w0), 4 * n);
    }

    /** INT4: the byte of {@link #packedMapping}'s buffer where word [row, w0] lies. */
    public long packedMappedAt(int row, int w0, int n) {
        return weight.mappedAt(4L * ((long) row * wordsPerRow() + w0), 4 * n);
    }

    /** INT4: the error for packed words [row, w0] and the n - 1 after it that the native decoder could not read in place. */
    public RuntimeException packedMappingFault(int row, int w0, long n) {
        return weight.readFault(4L * ((long) row * wordsPerRow() + w0), 4 * n, "the native decoder, in place");
    }

    /**
     * INT4: the mapping holding the group scales [row, g0] and the n - 1 after it (rows run on into the next), for the native
     * decoders that read them in place at {@link #groupScaleMappedAt}; null where they cross a mapping border.
     */
    public java.nio.MappedByteBuffer groupScaleMapping(int row, int g0, int n) {
        int e = groupScale.dtype().bytes();
        return groupScale.mapping(e * ((long) row * groupScales() + g0), e * n);
    }

    /** INT4: the byte of {@link #groupScaleMapping}'s buffer where scale [row, g0] lies. */
    public long groupScaleMappedAt(int row, int g0, int n) {
        int e = groupScale.dtype().bytes();
        return groupScale.mappedAt(e * ((long) row * groupScales() + g0), e * n);
    }

    /** INT4: the error for group scales [row, g0] and the n - 1 after it that the native decoder could not read in place. */
    public RuntimeException groupScaleMappingFault(int row, int g0, long n) {
        int e = groupScale.dtype().bytes();
        return groupScale.readFault(e * ((long) row * groupScales() + g0), e * n, "the native decoder, in place");
    }

    /** INT4: the group scales [row, g0 .. g0 + n) in fp32 into dst[off ..]. */
    public void groupScales(int row, int g0, float[] dst, int off, int n) {
        groupScale.toFloat((long) row * groupScales() + g0, dst, off, n);
    }

    /** INT4: the packed weight tensor and the scale tensor, for devices that keep them as they are. */
    public Tensor packedTensor() {
        return format == Format.INT4_GROUP ? weight : null;
    }

    public Tensor scaleTensor() {
        return groupScale;
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

    /** FP8: weight_scale_inv in fp32, row-major [ceil(out / blockRows), scaleCols()] (the native row-dot reads it; not copied). */
    float[] fp8ScaleInv() {
        return scaleInv;
    }

    /** FP8: weight rows per scale block. */
    int blockRows() {
        return blockRows;
    }

    /** FP8: scale blocks a row of weight_scale_inv holds. */
    int scaleCols() {
        return scaleCols;
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
