package dev.scorch.engine.kernels;

/** Log-softmax pieces over one row of fp32 logits, reduced in double in a fixed order. */
public final class LogSoftmax {
    private LogSoftmax() {}

    public static double logSumExp(float[] x, int off, int n) {
        float max = Float.NEGATIVE_INFINITY;
        for (int i = 0; i < n; i++) {
            max = Math.max(max, x[off + i]);
        }
        double sum = 0;
        for (int i = 0; i < n; i++) {
            sum += Math.exp((double) x[off + i] - max);
        }
        return max + Math.log(sum);
    }

    /** Index of the largest logit; the lowest id wins ties. */
    public static int argmax(float[] x, int off, int n) {
        int best = 0;
        for (int i = 1; i < n; i++) {
            if (x[off + i] > x[off + best]) {
                best = i;
            }
        }
        return best;
    }

    /** The k largest ids, largest first; ties by lower id. */
    public static int[] topK(float[] x, int off, int n, int k) {
        int[] ids = new int[Math.min(k, n)];
        topK(x, off, n, ids.length, ids, 0);
        return ids;
    }

    /** The k (at most n) largest ids of x[off .. off + n) into ids[idsOff .. idsOff + k), largest first; ties by lower id. */
    public static void topK(float[] x, int off, int n, int k, int[] ids, int idsOff) {
        if (k > n) {
            throw new IllegalArgumentException("top " + k + " of " + n);
        }
        if (k == 0) {
            return;
        }
        int size = 0;
        for (int i = 0; i < n; i++) {
            float v = x[off + i];
            if (size == k && !(v > x[off + ids[idsOff + k - 1]])) {
                continue;
            }
            int pos = size < k ? size++ : k - 1;
            while (pos > 0 && v > x[off + ids[idsOff + pos - 1]]) {
                ids[idsOff + pos] = ids[idsOff + pos - 1];
                pos--;
            }
            ids[idsOff + pos] = i;
        }
    }

    /** The k largest of x[0 .. n), largest first; ties by lower id. */
    public static int[] topK(double[] x, int n, int k) {
        k = Math.min(k, n);
        int[] ids = new int[k];
        int size = 0;
        for (int i = 0; i < n; i++) {
            double v = x[i];
            if (size == k && !(v > x[ids[k - 1]])) {
                continue;
            }
            int pos = size < k ? size++ : k - 1;
            while (pos > 0 && v > x[ids[pos - 1]]) {
                ids[pos] = ids[pos - 1];
                pos--;
            }
            ids[pos] = i;
        }
        return ids;
    }
}
