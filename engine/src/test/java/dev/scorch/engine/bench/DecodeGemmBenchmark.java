package dev.scorch.engine.bench;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.demo.Fp8Blocks;
import dev.scorch.engine.demo.Int4Groups;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.PackedGemm;
import dev.scorch.engine.kernels.Parallel;
import dev.scorch.engine.kernels.RowDotGemm;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;
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
 * Decode-shaped y[M, N] = x[M, K] · Wᵀ: {@link RowDotGemm} (the decode kernel) against {@link PackedGemm}
 * (prefill's), W [N, K] memory-mapped from a safetensors file as the model reads it. Calls cycle through
 * {@code copies} distinct weights (8 × 8 MiB by default, twice the 32 MiB L3), so W comes from DRAM as in a
 * decode step. At M = 1 the weight bytes per second (N·K·bytes / time) compare with the machine's read
 * bandwidth (see {@link BandwidthBenchmark}).
 *
 * <pre>dev/jmh DecodeGemmBenchmark -p m=1,8,32</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 1,
        jvmArgsAppend = {"--add-modules=jdk.incubator.vector"})
public class DecodeGemmBenchmark {
    /** Rows of x (sequences decoded together). */
    @Param({"1", "8", "32"})
    public int m;

    /** Weight shape as KxN (in_features x out_features). */
    @Param({"1024x4096"})
    public String shape;

    /** BF16, F8_E4M3 (128x128 block scales) or I32 (INT4 in groups of 32 with BF16 scales). */
    @Param({"BF16"})
    public String dtype;

    @Param({"2"})
    public int threads;

    /** Distinct weights the calls cycle through. */
    @Param({"8"})
    public int copies;

    private Path dir;
    private Linear[] ws;
    private int next;
    private Parallel par;
    private final CpuPrecision precision = KernelSelection.current().cpuPrecision();
    private float[] x;
    private float[] y;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        String[] kn = shape.split("x");
        int k = Integer.parseInt(kn[0]);
        int n = Integer.parseInt(kn[1]);
        DType dt = DType.valueOf(dtype);
        SplittableRandom rnd = new SplittableRandom(42);
        float[] wv = GemmFixture.gaussian(rnd, n * k, 1.0 / Math.sqrt(k));
        SafetensorsWriter sw = new SafetensorsWriter();
        for (int c = 0; c < copies; c++) {
            if (dt == DType.F8_E4M3) {
                Fp8Blocks q = Fp8Blocks.quantize(wv, n, k, 128, 128);
                sw.add("w" + c + ".weight", DType.F8_E4M3, new long[] {n, k}, q.codes());
                sw.addFloats(
                        "w" + c + ".weight_scale_inv",
                        DType.F32,
                        new long[] {q.scaleRows(), q.scaleCols()},
                        q.scaleInv());
            } else if (dt == DType.I32) {
                Int4Groups q = Int4Groups.quantize(wv, n, k, GemmFixture.INT4_GROUP);
                sw.add("w" + c + ".weight_packed", DType.I32, new long[] {n, (k + 7) / 8}, q.packedBytes());
                sw.addFloats(
                        "w" + c + ".weight_scale",
                        DType.BF16,
                        new long[] {n, (k + GemmFixture.INT4_GROUP - 1) / GemmFixture.INT4_GROUP},
                        q.scales());
            } else {
                sw.addFloats("w" + c + ".weight", dt, new long[] {n, k}, wv);
            }
        }
        dir = Files.createTempDirectory("scorch-decode-gemm-bench");
        Path path = dir.resolve("model.safetensors");
        sw.write(path);
        SafetensorsFile file = SafetensorsFile.open(path);
        ws = new Linear[copies];
        for (int c = 0; c < copies; c++) {
            ws[c] = dt == DType.F8_E4M3
                    ? new Linear(file.tensor("w" + c + ".weight"), file.tensor("w" + c + ".weight_scale_inv"), 128, 128)
                    : dt == DType.I32
                            ? Linear.int4(
                                    "w" + c + ".weight",
                                    file.tensor("w" + c + ".weight_packed"),
                                    file.tensor("w" + c + ".weight_scale"),
                                    n,
                                    k,
                                    GemmFixture.INT4_GROUP)
                            : new Linear(file.tensor("w" + c + ".weight"));
        }
        x = GemmFixture.gaussian(rnd, m * k, 1.0);
        y = new float[m * n];
        par = new Parallel(threads);
    }

    @Benchmark
    public float[] rowDot() {
        RowDotGemm.matmul(x, m, nextWeight(), y, par);
        return y;
    }

    @Benchmark
    public float[] packed() {
        PackedGemm.matmul(x, m, nextWeight(), y, par, precision);
        return y;
    }

    private Linear nextWeight() {
        Linear w = ws[next];
        next = (next + 1) % ws.length;
        return w;
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        par.close();
        Files.deleteIfExists(dir.resolve("model.safetensors"));
        Files.deleteIfExists(dir);
    }
}
