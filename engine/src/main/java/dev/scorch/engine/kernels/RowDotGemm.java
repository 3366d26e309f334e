package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.NumberFormats;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShuffle;
import jdk.incubator.vector.VectorSpecies;

/**
 * y[M, N] = x[M, K] · Wᵀ for decode-shaped calls (M from 1 to a few dozen): every output is a dot product of
 * a row of x with a weight row read straight from the memory-mapped checkpoint, NR weight rows at a time
 * (bulk-copied into a small per-thread buffer, decoded in registers), each loaded weight vector feeding up to
 * MR rows of x. Nothing is packed, so at M = 1 the cost is reading W once. N is split across threads.
 *
 * <p>Bits: every y[m, n] is the same sequence of float operations whatever M, whichever register block or
 * thread computes it. Per output there is one L-lane accumulator over k in order (for BF16, lane i of step j
 * takes k = 2(jL + i) then k = 2(jL + i) + 1, each as one FMA), then the lanes are added in a fixed tree
 * (never reduceLanes(ADD), whose order is unspecified), then the K tail by scalar FMAs in order. The result
 * depends on the vector width L of the machine, and differs from {@link PackedGemm}'s plain FMA chain in
 * rounding only: decode steps use this kernel whatever their batch size, prefill uses PackedGemm.
 *
 * <p>Weights: BF16 (even K), FP8 E4M3 with block scales (block columns a multiple of L) and INT4 groups (group size a
 * multiple of 8) are decoded in registers; F32, F16 and other shapes are decoded row by row through {@link Linear#row}
 * (slower, same bits rules). INT4's lanes take whole words: lane i of step j takes the eight inputs of word jL + i, k =
 * 8(jL + i) + p for p = 0 .. 7 in order, each as one FMA; the K tail past the last whole vector of words goes by scalar
 * FMAs.
 */
public final class RowDotGemm {
    static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    static final VectorSpecies<Integer> I = VectorSpecies.of(int.class, F.vectorShape());
    static final int L = F.length();
    /** Weight rows per block. */
    static final int NR = 4;
    /** Rows of x per register block when M > 1. */
    static final int MR = 4;
    /** BF16 rows in 4 × 4 blocks ({@link KernelSelection#decodeBlock4x4}); else two 2 × 4 blocks. */
    static final boolean BLOCK_4X4 = KernelSelection.current().decodeBlock4x4();
    /**
     * BF16 rows through the native row-dot, reading the mapping in place ({@link KernelSelection}'s decode choice, and the
     * library's SIGBUS guard installed): the same bits as the Java blocks, without their copy of each block's rows.
     */
    static final boolean NATIVE_ROWDOT = KernelSelection.current().decodeGemm().impl() == KernelSelection.Impl.NATIVE
            && NativeCpu.mappedReadsGuarded();
    /** Weights (N·K) a task gets at least, so small matrices do not pay for waking threads. */
    static final long MIN_TASK_WEIGHTS = 1 << 17;

    private static final int BF16_HIGH = 0xFFFF0000;

    private RowDotGemm() {}

    private enum Path {
        BF16,
        /** BF16 weights in a bf16 precision: x in bf16 parts, the products on VDPBF16PS. */
        BF16_PARTS,
        FP8,
        INT4,
        GENERIC
    }

    /** Per-thread buffers, grown as needed and reused call after call. */
    private static final class Scratch {
        int[] ints = new int[0];
        byte[] bytes = new byte[0];
        float[] floats = new float[0];
        float[][] xsGroup = new float[1][];
        int[][] xpGroup = new int[1][];
        // A call's plan (grown to the largest group, reused): the caller's thread fills them before the parallel pass.
        Path[] paths = new Path[1];
        float[][] xs = new float[1][];
        int[][] xp = new int[1][];
        int[] perTask = new int[1];
        int[] firstTask = new int[2];
        // matmul's one-element groups
        final float[][] x1 = new float[1][];
        final int[] m1 = new int[1];
        final Linear[] w1 = new Linear[1];
        final float[][] y1 = new float[1][];

        // The group in flight and the task that runs one of its tasks: made once, so a call allocates no lambda.
        float[][] gx;
        int[] gm;
        Linear[] gw;
        float[][] gy;
        boolean block4x4;
        boolean nativeRowDot;
        int parts;
        final java.util.function.IntConsumer task = this::runTask;

        /** Task t of the group planned in this (the caller's) scratch; per-thread buffers come from the running thread's. */
        private void runTask(int t) {
            int i = 0;
            while (firstTask[i + 1] <= t) {
                i++;
            }
            int r0 = (t - firstTask[i]) * perTask[i] * NR;
            int r1 = Math.min(gw[i].out(), r0 + perTask[i] * NR);
            Scratch s = SCRATCH.get();
            switch (paths[i]) {
                case BF16 -> bf16Fp32Rows(i, r0, r1, s);
                case BF16_PARTS -> {
                    if (!bf16RowsNative(i, r0, r1, parts)) {
                        // A task a mapping border cuts: row by row, each in place where it lies whole in one mapping,
                        // else in fp32 (which rows those are depends on the file alone, not on the task's bounds).
                        for (int r = r0; r < r1; r++) {
                            if (!bf16RowsNative(i, r, r + 1, parts)) {
                                bf16Fp32Rows(i, r, r + 1, s);
                            }
                        }
                    }
                }
                case FP8 -> {
                    if (!nativeRowDot || !fp8RowsNative(gx[i], gm[i], gw[i], gy[i], r0, r1)) {
                        fp8Rows(gx[i], gm[i], gw[i], gy[i], r0, r1, s);
                    }
                }
                case INT4 -> {
                    if (!nativeRowDot || !int4RowsNative(xs[i], gx[i], gm[i], gw[i], gy[i], r0, r1, s)) {
                        int4Rows(xs[i], gx[i], gm[i], gw[i], gy[i], r0, r1, s);
                    }
                }
                default -> genericRows(gx[i], gm[i], gw[i], gy[i], r0, r1, s);
            }
        }

        /** Member i's BF16 rows [r0, r1) in fp32: the native row-dot where it runs and they lie in one mapping, else Java. */
        private void bf16Fp32Rows(int i, int r0, int r1, Scratch s) {
            if (!nativeRowDot || !bf16RowsNative(i, r0, r1, 0)) {
                bf16Rows(xs[i], gx[i], gm[i], gw[i], gy[i], r0, r1, block4x4, s);
            }
        }

        /**
         * Member i's BF16 rows [r0, r1) by a native row-dot reading the weights in place: with parts 0 the fp32 one (the
         * bits of {@link #bf16Rows}) against xs and x, else the bf16 one against xp. False (nothing done) where they do
         * not lie whole in one mapping.
         */
        private boolean bf16RowsNative(int i, int r0, int r1, int parts) {
            Linear w = gw[i];
            int m = gm[i];
            int kDim = w.in();
            long n = (long) (r1 - r0) * kDim;
            if (m == 0 || r1 <= r0) {
                return true;
            }
            if (2 * n > Integer.MAX_VALUE) {
                return false;
            }
            java.nio.MappedByteBuffer map = w.rawMapping(r0, 0, (int) n);
            if (map == null) {
                return false;
            }
            long at = w.rawMappedAt(r0, 0, (int) n);
            boolean read = parts == 0
                    ? NativeCpu.bf16RowDotMapped(map, at, kDim, r1 - r0, xs[i], gx[i], m, gy[i], r0, w.out())
                    : NativeCpu.bf16PairsRowDotMapped(map, at, kDim, r1 - r0, xp[i], parts, m, gy[i], r0, w.out());
            if (!read) {
                throw w.rawMappingFault(r0, 0, n);
            }
            return true;
        }

