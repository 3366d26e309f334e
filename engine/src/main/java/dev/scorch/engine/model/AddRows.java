package dev.scorch.engine.model;

import dev.scorch.engine.kernels.Ops;
import java.util.function.IntConsumer;

/**
 * Item j: y[rows[j]] += weight[j] · src[j] over hidden (rows and weight null: y[j] += src[j]): the MoE's weighted sums and
 * the residual adds, rows spread over the engine's threads. A scratch keeps one and sets its operands per pass, so that a
 * pass makes no lambda.
 */
final class AddRows implements IntConsumer {
    private float[] y;
    private float[] src;
    private int[] rows;
    private float[] weight;
    private int hidden;

    /** The n items through ops' threads. */
    void run(Ops ops, int n, float[] y, float[] src, int[] rows, float[] weight, int hidden) {
        this.y = y;
        this.src = src;
        this.rows = rows;
        this.weight = weight;
        this.hidden = hidden;
        ops.forEachRow(n, this);
    }

    @Override
    public void accept(int j) {
        int yo = (rows == null ? j : rows[j]) * hidden;
        int so = j * hidden;
        if (weight == null) {
            for (int d = 0; d < hidden; d++) {
                y[yo + d] += src[so + d];
            }
        } else {
            float wj = weight[j];
            for (int d = 0; d < hidden; d++) {
                y[yo + d] += wj * src[so + d];
            }
        }
    }
}
