package dev.scorch.engine.kernels;

import java.nio.ByteBuffer;
import java.util.function.IntConsumer;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * y[M, N] = x[M, K] · Wᵀ with W [N, K] in its checkpoint dtype, for prefill-shaped calls.
 *
 * <p>Layout: each row of x is transposed once per call into tiles of MR rows (xᵀ: for each k, MR consecutive
 * rows, so one vector load gives L rows of x). W is decoded to fp32 a block of weight rows × KC inputs at a
 * time, by whole rows (no transpose: the kernel broadcasts weights), once per block of MB (or MB_WIDE) rows of x.
 * The register-tiled micro-kernel computes MR rows of x × NR weight rows: 2 vectors of rows times NR broadcast
 * weights. Where {@link NativeCpu} loads, a task's K block runs in its C build of the tile, which the C compiler
 * schedules without the spills and scalar address work C2 leaves in the Java loop: 2 × 6 (12 accumulators) with
 * AVX2's 8-lane vectors, 2 × 12 (24 of AVX-512's 32 registers) with 16-lane vectors; the xᵀ transpose and the staged
 * BF16/FP8/INT4 decoding run in C there too. Otherwise the Java Vector API kernel runs, 2 × 6; JDK 17's C2 spills that
 * tile (half the speed), so there it is 2 × 4, 8 accumulators: still enough independent FMA chains for two FMA pipes
 * of latency 4.
 *
 * <p>Every output is one fused-multiply-add chain over k = 0 .. K-1 in order, whatever M, the tile a row
 * lands in, or the thread that runs it: a row's result is bit-identical in any batch and at any thread count,
 * and to {@link ScalarGemm}'s.
 *
 * <p>In a bf16 {@link CpuPrecision} (where the CPU has AVX512-BF16) the AVX-512 tile's K blocks run on VDPBF16PS
 * instead: each tile of x is split, not transposed, into bf16 parts of each pair of inputs, and each block's weight rows
 * are packed to bf16 pairs (groups of 12 rows not exact in bf16 run that block in fp32 FMAs). Each output is then one
 * chain over the pairs in order, part by part: again the same bits in any batch and at any thread count, within the
 * mode.
 */
public final class PackedGemm {
    static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
    static final int L = S.length();
    /** Rows of x per micro-kernel call: two vectors. */
    static final int MR = 2 * L;
    /**
     * Whether the K blocks run in {@link NativeCpu}'s kernel: where it loads and has a tile of MR rows (16 with AVX2's
     * 8-lane vectors, 32 with AVX-512's 16-lane ones). {@link KernelSelection} decides.
     */
    static final boolean NATIVE = KernelSelection.current().prefillGemm().impl() == KernelSelection.Impl.NATIVE;
    /** The precision matmul runs in unless told: {@link KernelSelection}'s (fp32 where the BF16 units are absent). */
    static final CpuPrecision PRECISION = KernelSelection.current().cpuPrecision();
    /** Weight rows per tile of the native kernel for MR: 6 (AVX2) or 12 (AVX-512). */
    static final int NATIVE_NR = NativeCpu.nr(MR);
    /**
     * Weight rows per micro-kernel call on this JVM (broadcast one at a time): the native kernel's NATIVE_NR; else 6, or
     * 4 for the Java kernel on JDK 17 ({@link KernelSelection} decides and says why).
     */
    static final int NR = KernelSelection.current().gemmNr();
    /** The widest tile, which sizes the scratch. */
    private static final int MAX_NR = 12;
    /** Inputs per decoded weight block. */
    static final int KC = 256;
    /**
     * Inputs per staged block (4 decode blocks): a task copies its rows' raw weights out of the mapping this many inputs
     * at a time, in one sequential copy where that is whole rows, then decodes them block by block from the copy.
     */
    static final int KS = 4 * KC;
    /**
     * Weight rows a task decodes per K block (a multiple of every tile's NR, 4, 6 and 12): the block stays in L2 while all
     * of x passes. Each K block of xᵀ a task reads (from L3 once x is past L2's size) serves 2·NB flops per float, so
     * the AVX-512 kernel's tasks take 96 rows: its CPUs have 1–2 MiB of L2 to hold them.
     */
    static final int NB = MR == 32 ? 96 : 48;
    /**
     * Rows of x per pass over the weights (a multiple of MR): a K block of their xᵀ (MB·KC floats, 256 KiB), the decoded
     * weights and the accumulators stay in L2 (with AVX2's 48 weight rows, 464 KiB of a 512 KiB L2).
     */
    static final int MB = 256;
    /** Rows of x transposed per parallel pass (a multiple of MB and of MB_WIDE). */
    static final int CHUNK = 4 * MB;
    /**
     * Rows per block of a whole chunk with the AVX-512 kernel, and the most in any block: twice MB halves the copies and
     * decoding of the weights per flop, and a K block of their xᵀ (512 KiB) still fits the 2 MiB L2 of these CPUs.
     */
    static final int MB_WIDE = MR == 32 ? 2 * MB : MB;
    /** Inputs per block of the scalar transpose into the tiles. */
    static final int COPY_ROWS = 16;

