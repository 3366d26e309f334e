package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.DType;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The native CPU micro-kernels (engine/src/main/c/scorch_cpu.c through JNI): PackedGemm's register tile over one K
 * block of a row task, compiled by a C compiler for AVX2 + FMA (2 × 6 tiles of 16 rows) and for AVX-512 (2 × 12 tiles
 * of 32 rows, 24 accumulators, a tile the Java kernel cannot hold in registers). Same fused multiply-adds in the same
 * order as the Java kernel, so the same bits; C2 leaves spills and scalar address work in the Java loop that the C
 * compiler does not. Beside them, the rest of a call's per-element work: the decoders of a K block's staged BF16, FP8 and INT4
 * weight rows (8 or 16 inputs a step), bit for bit RowDecoder's (at 16 rows of x a weight is decoded for 32 flops, so
 * decoding costs as much as the tile there), and the transpose of x into tiles. Loaded once per JVM from the jar
 * (x86-64 Linux, where the build had a C compiler) through a file kept per content in the user's cache
 * ({@link NativeLibraryFile}), and used only where the CPU has AVX2 and FMA; -Dscorch.native=false turns it off. Which
 * kernels run where it loads is {@link KernelSelection}'s choice; elsewhere PackedGemm runs its Java kernel.
 */
public final class NativeCpu {
    private static final String RESOURCE = "native/libscorch_cpu.so";
    /** How loading went, for {@link KernelSelection}. */
    private static final KernelSelection.Library LIBRARY = loadOnce();

    private static final boolean AVAILABLE = LIBRARY.whyNotUsable() == null;
    private static final String STATUS = AVAILABLE ? "loaded" : LIBRARY.whyNotUsable();
    /** Whether the CPU also runs the AVX-512 kernel (isa() == 2). */
    private static final boolean AVX512 = AVAILABLE && LIBRARY.isa() == 2;

    private static final boolean MAPPED_READS_GUARDED = AVAILABLE && guarded();

    private NativeCpu() {}

    /** Whether the library loaded and its kernels run on this CPU (it has AVX2 and FMA). */
    public static boolean available() {
        return AVAILABLE;
    }

    /**
     * Room for n floats off the heap at a 64-byte-aligned address (a cache line: no vector load from it splits across
     * two), in the CPU's byte order: the native kernel's xᵀ.
     */
    static ByteBuffer alignedFloats(int n) {
        long bytes = ((long) n * Float.BYTES + 63) / 64 * 64;
        if (n < 0 || bytes + 64 > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(n + " floats do not fit one direct buffer");
        }
        // Whole lines, and a line to spare for the aligned start: the slice holds them all.
        return ByteBuffer.allocateDirect((int) bytes + 64)
                .alignedSlice(64)
                .limit(n * Float.BYTES)
                .slice()
                .order(ByteOrder.nativeOrder());
    }

    /** Whether the CPU has AVX512-BF16 for {@link #bf16KernelBlock} and {@link #splitTile} (with the AVX-512 kernel). */
    private static final boolean BF16 = AVX512 && (LIBRARY.units() & KernelSelection.Library.AVX512_BF16) != 0;

    /** Whether the AVX512-BF16 kernel runs here (whatever the selection chose). */
    public static boolean bf16() {
        return BF16;
    }

    /** Whether the AVX-512 kernel (tiles of 32 rows) runs here too. */
    public static boolean avx512() {
        return AVX512;
    }

    /** The weight rows per tile of the kernel on tiles of mr rows: 6 for AVX2's 16, 12 for AVX-512's 32. */
    static int nr(int mr) {
        return mr == 32 ? 12 : 6;
    }

    /** What runs, or why the native kernel does not: for bench and report headers. */
    public static String status() {
        return STATUS;
    }

    /** How loading the library went in this JVM. */
    static KernelSelection.Library library() {
        return LIBRARY;
    }

    /** Loads the library unless {@link KernelSelection#libraryRefusal} refuses it here. */
    private static KernelSelection.Library loadOnce() {
        String refused = KernelSelection.libraryRefusal(
                System.getProperty(KernelSelection.NATIVE),
                System.getProperty("os.name", ""),
                System.getProperty("os.arch", ""));
        if (refused != null) {
            return KernelSelection.Library.notLoaded("off (" + refused + ")");
        }
        try {
            return load();
        } catch (IOException | LinkageError | SecurityException e) {
            return KernelSelection.Library.notLoaded("not loaded: " + e);
        }
    }