        void plan(int g) {
            if (paths.length < g) {
                paths = new Path[g];
                xs = new float[g][];
                xp = new int[g][];
                perTask = new int[g];
                firstTask = new int[g + 1];
            }
        }

        final float[] lanes = new float[16 * L]; // up to sixteen accumulators' lanes

        int[] ints(int n) {
            return ints.length >= n ? ints : (ints = new int[n]);
        }

        byte[] bytes(int n) {
            return bytes.length >= n ? bytes : (bytes = new byte[n]);
        }

        float[] floats(int n) {
            return floats.length >= n ? floats : (floats = new float[n]);
        }
    }

    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    private static Path path(Linear w) {
        if (w.dtype() == DType.BF16 && w.in() % 2 == 0) {
            return Path.BF16;
        }
        if (RowDecoder.fp8InRegisters(w)) {
            return Path.FP8;
        }
        if (w.format() == Linear.Format.INT4_GROUP && w.groupSize() % 8 == 0) {
            return Path.INT4;
        }
        return Path.GENERIC;
    }

    public static void matmul(float[] x, int m, Linear w, float[] y, Parallel par) {
        matmul(x, m, w, y, par, CpuPrecision.FP32);
    }

    /** y = x · wᵀ in precision, which must run here ({@link #runs}). */
    public static void matmul(float[] x, int m, Linear w, float[] y, Parallel par, CpuPrecision precision) {
        Scratch s = SCRATCH.get();
        s.x1[0] = x;
        s.m1[0] = m;
        s.w1[0] = w;
        s.y1[0] = y;
        try {
            matmulGroup(s.x1, s.m1, s.w1, s.y1, par, precision);
        } finally {
            s.x1[0] = s.y1[0] = null; // no arrays kept alive past the call
        }
    }

    /**
     * Independent products y[g] = x[g] · w[g]ᵀ (m[g] rows each) in one parallel pass, so small matrices (the
     * experts of a decode step) share one wake-up of the threads. Each result has the bits {@link #matmul} gives.
     */
    public static void matmulGroup(float[][] x, int[] m, Linear[] w, float[][] y, Parallel par) {
        matmulGroup(x, m, w, y, par, BLOCK_4X4, NATIVE_ROWDOT, 0);
    }

    /**
     * As {@link #matmulGroup(float[][], int[], Linear[], float[][], Parallel)} in precision, which must run here ({@link
     * #runs}): in a bf16 one, BF16 weights multiply x's bf16 parts on VDPBF16PS (see {@link CpuPrecision}); FP8, INT4
     * and other weights stay fp32.
     */
    public static void matmulGroup(
            float[][] x, int[] m, Linear[] w, float[][] y, Parallel par, CpuPrecision precision) {
        if (!runs(precision)) {
            throw new IllegalArgumentException("CPU precision " + precision.id() + " does not run in decode here: "
                    + KernelSelection.current().decodePrecision().reason());
        }
        matmulGroup(x, m, w, y, par, BLOCK_4X4, NATIVE_ROWDOT, precision.parts());
    }

    /**
     * Whether precision runs here: fp32 always; the bf16 modes where the native row-dot runs on 16 lanes (AVX-512) and
     * the CPU has AVX512-BF16.
     */
    public static boolean runs(CpuPrecision precision) {
        return precision == CpuPrecision.FP32 || NATIVE_ROWDOT && L == 16 && NativeCpu.bf16();
    }

    /** As {@link #matmulGroup(float[][], int[], Linear[], float[][], Parallel)} with BF16's block given (tests run both). */
    static void matmulGroup(float[][] x, int[] m, Linear[] w, float[][] y, Parallel par, boolean block4x4) {
        matmulGroup(x, m, w, y, par, block4x4, NATIVE_ROWDOT, 0);
    }

    /** As {@link #matmulGroup(float[][], int[], Linear[], float[][], Parallel, boolean)}, the native row-dot on or off. */
    static void matmulGroup(
            float[][] x, int[] m, Linear[] w, float[][] y, Parallel par, boolean block4x4, boolean nativeRowDot) {
        matmulGroup(x, m, w, y, par, block4x4, nativeRowDot, 0);
    }

    /** As above, BF16 weights in parts bf16 parts of x (0: fp32). */
    private static void matmulGroup(
            float[][] x,
            int[] m,
            Linear[] w,
            float[][] y,
            Parallel par,
            boolean block4x4,
            boolean nativeRowDot,
            int parts) {
        if (nativeRowDot && !NATIVE_ROWDOT) {
            throw new IllegalArgumentException(
                    "no native row-dot here: " + KernelSelection.current().decodeGemm());
        }
        if (block4x4 && L != 16) {
            throw new IllegalArgumentException("the 4 x 4 block folds 16 lanes; this JVM's vectors hold " + L);
        }
        int g = w.length;
        Scratch caller = SCRATCH.get();
        caller.plan(g);
        Path[] paths = caller.paths;
        float[][] xs = caller.xs;
        int[][] xp = caller.xp;
        int[] perTask = caller.perTask;
        int[] firstTask = caller.firstTask;
        firstTask[0] = 0;
        if (caller.xsGroup.length < g) {
            caller.xsGroup = java.util.Arrays.copyOf(caller.xsGroup, g);
            caller.xpGroup = java.util.Arrays.copyOf(caller.xpGroup, g);
        }
        for (int i = 0; i < g; i++) {
            int kDim = w[i].in();
            int nDim = w[i].out();
            if (x[i].length < (long) m[i] * kDim || y[i].length < (long) m[i] * nDim) {
                throw new IllegalArgumentException(w[i].name() + ": x or y too short for m = " + m[i]);
            }
            paths[i] = path(w[i]);
            xs[i] = x[i];
            if (paths[i] == Path.BF16) {
                // BF16 pairs are decoded as (even, odd) lanes, so x is split into its even and odd elements once:
                // row r holds [x[r, 0], x[r, 2], ... | x[r, 1], x[r, 3], ...] at r * K.
                float[] split = caller.xsGroup[i];
                if (split == null || split.length < m[i] * kDim) {
                    caller.xsGroup[i] = split = new float[m[i] * kDim];
                }
                int half = kDim / 2;
                for (int r = 0; r < m[i]; r++) {
                    int o = r * kDim;
                    for (int k = 0; k < half; k++) {
                        split[o + k] = x[i][o + 2 * k];
                        split[o + half + k] = x[i][o + 2 * k + 1];
                    }
                }
                xs[i] = split;
                if (parts > 0) {
                    int need = m[i] * parts * NativeCpu.pairsStride(kDim);
                    int[] pairs = caller.xpGroup[i];
                    if (pairs == null || pairs.length < need) {
                        caller.xpGroup[i] = pairs = new int[need];
                    }
                    NativeCpu.splitPairs(x[i], m[i], kDim, parts, pairs);
                    xp[i] = pairs;
                    paths[i] = Path.BF16_PARTS;
                }
            } else if (paths[i] == Path.INT4) {
                // INT4 words are decoded phase by phase (input 8v + p of word v), so x is split by phase once: row r
                // holds
                // x[r, 8v + p] at r * K + p * (K / 8) + v for the K / 8 whole words (the inputs past them are read from
                // x).
                float[] split = caller.xsGroup[i];
                if (split == null || split.length < m[i] * kDim) {
                    caller.xsGroup[i] = split = new float[m[i] * kDim];
                }
                int kw = kDim / 8;
                for (int r = 0; r < m[i]; r++) {
                    int o = r * kDim;
                    for (int v = 0; v < kw; v++) {
                        for (int p = 0; p < 8; p++) {
                            split[o + p * kw + v] = x[i][o + 8 * v + p];
                        }
                    }
                }
                xs[i] = split;
            }
            int blocks = (nDim + NR - 1) / NR;
            long weights = (long) nDim * kDim;
            int tasks = (int) Math.min(blocks, Math.max(1, weights / MIN_TASK_WEIGHTS));
            if (tasks > 1 && g == 1) {
                // A whole number of tasks a thread: 5 equal tasks on 2 threads would leave one thread 3 of them.
                int t = par.threads();
                tasks = Math.min(blocks, (Math.max(tasks, 2 * t) + t - 1) / t * t);
            }
            perTask[i] = m[i] == 0 || blocks == 0 ? 0 : (blocks + tasks - 1) / tasks;
            int count = perTask[i] == 0 ? 0 : (blocks + perTask[i] - 1) / perTask[i];
            firstTask[i + 1] = firstTask[i] + count;
        }
        caller.gx = x;
        caller.gm = m;
        caller.gw = w;
        caller.gy = y;
        caller.block4x4 = block4x4;
        caller.nativeRowDot = nativeRowDot;
        caller.parts = parts;
        try {
            par.forEach(firstTask[g], caller.task);
        } finally {
            caller.gx = caller.gy = null;
            caller.gm = null;
            caller.gw = null;
        }
    }

