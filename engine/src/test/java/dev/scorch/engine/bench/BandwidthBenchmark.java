package dev.scorch.engine.bench;

import dev.scorch.engine.kernels.NativeCpu;
import dev.scorch.engine.kernels.Parallel;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
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
 * The machine's memory bandwidth as the engine's threads see it, the ceiling for decode (which reads every
 * active weight once per step): {@code copy} copies a 1 GiB off-heap buffer into another, split across the
 * threads (GB/s copied = 1.074 / time in s); {@code read} streams the same GiB into int[] chunks of 64 KiB as
 * the Java decode kernel does with weight rows (GB/s read = 1.074 / time in s); {@code readNative} streams it through
 * the native library's loop, as the native row-dots read weights in place.
 *
 * <pre>dev/jmh BandwidthBenchmark</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(
        value = 1,
        jvmArgsAppend = {"-Xmx3g"})
public class BandwidthBenchmark {
    static final int BYTES = 1 << 30;
    static final int CHUNK = 64 << 10;

    @Param({"2"})
    public int threads;

    private ByteBuffer src;
    private ByteBuffer dst;
    private Parallel par;
    private int[][] sink;

    @Setup(Level.Trial)
    public void setUp() {
        src = ByteBuffer.allocateDirect(BYTES).order(ByteOrder.LITTLE_ENDIAN);
        dst = ByteBuffer.allocateDirect(BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < BYTES; i += 4096) {
            src.put(i, (byte) i);
            dst.put(i, (byte) 1);
        }
        par = new Parallel(threads);
        sink = new int[threads][CHUNK / 4];
    }

    /** Bytes copied: 1 GiB read plus 1 GiB written. */
    @Benchmark
    public ByteBuffer copy() {
        int per = BYTES / threads;
        par.forEach(threads, t -> dst.slice(t * per, per).put(src.slice(t * per, per)));
        return dst;
    }

    /** Bytes read: 1 GiB, bulk-copied chunk by chunk into a small int[] that stays in L1/L2. */
    @Benchmark
    public int read() {
        int per = BYTES / threads;
        int[] acc = new int[threads];
        par.forEach(threads, t -> {
            int[] buf = sink[t];
            for (int off = t * per; off < (t + 1) * per; off += CHUNK) {
                src.slice(off, CHUNK)
                        .order(ByteOrder.LITTLE_ENDIAN)
                        .asIntBuffer()
                        .get(buf);
                acc[t] += buf[0];
            }
        });
        return acc[0] + acc[threads - 1];
    }

    /**
     * Bytes read: the same GiB streamed by the native library's loop (vector loads and the row-dots' prefetch ahead, no
     * copy), the ceiling the native row-dots are held to; where the library does not run here, this benchmark fails.
     */
    @Benchmark
    public int readNative() {
        int per = BYTES / threads;
        int[] acc = new int[threads];
        par.forEach(threads, t -> acc[t] = NativeCpu.readStream(src, (long) t * per, per));
        return acc[0] ^ acc[threads - 1];
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        par.close();
    }
}
