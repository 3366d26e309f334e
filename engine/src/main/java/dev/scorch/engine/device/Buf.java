package dev.scorch.engine.device;

/**
 * A range of device memory: elements [offset, offset + length) of one allocation, of one element type. What
 * the allocation is belongs to the {@link Device} that made it (a Java array for {@code HostDevice}, a device
 * address for CUDA); buffers are only passed back to that device.
 *
 * @param offset first element, counted from the start of the allocation
 * @param length elements
 */
public record Buf(Object storage, Kind kind, long offset, long length) {
    /** Element types. */
    public enum Kind {
        F32(4),
        I32(4),
        BF16(2),
        /** Device addresses of buffers ({@link Device#writeAddresses}). */
        ADDR(8),
        /**
         * An INT4 group-quantised weight kept packed ({@link PackedInt4}: packed words and group scales, each a buffer of
         * its own); made by {@link Device#int4Weight}, never by alloc, and only multiplied. Its length counts weights.
         */
        INT4(0),
        /**
         * An FP8 E4M3 block-scaled weight kept as its codes ({@link PackedFp8}: codes, scales and scale rows, each a buffer
         * of its own); made by {@link Device#fp8Weight}, never by alloc, and only multiplied. Its length counts weights.
         */
        FP8(0),
        /**
         * Checkpoint linear weights used where they lie (a {@code Linear[]} stacked along out, memory-mapped in their
         * checkpoint dtype): the CPU device's weights, which its kernels decode as they multiply. Never allocated; its
         * length counts weights.
         */
        LINEAR(0);

        final int bytes;

        Kind(int bytes) {
            this.bytes = bytes;
        }

        public int bytes() {
            return bytes;
        }
    }

    public long bytes() {
        if (storage instanceof PackedInt4 p) {
            return p.bytes();
        }
        return storage instanceof PackedFp8 p ? p.bytes() : length * kind.bytes;
    }

    /** Elements [from, from + n) of this range. */
    public Buf slice(long from, long n) {
        if (kind == Kind.INT4 || kind == Kind.FP8 || kind == Kind.LINEAR) {
            throw new IllegalArgumentException("an " + kind + " weight is not sliced");
        }
        if (from < 0 || n < 0 || from + n > length) {
            throw new IndexOutOfBoundsException(
                    "slice [" + from + ", " + (from + n) + ") of a buffer of " + length + " elements");
        }
        return new Buf(storage, kind, offset + from, n);
    }

    /** Checks that this buffer holds at least n elements of kind k. */
    public Buf need(Kind k, long n, String what) {
        if (kind != k || length < n) {
            throw new IllegalArgumentException(
                    what + ": needs " + n + " " + k + " elements, got " + length + " " + kind);
        }
        return this;
    }
}