    // ---------------------------------------------------------------------------------------------------- BF16

    private static void bf16Rows(
            float[] xs, float[] x, int m, Linear w, float[] y, int r0, int r1, boolean block4x4, Scratch s) {
        int kDim = w.in();
        int half = kDim / 2;
        int[] wb = s.ints(NR * half);
        for (int r = r0; r < r1; r += NR) {
            int nr = Math.min(NR, r1 - r);
            if (!w.rawHalfPairs(r, 0, wb, nr * half)) {
                pairsFromRows(w, r, nr, wb, s);
            }
            if (nr == NR) {
                int i = 0;
                for (; i + MR <= m; i += MR) {
                    if (block4x4) {
                        bf16Block4x4(xs, x, i, w, wb, y, r, s);
                    } else {
                        bf16Block2x4(xs, x, i, w, wb, 0, y, r, s);
                        bf16Block2x4(xs, x, i, w, wb, 2 * half, y, r + 2, s);
                    }
                }
                for (; i < m; i++) {
                    bf16Block4x1(xs, x, i, w, wb, y, r, s);
                }
            } else {
                for (int j = 0; j < nr; j++) {
                    for (int i = 0; i < m; i++) {
                        bf16Block1x1(xs, x, i, w, wb, j * half, y, r + j, s);
                    }
                }
            }
        }
    }

    /** The pairs rebuilt from decoded rows, where the mapping is not 4-byte aligned (bf16 is fp32's top half: exact). */
    private static void pairsFromRows(Linear w, int row, int rows, int[] dst, Scratch s) {
        int kDim = w.in();
        float[] f = s.floats(kDim);
        for (int r = 0; r < rows; r++) {
            w.row(row + r, 0, kDim, f, 0);
            for (int i = 0; i < kDim / 2; i++) {
                dst[r * (kDim / 2) + i] = (Float.floatToRawIntBits(f[2 * i]) >>> 16)
                        | (Float.floatToRawIntBits(f[2 * i + 1]) & BF16_HIGH);
            }
        }
    }

    /** Finishes one BF16 output: the lanes in a fixed tree, then k = 2·kv .. K-1 by scalar FMAs. */
    private static float bf16Finish(float[] lanes, int lo, int[] wb, int wOff, float[] x, int xOff, int kv, int kDim) {
        return bf16Tail(Lanes.foldTree(lanes, lo, L), wb, wOff, x, xOff, kv, kDim);
    }

    /** sum, then k = 2·kv .. K-1 of the weight row at wb[wOff ..] by scalar FMAs in order. */
    private static float bf16Tail(float sum, int[] wb, int wOff, float[] x, int xOff, int kv, int kDim) {
        for (int k = 2 * kv; k < kDim; k++) {
            int pair = wb[wOff + k / 2];
            float wk = Float.intBitsToFloat((k & 1) == 0 ? pair << 16 : pair & BF16_HIGH);
            sum = Math.fma(x[xOff + k], wk, sum);
        }
        return sum;
    }

    private static void bf16Block1x1(
            float[] xs, float[] x, int i, Linear w, int[] wb, int wOff, float[] y, int row, Scratch s) {
        int kDim = w.in();
        int half = kDim / 2;
        int kv = half / L * L; // pairs taken by whole vectors
        int xe = i * kDim;
        int xo = xe + half;
        FloatVector a = FloatVector.zero(F);
        for (int j = 0; j < kv; j += L) {
            IntVector p = IntVector.fromArray(I, wb, wOff + j);
            a = p.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(FloatVector.fromArray(F, xs, xe + j), a);
            a = p.and(BF16_HIGH).reinterpretAsFloats().fma(FloatVector.fromArray(F, xs, xo + j), a);
        }
        a.intoArray(s.lanes, 0);
        y[i * w.out() + row] = bf16Finish(s.lanes, 0, wb, wOff, x, xe, kv, kDim);
    }

    private static void bf16Block4x1(float[] xs, float[] x, int i, Linear w, int[] wb, float[] y, int row, Scratch s) {
        int kDim = w.in();
        int half = kDim / 2;
        int kv = half / L * L;
        int xe = i * kDim;
        int xo = xe + half;
        FloatVector a0 = FloatVector.zero(F);
        FloatVector a1 = a0;
        FloatVector a2 = a0;
        FloatVector a3 = a0;
        for (int j = 0; j < kv; j += L) {
            FloatVector ve = FloatVector.fromArray(F, xs, xe + j);
            FloatVector vo = FloatVector.fromArray(F, xs, xo + j);
            IntVector p0 = IntVector.fromArray(I, wb, j);
            IntVector p1 = IntVector.fromArray(I, wb, half + j);
            IntVector p2 = IntVector.fromArray(I, wb, 2 * half + j);
            IntVector p3 = IntVector.fromArray(I, wb, 3 * half + j);
            a0 = p0.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(ve, a0);
            a1 = p1.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(ve, a1);
            a2 = p2.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(ve, a2);
            a3 = p3.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(ve, a3);
            a0 = p0.and(BF16_HIGH).reinterpretAsFloats().fma(vo, a0);
            a1 = p1.and(BF16_HIGH).reinterpretAsFloats().fma(vo, a1);
            a2 = p2.and(BF16_HIGH).reinterpretAsFloats().fma(vo, a2);
            a3 = p3.and(BF16_HIGH).reinterpretAsFloats().fma(vo, a3);
        }
        int yo = i * w.out() + row;
        a0.intoArray(s.lanes, 0);
        a1.intoArray(s.lanes, L);
        a2.intoArray(s.lanes, 2 * L);
        a3.intoArray(s.lanes, 3 * L);
        y[yo] = bf16Finish(s.lanes, 0, wb, 0, x, xe, kv, kDim);
        y[yo + 1] = bf16Finish(s.lanes, L, wb, half, x, xe, kv, kDim);
        y[yo + 2] = bf16Finish(s.lanes, 2 * L, wb, 2 * half, x, xe, kv, kDim);
        y[yo + 3] = bf16Finish(s.lanes, 3 * L, wb, 3 * half, x, xe, kv, kDim);
    }

