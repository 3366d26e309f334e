package dev.scorch.engine.checkpoint;

import java.nio.ByteBuffer;

/**
 * A tensor in a memory-mapped shard, still in its file dtype. Readers decode to fp32 only the elements they
 * ask for, so a BF16 or FP8 checkpoint stays BF16 or FP8 in memory.
 */
public final class Tensor {
    /** Bulk decodes go through slices of at most this many bytes (and at most the mapping's overlap). */
    private static final int PIECE = 1 << 20;

    private final TensorInfo info;
    private final MappedFile file;

    public Tensor(TensorInfo info, MappedFile file) {
        this.info = info;
        this.file = file;
    }

    public TensorInfo info() {
        return info;
    }

    public String name() {
        return info.name();
    }

    public DType dtype() {
        return info.dtype();
    }

    public long[] shape() {
        return info.shape().clone();
    }

    public int dim(int i) {
        return Math.toIntExact(info.shape()[i]);
    }

    public long numel() {
        return info.numel();
    }

    /** Raw little-endian bytes [byteOffset, byteOffset + length) of this tensor's data. */
    public ByteBuffer bytes(long byteOffset, int length) {
        return file.slice(dataOffset(byteOffset, length), length);
    }

    /** Copies the n raw bytes at byteOffset of this tensor's data into dst[0 .. n), allocating nothing. */
    public void rawBytes(long byteOffset, byte[] dst, int n) {
        rawBytes(byteOffset, dst, 0, n);
    }

    /** As {@link #rawBytes(long, byte[], int)} into dst[off .. off + n). */
    public void rawBytes(long byteOffset, byte[] dst, int off, int n) {
        file.getBytes(dataOffset(byteOffset, n), dst, off, n);
    }

    /**
     * The mapping holding this tensor's data bytes [byteOffset, byteOffset + length) whole, for native code reading them in
     * place (at {@link #mappedAt}); null where they cross a mapping border.
     */
    public java.nio.MappedByteBuffer mapping(long byteOffset, int length) {
        return file.mapping(dataOffset(byteOffset, length), length);
    }

    /**
     * The error for a read of this tensor's data bytes [byteOffset, byteOffset + length) that could not be read in place
     * (by reader, for the message): the file shrank under its mapping. Names the file and the tensor.
     */
    public CheckpointException readFault(long byteOffset, long length, String reader) {
        return file.readFault(
                info.begin() + byteOffset, length, "tensor '" + info.name() + "', read by " + reader, null);
    }

    /** Where byte byteOffset of the data lies in {@link #mapping}'s buffer for the same range. */
    public long mappedAt(long byteOffset, int length) {
        long at = dataOffset(byteOffset, length);
        return at - file.mappingStart(at, length);
    }

    /** Copies n little-endian 16-bit values from byteOffset into dst[off .. off + n); false (nothing read) where the file offset is odd. */
    public boolean rawShorts(long byteOffset, short[] dst, int off, int n) {
        return file.getShorts(dataOffset(byteOffset, 2L * n), dst, off, n);
    }

    /** Copies n little-endian 32-bit values from byteOffset into dst[0 .. n); false (nothing read) where the file offset is not a multiple of 4. */
    public boolean rawInts(long byteOffset, int[] dst, int n) {
        return file.getInts(dataOffset(byteOffset, 4L * n), dst, n);
    }

    private long dataOffset(long byteOffset, long length) {
        if (byteOffset < 0 || length < 0 || byteOffset + length > info.byteSize()) {
            throw new IndexOutOfBoundsException(info.name() + ": bytes [" + byteOffset + ", " + (byteOffset + length)
                    + ") outside " + info.byteSize());
        }
        return info.begin() + byteOffset;
    }

    /** Decodes elements [start, start + n) to fp32 into dst[off..]. Integer tensors are converted exactly where they fit. */
    public void toFloat(long start, float[] dst, int off, int n) {
        if (start < 0 || n < 0 || start + n > numel()) {
            throw new IndexOutOfBoundsException(
                    info.name() + ": elements [" + start + ", " + (start + n) + ") outside " + numel());
        }
        int esize = dtype().bytes();
        // Pieces must also fit the mapping's overlap, which a MappedFile with a small chunk size makes tiny.
        int perPiece = Math.max(1, Math.min(PIECE, file.maxSlice()) / esize);
        while (n > 0) {
            int k = Math.min(n, perPiece);
            long at = info.begin() + start * esize;
            if (!decodeDirect(at, dst, off, k)) {
                try {
                    decode(dtype(), file.slice(at, k * esize), dst, off, k);
                } catch (InternalError e) {
                    if (!file.shrunk()) {
                        throw e;
                    }
                    throw file.readFault(at, (long) k * esize, "tensor '" + info.name() + "'", e);
                }
            }
            start += k;
            off += k;
            n -= k;
        }
    }

