package dev.scorch.engine.bench;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.demo.Fp8Blocks;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.Linear;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
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
 * y[M, N] = x[M, K] · Wᵀ through {@link CpuOps#matmul} (PackedGemm), W [N, K] read from a memory-mapped
 * safetensors file exactly as the model reads it: BF16, FP8 E4M3 with 128x128 weight_scale_inv, or F32 for
 * reference. Activations are fp32. GFLOP/s = 2·M·N·K / time; bin/kernel-bench computes it from JMH's JSON
 * output ({@link #flops} gives the numerator).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Fork(value = 1, jvmArgsAppend = {"--add-modules=jdk.incubator.vector"})
public class GemmBenchmark {
  /** FP8 block size, as DeepSeek-V3 / Kimi K2 checkpoints store it. */
  private static final int BLOCK = 128;

  /** Rows of x (tokens). */
  @Param({"16", "256", "2048"})
  public int m;

  /** Weight shape as KxN (in_features x out_features). */
  @Param({"1024x1024", "1024x4096", "4096x1024"})
  public String shape;

  /** Weight dtype in the file: BF16, F8_E4M3 (block-scaled) or F32. */
  @Param({"BF16", "F8_E4M3", "F32"})
  public String dtype;

  /** Engine threads (the benchmark thread plus threads - 1 pool helpers). */
  @Param({"2"})
  public int threads;

  private Path dir;
  private SafetensorsFile file;
  private Linear w;
  private CpuOps ops;
  private float[] x;
  private float[] y;

  /** Floating-point operations of one matmul: 2·M·N·K. */
  public static double flops(int m, int k, int n) {
    return 2.0 * m * n * k;
  }

  @Setup(Level.Trial)
  public void setUp() throws IOException {
    String[] kn = shape.split("x");
    int k = Integer.parseInt(kn[0]);
    int n = Integer.parseInt(kn[1]);
    DType dt = DType.valueOf(dtype);
    SplittableRandom rnd = new SplittableRandom(42);
    // Random weight [N, K] with the demo models' scale (std 1/sqrt(K)).
    float[] wv = gaussian(rnd, n * k, 1.0 / Math.sqrt(k));
    // Write it as a real safetensors file (FP8: codes plus weight_scale_inv).
    SafetensorsWriter sw = new SafetensorsWriter();
    long[] wShape = {n, k};
    if (dt == DType.F8_E4M3) {
      Fp8Blocks q = Fp8Blocks.quantize(wv, n, k, BLOCK, BLOCK);
      sw.add("w.weight", DType.F8_E4M3, wShape, q.codes());
      sw.addFloats("w.weight_scale_inv", DType.F32, new long[] {q.scaleRows(), q.scaleCols()}, q.scaleInv());
    } else {
      sw.addFloats("w.weight", dt, wShape, wv);
    }
    dir = Files.createTempDirectory("scorch-gemm-bench");
    Path path = dir.resolve("model.safetensors");
    sw.write(path);
    // Open it memory-mapped and wrap it the way ModelWeights.linear does.
    file = SafetensorsFile.open(path);
    w = dt == DType.F8_E4M3
        ? new Linear(file.tensor("w.weight"), file.tensor("w.weight_scale_inv"), BLOCK, BLOCK)
        : new Linear(file.tensor("w.weight"));
    // fp32 activations and the output buffer.
    x = gaussian(rnd, m * k, 1.0);
    y = new float[m * n];
    ops = new CpuOps(threads);
  }

  @Benchmark
  public float[] matmul() {
    ops.matmul(x, m, w, y);
    return y;
  }

  @TearDown(Level.Trial)
  public void tearDown() throws IOException {
    ops.close();
    // The mapping stays valid after unlinking on Linux; the JVM releases it at exit.
    Files.deleteIfExists(dir.resolve("model.safetensors"));
    Files.deleteIfExists(dir);
  }

  static float[] gaussian(SplittableRandom rnd, int n, double std) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = (float) (std * rnd.nextGaussian());
    }
    return v;
  }
}