    /**
     * Two weight rows (wOff, wOff + K/2 in wb) × four rows of x: each weight pair vector is decoded once and
     * feeds four accumulators. Eight accumulators plus the decoded weights fit AVX2's 16 registers.
     */
    private static void bf16Block2x4(
            float[] xs, float[] x, int i, Linear w, int[] wb, int wOff, float[] y, int row, Scratch s) {
        int kDim = w.in();
        int half = kDim / 2;
        int kv = half / L * L;
        int x0 = i * kDim;
        int x1 = x0 + kDim;
        int x2 = x1 + kDim;
        int x3 = x2 + kDim;
        int w1Off = wOff + half;
        FloatVector z = FloatVector.zero(F);
        FloatVector a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
        for (int j = 0; j < kv; j += L) {
            IntVector p0 = IntVector.fromArray(I, wb, wOff + j);
            IntVector p1 = IntVector.fromArray(I, wb, w1Off + j);
            FloatVector e0 = p0.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector e1 = p1.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector o0 = p0.and(BF16_HIGH).reinterpretAsFloats();
            FloatVector o1 = p1.and(BF16_HIGH).reinterpretAsFloats();
            // Per accumulator: the even product, then the odd one.
            FloatVector v = FloatVector.fromArray(F, xs, x0 + j);
            a00 = e0.fma(v, a00);
            a01 = e1.fma(v, a01);
            v = FloatVector.fromArray(F, xs, x0 + half + j);
            a00 = o0.fma(v, a00);
            a01 = o1.fma(v, a01);
            v = FloatVector.fromArray(F, xs, x1 + j);
            a10 = e0.fma(v, a10);
            a11 = e1.fma(v, a11);
            v = FloatVector.fromArray(F, xs, x1 + half + j);
            a10 = o0.fma(v, a10);
            a11 = o1.fma(v, a11);
            v = FloatVector.fromArray(F, xs, x2 + j);
            a20 = e0.fma(v, a20);
            a21 = e1.fma(v, a21);
            v = FloatVector.fromArray(F, xs, x2 + half + j);
            a20 = o0.fma(v, a20);
            a21 = o1.fma(v, a21);
            v = FloatVector.fromArray(F, xs, x3 + j);
            a30 = e0.fma(v, a30);
            a31 = e1.fma(v, a31);
            v = FloatVector.fromArray(F, xs, x3 + half + j);
            a30 = o0.fma(v, a30);
            a31 = o1.fma(v, a31);
        }
        int n = w.out();
        float[] ln = s.lanes;
        int y0 = i * n + row;
        a00.intoArray(ln, 0);
        a01.intoArray(ln, L);
        a10.intoArray(ln, 2 * L);
        a11.intoArray(ln, 3 * L);
        a20.intoArray(ln, 4 * L);
        a21.intoArray(ln, 5 * L);
        a30.intoArray(ln, 6 * L);
        a31.intoArray(ln, 7 * L);
        y[y0] = bf16Finish(ln, 0, wb, wOff, x, x0, kv, kDim);
        y[y0 + 1] = bf16Finish(ln, L, wb, w1Off, x, x0, kv, kDim);
        y0 += n;
        y[y0] = bf16Finish(ln, 2 * L, wb, wOff, x, x1, kv, kDim);
        y[y0 + 1] = bf16Finish(ln, 3 * L, wb, w1Off, x, x1, kv, kDim);
        y0 += n;
        y[y0] = bf16Finish(ln, 4 * L, wb, wOff, x, x2, kv, kDim);
        y[y0 + 1] = bf16Finish(ln, 5 * L, wb, w1Off, x, x2, kv, kDim);
        y0 += n;
        y[y0] = bf16Finish(ln, 6 * L, wb, wOff, x, x3, kv, kDim);
        y[y0 + 1] = bf16Finish(ln, 7 * L, wb, w1Off, x, x3, kv, kDim);
    }

    /**
     * Four weight rows (all of wb) × four rows of x from row i, where {@link KernelSelection#decodeBlock4x4} says
     * (AVX-512's 32 registers hold the sixteen accumulators and the eight decoded weight vectors). Each accumulator has
     * the bits of {@link #bf16Block4x1}'s (the even product, then the odd one, per step); each loaded weight vector
     * feeds four rows and each x vector four weight rows, half the x loads per FMA of two {@link #bf16Block2x4}s; the
     * sixteen are finished together ({@link FoldTree16}), not by scalar lane sums.
     */
    private static void bf16Block4x4(float[] xs, float[] x, int i, Linear w, int[] wb, float[] y, int row, Scratch s) {
        int kDim = w.in();
        int half = kDim / 2;
        int kv = half / L * L;
        int x0 = i * kDim;
        int x1 = x0 + kDim;
        int x2 = x1 + kDim;
        int x3 = x2 + kDim;
        FloatVector z = FloatVector.zero(F);
        // a<x row><weight row>
        FloatVector a00 = z, a01 = z, a02 = z, a03 = z, a10 = z, a11 = z, a12 = z, a13 = z;
        FloatVector a20 = z, a21 = z, a22 = z, a23 = z, a30 = z, a31 = z, a32 = z, a33 = z;
        for (int j = 0; j < kv; j += L) {
            IntVector p0 = IntVector.fromArray(I, wb, j);
            IntVector p1 = IntVector.fromArray(I, wb, half + j);
            IntVector p2 = IntVector.fromArray(I, wb, 2 * half + j);
            IntVector p3 = IntVector.fromArray(I, wb, 3 * half + j);
            FloatVector e0 = p0.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector e1 = p1.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector e2 = p2.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector e3 = p3.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector o0 = p0.and(BF16_HIGH).reinterpretAsFloats();
            FloatVector o1 = p1.and(BF16_HIGH).reinterpretAsFloats();
            FloatVector o2 = p2.and(BF16_HIGH).reinterpretAsFloats();
            FloatVector o3 = p3.and(BF16_HIGH).reinterpretAsFloats();
            FloatVector ve = FloatVector.fromArray(F, xs, x0 + j);
            FloatVector vo = FloatVector.fromArray(F, xs, x0 + half + j);
            a00 = o0.fma(vo, e0.fma(ve, a00));
            a01 = o1.fma(vo, e1.fma(ve, a01));
            a02 = o2.fma(vo, e2.fma(ve, a02));
            a03 = o3.fma(vo, e3.fma(ve, a03));
            ve = FloatVector.fromArray(F, xs, x1 + j);
            vo = FloatVector.fromArray(F, xs, x1 + half + j);
            a10 = o0.fma(vo, e0.fma(ve, a10));
            a11 = o1.fma(vo, e1.fma(ve, a11));
            a12 = o2.fma(vo, e2.fma(ve, a12));
            a13 = o3.fma(vo, e3.fma(ve, a13));
            ve = FloatVector.fromArray(F, xs, x2 + j);
            vo = FloatVector.fromArray(F, xs, x2 + half + j);
            a20 = o0.fma(vo, e0.fma(ve, a20));
            a21 = o1.fma(vo, e1.fma(ve, a21));
            a22 = o2.fma(vo, e2.fma(ve, a22));
            a23 = o3.fma(vo, e3.fma(ve, a23));
            ve = FloatVector.fromArray(F, xs, x3 + j);
            vo = FloatVector.fromArray(F, xs, x3 + half + j);
            a30 = o0.fma(vo, e0.fma(ve, a30));
            a31 = o1.fma(vo, e1.fma(ve, a31));
            a32 = o2.fma(vo, e2.fma(ve, a32));
            a33 = o3.fma(vo, e3.fma(ve, a33));
        }
        // The accumulators leave registers through an array, row-major (a00, a01, .., a33): the finishing methods
        // load them back (a vector passed to a call C2 does not inline, as the folds here are not, is boxed).
        float[] ln = s.lanes;
        a00.intoArray(ln, 0);
        a01.intoArray(ln, L);
        a02.intoArray(ln, 2 * L);
        a03.intoArray(ln, 3 * L);
        a10.intoArray(ln, 4 * L);
        a11.intoArray(ln, 5 * L);
        a12.intoArray(ln, 6 * L);
        a13.intoArray(ln, 7 * L);
        a20.intoArray(ln, 8 * L);
        a21.intoArray(ln, 9 * L);
        a22.intoArray(ln, 10 * L);
        a23.intoArray(ln, 11 * L);
        a30.intoArray(ln, 12 * L);
        a31.intoArray(ln, 13 * L);
        a32.intoArray(ln, 14 * L);
        a33.intoArray(ln, 15 * L);
        int n = w.out();
        FoldTree16.fold(ln);
        for (int lane = 0; lane < 16; lane++) {
            int xr = FoldTree16.X_ROW[lane];
            int wr = FoldTree16.W_ROW[lane];
            y[(i + xr) * n + row + wr] = bf16Tail(ln[lane], wb, wr * half, x, x0 + xr * kDim, kv, kDim);
        }
    }