    public float[] toFloatArray() {
        float[] out = new float[Math.toIntExact(numel())];
        toFloat(0, out, 0, out.length);
        return out;
    }

    /** An integer tensor's (I32 or I64) values, exactly; for small tensors such as compressed-tensors' weight_shape. */
    public long[] toLongArray() {
        if (dtype() != DType.I32 && dtype() != DType.I64) {
            throw new CheckpointException(
                    info.file() + ": tensor '" + info.name() + "' is " + dtype() + ", not an integer tensor");
        }
        long[] out = new long[Math.toIntExact(numel())];
        int esize = dtype().bytes();
        for (int i = 0; i < out.length; i++) {
            ByteBuffer b = bytes((long) i * esize, esize).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            out[i] = esize == 4 ? b.getInt(b.position()) : b.getLong(b.position());
        }
        return out;
    }

    public float getFloat(long index) {
        float[] one = new float[1];
        toFloat(index, one, 0, 1);
        return one[0];
    }

    private static final ThreadLocal<short[]> SHORTS = ThreadLocal.withInitial(() -> new short[4096]);
    private static final ThreadLocal<byte[]> BYTES = ThreadLocal.withInitial(() -> new byte[4096]);

    /**
     * Decodes n elements at file offset at straight from the mapping into dst (no buffer objects: this runs for every
     * row a kernel packs); false for dtypes and alignments it does not take, which go through {@link #decode}.
     */
    private boolean decodeDirect(long at, float[] dst, int off, int n) {
        switch (dtype()) {
            case F32 -> {
                return file.getFloats(at, dst, off, n);
            }
            case BF16 -> {
                short[] raw = shorts(n);
                if (!file.getShorts(at, raw, 0, n)) {
                    return false;
                }
                for (int i = 0; i < n; i++) {
                    dst[off + i] = Float.intBitsToFloat(raw[i] << 16);
                }
                return true;
            }
            case F8_E4M3 -> {
                byte[] raw = bytes(n);
                file.getBytes(at, raw, 0, n);
                for (int i = 0; i < n; i++) {
                    dst[off + i] = NumberFormats.e4m3ToFloat(raw[i]);
                }
                return true;
            }
            default -> {
                return false;
            }
        }
    }

    private static short[] shorts(int n) {
        short[] raw = SHORTS.get();
        if (raw.length < n) {
            raw = new short[n];
            SHORTS.set(raw);
        }
        return raw;
    }

    private static byte[] bytes(int n) {
        byte[] raw = BYTES.get();
        if (raw.length < n) {
            raw = new byte[n];
            BYTES.set(raw);
        }
        return raw;
    }

    static void decode(DType dtype, ByteBuffer b, float[] dst, int off, int n) {
        switch (dtype) {
            case F32 -> b.asFloatBuffer().get(dst, off, n);
            case BF16 -> {
                // Bulk-copy the raw halves, then widen in a plain loop the JIT vectorises: bf16 is fp32's top 16 bits.
                short[] raw = shorts(n);
                b.asShortBuffer().get(raw, 0, n);
                for (int i = 0; i < n; i++) {
                    dst[off + i] = Float.intBitsToFloat(raw[i] << 16);
                }
            }
            case F16 -> {
                for (int i = 0; i < n; i++) {
                    dst[off + i] = NumberFormats.f16ToFloat(b.getShort(2 * i));
                }
            }
            case F8_E4M3 -> {
                // Bulk-copy the codes, then look each up (every code's value is exact in fp32).
                byte[] raw = bytes(n);
                b.get(0, raw, 0, n);
                for (int i = 0; i < n; i++) {
                    dst[off + i] = NumberFormats.e4m3ToFloat(raw[i]);
                }
            }
            case I32 -> {
                for (int i = 0; i < n; i++) {
                    dst[off + i] = b.getInt(4 * i);
                }
            }
            case I64 -> {
                for (int i = 0; i < n; i++) {
                    dst[off + i] = b.getLong(8 * i);
                }
            }
        }
    }
}