    private PackedGemm() {}

    /** Per-thread buffers, grown as needed and reused call after call. */
    private static final class Scratch {
        /** xᵀ tiles (the calling thread's), for the Java kernel. */
        float[] xt = new float[0];
        /**
         * xᵀ tiles for the native kernel: off the heap, at a 64-byte-aligned address that never moves, so that none of its
         * vector loads splits across two cache lines (a Java array's elements start 16 bytes past an 8-byte-aligned
         * header: every 64-byte load from one would).
         */
        ByteBuffer xtNative = NativeCpu.alignedFloats(0);
        /** Decoded weights: NB rows × KC. */
        final float[] w = new float[NB * KC];

        final RowDecoder decoder = new RowDecoder(KC, NB, KS);
        /** Accumulators between K blocks: c[j * mPad + i] for weight row j of the task and row i of x. */
        float[] c = new float[0];
        /** The same for the native kernel, aligned off the heap like xtNative (a task's NB rows × MB_WIDE rows at most). */
        ByteBuffer cNative;
        /** One finished tile on its way to y: tile[r * MR + i]. */
        final float[] tile = new float[MAX_NR * MR];

        float[] xt(int n) {
            return xt.length >= n ? xt : (xt = new float[n]);
        }

        ByteBuffer cNative() {
            return cNative != null ? cNative : (cNative = NativeCpu.alignedFloats(NB * MB_WIDE));
        }

        ByteBuffer xtNative(int n) {
            return xtNative.capacity() / Float.BYTES >= n ? xtNative : (xtNative = NativeCpu.alignedFloats(n));
        }

        float[] c(int n) {
            return c.length >= n ? c : (c = new float[n]);
        }

        /** The call this thread makes, planned here (the passes' items read it from whichever thread runs them). */
        final Call call = new Call();
    }

    /** One call in flight: its operands, its plan and the two passes' items, made once per thread (no lambda per call). */
    private static final class Call {
        float[] x;
        int kDim;
        Linear[] w;
        float[][] y;
        int nr;
        /** Whether the row tasks run their K blocks in {@link NativeCpu}'s kernel. */
        boolean nativeKernel;
        /** bf16 parts per input on the AVX512-BF16 kernel (its tiles split, not transposed); 0: fp32. */
        int parts;
        /**
         * Micro-kernel groups of nr weight rows in weight g (the last may be partial), and the first task of each weight
         * (firstTask[g + 1] - firstTask[g] tasks, each a run of whole groups).
         */
        int[] groupsOf = new int[1];