    /**
     * {@link Lanes#foldTree} for sixteen 16-lane accumulators at once, with the bits it gives each one. A fold of level
     * b (8, 4, 2, 1 lanes) takes p and q, each holding accumulators in groups of 2b lanes, and returns one vector of
     * groups of b lanes: lane j of a group is p's j + (j + b) where bit b of j is clear, q's (j - b) + j where it is
     * set (the same two addends: addition commutes exactly). {@link #X_ROW} and {@link #W_ROW} say which accumulator
     * (a&lt;x row&gt;&lt;weight row&gt;) each lane of {@link RowDotGemm#bf16Block4x4}'s folded vector holds.
     */
    private static final class FoldTree16 {
        static final int[] X_ROW = new int[16];
        static final int[] W_ROW = new int[16];
        // Constants, so that C2 compiles each fold to two permutes, two blends and an add.
        private static final VectorShuffle<Float> SWAP8 = VectorShuffle.fromOp(F, j -> j ^ 8);
        private static final VectorShuffle<Float> SWAP4 = VectorShuffle.fromOp(F, j -> j ^ 4);
        private static final VectorShuffle<Float> SWAP2 = VectorShuffle.fromOp(F, j -> j ^ 2);
        private static final VectorShuffle<Float> SWAP1 = VectorShuffle.fromOp(F, j -> j ^ 1);
        private static final VectorMask<Float> UP8 = upper(8);
        private static final VectorMask<Float> UP4 = upper(4);
        private static final VectorMask<Float> UP2 = upper(2);
        private static final VectorMask<Float> UP1 = upper(1);

        private static VectorMask<Float> upper(int b) {
            boolean[] set = new boolean[16];
            for (int j = 0; j < 16; j++) {
                set[j] = (j & b) != 0;
            }
            return VectorMask.fromArray(F, set, 0);
        }

        static FloatVector fold8(FloatVector p, FloatVector q) {
            return p.blend(q, UP8).add(p.rearrange(SWAP8).blend(q.rearrange(SWAP8), UP8));
        }

        static FloatVector fold4(FloatVector p, FloatVector q) {
            return p.blend(q, UP4).add(p.rearrange(SWAP4).blend(q.rearrange(SWAP4), UP4));
        }

        static FloatVector fold2(FloatVector p, FloatVector q) {
            return p.blend(q, UP2).add(p.rearrange(SWAP2).blend(q.rearrange(SWAP2), UP2));
        }

        static FloatVector fold1(FloatVector p, FloatVector q) {
            return p.blend(q, UP1).add(p.rearrange(SWAP1).blend(q.rearrange(SWAP1), UP1));
        }

        /**
         * The sixteen accumulators at ln[0 .. 256), row-major, folded into ln[0 .. 16) (lanes as X_ROW, W_ROW say), in
         * two methods whose folds C2 inlines: as one, it stopped inlining after a dozen (NodeCountInliningCutoff) and
         * boxed the vectors of the rest.
         */
        static void fold(float[] ln) {
            halves(ln);
            quarters(ln);
        }

        /** First level: accumulator pairs (2k, 2k + 1) into ln[16k ..] for k = 0 .. 7. */
        private static void halves(float[] ln) {
            for (int k = 0; k < 8; k++) {
                fold8(FloatVector.fromArray(F, ln, 32 * k), FloatVector.fromArray(F, ln, 32 * k + 16))
                        .intoArray(ln, 16 * k);
            }
        }

        /** The other three levels, from the eight vectors halves left. */
        private static void quarters(float[] ln) {
            FloatVector w0 = fold4(FloatVector.fromArray(F, ln, 0), FloatVector.fromArray(F, ln, 16));
            FloatVector w1 = fold4(FloatVector.fromArray(F, ln, 32), FloatVector.fromArray(F, ln, 48));
            FloatVector w2 = fold4(FloatVector.fromArray(F, ln, 64), FloatVector.fromArray(F, ln, 80));
            FloatVector w3 = fold4(FloatVector.fromArray(F, ln, 96), FloatVector.fromArray(F, ln, 112));
            fold1(fold2(w0, w1), fold2(w2, w3)).intoArray(ln, 0);
        }

        static {
            // The folds of bf16Block4x4 on labels (accumulator 4 · x row + weight row per lane), not on values.
            int[][] a = new int[16][16];
            for (int acc = 0; acc < 16; acc++) {
                java.util.Arrays.fill(a[acc], acc);
            }
            int[][] v = new int[8][];
            for (int k = 0; k < 8; k++) {
                v[k] = foldLabels(a[2 * k], a[2 * k + 1], 0);
            }
            int[][] w = new int[4][];
            for (int k = 0; k < 4; k++) {
                w[k] = foldLabels(v[2 * k], v[2 * k + 1], 1);
            }
            int[] r = foldLabels(foldLabels(w[0], w[1], 2), foldLabels(w[2], w[3], 2), 3);
            for (int lane = 0; lane < 16; lane++) {
                X_ROW[lane] = r[lane] / 4;
                W_ROW[lane] = r[lane] % 4;
            }
        }

        private static int[] foldLabels(int[] p, int[] q, int level) {
            int b = 8 >> level;
            int[] out = new int[16];
            for (int j = 0; j < 16; j++) {
                out[j] = (j & b) == 0 ? p[j] : q[j];
            }
            return out;
        }
    }

    // ----------------------------------------------------------------------------------------------------- FP8

