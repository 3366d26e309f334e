package dev.scorch.engine.bench;

import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.MlaInputs;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Causal multi-head latent attention ({@link CpuOps#attention}) at the {@code small} demo model's head
 * shapes: 16 heads, qk_nope 64, qk_rope 32, v_head 64, over a packed batch of equal-length sequences.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Fork(
        value = 1,
        jvmArgsAppend = {"--add-modules=jdk.incubator.vector"})
public class AttentionBenchmark {
    private static final int HEADS = 16;
    private static final int QK_NOPE = 64;
    private static final int QK_ROPE = 32;
    private static final int V_HEAD = 64;

    /** Packed batch as SEQUENCESxLENGTH. */
    @Param({"1x1024", "8x256"})
    public String batch;

    /** Engine threads. */
    @Param({"2"})
    public int threads;

    private CpuOps ops;
    private MlaInputs in;
    private float[] out;

    @Setup(Level.Trial)
    public void setUp() {
        String[] sl = batch.split("x");
        int seqs = Integer.parseInt(sl[0]);
        int len = Integer.parseInt(sl[1]);
        int t = seqs * len;
        // Sequence boundaries of the packed batch.
        int[] start = new int[seqs];
        int[] lens = new int[seqs];
        for (int s = 0; s < seqs; s++) {
            start[s] = s * len;
            lens[s] = len;
        }
        // Random q [T, heads, nope + rope], kv [T, heads, nope + v], k_pe [T, rope].
        SplittableRandom rnd = new SplittableRandom(7);
        float[] q = GemmFixture.gaussian(rnd, t * HEADS * (QK_NOPE + QK_ROPE), 1.0);
        float[] kv = GemmFixture.gaussian(rnd, t * HEADS * (QK_NOPE + V_HEAD), 1.0);
        float[] kPe = GemmFixture.gaussian(rnd, t * QK_ROPE, 1.0);
        float scale = (float) (1.0 / Math.sqrt(QK_NOPE + QK_ROPE));
        in = new MlaInputs(q, kv, kPe, HEADS, QK_NOPE, QK_ROPE, V_HEAD, start, lens, scale, 0);
        out = new float[t * HEADS * V_HEAD];
        ops = new CpuOps(threads);
    }

    @Benchmark
    public float[] attention() {
        ops.attention(in, out);
        return out;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        ops.close();
    }
}