        int[] firstTask = new int[2];
        int nTasks;
        /** Rows of x per block in the chunk being computed (a multiple of MR, at most MB_WIDE). */
        int blockRows;
        // The chunk being computed: its xᵀ in xt (Java kernel) or xtNative (native kernel).
        float[] xt;
        ByteBuffer xtNative;
        int chunkBase;
        int rows;
        // matmul's one-weight groups.
        final Linear[] w1 = new Linear[1];
        final float[][] y1 = new float[1][];

        /** The first block of the chunk whose tiles and tasks the two shared passes hand out (the blocks before it are owned). */
        int firstShared;

        /** The xᵀ tile t of the chunk (in C with the native kernel). */
        void transposeTile(int t) {
            if (parts > 0) {
                NativeCpu.splitTile(
                        parts,
                        x,
                        (chunkBase + t * MR) * kDim,
                        Math.min(MR, rows - t * MR),
                        kDim,
                        xtNative,
                        t * splitTileInts(kDim, parts));
            } else if (nativeKernel) {
                NativeCpu.transposeTile(
                        MR, x, (chunkBase + t * MR) * kDim, Math.min(MR, rows - t * MR), kDim, xtNative, t * kDim * MR);
            } else {
                PackedGemm.transposeTile(x, chunkBase, rows, kDim, t, xt);
            }
        }

        /** Task t of block b: the block's rows against the task's weight rows, K block by K block. */
        void blockTask(int b, int t) {
            int g = 0;
            while (firstTask[g + 1] <= t) {
                g++;
            }
            // Task i of T takes groups [i·G / T, (i + 1)·G / T): runs of whole groups that differ by one group at most.
            int tasks = firstTask[g + 1] - firstTask[g];
            int i = t - firstTask[g];
            int n0 = (int) ((long) i * groupsOf[g] / tasks) * nr;
            int n1 = Math.min(w[g].out(), (int) ((long) (i + 1) * groupsOf[g] / tasks) * nr);
            int mb = Math.min(blockRows, rows - b * blockRows);
            rowTask(
                    xt,
                    xtNative,
                    b * (blockRows / MR),
                    (mb + MR - 1) / MR,
                    chunkBase + b * blockRows,
                    mb,
                    w[g],
                    n0,
                    n1 - n0,
                    y[g],
                    nr,
                    nativeKernel,
                    parts);
        }

        /** Owned pass, item b: block b's tiles transposed, then all its tasks, on one thread. */
        final IntConsumer ownedBlocks = b -> {
            int t0 = b * (blockRows / MR);
            int t1 = Math.min((rows + MR - 1) / MR, t0 + blockRows / MR);
            for (int t = t0; t < t1; t++) {
                transposeTile(t);
            }
            for (int t = 0; t < nTasks; t++) {
                blockTask(b, t);
            }
        };

        /** Shared pass 1, item t: tile t of the shared blocks. */
        final IntConsumer transpose = t -> transposeTile(firstShared * (blockRows / MR) + t);

        /** Shared pass 2, item task: one shared block's rows against one task's weight rows. */
        final IntConsumer rowTasks = task -> blockTask(firstShared + task / nTasks, task % nTasks);

        void plan(int groups) {
            if (groupsOf.length < groups) {
                groupsOf = new int[groups];
                firstTask = new int[groups + 1];
            }
        }

        /** Drops the operands, so that no caller's array stays reachable after the call. */
        void clear() {
            x = null;
            w = null;
            y = null;
            w1[0] = null;
            y1[0] = null;
        }
    }

    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    /** y = x · wᵀ in the given precision (fp32, or bf16 parts where {@link #runs} says so). */
    public static void matmul(float[] x, int m, Linear w, float[] y, Parallel par, CpuPrecision precision) {
        Call call = SCRATCH.get().call;
        call.w1[0] = w;
        call.y1[0] = y;
        matmul(x, m, call.w1, call.y1, par, precision);
    }

