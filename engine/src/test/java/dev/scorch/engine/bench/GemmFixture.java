package dev.scorch.engine.bench;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.demo.Fp8Blocks;
import dev.scorch.engine.demo.Int4Groups;
import dev.scorch.engine.kernels.Linear;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;

/**
 * One GEMM y[M, N] = x[M, K] · Wᵀ as the model runs it: W [N, K] written to a real safetensors file (BF16, FP8
 * E4M3 with 128x128 weight_scale_inv, F32, or INT4: compressed-tensors' packed words with BF16 scales per group of 32, as
 * {@code dtype} I32) and read back memory-mapped, fp32 activations, the output buffer.
 * Shared by {@link GemmBenchmark} (JMH) and {@link EnginePairs} (timed against OpenBLAS in alternation).
 */
final class GemmFixture implements AutoCloseable {
    /** FP8 block size, as DeepSeek-V3 / Kimi K2 checkpoints store it. */
    private static final int BLOCK = 128;
    /** INT4 group size, as Kimi-K2-Thinking's routed experts store it. */
    static final int INT4_GROUP = 32;

    final int m;
    final int k;
    final int n;
    final Linear w;
    final float[] x;
    final float[] y;
    private final Path dir;

    GemmFixture(int m, int k, int n, DType dtype) throws IOException {
        this.m = m;
        this.k = k;
        this.n = n;
        SplittableRandom rnd = new SplittableRandom(42);
        // Random weight [N, K] with the demo models' scale (std 1/sqrt(K)).
        float[] wv = gaussian(rnd, n * k, 1.0 / Math.sqrt(k));
        // Written as a real safetensors file (FP8: codes plus weight_scale_inv).
        SafetensorsWriter sw = new SafetensorsWriter();
        long[] wShape = {n, k};
        if (dtype == DType.F8_E4M3) {
            Fp8Blocks q = Fp8Blocks.quantize(wv, n, k, BLOCK, BLOCK);
            sw.add("w.weight", DType.F8_E4M3, wShape, q.codes());
            sw.addFloats("w.weight_scale_inv", DType.F32, new long[] {q.scaleRows(), q.scaleCols()}, q.scaleInv());
        } else if (dtype == DType.I32) {
            Int4Groups q = Int4Groups.quantize(wv, n, k, INT4_GROUP);
            sw.add("w.weight_packed", DType.I32, new long[] {n, (k + 7) / 8}, q.packedBytes());
            sw.addFloats("w.weight_scale", DType.BF16, new long[] {n, (k + INT4_GROUP - 1) / INT4_GROUP}, q.scales());
        } else {
            sw.addFloats("w.weight", dtype, wShape, wv);
        }
        dir = Files.createTempDirectory("scorch-gemm-bench");
        Path path = dir.resolve("model.safetensors");
        sw.write(path);
        // Opened memory-mapped and wrapped the way ModelWeights.linear does.
        SafetensorsFile file = SafetensorsFile.open(path);
        w = dtype == DType.F8_E4M3
                ? new Linear(file.tensor("w.weight"), file.tensor("w.weight_scale_inv"), BLOCK, BLOCK)
                : dtype == DType.I32
                        ? Linear.int4(
                                "w.weight",
                                file.tensor("w.weight_packed"),
                                file.tensor("w.weight_scale"),
                                n,
                                k,
                                INT4_GROUP)
                        : new Linear(file.tensor("w.weight"));
        x = gaussian(rnd, m * k, 1.0);
        y = new float[m * n];
    }

    @Override
    public void close() throws IOException {
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
