package dev.scorch.engine.model;

import dev.scorch.engine.kernels.Ops;
import java.util.function.IntConsumer;

/**
 * Item j: dst[dstRow0 + j] = src[rows[j]] over width (rows null: src[srcRow0 + j]): gathering an expert's tokens,
 * moving a chunk of rows, rows spread over the engine's threads. A scratch keeps one and sets its operands per pass, so
 * that a pass makes no lambda.
 */
final class CopyRows implements IntConsumer {
    private float[] src;
    private int[] rows;
    private int srcRow0;
    private float[] dst;
    private int dstRow0;
    private int width;

    /** dst[j] = src[rows[j]] for j &lt; n. */
    void gather(Ops ops, float[] src, int[] rows, int n, float[] dst, int width) {
        run(ops, src, rows, 0, n, dst, 0, width);
    }

    /** dst[dstRow0 + j] = src[srcRow0 + j] for j &lt; n. */
    void copy(Ops ops, float[] src, int srcRow0, int n, float[] dst, int dstRow0, int width) {
        run(ops, src, null, srcRow0, n, dst, dstRow0, width);
    }

    private void run(Ops ops, float[] src, int[] rows, int srcRow0, int n, float[] dst, int dstRow0, int width) {
        this.src = src;
        this.rows = rows;
        this.srcRow0 = srcRow0;
        this.dst = dst;
        this.dstRow0 = dstRow0;
        this.width = width;
        ops.forEachRow(n, this);
    }

    @Override
    public void accept(int j) {
        System.arraycopy(src, (rows == null ? srcRow0 + j : rows[j]) * width, dst, (dstRow0 + j) * width, width);
    }
}
