package dev.scorch.engine.kernels;

import java.nio.ByteBuffer;

/**
 * Prefill attention of one head over one sequence in C with AVX-512 ({@code attend_head} in scorch_attention.c, in
 * {@link NativeCpu}'s library): the twin of {@link CpuOps.VecMath#attendHead} on 16-lane vectors, the same arithmetic in
 * the same order, so the same bits. The Java code waits on FMA latency and on C2's per-row reductions (a third of the
 * machine's FMA rate at 256-token sequences); the C compiler keeps 8 × 32 score tiles and 4 × 64 p · v tiles in
 * registers. Runs where the native library loaded and the CPU has AVX-512, for v_head a multiple of 16; elsewhere the
 * Java code does.
 */
final class NativeAttention {
    /**
     * Where it runs: the native library with its AVX-512 code, as {@link KernelSelection} picks it. -Dscorch.native=false
     * turns off all native code, -Dscorch.native.attention=false this alone.
     */
    static final boolean AVAILABLE = KernelSelection.current().attention().impl() == KernelSelection.Impl.NATIVE;

    private static final int LANES = 16;
    private static final int KEY_BLOCK = 32;
    private static final int QUERY_TILE = 8;

    /** Per-thread scratch: kT, the head's values and a tile's scores (see {@link #scratchFloats}). */
    private static final ThreadLocal<ByteBuffer[]> SCRATCH =
            ThreadLocal.withInitial(() -> new ByteBuffer[] {NativeCpu.alignedFloats(0)});

    private NativeAttention() {}

    /** Whether attend_head takes these operands: v_head in whole vectors. */
    static boolean supports(MlaInputs in) {
        return AVAILABLE && in.vHead() % LANES == 0 && in.vHead() > 0;
    }

    /** Floats of attend_head's scratch for a sequence of len: kT [lenPad, q_head], values [len, v_head] (whole vectors), scores [8, lenPad]. */
    static long scratchFloats(MlaInputs in, int len) {
        long lenPad = (len + KEY_BLOCK - 1) / KEY_BLOCK * KEY_BLOCK;
        return lenPad * in.qHead() + ((long) len * in.vHead() + LANES - 1) / LANES * LANES + QUERY_TILE * lenPad;
    }

    /** out rows of sequence s, head h = its causal attention, as {@link CpuOps.VecMath#attendHead} computes them. */
    static void attendHead(MlaInputs in, int s, int h, float[] out) {
        int base = in.seqStart()[s];
        int len = in.seqLen()[s];
        int heads = in.heads();
        long end = (long) base + len;
        if (!supports(in)
                || h < 0
                || h >= heads
                || base < in.kvRow0()
                || len < 0
                || in.qkNope() < 0
                || in.qkRope() < 0
                || end * heads * in.qHead() > in.q().length
                || (end - in.kvRow0()) * heads * in.kvHead() > in.kv().length
                || end * in.qkRope() > in.kPe().length
                || end * heads * in.vHead() > out.length) {
            throw new IndexOutOfBoundsException(
                    "attention of sequence " + s + " (rows " + base + " + " + len + "), head " + h
                            + " of " + heads + " out of its arrays: q " + in.q().length + ", kv " + in.kv().length
                            + " from row "
                            + in.kvRow0() + ", k_pe " + in.kPe().length + ", out " + out.length);
        }
        if (len == 0) {
            return;
        }
        long need = scratchFloats(in, len);
        if (need > Integer.MAX_VALUE / Float.BYTES - 64) {
            throw new IllegalArgumentException(
                    "sequence of " + len + " tokens: attention scratch of " + need + " floats");
        }
        ByteBuffer[] holder = SCRATCH.get();
        if (holder[0].capacity() / Float.BYTES < need) {
            holder[0] = NativeCpu.alignedFloats((int) need);
        }
        attendHead0(
                in.q(),
                in.kv(),
                in.kPe(),
                heads,
                in.qkNope(),
                in.qkRope(),
                in.vHead(),
                base,
                len,
                in.kvRow0(),
                in.scale(),
                h,
                out,
                holder[0]);
    }

    private static native void attendHead0(
            float[] q,
            float[] kv,
            float[] kPe,
            int heads,
            int qkNope,
            int qkRope,
            int vHead,
            int base,
            int len,
            int kvRow0,
            float scale,
            int h,
            float[] out,
            ByteBuffer scratch);
}
