package dev.scorch.udfs.progress;

import java.io.Serializable;
import org.apache.spark.SparkContext;
import org.apache.spark.util.LongAccumulator;

/**
 * A job's Spark accumulators (named, so the Spark UI shows them per stage): rows, tokens (scored, or generated),
 * engine batches (prefill batches and decode steps), error rows, padding tokens computed (zero by design:
 * batches are packed varlen), and the nanoseconds the score engine spent in its batches, summed over tasks (generate
 * leaves it 0: its engine steps pull input rows as they go, so their time is not the engine's alone), and the
 * nanoseconds score partitions streamed, from their model being ready to their last row, summed over tasks: the
 * engine's share of it is how busy the device was ({@link #engineBusy}).
 */
public record JobMetrics(
        LongAccumulator rows,
        LongAccumulator tokens,
        LongAccumulator batches,
        LongAccumulator errors,
        LongAccumulator paddingTokens,
        LongAccumulator engineNanos,
        LongAccumulator partitionNanos)
        implements Serializable {

    public static JobMetrics register(SparkContext sc) {
        return new JobMetrics(
                sc.longAccumulator("scorch.rows"),
                sc.longAccumulator("scorch.tokens"),
                sc.longAccumulator("scorch.batches"),
                sc.longAccumulator("scorch.errors"),
                sc.longAccumulator("scorch.padding_tokens"),
                sc.longAccumulator("scorch.engine_nanos"),
                sc.longAccumulator("scorch.partition_nanos"));
    }

    /** Seconds the engine spent in its batches, summed over tasks. */
    public double engineSeconds() {
        return engineNanos.value() / 1e9;
    }

    /** Seconds score partitions streamed, summed over tasks. */
    public double partitionSeconds() {
        return partitionNanos.value() / 1e9;
    }

    /**
     * The engine's share of the score partitions' wall time (0 when none ran): on a GPU task, how busy the GPU was
     * kept; the rest went to the task's own work (reading, checking and tokenizing rows, writing results) and to
     * Spark's around it.
     */
    public double engineBusy() {
        long wall = partitionNanos.value();
        return wall == 0 ? 0 : (double) engineNanos.value() / wall;
    }

    /** Padding tokens over all tokens the engine computed. */
    public double paddingRatio() {
        long all = tokens.value() + paddingTokens.value();
        return all == 0 ? 0 : (double) paddingTokens.value() / all;
    }
}
