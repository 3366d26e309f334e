package dev.scorch.engine.kernels;

/**
 * The scalar fallback for machines or JVMs without the Vector API: the same fused-multiply-add chain over
 * k = 0 .. K-1 per output as {@link PackedGemm}, so both give bit-identical results.
 */
public final class ScalarGemm {
    private ScalarGemm() {}

    public static void matmul(float[] x, int m, Linear w, float[] y, Parallel par) {
        int kDim = w.in();
        int nDim = w.out();
        par.forEach(nDim, n -> {
            float[] row = new float[kDim];
            w.row(n, 0, kDim, row, 0);
            for (int i = 0; i < m; i++) {
                float acc = 0;
                int xi = i * kDim;
                for (int k = 0; k < kDim; k++) {
                    acc = Math.fma(x[xi + k], row[k], acc);
                }
                y[i * nDim + n] = acc;
            }
        });
    }
}
