package dev.scorch.engine.model;

import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.runtime.KvCache;
import dev.scorch.engine.runtime.PackedBatch;

/**
 * Which matmul each row of a forward pass takes. Decode rows — tokens of a sequence that extends a non-empty
 * KV cache — go through {@link Ops#matmulDecode}; all other rows (scoring, a prompt's prefill into an empty
 * cache) through {@link Ops#matmul}. The choice depends only on the row's own sequence, so a row's bits
 * never depend on its batch mates: a decode step gives the same bits alone, batched, or packed together with
 * another sequence's prefill, and prefill keeps scoring's bits.
 */
final class Matmuls {
    private final Ops ops;
    private final boolean[] decode; // [rows]; null when every row takes the same path
    private final boolean allDecode;

    private Matmuls(Ops ops, boolean[] decode, boolean allDecode) {
        this.ops = ops;
        this.decode = decode;
        this.allDecode = allDecode;
    }

    // The last uniform choices made, reused while the ops stay the same (a decode step asks twice per step). A race
    // only makes a spare object: Matmuls is immutable.
    private static volatile Matmuls lastPrefill;
    private static volatile Matmuls lastDecode;

    /** Every row through {@link Ops#matmul}: scoring and prefill without a cache. */
    static Matmuls prefill(Ops ops) {
        Matmuls m = lastPrefill;
        if (m == null || m.ops != ops) {
            lastPrefill = m = new Matmuls(ops, null, false);
        }
        return m;
    }

    /** Every row through {@link Ops#matmulDecode}. */
    static Matmuls decode(Ops ops) {
        Matmuls m = lastDecode;
        if (m == null || m.ops != ops) {
            lastDecode = m = new Matmuls(ops, null, true);
        }
        return m;
    }

    /** The rows of batch: decode rows are those of sequences whose cache holds tokens before this pass (caches may be null). */
    static Matmuls of(Ops ops, PackedBatch batch, KvCache[] caches) {
        if (caches == null) {
            return prefill(ops);
        }
        int n = batch.numSequences();
        int cached = 0;
        for (int s = 0; s < n; s++) {
            cached += caches[s].length() > 0 ? 1 : 0;
        }
        if (cached == 0) {
            return prefill(ops);
        }
        if (cached == n) {
            return decode(ops);
        }
        boolean[] d = new boolean[batch.numTokens()];
        for (int s = 0; s < n; s++) {
            if (caches[s].length() > 0) {
                java.util.Arrays.fill(d, batch.seqStart()[s], batch.seqStart()[s] + batch.seqLen()[s], true);
            }
        }
        return new Matmuls(ops, d, false);
    }

    Ops ops() {
        return ops;
    }

    /** True when every row is a decode row. */
    boolean allDecode() {
        return decode == null && allDecode;
    }

    /** The same choice for the sub-batch of rows[0 .. n) (for example the tokens routed to one expert). */
    Matmuls rows(int[] rows, int n) {
        if (decode == null) {
            return this;
        }
        boolean[] d = new boolean[n];
        for (int j = 0; j < n; j++) {
            d[j] = decode[rows[j]];
        }
        return of(ops, d);
    }

    /** The same choice for the rows [from, to) (a chunk of a long batch). */
    Matmuls range(int from, int to) {
        return decode == null ? this : of(ops, java.util.Arrays.copyOfRange(decode, from, to));
    }

    private static Matmuls of(Ops ops, boolean[] d) {
        int count = 0;
        for (boolean b : d) {
            count += b ? 1 : 0;
        }
        return count == 0 ? prefill(ops) : count == d.length ? decode(ops) : new Matmuls(ops, d, false);
    }

    /** y[g] = x · w[g]ᵀ for weights sharing the input x [m, in]: one pass when every row is a prefill row. */
    void apply(float[] x, int m, Linear[] w, float[][] y) {
        if (decode == null && !allDecode) {
            ops.matmul(x, m, w, y);
            return;
        }
        for (int g = 0; g < w.length; g++) {
            apply(x, m, w[g], y[g]);
        }
    }

    /** y[m, out] = x[m, in] · Wᵀ, each row through its own path. */
    void apply(float[] x, int m, Linear w, float[] y) {
        if (decode == null) {
            if (allDecode) {
                ops.matmulDecode(x, m, w, y);
            } else {
                ops.matmul(x, m, w, y);
            }
            return;
        }
        // Mixed: gather each path's rows, run it, scatter the results back.
        int in = w.in();
        int out = w.out();
        for (boolean path : new boolean[] {true, false}) {
            int count = 0;
            for (int i = 0; i < m; i++) {
                count += decode[i] == path ? 1 : 0;
            }
            if (count == 0) {
                continue;
            }
            float[] xs = new float[count * in];
            float[] ys = new float[count * out];
            for (int i = 0, j = 0; i < m; i++) {
                if (decode[i] == path) {
                    System.arraycopy(x, i * in, xs, j++ * in, in);
                }
            }
            if (path) {
                ops.matmulDecode(xs, count, w, ys);
            } else {
                ops.matmul(xs, count, w, ys);
            }
            for (int i = 0, j = 0; i < m; i++) {
                if (decode[i] == path) {
                    System.arraycopy(ys, j++ * out, y, i * out, out);
                }
            }
        }
    }
}