    /**
     * Rows [r0, r1) by the native row-dot, reading the codes in place (the bits of {@link #fp8Rows}); false
     * (nothing done) where they do not lie whole in one mapping.
     */
    private static boolean fp8RowsNative(float[] x, int m, Linear w, float[] y, int r0, int r1) {
        if (m == 0 || r1 <= r0) {
            return true;
        }
        int kDim = w.in();
        long n = (long) (r1 - r0) * kDim;
        if (n > Integer.MAX_VALUE) {
            return false;
        }
        java.nio.MappedByteBuffer map = w.rawMapping(r0, 0, (int) n);
        if (map == null) {
            return false;
        }
        long at = w.rawMappedAt(r0, 0, (int) n);
        if (!NativeCpu.fp8RowDotMapped(
                map,
                at,
                kDim,
                r1 - r0,
                r0,
                w.fp8ScaleInv(),
                w.scaleCols(),
                w.blockRows(),
                w.blockCols(),
                x,
                m,
                y,
                r0,
                w.out())) {
            throw w.rawMappingFault(r0, 0, n);
        }
        return true;
    }

    private static void fp8Rows(float[] x, int m, Linear w, float[] y, int r0, int r1, Scratch s) {
        int kDim = w.in();
        byte[] wb = s.bytes(NR * kDim);
        for (int r = r0; r < r1; r += NR) {
            int nr = Math.min(NR, r1 - r);
            w.rawCodes(r, 0, wb, nr * kDim);
            if (nr == NR) {
                int i = 0;
                for (; i + MR <= m; i += MR) {
                    fp8Block2x4(x, i, w, wb, 0, y, r, s);
                    fp8Block2x4(x, i, w, wb, 2 * kDim, y, r + 2, s);
                }
                for (; i < m; i++) {
                    fp8Block4x1(x, i, w, wb, y, r, s);
                }
            } else {
                for (int j = 0; j < nr; j++) {
                    for (int i = 0; i < m; i++) {
                        fp8Block1x1(x, i, w, wb, j * kDim, y, r + j, s);
                    }
                }
            }
        }
    }

    /** Finishes one FP8 output: lanes in a fixed tree, then the K tail by scalar FMAs of code × block scale. */
    private static float fp8Finish(
            float[] lanes, int lo, Linear w, int row, byte[] wb, int wOff, float[] x, int xOff, int kv) {
        float sum = Lanes.foldTree(lanes, lo, L);
        for (int k = kv; k < w.in(); k++) {
            float wk = NumberFormats.e4m3ToFloat(wb[wOff + k]) * w.blockScale(row, k);
            sum = Math.fma(x[xOff + k], wk, sum);
        }
        return sum;
    }

    private static FloatVector scale(Linear w, int row, int k) {
        return FloatVector.broadcast(F, w.blockScale(row, k) * RowDecoder.FP8_RESCALE);
    }

    private static void fp8Block1x1(float[] x, int i, Linear w, byte[] wb, int wOff, float[] y, int row, Scratch s) {
        int kDim = w.in();
        int kv = kDim / L * L;
        int bc = w.blockCols();
        int xo = i * kDim;
        FloatVector a = FloatVector.zero(F);
        for (int k0 = 0; k0 < kv; k0 += bc) {
            int kEnd = Math.min(kv, k0 + bc);
            FloatVector sc = scale(w, row, k0);
            for (int k = k0; k < kEnd; k += L) {
                a = RowDecoder.fp8(wb, wOff + k, sc).fma(FloatVector.fromArray(F, x, xo + k), a);
            }
        }
        a.intoArray(s.lanes, 0);
        y[i * w.out() + row] = fp8Finish(s.lanes, 0, w, row, wb, wOff, x, xo, kv);
    }

    private static void fp8Block4x1(float[] x, int i, Linear w, byte[] wb, float[] y, int row, Scratch s) {
        int kDim = w.in();
        int kv = kDim / L * L;
        int bc = w.blockCols();
        int xo = i * kDim;
        FloatVector a0 = FloatVector.zero(F);
        FloatVector a1 = a0;
        FloatVector a2 = a0;
        FloatVector a3 = a0;
        for (int k0 = 0; k0 < kv; k0 += bc) {
            int kEnd = Math.min(kv, k0 + bc);
            FloatVector s0 = scale(w, row, k0);
            FloatVector s1 = scale(w, row + 1, k0);
            FloatVector s2 = scale(w, row + 2, k0);
            FloatVector s3 = scale(w, row + 3, k0);
            for (int k = k0; k < kEnd; k += L) {
                FloatVector v = FloatVector.fromArray(F, x, xo + k);
                a0 = RowDecoder.fp8(wb, k, s0).fma(v, a0);
                a1 = RowDecoder.fp8(wb, kDim + k, s1).fma(v, a1);
                a2 = RowDecoder.fp8(wb, 2 * kDim + k, s2).fma(v, a2);
                a3 = RowDecoder.fp8(wb, 3 * kDim + k, s3).fma(v, a3);
            }
        }
        int yo = i * w.out() + row;
        a0.intoArray(s.lanes, 0);
        a1.intoArray(s.lanes, L);
        a2.intoArray(s.lanes, 2 * L);
        a3.intoArray(s.lanes, 3 * L);
        y[yo] = fp8Finish(s.lanes, 0, w, row, wb, 0, x, xo, kv);
        y[yo + 1] = fp8Finish(s.lanes, L, w, row + 1, wb, kDim, x, xo, kv);
        y[yo + 2] = fp8Finish(s.lanes, 2 * L, w, row + 2, wb, 2 * kDim, x, xo, kv);
        y[yo + 3] = fp8Finish(s.lanes, 3 * L, w, row + 3, wb, 3 * kDim, x, xo, kv);
    }

    /** Two weight rows (wOff, wOff + K in wb) × four rows of x, as {@link #bf16Block2x4}. */
    private static void fp8Block2x4(float[] x, int i, Linear w, byte[] wb, int wOff, float[] y, int row, Scratch s) {
        int kDim = w.in();
        int kv = kDim / L * L;
        int bc = w.blockCols();
        int x0 = i * kDim;
        int x1 = x0 + kDim;
        int x2 = x1 + kDim;
        int x3 = x2 + kDim;
        int w1Off = wOff + kDim;
        FloatVector z = FloatVector.zero(F);
        FloatVector a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
        for (int k0 = 0; k0 < kv; k0 += bc) {
            int kEnd = Math.min(kv, k0 + bc);
            FloatVector s0 = scale(w, row, k0);
            FloatVector s1 = scale(w, row + 1, k0);
            for (int k = k0; k < kEnd; k += L) {
                FloatVector w0 = RowDecoder.fp8(wb, wOff + k, s0);
                FloatVector w1 = RowDecoder.fp8(wb, w1Off + k, s1);
                FloatVector v = FloatVector.fromArray(F, x, x0 + k);
                a00 = w0.fma(v, a00);
                a01 = w1.fma(v, a01);
                v = FloatVector.fromArray(F, x, x1 + k);
                a10 = w0.fma(v, a10);
                a11 = w1.fma(v, a11);
                v = FloatVector.fromArray(F, x, x2 + k);
                a20 = w0.fma(v, a20);
                a21 = w1.fma(v, a21);
                v = FloatVector.fromArray(F, x, x3 + k);
                a30 = w0.fma(v, a30);
                a31 = w1.fma(v, a31);
            }
        }
        int n = w.out();
        float[] ln = s.lanes;
        int y0 = i * n + row;
        a00.intoArray(ln, 0);
        a01.intoArray(ln, L);
        a10.intoArray(ln, 2 * L);
        a11.intoArray(ln, 3 * L);
        a20.intoArray(ln, 4 * L);
        a21.intoArray(ln, 5 * L);
        a30.intoArray(ln, 6 * L);
        a31.intoArray(ln, 7 * L);
        y[y0] = fp8Finish(ln, 0, w, row, wb, wOff, x, x0, kv);
        y[y0 + 1] = fp8Finish(ln, L, w, row + 1, wb, w1Off, x, x0, kv);
        y0 += n;
        y[y0] = fp8Finish(ln, 2 * L, w, row, wb, wOff, x, x1, kv);
        y[y0 + 1] = fp8Finish(ln, 3 * L, w, row + 1, wb, w1Off, x, x1, kv);
        y0 += n;
        y[y0] = fp8Finish(ln, 4 * L, w, row, wb, wOff, x, x2, kv);
        y[y0 + 1] = fp8Finish(ln, 5 * L, w, row + 1, wb, w1Off, x, x2, kv);
        y0 += n;
        y[y0] = fp8Finish(ln, 6 * L, w, row, wb, wOff, x, x3, kv);
        y[y0 + 1] = fp8Finish(ln, 7 * L, w, row + 1, wb, w1Off, x, x3, kv);
    }