    /** Whether precision runs here: fp32 always; the bf16 modes where the AVX512-BF16 kernel and the AVX-512 tile run. */
    public static boolean runs(CpuPrecision precision) {
        return precision == CpuPrecision.FP32 || NATIVE && NATIVE_NR == 12 && NR == 12 && NativeCpu.bf16();
    }

    /** Ints of one split tile: pairs of inputs × parts × MR. */
    static int splitTileInts(int kDim, int parts) {
        return NativeCpu.pairs(kDim) * parts * MR;
    }

    /**
     * y[g] = x · w[g]ᵀ for weights that share their input (q_a_proj and kv_a_proj, gate_proj and up_proj): x is
     * transposed once and every weight's row tasks run in one parallel pass. Each y[g] has the bits of its own call.
     * The precision must run here ({@link #runs}).
     */
    public static void matmul(float[] x, int m, Linear[] w, float[][] y, Parallel par, CpuPrecision precision) {
        if (precision == CpuPrecision.FP32) {
            matmul(x, m, w, y, par, NR);
        } else if (!runs(precision)) {
            throw new IllegalArgumentException("CPU precision " + precision.id() + " does not run here: "
                    + KernelSelection.current().precision().reason());
        } else {
            matmul(x, m, w, y, par, NR, true, precision.parts());
        }
    }

    /** {@link #matmul(float[], int, Linear[], float[][], Parallel, CpuPrecision)} in fp32 with nr weight rows per micro-kernel call (4 or 6). */
    static void matmul(float[] x, int m, Linear[] w, float[][] y, Parallel par, int nr) {
        matmul(x, m, w, y, par, nr, NATIVE && nr == NATIVE_NR);
    }

    /**
     * As {@link #matmul(float[], int, Linear[], float[][], Parallel, int)}, the K blocks in {@link NativeCpu}'s kernel when
     * nativeKernel is set and it runs here (then nr must be its NATIVE_NR), else in the Java kernel (nr 4 or 6): the same
     * bits either way.
     */
    static void matmul(float[] x, int m, Linear[] w, float[][] y, Parallel par, int nr, boolean nativeKernel) {
        matmul(x, m, w, y, par, nr, nativeKernel, 0);
    }

