package dev.scorch.engine.bench;

import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.util.function.LongSupplier;

/**
 * Whether the JIT compilers have gone quiet over a benchmark's warm-up runs: {@link #QUIET_RUNS} runs in a row, each
 * with under {@link #QUIET_SHARE} of its wall time spent compiling (the compilers' time summed over their threads, as
 * {@link CompilationMXBean} counts it), or {@link #MAX_RUNS} runs watched, whichever comes first. A JVM that does not
 * count compilation time is taken as quiet at once.
 */
final class JitQuiet {
    static final int QUIET_RUNS = 3;
    static final double QUIET_SHARE = 0.01;
    static final int MAX_RUNS = 100;

    private final LongSupplier compiledMillis; // null where the JVM does not count it
    private long millis0;
    private int watched;
    private int quietInARow;

    /** Watching this JVM's compilers. */
    JitQuiet() {
        this(compilersTime());
    }

    /** Watching the compilation time compiledMillis reads (null: not counted). */
    JitQuiet(LongSupplier compiledMillis) {
        this.compiledMillis = compiledMillis;
    }

    private static LongSupplier compilersTime() {
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        return jit != null && jit.isCompilationTimeMonitoringSupported() ? jit::getTotalCompilationTime : null;
    }

    /** Before a run. */
    void begin() {
        millis0 = compiledMillis == null ? 0 : compiledMillis.getAsLong();
    }

    /** After a run of wallNanos. */
    void end(long wallNanos) {
        watched++;
        long compiled = compiledMillis == null ? 0 : compiledMillis.getAsLong() - millis0;
        quietInARow = compiled * 1e6 < QUIET_SHARE * wallNanos ? quietInARow + 1 : 0;
    }

    boolean quiet() {
        return compiledMillis == null || quietInARow >= QUIET_RUNS || watched >= MAX_RUNS;
    }
}
