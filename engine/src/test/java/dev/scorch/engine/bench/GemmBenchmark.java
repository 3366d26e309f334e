package dev.scorch.engine.bench;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.kernels.CpuOps;
import java.io.IOException;
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
 * y[M, N] = x[M, K] · Wᵀ through {@link CpuOps#matmul} (PackedGemm), W [N, K] read from a memory-mapped
 * safetensors file exactly as the model reads it: BF16, FP8 E4M3 with 128x128 weight_scale_inv, or F32 for
 * reference. Activations are fp32. GFLOP/s = 2·M·N·K / time ({@link #flops} gives the numerator);
 * dev/gemm-paired runs the same shapes against OpenBLAS.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Fork(
        value = 1,
        jvmArgsAppend = {"--add-modules=jdk.incubator.vector"})
public class GemmBenchmark {
    /** Rows of x (tokens). */
    @Param({"16", "256", "2048"})
    public int m;

    /** Weight shape as KxN (in_features x out_features). */
    @Param({"1024x1024", "1024x4096", "4096x1024"})
    public String shape;

    /** Weight dtype in the file: BF16, F8_E4M3 (block-scaled), F32, or I32 (INT4 groups of 32, BF16 scales). */
    @Param({"BF16", "F8_E4M3", "F32"})
    public String dtype;

    /** Engine threads (the benchmark thread plus threads - 1 pool helpers). */
    @Param({"2"})
    public int threads;

    private GemmFixture gemm;
    private CpuOps ops;

    /** Floating-point operations of one matmul: 2·M·N·K. */
    public static double flops(int m, int k, int n) {
        return 2.0 * m * n * k;
    }

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        String[] kn = shape.split("x");
        gemm = new GemmFixture(m, Integer.parseInt(kn[0]), Integer.parseInt(kn[1]), DType.valueOf(dtype));
        ops = new CpuOps(threads);
    }

    @Benchmark
    public float[] matmul() {
        ops.matmul(gemm.x, m, gemm.w, gemm.y);
        return gemm.y;
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        ops.close();
        gemm.close();
    }
}