    /** The same, the native tile's K blocks on AVX512-BF16 with parts bf16 parts an input where parts &gt; 0. */
    private static void matmul(
            float[] x, int m, Linear[] w, float[][] y, Parallel par, int nr, boolean nativeKernel, int parts) {
        boolean inC = nativeKernel && NATIVE;
        if (inC ? nr != NATIVE_NR : nr != 4 && nr != 6) {
            throw new IllegalArgumentException("no 2 x " + nr + " micro-kernel" + (inC ? " in C" : " in Java"));
        }
        Scratch s = SCRATCH.get();
        Call call = s.call;
        try {
            int kDim = w[0].in();
            // Weight rows split into tasks of whole micro-kernel groups; task ranges per weight.
            call.plan(w.length);
            int[] groupsOf = call.groupsOf;
            int[] firstTask = call.firstTask;
            firstTask[0] = 0;
            for (int g = 0; g < w.length; g++) {
                if (w[g].in() != kDim) {
                    throw new IllegalArgumentException(
                            w[g].name() + ": in_features " + w[g].in() + ", not " + kDim + " like " + w[0].name());
                }
                int nDim = w[g].out();
                // Tasks of at most NB rows, at least two per thread where the groups allow. A call of one block makes a
                // whole
                // number per thread, so that its one pass splits evenly (1,024 weight rows in tasks of 96 would be 11
                // tasks, 6
                // against 5 on two threads). Where a thread owns a block (below) it runs all its tasks, and more tasks
                // only
                // re-read its xᵀ.
                int groups = (nDim + nr - 1) / nr;
                int tasks = Math.max((groups + NB / nr - 1) / (NB / nr), Math.min(groups, 2 * par.threads()));
                if (m <= MB) {
                    tasks = Math.min(groups, roundUp(tasks, par.threads()));
                }
                groupsOf[g] = groups;
                firstTask[g + 1] = firstTask[g] + tasks;
            }
            call.x = x;
            call.kDim = kDim;
            call.w = w;
            call.y = y;
            call.nr = nr;
            call.nativeKernel = inC;
            call.parts = parts;
            call.nTasks = firstTask[w.length];
            int weightRows = 0; // of all the weights: the rows every block decodes
            for (Linear wg : w) {
                weightRows += wg.out();
            }
            // Rows of x in chunks of CHUNK, cut into blocks. A block's tiles are best transposed by the thread that
            // computes
            // with them: reading xᵀ lines that the other core has just written (modified in its L2) is slower than
            // transposing them itself. So blocks are owned where that splits the work evenly: one item per block, its
            // tiles
            // and then all its tasks.
            //  - A whole chunk: blocks of MB_WIDE (or MB) rows, a whole number of them per thread.
            //  - A shorter chunk (a call under CHUNK rows, or the last chunk) with no more weight rows than 4 × its
            // rows: its
            //    tiles in one block per thread, each thread decoding every weight for its own rows. With many more
            // weight rows
            //    than x rows that second decoding costs more than the other core's lines.
            // Otherwise, and for the tiles left over, the blocks are shared: one pass transposes their tiles, a second
            // hands
            // out their (block, weight rows) tasks.
            for (int c0 = 0; c0 < m; c0 += CHUNK) {
                int rows = Math.min(CHUNK, m - c0);
                int tiles = (rows + MR - 1) / MR;
                // xᵀ: tile t holds x[c0 + t·MR + r, k] at t·K·MR + k·MR + r (rows past the chunk are zero).
                if (parts > 0) {
                    call.xtNative = s.xtNative(tiles * splitTileInts(kDim, parts));
                } else if (call.nativeKernel) {
                    call.xtNative = s.xtNative(tiles * MR * kDim);
                } else {
                    call.xt = s.xt(tiles * MR * kDim);
                }
                call.chunkBase = c0;
                call.rows = rows;
                int threads = par.threads();
                int owned;
                if (rows == CHUNK) {
                    call.blockRows = MB_WIDE;
                    owned = CHUNK / MB_WIDE / threads * threads;
                } else if (threads > 1 && tiles >= threads && weightRows <= 4 * rows) {
                    call.blockRows = Math.min(MB_WIDE, tiles / threads * MR);
                    owned = tiles / (call.blockRows / MR) / threads * threads;
                } else {
                    call.blockRows = MB;
                    owned = 0;
                }
                int blocks = (rows + call.blockRows - 1) / call.blockRows;
                if (owned > 0) {
                    par.forEach(owned, call.ownedBlocks);
                }
                if (owned < blocks) {
                    call.firstShared = owned;
                    par.forEach(tiles - owned * (call.blockRows / MR), call.transpose);
                    par.forEach((blocks - owned) * call.nTasks, call.rowTasks);
                }
            }
        } finally {
            call.clear();
        }
    }