    // ---------------------------------------------------------------------------------------------------- INT4

    /**
     * Rows [r0, r1) by the native row-dot, reading the packed words and the group scales in place (the bits of {@link
     * #int4Rows}); false (nothing done) where either does not lie whole in one mapping, or the words are not
     * 4-byte aligned in the file (the Java kernel then takes its generic path, whose bits it keeps).
     */
    private static boolean int4RowsNative(
            float[] xs, float[] x, int m, Linear w, float[] y, int r0, int r1, Scratch s) {
        if (m == 0 || r1 <= r0) {
            return true;
        }
        if (NativeCpu.scaleTypeCode(w.scaleTensor().dtype()) < 0) {
            return false;
        }
        int wpr = w.wordsPerRow();
        int gpr = w.groupScales();
        long words = (long) (r1 - r0) * wpr;
        long scales = (long) (r1 - r0) * gpr;
        if (4 * words > Integer.MAX_VALUE || 4 * scales > Integer.MAX_VALUE) {
            return false;
        }
        java.nio.MappedByteBuffer map = w.packedMapping(r0, 0, (int) words);
        java.nio.MappedByteBuffer scaleMap = map == null ? null : w.groupScaleMapping(r0, 0, (int) scales);
        if (scaleMap == null) {
            return false;
        }
        long at = w.packedMappedAt(r0, 0, (int) words);
        if (at % 4 != 0) {
            return false;
        }
        int fault = NativeCpu.int4RowDotMapped(
                map,
                at,
                wpr,
                w.in(),
                r1 - r0,
                scaleMap,
                w.groupScaleMappedAt(r0, 0, (int) scales),
                w.scaleTensor().dtype(),
                gpr,
                w.groupSize(),
                s.floats(NR * (gpr + wpr)),
                xs,
                x,
                m,
                y,
                r0,
                w.out());
        if (fault == 1) {
            throw w.packedMappingFault(r0, 0, words);
        }
        if (fault == 2) {
            throw w.groupScaleMappingFault(r0, 0, scales);
        }
        return true;
    }

    /**
     * INT4 rows, L packed words a step: lane i takes word j + i whole, the dot of its eight q (phase p = 0 .. 7,
     * element 8(j + i) + p) with x in phase order (q0 x0, then seven FMAs), each q shifted out of the one loaded vector
     * against x split by phase (see matmulGroup), so no lane ever waits on a shuffle; then one FMA adds that dot times
     * the word's scale to the lane's sum. So the scale is applied once a word, and each word's short chain starts afresh
     * (the lanes' sums do not wait on one long chain of FMAs). A lane's words can lie in different groups (4 words make
     * a group of 32): the scales are spread to one per word first (sw). Phase p of a word xor 0x88888888 is q,
     * sign-extended by a shift left to bits 28..31 and an arithmetic one back; the int converts exactly.
     */
    private static void int4Rows(float[] xs, float[] x, int m, Linear w, float[] y, int r0, int r1, Scratch s) {
        int wpr = w.wordsPerRow();
        int gpr = w.groupScales();
        int group = w.groupSize();
        int[] wb = s.ints(NR * wpr);
        float[] buf = s.floats(NR * (gpr + wpr));
        for (int r = r0; r < r1; r += NR) {
            int nr = Math.min(NR, r1 - r);
            if (!w.rawWords(r, 0, wb, nr * wpr)) {
                // A mapping that is not 4-byte aligned: rows through Linear.row in the generic order (the same for
                // every call with
                // this weight, so the bits still do not depend on M, blocking or threads).
                genericRows(x, m, w, y, r, r + nr, s);
                buf = s.floats(NR * (gpr + wpr));
                continue;
            }
            // Group scales at NR * wpr + j * gpr, spread to one per word at j * wpr.
            int so = NR * wpr;
            w.groupScales(r, 0, buf, so, nr * gpr);
            int wordsPerGroup = group / 8;
            for (int j = 0; j < nr; j++) {
                int g = so + j * gpr;
                for (int v = 0, left = wordsPerGroup; v < wpr; v++) {
                    buf[j * wpr + v] = buf[g];
                    if (--left == 0) {
                        g++;
                        left = wordsPerGroup;
                    }
                }
            }
            if (nr == NR) {
                int i = 0;
                for (; i + 2 <= m; i += 2) {
                    int4Block2x2(xs, x, i, w, wb, 0, buf, y, r, s);
                    int4Block2x2(xs, x, i, w, wb, 2 * wpr, buf, y, r + 2, s);
                }
                for (; i < m; i++) {
                    int4Block4x1(xs, x, i, w, wb, buf, y, r, s);
                }
            } else {
                for (int j = 0; j < nr; j++) {
                    for (int i = 0; i < m; i++) {
                        int4Block1x1(xs, x, i, w, wb, j * wpr, buf, y, r + j, s);
                    }
                }
            }
        }
    }

    /** Finishes one INT4 output: lanes in a fixed tree, then k = 8·kvw .. K-1 by scalar FMAs of q × word scale, in order. */
    private static float int4Finish(
            float[] lanes, int lo, Linear w, int[] wb, int wOff, float[] sw, float[] x, int xOff, int kvw) {
        float sum = Lanes.foldTree(lanes, lo, L);
        for (int k = 8 * kvw; k < w.in(); k++) {
            float wk = (((wb[wOff + k / 8] >>> (4 * (k & 7))) & 0xF) - 8) * sw[wOff + k / 8];
            sum = Math.fma(x[xOff + k], wk, sum);
        }
        return sum;
    }

    /** Phase ph's q of each lane's word (p: the words xor 0x88888888) as floats: shifted to bits 28..31, back by sign. */
    private static FloatVector q(IntVector p, int ph) {
        return (FloatVector) p.lanewise(VectorOperators.LSHL, 28 - 4 * ph)
                .lanewise(VectorOperators.ASHR, 28)
                .convert(VectorOperators.I2F, 0);
    }

    private static void int4Block1x1(
            float[] xs, float[] x, int i, Linear w, int[] wb, int wOff, float[] sw, float[] y, int row, Scratch s) {
        int kDim = w.in();
        int kw = kDim / 8;
        int kvw = kw / L * L; // words taken by whole vectors
        int xo = i * kDim;
        FloatVector a = FloatVector.zero(F);
        for (int j = 0; j < kvw; j += L) {
            IntVector p = IntVector.fromArray(I, wb, wOff + j).lanewise(VectorOperators.XOR, 0x88888888);
            FloatVector t = q(p, 0).mul(FloatVector.fromArray(F, xs, xo + j));
            for (int ph = 1; ph < 8; ph++) {
                t = q(p, ph).fma(FloatVector.fromArray(F, xs, xo + ph * kw + j), t);
            }
            a = t.fma(FloatVector.fromArray(F, sw, wOff + j), a);
        }
        a.intoArray(s.lanes, 0);
        y[i * w.out() + row] = int4Finish(s.lanes, 0, w, wb, wOff, sw, x, xo, kvw);
    }

