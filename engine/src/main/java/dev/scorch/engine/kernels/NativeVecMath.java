package dev.scorch.engine.kernels;

/**
 * {@link CpuOps.VecMath#logSumExp} and {@link CpuOps.VecMath#siluMul} in C with AVX-512 (scorch_vecmath.c, in
 * {@link NativeCpu}'s library): the same operations in the same order as the Java code on 16-lane vectors, so the same
 * bits. On JDK 17 the Java code leaves Vector API objects on the heap (about 570 bytes a prefill token); the C code
 * allocates nothing on any JDK. Runs where the native library loaded and the CPU has AVX-512;
 * -Dscorch.native.vecmath=false turns it off alone ({@link KernelSelection} picks).
 */
final class NativeVecMath {
    static final boolean AVAILABLE = KernelSelection.current().vectorMath().impl() == KernelSelection.Impl.NATIVE;

    /** The max and the sum of e^(x - max) of a row: out[0], out[1] (one per thread: no array per call). */
    private static final ThreadLocal<double[]> OUT = ThreadLocal.withInitial(() -> new double[2]);

    private NativeVecMath() {}

    /** VecMath.logSumExp(x, off, n), the same bits. */
    static double logSumExp(float[] x, int off, int n) {
        if (off < 0 || n < 0 || (long) off + n > x.length) {
            throw new IndexOutOfBoundsException(
                    "log-sum-exp of [" + off + ", " + ((long) off + n) + ") of " + x.length);
        }
        double[] out = OUT.get();
        if (logSumExp0(x, off, n, out) == 0) {
            return LogSoftmax.logSumExp(x, off, n); // a NaN or infinite max: VecMath's fallback too
        }
        return out[0] + Math.log(out[1]);
    }

    /** VecMath.siluMul(g, u, off, n), the same bits: g[off .. off + n) = silu(g) · u. */
    static void siluMul(float[] g, float[] u, int off, int n) {
        if (off < 0 || n < 0 || (long) off + n > g.length || (long) off + n > u.length) {
            throw new IndexOutOfBoundsException(
                    "silu · u of [" + off + ", " + ((long) off + n) + ") of " + g.length + " and " + u.length);
        }
        siluMul0(g, u, off, n);
    }

    private static native int logSumExp0(float[] x, int off, int n, double[] out);

    private static native void siluMul0(float[] g, float[] u, int off, int n);
}
