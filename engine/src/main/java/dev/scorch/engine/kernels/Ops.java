package dev.scorch.engine.kernels;

/**
 * The CPU's kernels, under {@link dev.scorch.engine.device.cpu.CpuDevice}: the heavy operations a CPU pass calls.
 * {@link CpuOps} is the fast path; the tests hold {@code ReferenceOps}, the plain loops it is tested against (the plain
 * device in production code is {@link dev.scorch.engine.device.host.HostDevice}). (The seam every device implements,
 * CUDA's included, is {@link dev.scorch.engine.device.Device}.)
 */
public interface Ops extends AutoCloseable {
    /** y[m, out] = x[m, in] · Wᵀ. */
    void matmul(float[] x, int m, Linear w, float[] y);

    /**
     * y[g] = x · w[g]ᵀ for weights that share their input x [m, in] (q_a_proj with kv_a_proj, gate_proj with
     * up_proj), which a backend may run as one pass; each y[g] has the bits {@link #matmul} gives it alone.
     */
    default void matmul(float[] x, int m, Linear[] w, float[][] y) {
        for (int g = 0; g < w.length; g++) {
            matmul(x, m, w[g], y[g]);
        }
    }

    /**
     * y[m, out] = x[m, in] · Wᵀ for decode-shaped calls (m of 1 to a few dozen rows): the matmul of every
     * token that extends a KV cache. The bits of each output row depend only on its x row and W — never on m,
     * the other rows or the thread count — but may differ from {@link #matmul}'s in rounding.
     */
    void matmulDecode(float[] x, int m, Linear w, float[] y);

    /**
     * Independent decode matmuls y[g] = x[g] · w[g]ᵀ (m[g] rows each), which a backend may run as one parallel
     * pass (the experts of a decode step); each result has the bits {@link #matmulDecode} gives it alone.
     */
    default void matmulDecode(float[][] x, int[] m, Linear[] w, float[][] y) {
        for (int g = 0; g < w.length; g++) {
            matmulDecode(x[g], m[g], w[g], y[g]);
        }
    }

    /** out[T, heads, v_head]: causal softmax(q·kᵀ · scale) · v per sequence, softmax in fp32. */
    void attention(MlaInputs in, float[] out);

    /**
     * log Σ e^(x[i]) over x[off .. off + n), the log-softmax denominator of a row of logits: the same bits for a row
     * on every call. This default is the reference: {@link LogSoftmax#logSumExp}'s plain double loop.
     */
    default double logSumExp(float[] x, int off, int n) {
        return LogSoftmax.logSumExp(x, off, n);
    }

    /**
     * g[i] = silu(g[i]) · u[i] = g[i] / (1 + e^-g[i]) · u[i] over [off, off + n), SwiGLU's gate: each element's bits
     * depend only on its g and u (not on off, n or the thread). This default is the reference: e^-g in double.
     */
    default void siluMul(float[] g, float[] u, int off, int n) {
        for (int i = off; i < off + n; i++) {
            g[i] = silu(g[i]) * u[i];
        }
    }

    /** silu(x) = x / (1 + e^-x), in double, rounded once: the reference activation. */
    static float silu(float x) {
        return (float) (x / (1.0 + Math.exp(-x)));
    }

    /**
     * body(i) for i in [0, n): independent row work outside the kernels above (the log-softmax stats of a chunk of
     * logits), spread over the backend's threads where it has them. Each item must give the same result on any thread.
     */
    default void forEachRow(int n, java.util.function.IntConsumer body) {
        for (int i = 0; i < n; i++) {
            body.accept(i);
        }
    }

    /**
     * Whether this backend's vector kernels run; false: the plain loops, the reference. Code beside the kernels with a
     * vector and a plain form of its own (the absorbed attention of {@code LatentAttention}) follows it.
     */
    default boolean simd() {
        return false;
    }

    /** Engine threads this backend runs on. */
    int threads();

    @Override
    void close();
}