    /**
     * y[rowBase + i, n0 + j] for the mb rows of one block (tiles from firstTile of xᵀ: xtNative for the native kernel, else
     * xt) and nn weight rows from n0.
     */
    private static void rowTask(
            float[] xt,
            ByteBuffer xtNative,
            int firstTile,
            int tiles,
            int rowBase,
            int mb,
            Linear w,
            int n0,
            int nn,
            float[] y,
            int nr,
            boolean nativeKernel,
            int parts) {
        Scratch s = SCRATCH.get();
        int kDim = w.in();
        int nDim = w.out();
        int mPad = tiles * MR;
        int groups = (nn + nr - 1) / nr;
        float[] c = nativeKernel ? null : s.c(groups * nr * mPad);
        ByteBuffer cNative = nativeKernel ? s.cNative() : null;
        float[] wb = s.w;
        boolean staged = false;
        for (int k0 = 0; k0 < kDim; k0 += KC) {
            int kc = Math.min(KC, kDim - k0);
            if (k0 % KS == 0) {
                staged = s.decoder.stage(
                        w, n0, nn, k0, Math.min(KS, kDim - k0), nativeKernel); // in place for the C decoders
            }
            // Decode W[n0 .., k0 .. k0 + kc) (in C with the native kernel). Rows past nn in the last group keep stale
            // values: each
            // accumulator is one weight row's own, and those rows' results are never written to y.
            if (staged) {
                s.decoder.decodeStagedRows(nn, k0, kc, wb, nativeKernel);
            } else {
                for (int j = 0; j < nn; j++) {
                    s.decoder.decode(w, n0 + j, k0, kc, wb, j * kc);
                }
            }
            boolean first = k0 == 0;
            boolean last = k0 + kc == kDim;
            if (parts > 0) {
                // On AVX512-BF16: the block's weight rows packed to bf16 pairs in C, against the split tiles.
                NativeCpu.bf16KernelBlock(
                        parts,
                        xtNative,
                        firstTile * splitTileInts(kDim, parts),
                        tiles,
                        kDim,
                        k0,
                        kc,
                        wb,
                        groups,
                        cNative,
                        mPad,
                        first,
                        last ? y : null,
                        rowBase,
                        mb,
                        nDim,
                        n0,
                        nn);
                continue;
            }
            if (nativeKernel) {
                // The whole block in C: into the accumulators, and the last block's sums into y[rowBase + i, n0 + j].
                NativeCpu.kernelBlock(
                        MR,
                        xtNative,
                        firstTile * kDim * MR,
                        tiles,
                        kDim,
                        k0,
                        kc,
                        wb,
                        groups,
                        cNative,
                        mPad,
                        first,
                        last ? y : null,
                        rowBase,
                        mb,
                        nDim,
                        n0,
                        nn);
                continue;
            }
            for (int t = 0; t < tiles; t++) {
                int xo = (firstTile + t) * kDim * MR + k0 * MR;
                for (int g = 0; g < groups; g++) {
                    int co = g * nr * mPad + t * MR;
                    if (!last) {
                        kernel(nr, xt, xo, kc, wb, g * nr * kc, first ? null : c, co, mPad, c, co, mPad);
                    } else {
                        // The finished tile goes through a few registers' worth of L1 into y[rowBase + t·MR + i, n0 +
                        // g·nr + r].
                        kernel(nr, xt, xo, kc, wb, g * nr * kc, first ? null : c, co, mPad, s.tile, 0, MR);
                        int rows = Math.min(MR, mb - t * MR);
                        int cols = Math.min(nr, nn - g * nr);
                        int yo = (rowBase + t * MR) * nDim + n0 + g * nr;
                        for (int i = 0; i < rows; i++) {
                            for (int r = 0; r < cols; r++) {
                                y[yo + i * nDim + r] = s.tile[r * MR + i];
                            }
                        }
                    }
                }
            }
        }
    }

    private static int roundUp(int v, int multiple) {
        return (v + multiple - 1) / multiple * multiple;
    }

    /** xᵀ of one tile, COPY_ROWS inputs at a time so the strided writes stay in L1 (a Vector API gather is slower). */
    private static void transposeTile(float[] x, int rowBase, int rows, int kDim, int t, float[] xt) {
        int base = t * kDim * MR;
        for (int k0 = 0; k0 < kDim; k0 += COPY_ROWS) {
            int k1 = Math.min(kDim, k0 + COPY_ROWS);
            for (int r = 0; r < MR; r++) {
                int row = t * MR + r;
                if (row < rows) {
                    int xo = (rowBase + row) * kDim;
                    for (int k = k0; k < k1; k++) {
                        xt[base + k * MR + r] = x[xo + k];
                    }
                } else {
                    for (int k = k0; k < k1; k++) {
                        xt[base + k * MR + r] = 0f;
                    }
                }
            }
        }
    }

