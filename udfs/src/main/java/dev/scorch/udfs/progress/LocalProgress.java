package dev.scorch.udfs.progress;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Live counters of this JVM's tasks, window by window. Spark's accumulators reach the driver only when a
 * task ends; in local mode the driver shares the executors' JVM, so its progress line reads these instead.
 */
public final class LocalProgress {
    private static final AtomicLong ROWS = new AtomicLong();
    private static final AtomicLong TOKENS = new AtomicLong();
    private static final AtomicLong ERRORS = new AtomicLong();

    private LocalProgress() {}

    public static void add(long rows, long tokens, long errors) {
        ROWS.addAndGet(rows);
        TOKENS.addAndGet(tokens);
        ERRORS.addAndGet(errors);
    }

    public static long rows() {
        return ROWS.get();
    }

    public static long tokens() {
        return TOKENS.get();
    }

    public static long errors() {
        return ERRORS.get();
    }
}