    private static void int4Block4x1(
            float[] xs, float[] x, int i, Linear w, int[] wb, float[] sw, float[] y, int row, Scratch s) {
        int kDim = w.in();
        int kw = kDim / 8;
        int kvw = kw / L * L;
        int wpr = w.wordsPerRow();
        int xo = i * kDim;
        FloatVector a0 = FloatVector.zero(F);
        FloatVector a1 = a0;
        FloatVector a2 = a0;
        FloatVector a3 = a0;
        for (int j = 0; j < kvw; j += L) {
            IntVector p0 = IntVector.fromArray(I, wb, j).lanewise(VectorOperators.XOR, 0x88888888);
            IntVector p1 = IntVector.fromArray(I, wb, wpr + j).lanewise(VectorOperators.XOR, 0x88888888);
            IntVector p2 = IntVector.fromArray(I, wb, 2 * wpr + j).lanewise(VectorOperators.XOR, 0x88888888);
            IntVector p3 = IntVector.fromArray(I, wb, 3 * wpr + j).lanewise(VectorOperators.XOR, 0x88888888);
            FloatVector v = FloatVector.fromArray(F, xs, xo + j);
            FloatVector t0 = q(p0, 0).mul(v);
            FloatVector t1 = q(p1, 0).mul(v);
            FloatVector t2 = q(p2, 0).mul(v);
            FloatVector t3 = q(p3, 0).mul(v);
            for (int ph = 1; ph < 8; ph++) {
                v = FloatVector.fromArray(F, xs, xo + ph * kw + j);
                t0 = q(p0, ph).fma(v, t0);
                t1 = q(p1, ph).fma(v, t1);
                t2 = q(p2, ph).fma(v, t2);
                t3 = q(p3, ph).fma(v, t3);
            }
            a0 = t0.fma(FloatVector.fromArray(F, sw, j), a0);
            a1 = t1.fma(FloatVector.fromArray(F, sw, wpr + j), a1);
            a2 = t2.fma(FloatVector.fromArray(F, sw, 2 * wpr + j), a2);
            a3 = t3.fma(FloatVector.fromArray(F, sw, 3 * wpr + j), a3);
        }
        int yo = i * w.out() + row;
        a0.intoArray(s.lanes, 0);
        a1.intoArray(s.lanes, L);
        a2.intoArray(s.lanes, 2 * L);
        a3.intoArray(s.lanes, 3 * L);
        y[yo] = int4Finish(s.lanes, 0, w, wb, 0, sw, x, xo, kvw);
        y[yo + 1] = int4Finish(s.lanes, L, w, wb, wpr, sw, x, xo, kvw);
        y[yo + 2] = int4Finish(s.lanes, 2 * L, w, wb, 2 * wpr, sw, x, xo, kvw);
        y[yo + 3] = int4Finish(s.lanes, 3 * L, w, wb, 3 * wpr, sw, x, xo, kvw);
    }

    /**
     * Two weight rows (wOff, wOff + words per row in wb and in sw) × two rows of x: each word's phases decoded once for
     * both rows of x (eight accumulators: each output's word sums and its running sum, within AVX2's 16 registers).
     */
    private static void int4Block2x2(
            float[] xs, float[] x, int i, Linear w, int[] wb, int wOff, float[] sw, float[] y, int row, Scratch s) {
        int kDim = w.in();
        int kw = kDim / 8;
        int kvw = kw / L * L;
        int x0 = i * kDim;
        int x1 = x0 + kDim;
        int w1Off = wOff + w.wordsPerRow();
        FloatVector z = FloatVector.zero(F);
        FloatVector a00 = z, a01 = z, a10 = z, a11 = z;
        for (int j = 0; j < kvw; j += L) {
            IntVector p0 = IntVector.fromArray(I, wb, wOff + j).lanewise(VectorOperators.XOR, 0x88888888);
            IntVector p1 = IntVector.fromArray(I, wb, w1Off + j).lanewise(VectorOperators.XOR, 0x88888888);
            FloatVector w0 = q(p0, 0);
            FloatVector w1 = q(p1, 0);
            FloatVector v = FloatVector.fromArray(F, xs, x0 + j);
            FloatVector t00 = w0.mul(v), t01 = w1.mul(v);
            v = FloatVector.fromArray(F, xs, x1 + j);
            FloatVector t10 = w0.mul(v), t11 = w1.mul(v);
            for (int ph = 1; ph < 8; ph++) {
                w0 = q(p0, ph);
                w1 = q(p1, ph);
                int xp = ph * kw + j;
                v = FloatVector.fromArray(F, xs, x0 + xp);
                t00 = w0.fma(v, t00);
                t01 = w1.fma(v, t01);
                v = FloatVector.fromArray(F, xs, x1 + xp);
                t10 = w0.fma(v, t10);
                t11 = w1.fma(v, t11);
            }
            FloatVector s0 = FloatVector.fromArray(F, sw, wOff + j);
            FloatVector s1 = FloatVector.fromArray(F, sw, w1Off + j);
            a00 = t00.fma(s0, a00);
            a01 = t01.fma(s1, a01);
            a10 = t10.fma(s0, a10);
            a11 = t11.fma(s1, a11);
        }
        int n = w.out();
        float[] ln = s.lanes;
        int y0 = i * n + row;
        a00.intoArray(ln, 0);
        a01.intoArray(ln, L);
        a10.intoArray(ln, 2 * L);
        a11.intoArray(ln, 3 * L);
        y[y0] = int4Finish(ln, 0, w, wb, wOff, sw, x, x0, kvw);
        y[y0 + 1] = int4Finish(ln, L, w, wb, w1Off, sw, x, x0, kvw);
        y0 += n;
        y[y0] = int4Finish(ln, 2 * L, w, wb, wOff, sw, x, x1, kvw);
        y[y0 + 1] = int4Finish(ln, 3 * L, w, wb, w1Off, sw, x, x1, kvw);
    }

    // ------------------------------------------------------------------------------------------------- generic

    /** F32, F16 and shapes the in-register decoders do not take: rows decoded by {@link Linear#row}, one output at a time. */
    private static void genericRows(float[] x, int m, Linear w, float[] y, int r0, int r1, Scratch s) {
        int kDim = w.in();
        int nDim = w.out();
        int kv = kDim / L * L;
        float[] row = s.floats(kDim);
        for (int r = r0; r < r1; r++) {
            w.row(r, 0, kDim, row, 0);
            for (int i = 0; i < m; i++) {
                int xo = i * kDim;
                FloatVector a = FloatVector.zero(F);
                for (int k = 0; k < kv; k += L) {
                    a = FloatVector.fromArray(F, row, k).fma(FloatVector.fromArray(F, x, xo + k), a);
                }
                a.intoArray(s.lanes, 0);
                float sum = Lanes.foldTree(s.lanes, 0, L);
                for (int k = kv; k < kDim; k++) {
                    sum = Math.fma(x[xo + k], row[k], sum);
                }
                y[i * nDim + r] = sum;
            }
        }
    }
}