    /** One micro-kernel call with the nr-row tile (one branch per call, the same way every time outside tests). */
    private static void kernel(
            int nr,
            float[] xt,
            int xo,
            int kc,
            float[] wb,
            int wo,
            float[] c,
            int co,
            int cStride,
            float[] d,
            int dOff,
            int dStride) {
        if (nr == 6) {
            kernel2x6(xt, xo, kc, wb, wo, c, co, cStride, d, dOff, dStride);
        } else {
            kernel2x4(xt, xo, kc, wb, wo, c, co, cStride, d, dOff, dStride);
        }
    }

    /**
     * The 2 × 6 tile: d[dOff + r·dStride + i] = c[co + r·cStride + i] (0 when c is null) + Σ_k xᵀ[k, i] · w[r, k] for the 6 weight
     * rows r of one group and the MR rows i of one tile, one FMA per k in order.
     */
    private static void kernel2x6(
            float[] xt,
            int xo,
            int kc,
            float[] wb,
            int wo,
            float[] c,
            int co,
            int cStride,
            float[] d,
            int dOff,
            int dStride) {
        int c0 = co;
        int c1 = c0 + cStride;
        int c2 = c1 + cStride;
        int c3 = c2 + cStride;
        int c4 = c3 + cStride;
        int c5 = c4 + cStride;
        FloatVector a00, a01, a10, a11, a20, a21, a30, a31, a40, a41, a50, a51;
        if (c == null) {
            a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = a40 = a41 = a50 = a51 = FloatVector.zero(S);
        } else {
            a00 = FloatVector.fromArray(S, c, c0);
            a01 = FloatVector.fromArray(S, c, c0 + L);
            a10 = FloatVector.fromArray(S, c, c1);
            a11 = FloatVector.fromArray(S, c, c1 + L);
            a20 = FloatVector.fromArray(S, c, c2);
            a21 = FloatVector.fromArray(S, c, c2 + L);
            a30 = FloatVector.fromArray(S, c, c3);
            a31 = FloatVector.fromArray(S, c, c3 + L);
            a40 = FloatVector.fromArray(S, c, c4);
            a41 = FloatVector.fromArray(S, c, c4 + L);
            a50 = FloatVector.fromArray(S, c, c5);
            a51 = FloatVector.fromArray(S, c, c5 + L);
        }
        int w0 = wo;
        int w1 = w0 + kc;
        int w2 = w1 + kc;
        int w3 = w2 + kc;
        int w4 = w3 + kc;
        int w5 = w4 + kc;
        for (int k = 0; k < kc; k++) {
            FloatVector x0 = FloatVector.fromArray(S, xt, xo + k * MR);
            FloatVector x1 = FloatVector.fromArray(S, xt, xo + k * MR + L);
            FloatVector v = FloatVector.broadcast(S, wb[w0 + k]);
            a00 = x0.fma(v, a00);
            a01 = x1.fma(v, a01);
            v = FloatVector.broadcast(S, wb[w1 + k]);
            a10 = x0.fma(v, a10);
            a11 = x1.fma(v, a11);
            v = FloatVector.broadcast(S, wb[w2 + k]);
            a20 = x0.fma(v, a20);
            a21 = x1.fma(v, a21);
            v = FloatVector.broadcast(S, wb[w3 + k]);
            a30 = x0.fma(v, a30);
            a31 = x1.fma(v, a31);
            v = FloatVector.broadcast(S, wb[w4 + k]);
            a40 = x0.fma(v, a40);
            a41 = x1.fma(v, a41);
            v = FloatVector.broadcast(S, wb[w5 + k]);
            a50 = x0.fma(v, a50);
            a51 = x1.fma(v, a51);
        }
        int d0 = dOff;
        int d1 = d0 + dStride;
        int d2 = d1 + dStride;
        int d3 = d2 + dStride;
        int d4 = d3 + dStride;
        int d5 = d4 + dStride;
        a00.intoArray(d, d0);
        a01.intoArray(d, d0 + L);
        a10.intoArray(d, d1);
        a11.intoArray(d, d1 + L);
        a20.intoArray(d, d2);
        a21.intoArray(d, d2 + L);
        a30.intoArray(d, d3);
        a31.intoArray(d, d3 + L);
        a40.intoArray(d, d4);
        a41.intoArray(d, d4 + L);
        a50.intoArray(d, d5);
        a51.intoArray(d, d5 + L);
    }

