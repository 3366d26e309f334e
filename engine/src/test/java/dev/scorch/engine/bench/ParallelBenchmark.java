package dev.scorch.engine.bench;

import dev.scorch.engine.kernels.Parallel;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What one small parallel call costs, as a decode step makes dozens of them: {@code forEach} runs 8 items of about
 * 1 µs each on the engine threads; {@code inline} runs the same items on the caller alone. With 2 threads the
 * call beats the inline loop only when handing work over costs well under the items' time.
 *
 * <pre>dev/jmh ParallelBenchmark</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class ParallelBenchmark {
    static final int ITEMS = 8;

    @Param({"2"})
    public int threads;

    private Parallel par;
    private final long[] sink = new long[ITEMS * 8]; // one cache line per item

    @Setup(Level.Trial)
    public void setUp() {
        par = new Parallel(threads);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        par.close();
    }

    private void item(int i) {
        long s = 0;
        for (int k = 0; k < 2000; k++) {
            s += (long) k * i;
        }
        sink[i * 8] += s;
    }

    @Benchmark
    public long forEach() {
        par.forEach(ITEMS, this::item);
        return sink[0];
    }

    @Benchmark
    public long inline() {
        for (int i = 0; i < ITEMS; i++) {
            item(i);
        }
        return sink[0];
    }
}