    private static KernelSelection.Library load() throws IOException {
        byte[] bytes;
        try (InputStream in = NativeCpu.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                return KernelSelection.Library.notLoaded("not in this build (it had no C compiler)");
            }
            bytes = in.readAllBytes();
        }
        Path lib = NativeLibraryFile.cached(bytes, NativeLibraryFile.defaultDir(), "libscorch_cpu");
        System.load(lib.toString());
        try {
            NativeLibraryFile.removeOldTempCopies(Path.of(System.getProperty("java.io.tmpdir")), Files.getOwner(lib));
        } catch (IOException e) {
            // best effort: what is left is only disk space
        }
        return KernelSelection.Library.loaded(isa(), units0());
    }

    /** The library's SIGBUS guard (false where asking fails: the decoders then copy the weights out first). */
    private static boolean guarded() {
        try {
            return mappedReadsGuarded0();
        } catch (LinkageError e) {
            return false;
        }
    }

    /**
     * One K block of a row task on tiles of mr rows (see {@code kernel_block} in scorch_cpu.c; mr 16, or 32 where
     * {@link #avx512()}): for every tile t of xᵀ from xtOff and every group g of nr(mr) decoded weight rows in wb (row j
     * at j·kc), c[j·mPad + t·mr + i] = (first ? 0 : c[..]) + Σ_k xᵀ · w. With y (the last K block), the sums of the
     * task's mb rows and nn weight rows go to y[(rowBase + i)·nDim + n0 + j] instead. The arrays' bounds are checked
     * here: the C side trusts them.
     */
    static void kernelBlock(
            int mr,
            ByteBuffer xt,
            int xtOff,
            int tiles,
            int kDim,
            int k0,
            int kc,
            float[] wb,
            int groups,
            ByteBuffer c,
            int mPad,
            boolean first,
            float[] y,
            int rowBase,
            int mb,
            int nDim,
            int n0,
            int nn) {
        if (mr != 16 && !(mr == 32 && AVX512)) {
            throw new IllegalArgumentException("no native kernel on tiles of " + mr + " rows here");
        }
        checkKernelBlock(
                mr,
                xt.isDirect(),
                xt.capacity() / Float.BYTES,
                (long) kDim * mr,
                xtOff,
                tiles,
                kDim,
                k0,
                kc,
                wb.length,
                groups,
                c.isDirect(),
                c.capacity() / Float.BYTES,
                mPad,
                y == null ? -1 : y.length,
                rowBase,
                mb,
                nDim,
                n0,
                nn);
        kernelBlock0(mr, xt, xtOff, tiles, kDim, k0, kc, wb, groups, c, mPad, first, y, rowBase, mb, nDim, n0, nn);
    }

    /**
     * kernelBlock's bounds, on the arrays' lengths in floats (yLength -1: no y) and tiles of tileFloats floats (kDim·mr
     * for kernelBlock; a split tile's pairs·parts·32); throws where a block would leave them.
     */
    static void checkKernelBlock(
            int mr,
            boolean xtDirect,
            long xtFloats,
            long tileFloats,
            int xtOff,
            int tiles,
            int kDim,
            int k0,
            int kc,
            int wbLength,
            int groups,
            boolean cDirect,
            long cFloats,
            int mPad,
            int yLength,
            int rowBase,
            int mb,
            int nDim,
            int n0,
            int nn) {
        int nr = nr(mr);
        boolean y = yLength >= 0;
        // In long throughout: an int sum or product of valid-looking arguments can wrap to a small one that passes.
        if (xtOff < 0
                || k0 < 0
                || kc < 0
                || (long) k0 + kc > kDim
                || tiles < 0
                || groups < 0
                || mPad < (long) tiles * mr
                || !xtDirect
                || (long) xtOff + tiles * tileFloats > xtFloats
                || (long) groups * nr * kc > wbLength
                || !cDirect
                || (long) groups * nr * mPad > cFloats
                || y
                        && (rowBase < 0
                                || mb < 0
                                || mb > (long) tiles * mr
                                || n0 < 0
                                || nn < 0
                                || nn > (long) groups * nr
                                || (long) n0 + nn > nDim
                                || ((long) rowBase + mb) * nDim > yLength)) {
            throw new IndexOutOfBoundsException(
                    "kernel block out of its arrays: xt " + xtFloats + " from " + xtOff + ", " + tiles
                            + " tiles x " + kDim + ", wb " + wbLength + ", " + groups + " groups x " + kc + " from k "
                            + k0 + ", c " + cFloats
                            + " at stride " + mPad
                            + (y
                                    ? ", y " + yLength + " rows " + rowBase + " + " + mb + " x " + nDim
                                            + " from column " + n0 + " + " + nn
                                    : ""));
        }
    }

    /**
     * BF16 rows to fp32 (see {@code decode_bf16}): dst[j·n + k] = the float whose high half is src[so + j·srcStride + k],
     * for j &lt; rows and k &lt; n. The same bits as RowDecoder's Java vectors.
     */
    static void bf16Rows(short[] src, int so, int srcStride, int rows, int n, float[] dst) {
        if (so < 0
                || rows < 0
                || n < 0
                || srcStride < n
                || rows > 0 && (long) so + (long) (rows - 1) * srcStride + n > src.length
                || (long) rows * n > dst.length) {
            throw new IndexOutOfBoundsException("bf16 rows out of their arrays: src " + src.length + " from " + so
                    + ", " + rows + " rows of " + n + " at stride " + srcStride + ", dst " + dst.length);
        }
        bf16Rows0(src, so, srcStride, rows, n, dst);
    }

    /**
     * FP8 E4M3 rows to fp32 times their block scales (see {@code decode_fp8}): dst[j·n + k] = code src[so + j·srcStride + k]
     * times scales[j·blocksPerRow + (lead + k) / bc], which the caller has multiplied by 2^120 ({@link RowDecoder#FP8_RESCALE}).
     * lead (the first element's place in its block) and bc are multiples of 8. The same bits as RowDecoder's Java vectors.
     */
    static void fp8Rows(
            byte[] src,
            int so,
            int srcStride,
            int rows,
            int n,
            float[] scales,
            int blocksPerRow,
            int lead,
            int bc,
            float[] dst) {
        if (so < 0
                || rows < 0
                || n < 0
                || srcStride < n
                || bc < 8
                || bc % 8 != 0
                || lead < 0
                || lead >= bc
                || lead % 8 != 0
                || rows > 0 && (long) so + (long) (rows - 1) * srcStride + n > src.length
                || (long) rows * n > dst.length
                || !scalesCover(blocksPerRow, lead, n, bc)
                || (long) rows * blocksPerRow > scales.length) {
            throw new IndexOutOfBoundsException("fp8 rows out of their arrays: src " + src.length + " from " + so + ", "
                    + rows
                    + " rows of " + n + " at stride " + srcStride + ", scales " + scales.length + " (" + blocksPerRow
                    + " per row, blocks of " + bc + " from " + lead + "), dst " + dst.length);
        }
        fp8Rows0(src, so, srcStride, rows, n, scales, blocksPerRow, lead, bc, dst);
    }

    /** Whether blocksPerRow scales cover a row of n inputs from place lead in blocks of bc (bc positive). */
    static boolean scalesCover(int blocksPerRow, int lead, int n, int bc) {
        return blocksPerRow >= ((long) lead + n + bc - 1) / bc;
    }

    /**
     * INT4 rows to fp32 (see {@code decode_int4}): dst[j·n + k] = (nibble k % 8 of word src[so + j·srcStride + k / 8]) - 8,
     * times scales[scaleOff + j·scalesPerRow + (lead + k) / group], for j &lt; rows and k &lt; n; lead is the first element's
     * place in its group. Each row's first element is the low nibble of its first word. The same bits as RowDecoder's Java
     * vectors.
     */
    static void int4Rows(
            int[] src,
            int so,
            int srcStride,
            int rows,
            int n,
            float[] scales,
            int scaleOff,
            int scalesPerRow,
            int lead,
            int group,
            float[] dst) {
        int4Rows(src, so, srcStride, rows, n, scales, scaleOff, scalesPerRow, lead, group, dst, AVX512);
    }

    /** As above, in the AVX-512 build only where avx512 is set (and the CPU has it): false runs the AVX2 build, for tests. */
    static void int4Rows(
            int[] src,
            int so,
            int srcStride,
            int rows,
            int n,
            float[] scales,
            int scaleOff,
            int scalesPerRow,
            int lead,
            int group,
            float[] dst,
            boolean avx512) {
        long words = int4Words(n);
        if (so < 0
                || rows < 0
                || n < 0
                || srcStride < words
                || rows > 0 && so + (long) (rows - 1) * srcStride + words > src.length
                || (long) rows * n > dst.length
                || !int4ScalesFit(scales.length, scaleOff, scalesPerRow, rows, lead, n, group)) {
            throw new IndexOutOfBoundsException(
                    "int4 rows out of their arrays: src " + src.length + " from " + so + ", " + rows
                            + " rows of " + n + " at stride " + srcStride + " words, scales " + scales.length + " from "
                            + scaleOff + " ("
                            + scalesPerRow + " per row, groups of " + group + " from " + lead + "), dst " + dst.length);
        }
        int4Rows0(src, so, srcStride, rows, n, scales, scaleOff, scalesPerRow, lead, group, dst, avx512);
    }

    /** The packed words a row of n INT4 inputs from a word's first nibble takes. */
    static long int4Words(int n) {
        return ((long) n + 7) / 8;
    }

    /**
     * Whether scales[scaleOff + j·scalesPerRow + (lead + k) / group] lies in an array of scalesLength for every j &lt; rows
     * and k &lt; n, with 0 ≤ lead &lt; group.
     */
    static boolean int4ScalesFit(
            int scalesLength, int scaleOff, int scalesPerRow, int rows, int lead, int n, int group) {
        if (group < 1 || lead < 0 || lead >= group || scaleOff < 0 || rows < 0 || n < 0) {
            return false;
        }
        long need = n == 0 ? 0 : ((long) lead + n + group - 1) / group;
        return scalesPerRow >= need
                && (rows == 0 || scaleOff + (long) (rows - 1) * scalesPerRow + need <= scalesLength);
    }

    /**
     * Reads bytes [offset, offset + length) of a direct buffer once, as the native row-dots stream their weights (vector
     * loads, and the same prefetch ahead; the length rounded down to 32 bytes), and returns their 32-bit words xor-ed (so
     * no load can be left out): the read bandwidth probe's native twin, the ceiling the row-dots are measured against.
     * The probe's own memory only: unlike the row-dots it reads outside the SIGBUS guard, so never a file mapping.
     */
    public static int readStream(ByteBuffer buf, long offset, long length) {
        if (!AVAILABLE) {
            throw new IllegalStateException("no native library: " + STATUS);
        }
        if (!buf.isDirect() || offset < 0 || length < 0 || offset + length > buf.capacity()) {
            throw new IndexOutOfBoundsException(
                    "read of " + length + " bytes from " + offset + " out of a buffer of " + buf.capacity());
        }
        return readStream0(buf, offset, length);
    }

    /**
     * Whether the mapped decoders may read a checkpoint's mapping in place: the library's SIGBUS guard is installed, so a
     * page the file no longer has (truncated while mapped) makes them return false instead of crashing the JVM.
     */
    static boolean mappedReadsGuarded() {
        return MAPPED_READS_GUARDED;
    }

    /**
     * {@link #bf16Rows} reading the raw halves in place: row j's at byte byteOffset + 2·j·srcStride of map (a mapping of
     * the checkpoint; byteOffset even). False where a page of the range could not be read (the file shrank under its
     * mapping; dst then holds part of the rows): the caller throws naming the file.
     */
    static boolean bf16RowsMapped(
            java.nio.MappedByteBuffer map, long byteOffset, int srcStride, int rows, int n, float[] dst) {
        if (byteOffset < 0
                || byteOffset % 2 != 0
                || rows < 0
                || n < 0
                || srcStride < n
                || !map.isDirect()
                || rows > 0 && byteOffset + 2L * ((long) (rows - 1) * srcStride + n) > map.capacity()
                || (long) rows * n > dst.length) {
            throw new IndexOutOfBoundsException("bf16 rows out of their mapping: " + map.capacity() + " bytes from "
                    + byteOffset + ", " + rows + " rows of " + n + " at stride " + srcStride + ", dst " + dst.length);
        }
        return bf16RowsMapped0(map, byteOffset, srcStride, rows, n, dst);
    }

    /** {@link #fp8Rows} reading the codes in place: row j's at byte byteOffset + j·srcStride of map. False as {@link #bf16RowsMapped}. */
    static boolean fp8RowsMapped(
            java.nio.MappedByteBuffer map,
            long byteOffset,
            int srcStride,
            int rows,
            int n,
            float[] scales,
            int blocksPerRow,
            int lead,
            int bc,
            float[] dst) {
        if (byteOffset < 0
                || rows < 0
                || n < 0
                || srcStride < n
                || bc < 8
                || bc % 8 != 0
                || lead < 0
                || lead >= bc
                || lead % 8 != 0
                || !map.isDirect()
                || rows > 0 && byteOffset + (long) (rows - 1) * srcStride + n > map.capacity()
                || (long) rows * n > dst.length
                || !scalesCover(blocksPerRow, lead, n, bc)
                || (long) rows * blocksPerRow > scales.length) {
            throw new IndexOutOfBoundsException(
                    "fp8 rows out of their mapping: " + map.capacity() + " bytes from " + byteOffset
                            + ", " + rows + " rows of " + n + " at stride " + srcStride + ", scales " + scales.length
                            + " (" + blocksPerRow
                            + " per row, blocks of " + bc + " from " + lead + "), dst " + dst.length);
        }
        return fp8RowsMapped0(map, byteOffset, srcStride, rows, n, scales, blocksPerRow, lead, bc, dst);
    }

    /**
     * Decode's row-dot over BF16 weight rows [row0, row0 + rows) read in place (see {@code rowdot_bf16} in
     * scorch_decode.h; RowDotGemm's bits on its vector width, {@link #rowDotLanes}): y[i·nDim + yOff + r] = x row i ·
     * weight row row0 + r for i &lt; m, the rows' raw pairs from byte byteOffset of map, xs x split into even and odd
     * elements per row as RowDotGemm splits it. False where a page of the range could not be read (the file shrank
     * under its mapping; y then holds part of the outputs): the caller throws naming the file.
     */
    static boolean bf16RowDotMapped(
            java.nio.MappedByteBuffer map,
            long byteOffset,
            int kDim,
            int rows,
            float[] xs,
            float[] x,
            int m,
            float[] y,
            int yOff,
            int nDim) {
        long need = (long) m * kDim;
        if (byteOffset < 0
                || kDim < 2
                || kDim % 2 != 0
                || rows < 0
                || m < 0
                || yOff < 0
                || nDim < yOff + rows
                || !map.isDirect()
                || byteOffset + 2L * rows * kDim > map.capacity()
                || xs.length < need
                || x.length < need
                || m > 0 && y.length < (long) (m - 1) * nDim + yOff + rows) {
            throw new IndexOutOfBoundsException("bf16 row-dot out of bounds: mapping " + map.capacity() + " bytes from "
                    + byteOffset + ", " + rows + " rows of " + kDim + "; m " + m + ", xs " + xs.length + ", x "
                    + x.length
                    + ", y " + y.length + " from " + yOff + " at stride " + nDim);
        }
        return bf16RowDotMapped0(map, byteOffset, kDim, rows, xs, x, m, y, yOff, nDim, rowDotLanes());
    }

    /** The floats {@link #mlaAbsorbedBf16Mapped0}'s scratch holds: q_latent and o_latent of each head, its scores. */
    static long mlaScratchFloats(int heads, int rank, int len) {
        return (long) heads * (2L * rank + (len + 15) / 16 * 16); // the scores rounded up to either width's vectors
    }

    /**
     * Decode's row-dot over INT4 weight rows [row0, row0 + rows) read in place (see {@code rowdot_int4} in
     * scorch_decode.h; RowDotGemm's bits on its vector width, {@link #rowDotLanes}): the rows' packed words (wpr a row)
     * from byte byteOffset of map, their group scales (gpr a row, scaleType BF16, F16 or F32) from byte scaleByteOffset
     * of scaleMap; xs x split by phase as RowDotGemm splits it; scratch at least 4·(wpr + gpr) floats. 0 when read;
     * where a page could not be read (the file shrank under its mapping; y then holds part of the outputs), 1 if it was
     * the words', 2 if the scales': the caller throws naming the file.
     */
    static int int4RowDotMapped(
            java.nio.MappedByteBuffer map,
            long byteOffset,
            int wpr,
            int kDim,
            int rows,
            java.nio.MappedByteBuffer scaleMap,
            long scaleByteOffset,
            DType scaleType,
            int gpr,
            int group,
            float[] scratch,
            float[] xs,
            float[] x,
            int m,
            float[] y,
            int yOff,
            int nDim) {
        int type = scaleTypeCode(scaleType);
        long need = (long) m * kDim;
        if (byteOffset < 0
                || kDim < 1
                || wpr != (kDim + 7) / 8
                || group < 8
                || group % 8 != 0
                || gpr != (kDim + group - 1) / group
                || rows < 0
                || m < 0
                || yOff < 0
                || nDim < yOff + rows
                || type < 0
                || !map.isDirect()
                || !scaleMap.isDirect()
                || byteOffset + 4L * rows * wpr > map.capacity()
                || scaleByteOffset < 0
                || scaleByteOffset + (long) scaleType.bytes() * rows * gpr > scaleMap.capacity()
                || scratch.length < 4L * (wpr + gpr)
                || xs.length < need
                || x.length < need
                || m > 0 && y.length < (long) (m - 1) * nDim + yOff + rows) {
            throw new IndexOutOfBoundsException("int4 row-dot out of bounds: mapping " + map.capacity() + " bytes from "
                    + byteOffset + ", " + rows + " rows of " + kDim + " (" + wpr + " words); scales " + scaleType + " "
                    + scaleMap.capacity() + " bytes from " + scaleByteOffset + " (" + gpr + " a row, groups of " + group
                    + "); scratch " + scratch.length + ", m " + m + ", xs " + xs.length + ", x " + x.length + ", y "
                    + y.length + " from " + yOff + " at stride " + nDim);
        }
        return int4RowDotMapped0(
                map,
                byteOffset,
                wpr,
                kDim,
                rows,
                scaleMap,
                scaleByteOffset,
                type,
                gpr,
                group,
                scratch,
                xs,
                x,
                m,
                y,
                yOff,
                nDim,
                rowDotLanes());
    }

    /**
     * Decode's row-dot over FP8 weight rows [row0, row0 + rows) read in place (see {@code rowdot_fp8} in
     * scorch_decode.h; RowDotGemm's bits on its vector width, {@link #rowDotLanes}): the rows' codes from byte
     * byteOffset of map; scaleInv the weight's weight_scale_inv in fp32 (scaleCols a row, blockRows × bc weights a
     * block, bc a multiple of 8). False where a page of the range could not be read (the file shrank under its mapping;
     * y then holds part of the outputs).
     */
    static boolean fp8RowDotMapped(
            java.nio.MappedByteBuffer map,
            long byteOffset,
            int kDim,
            int rows,
            int row0,
            float[] scaleInv,
            int scaleCols,
            int blockRows,
            int bc,
            float[] x,
            int m,
            float[] y,
            int yOff,
            int nDim) {
        long need = (long) m * kDim;
        if (byteOffset < 0
                || kDim < 1
                || rows < 0
                || row0 < 0
                || m < 0
                || yOff < 0
                || nDim < yOff + rows
                || bc < 8
                || bc % 8 != 0
                || blockRows < 1
                || scaleCols < (kDim / 8 * 8 + bc - 1) / bc
                || scaleCols < (kDim + bc - 1) / bc
                || rows > 0 && (long) ((row0 + rows - 1) / blockRows + 1) * scaleCols > scaleInv.length
                || !map.isDirect()
                || byteOffset + (long) rows * kDim > map.capacity()
                || x.length < need
                || m > 0 && y.length < (long) (m - 1) * nDim + yOff + rows) {
            throw new IndexOutOfBoundsException("fp8 row-dot out of bounds: mapping " + map.capacity() + " bytes from "
                    + byteOffset + ", rows " + row0 + " + " + rows + " of " + kDim + "; scales " + scaleInv.length
                    + " ("
                    + scaleCols + " a row, blocks " + blockRows + " x " + bc + "); m " + m + ", x " + x.length + ", y "
                    + y.length + " from " + yOff + " at stride " + nDim);
        }
        return fp8RowDotMapped0(
                map,
                byteOffset,
                kDim,
                rows,
                row0,
                scaleInv,
                scaleCols,
                blockRows,
                bc,
                x,
                m,
                y,
                yOff,
                nDim,
                rowDotLanes());
    }

    /** Pairs a row of {@link #splitPairs}'s parts holds: K / 2 rounded up to 16 (one VDPBF16PS operand). */
    static int pairsStride(int kDim) {
        return (kDim / 2 + 15) / 16 * 16;
    }

    /**
     * x's m rows (K even) split into parts bf16 parts of pairs for {@link #bf16PairsRowDotMapped}: part q of row i at xp[(i
     * · parts + q) · {@link #pairsStride}(K) ..], pair t holding the part of x[i, 2t] (low half) and of x[i, 2t + 1]
     * (high half), each part the bf16 rounding of what the parts before it left (as PackedGemm's bf16 tiles split x).
     */
    static void splitPairs(float[] x, int m, int kDim, int parts, int[] xp) {
        if (!BF16
                || parts < 1
                || parts > 3
                || kDim < 2
                || kDim % 2 != 0
                || m < 0
                || (long) m * kDim > x.length
                || (long) m * parts * pairsStride(kDim) > xp.length) {
            throw new IllegalArgumentException("splitPairs: bf16 " + BF16 + ", " + parts + " parts, m " + m + ", K "
                    + kDim + ", x " + x.length + ", xp " + xp.length);
        }
        splitPairs0(x, m, kDim, parts, xp);
    }

    /**
     * Decode's row-dot over BF16 weight rows [row0, row0 + rows) read in place in a bf16 precision: y[i·nDim + yOff + r]
     * = x row i · weight row row0 + r, each product of a pair of x's parts ({@link #splitPairs}) and the row's pair by
     * VDPBF16PS, 16 pairs a step into one accumulator per output, parts in order, its lanes in Lanes.foldTree's order.
     * False where a page of the range could not be read (the caller throws naming the file).
     */
    static boolean bf16PairsRowDotMapped(
            java.nio.MappedByteBuffer map,
            long byteOffset,
            int kDim,
            int rows,
            int[] xp,
            int parts,
            int m,
            float[] y,
            int yOff,
            int nDim) {
        if (!BF16
                || byteOffset < 0
                || kDim < 2
                || kDim % 2 != 0
                || parts < 1
                || parts > 3
                || rows < 0
                || m < 0
                || yOff < 0
                || nDim < yOff + rows
                || !map.isDirect()
                || byteOffset + 2L * rows * kDim > map.capacity()
                || (long) m * parts * pairsStride(kDim) > xp.length
                || (m > 0 && (long) (m - 1) * nDim + yOff + rows > y.length)) {
            throw new IndexOutOfBoundsException("bf16 pairs row-dot out of bounds: bf16 " + BF16 + ", mapping "
                    + map.capacity() + " bytes from " + byteOffset + ", " + rows + " rows of " + kDim + "; " + parts
                    + " parts, m " + m + ", xp " + xp.length + ", y " + y.length + " from " + yOff + " at stride "
                    + nDim);
        }
        return bf16PairsRowDotMapped0(map, byteOffset, kDim, rows, xp, parts, m, y, yOff, nDim);
    }

    /**
     * The row-dots' vector width: RowDotGemm's (8, AVX2; or 16, AVX-512, which KernelSelection picks only where {@link
     * #isa} found it), so the C kernels give the Java kernel's bits.
     */
    static int rowDotLanes() {
        int lanes = RowDotGemm.L;
        if (lanes != 8 && !(lanes == 16 && AVX512)) {
            throw new IllegalStateException("no native row-dot for " + lanes + "-float vectors on this CPU");
        }
        return lanes;
    }

    /** The raw scale dtypes the native INT4 decoder reads in place: its code for scaleType, -1 for others. */
    static int scaleTypeCode(DType scaleType) {
        return switch (scaleType) {
            case F32 -> 0;
            case BF16 -> 1;
            case F16 -> 2;
            default -> -1;
        };
    }

    /**
     * {@link #int4Rows} reading both the packed words and the group scales in place, under the SIGBUS guard: row j's words
     * at byte byteOffset + 4·j·srcStride of map, its scales (scaleType: BF16, F16 or F32) at byte scaleByteOffset +
     * size·j·scalesPerRow of scaleMap, the first for input 0 (from place lead in its group). The scales are decoded into
     * scratch (rows × ceil((lead + n) / group) floats) first. 0 when read; where a page could not be read (the file shrank
     * under its mapping; dst then holds part of the rows), 1 if it was the words', 2 if the scales': the caller throws
     * naming the file.
     */
    static int int4RowsMapped(
            java.nio.MappedByteBuffer map,
            long byteOffset,
            int srcStride,
            int rows,
            int n,
            java.nio.MappedByteBuffer scaleMap,
            long scaleByteOffset,
            DType scaleType,
            int scalesPerRow,
            int lead,
            int group,
            float[] scratch,
            float[] dst) {
        long words = int4Words(n);
        int type = scaleTypeCode(scaleType);
        long need = group < 1 || n == 0 ? 0 : ((long) lead + n + group - 1) / group;
        if (byteOffset < 0
                || rows < 0
                || n < 0
                || srcStride < words
                || !map.isDirect()
                || rows > 0 && byteOffset + 4 * ((long) (rows - 1) * srcStride + words) > map.capacity()
                || (long) rows * n > dst.length
                || type < 0
                || group < 1
                || lead < 0
                || lead >= group
                || scalesPerRow < need
                || scaleByteOffset < 0
                || !scaleMap.isDirect()
                || rows > 0
                        && scaleByteOffset + scaleType.bytes() * ((long) (rows - 1) * scalesPerRow + need)
                                > scaleMap.capacity()
                || (long) rows * need > scratch.length) {
            throw new IndexOutOfBoundsException(
                    "int4 rows out of their mappings: " + map.capacity() + " bytes from " + byteOffset
                            + ", " + rows + " rows of " + n + " at stride " + srcStride + " words; scales " + scaleType
                            + " " + scaleMap.capacity()
                            + " bytes from " + scaleByteOffset + " (" + scalesPerRow + " per row, groups of " + group
                            + " from " + lead + "), scratch "
                            + scratch.length + ", dst " + dst.length);
        }
        return int4RowsMapped0(
                map,
                byteOffset,
                srcStride,
                rows,
                n,
                scaleMap,
                scaleByteOffset,
                type,
                scalesPerRow,
                (int) need,
                lead,
                group,
                scratch,
                dst);
    }

    /**
     * xᵀ of one tile of mr rows (a positive multiple of 8; see {@code transpose_tile}): xt[xtOff + k·mr + r] =
     * x[xOff + r·kDim + k] for r &lt; rows, 0 for rows ≤ r &lt; mr, k &lt; kDim.
     */
    static void transposeTile(int mr, float[] x, int xOff, int rows, int kDim, ByteBuffer xt, int xtOff) {
        if (mr <= 0
                || mr % 8 != 0
                || xOff < 0
                || xtOff < 0
                || kDim < 0
                || rows < 0
                || rows > mr
                || (long) xOff + (long) rows * kDim > x.length
                || !xt.isDirect()
                || (long) xtOff + (long) kDim * mr > xt.capacity() / Float.BYTES) {
            throw new IndexOutOfBoundsException("transposed tile out of its arrays: x " + x.length + " from " + xOff
                    + ", " + rows + " rows of " + kDim + ", xt " + xt.capacity() / Float.BYTES + " from " + xtOff);
        }
        transposeTile0(mr, x, xOff, rows, kDim, xt, xtOff);
    }

    /** Pairs of inputs per row of a split tile: an odd K takes a zero input at its end. */
    static int pairs(int kDim) {
        return (kDim + 1) / 2;
    }

    /**
     * One tile of 32 rows of x split into parts bf16 values per input (see {@code split_tile} in scorch_bf16.c):
     * xs[xsOff + (p·parts + q)·32 + r] holds part q of inputs 2p and 2p + 1 of row r (x[xOff + r·kDim + k]; 0 past rows
     * and past kDim), the even input in the low half.
     */
    static void splitTile(int parts, float[] x, int xOff, int rows, int kDim, ByteBuffer xs, int xsOff) {
        if (!BF16) {
            throw new IllegalStateException("no AVX512-BF16 kernel here");
        }
        if (parts < 1
                || parts > 3
                || xOff < 0
                || xsOff < 0
                || kDim < 0
                || rows < 0
                || rows > 32
                || (long) xOff + (long) rows * kDim > x.length
                || !xs.isDirect()
                || (long) xsOff + (long) pairs(kDim) * parts * 32 > xs.capacity() / Integer.BYTES) {
            throw new IndexOutOfBoundsException("split tile out of its arrays: " + parts + " parts, x " + x.length
                    + " from " + xOff + ", " + rows + " rows of " + kDim + ", xs " + xs.capacity() / Integer.BYTES
                    + " from " + xsOff);
        }
        splitTile0(parts, x, xOff, rows, kDim, xs, xsOff);
    }

    /**
     * {@link #kernelBlock} on split tiles of 32 rows (see {@code kernel_block_bf16} in scorch_bf16.c): xs from xsOff holds
     * the tiles as {@link #splitTile} writes them, parts a pair; the weights wb are fp32 as for kernelBlock (groups of 12
     * rows, at most 96 rows and 256 inputs). A group whose block is not exact in bf16 runs in fp32 FMAs. k0 is even.
     */
    static void bf16KernelBlock(
            int parts,
            ByteBuffer xs,
            int xsOff,
            int tiles,
            int kDim,
            int k0,
            int kc,
            float[] wb,
            int groups,
            ByteBuffer c,
            int mPad,
            boolean first,
            float[] y,
            int rowBase,
            int mb,
            int nDim,
            int n0,
            int nn) {
        if (!BF16) {
            throw new IllegalStateException("no AVX512-BF16 kernel here");
        }
        if (parts < 1 || parts > 3 || k0 % 2 != 0 || kc > 256 || groups > 8) {
            throw new IllegalArgumentException("no bf16 kernel block of " + parts + " parts, " + groups
                    + " groups of 12 rows, " + kc + " inputs from " + k0);
        }
        checkKernelBlock(
                32,
                xs.isDirect(),
                xs.capacity() / Integer.BYTES,
                (long) pairs(kDim) * parts * 32,
                xsOff,
                tiles,
                kDim,
                k0,
                kc,
                wb.length,
                groups,
                c.isDirect(),
                c.capacity() / Float.BYTES,
                mPad,
                y == null ? -1 : y.length,
                rowBase,
                mb,
                nDim,
                n0,
                nn);
        bf16KernelBlock0(
                parts, xs, xsOff, tiles, kDim, k0, kc, wb, groups, c, mPad, first, y, rowBase, mb, nDim, n0, nn);
    }

    /** The BF16 and AMX units the CPU has (KernelSelection.Library's bits; asked of the CPU in scorch_bf16.c). */
    private static native int units0();

    private static native int readStream0(ByteBuffer buf, long offset, long length);

    private static native void splitPairs0(float[] x, int m, int kDim, int parts, int[] xp);

    private static native boolean bf16PairsRowDotMapped0(
            java.nio.MappedByteBuffer map,
            long byteOffset,
            int kDim,
            int rows,
            int[] xp,
            int parts,
            int m,
            float[] y,
            int yOff,
            int nDim);

    private static native void splitTile0(int parts, float[] x, int xOff, int rows, int kDim, ByteBuffer xs, int xsOff);

    private static native void bf16KernelBlock0(
            int parts,
            ByteBuffer xs,
            int xsOff,
            int tiles,
            int kDim,
            int k0,
            int kc,
            float[] wb,
            int groups,
            ByteBuffer c,
            int mPad,
            boolean first,
            float[] y,
            int rowBase,
            int mb,
            int nDim,
            int n0,
            int nn);

    /** 2: AVX-512 F, AVX2 and FMA; 1: AVX2 and FMA; 0: neither (asked of the CPU in scorch_cpu.c). */
    private static native int isa();

    private static native void transposeTile0(
            int mr, float[] x, int xOff, int rows, int kDim, ByteBuffer xt, int xtOff);

    private static native void bf16Rows0(short[] src, int so, int srcStride, int rows, int n, float[] dst);

    private static native void fp8Rows0(
            byte[] src,
            int so,
            int srcStride,
            int rows,
            int n,
            float[] scales,
            int blocksPerRow,
            int lead,
            int bc,
            float[] dst);

    private static native boolean mappedReadsGuarded0();

    private static native boolean bf16RowsMapped0(
            java.nio.ByteBuffer map, long byteOffset, int srcStride, int rows, int n, float[] dst);

    private static native boolean fp8RowsMapped0(
            java.nio.ByteBuffer map,
            long byteOffset,
            int srcStride,
            int rows,
            int n,
            float[] scales,
            int blocksPerRow,
            int lead,
            int bc,
            float[] dst);

    private static native void int4Rows0(
            int[] src,
            int so,
            int srcStride,
            int rows,
            int n,
            float[] scales,
            int scaleOff,
            int scalesPerRow,
            int lead,
            int group,
            float[] dst,
            boolean avx512);

    /**
     * Decode's absorbed MLA attention of one query row for heads consecutive heads (see {@code mla_absorbed_bf16} in
     * scorch_decode.h; {@link LatentAttention#attendVector}'s bits on lanes, {@link #rowDotLanes}, for each head, whatever
     * the count),
     * their kv_b_proj rows (each head's nope W_UK rows, then vHead W_UV rows, rank BF16 values each) read in place from
     * byte byteOffset of map: head g's output at out[oOff + g oStride ..+ vHead) for its query q[qOff + g qStride ..] =
     * [q_nope | q_pe], over the first len rows of cache [.., stride]. scratch holds {@link #mlaScratchFloats} floats. True
     * when read; false where a page could not be read (the file shrank under its mapping): the caller throws naming the
     * file. Bounds are the caller's ({@link LatentAttention#attendInPlace}) to check.
     */
    static native boolean mlaAbsorbedBf16Mapped0(
            java.nio.MappedByteBuffer map,
            long byteOffset,
            int heads,
            int nope,
            int rope,
            int vHead,
            int rank,
            float scale,
            float[] q,
            int qOff,
            int qStride,
            float[] cache,
            int stride,
            int len,
            float[] out,
            int oOff,
            int oStride,
            float[] scratch,
            int lanes);

    private static native boolean bf16RowDotMapped0(
            java.nio.MappedByteBuffer map,
            long byteOffset,
            int kDim,
            int rows,
            float[] xs,
            float[] x,
            int m,
            float[] y,
            int yOff,
            int nDim,
            int lanes);

    private static native int int4RowDotMapped0(
            java.nio.MappedByteBuffer map,
            long byteOffset,
            int wpr,
            int kDim,
            int rows,
            java.nio.MappedByteBuffer scaleMap,
            long scaleByteOffset,
            int scaleType,
            int gpr,
            int group,
            float[] scratch,
            float[] xs,
            float[] x,
            int m,
            float[] y,
            int yOff,
            int nDim,
            int lanes);

    private static native boolean fp8RowDotMapped0(
            java.nio.MappedByteBuffer map,
            long byteOffset,
            int kDim,
            int rows,
            int row0,
            float[] scaleInv,
            int scaleCols,
            int blockRows,
            int bc,
            float[] x,
            int m,
            float[] y,
            int yOff,
            int nDim,
            int lanes);

    private static native int int4RowsMapped0(
            java.nio.ByteBuffer map,
            long byteOffset,
            int srcStride,
            int rows,
            int n,
            java.nio.ByteBuffer scaleMap,
            long scaleByteOffset,
            int scaleType,
            int scalesPerRow,
            int need,
            int lead,
            int group,
            float[] scratch,
            float[] dst);

    private static native void kernelBlock0(
            int mr,
            ByteBuffer xt,
            int xtOff,
            int tiles,
            int kDim,
            int k0,
            int kc,
            float[] wb,
            int groups,
            ByteBuffer c,
            int mPad,
            boolean first,
            float[] y,
            int rowBase,
            int mb,
            int nDim,
            int n0,
            int nn);
}