    /**
     * The 2 × 4 tile: d[dOff + r·dStride + i] = c[co + r·cStride + i] (0 when c is null) + Σ_k xᵀ[k, i] · w[r, k] for the 4 weight
     * rows r of one group and the MR rows i of one tile, one FMA per k in order.
     */
    private static void kernel2x4(
            float[] xt,
            int xo,
            int kc,
            float[] wb,
            int wo,
            float[] c,
            int co,
            int cStride,
            float[] d,
            int dOff,
            int dStride) {
        int c0 = co;
        int c1 = c0 + cStride;
        int c2 = c1 + cStride;
        int c3 = c2 + cStride;
        FloatVector a00, a01, a10, a11, a20, a21, a30, a31;
        if (c == null) {
            a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = FloatVector.zero(S);
        } else {
            a00 = FloatVector.fromArray(S, c, c0);
            a01 = FloatVector.fromArray(S, c, c0 + L);
            a10 = FloatVector.fromArray(S, c, c1);
            a11 = FloatVector.fromArray(S, c, c1 + L);
            a20 = FloatVector.fromArray(S, c, c2);
            a21 = FloatVector.fromArray(S, c, c2 + L);
            a30 = FloatVector.fromArray(S, c, c3);
            a31 = FloatVector.fromArray(S, c, c3 + L);
        }
        int w0 = wo;
        int w1 = w0 + kc;
        int w2 = w1 + kc;
        int w3 = w2 + kc;
        for (int k = 0; k < kc; k++) {
            FloatVector x0 = FloatVector.fromArray(S, xt, xo + k * MR);
            FloatVector x1 = FloatVector.fromArray(S, xt, xo + k * MR + L);
            FloatVector v = FloatVector.broadcast(S, wb[w0 + k]);
            a00 = x0.fma(v, a00);
            a01 = x1.fma(v, a01);
            v = FloatVector.broadcast(S, wb[w1 + k]);
            a10 = x0.fma(v, a10);
            a11 = x1.fma(v, a11);
            v = FloatVector.broadcast(S, wb[w2 + k]);
            a20 = x0.fma(v, a20);
            a21 = x1.fma(v, a21);
            v = FloatVector.broadcast(S, wb[w3 + k]);
            a30 = x0.fma(v, a30);
            a31 = x1.fma(v, a31);
        }
        int d0 = dOff;
        int d1 = d0 + dStride;
        int d2 = d1 + dStride;
        int d3 = d2 + dStride;
        a00.intoArray(d, d0);
        a01.intoArray(d, d0 + L);
        a10.intoArray(d, d1);
        a11.intoArray(d, d1 + L);
        a20.intoArray(d, d2);
        a21.intoArray(d, d2 + L);
        a30.intoArray(d, d3);
        a31.intoArray(d, d3 + L);
    }

    /** The plain reference: one float accumulation per output, simple loops, W decoded row by row. */
    public static void reference(float[] x, int m, Linear w, float[] y) {
        int kDim = w.in();
        int nDim = w.out();
        float[] row = new float[kDim];
        for (int n = 0; n < nDim; n++) {
            w.row(n, 0, kDim, row, 0);
            for (int i = 0; i < m; i++) {
                float acc = 0;
                for (int k = 0; k < kDim; k++) {
                    acc += x[i * kDim + k] * row[k];
                }
                y[i * nDim + n] = acc;
            }
        }
    }
}
