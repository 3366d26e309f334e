package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.demo.Fp8Blocks;
import dev.scorch.engine.demo.Int4Groups;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Decode's row-dot with the native kernel (weights read in place) and the Java kernel (rows copied out first) taking
 * turns in one JVM, in slices of a fraction of a second, so that a shared machine's drift hits both alike: per round one
 * slice of each (the order flips every round), the weight GB/s of each and their ratio; the median round per dtype. The
 * weights are mapped from a safetensors file, cycling through enough copies (64 MiB of BF16 by default) that each
 * call reads them from DRAM, as a decode step does. Needs the native row-dot ({@link RowDotGemm#NATIVE_ROWDOT}).
 *
 * <pre>dev/jmh --main dev.scorch.engine.kernels.RowDotPairs [M [ROUNDS [SLICE_S [THREADS [KxN [DTYPES]]]]]]</pre>
 *
 * defaults: M 1, 15 rounds, 0.3 s slices, 2 threads, 1024x4096, BF16,F8_E4M3,I32 (INT4 in groups of 32, BF16 scales).
 */
public final class RowDotPairs {
    private RowDotPairs() {}

    public static void main(String[] args) throws Exception {
        int m = args.length > 0 ? Integer.parseInt(args[0]) : 1;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 15;
        double slice = args.length > 2 ? Double.parseDouble(args[2]) : 0.3;
        int threads = args.length > 3 ? Integer.parseInt(args[3]) : 2;
        String[] kn = (args.length > 4 ? args[4] : "1024x4096").split("x");
        String[] dtypes = (args.length > 5 ? args[5] : "BF16,F8_E4M3,I32").split(",");
        if (!RowDotGemm.NATIVE_ROWDOT) {
            System.out.println(
                    "no native row-dot here: " + KernelSelection.current().decodeGemm());
            return;
        }
        int k = Integer.parseInt(kn[0]);
        int n = Integer.parseInt(kn[1]);
        Path dir = Files.createTempDirectory("scorch-rowdot-pairs");
        float[] x = GemmTest.randn(m * k, 1);
        float[] y = new float[m * n];
        System.out.printf(
                Locale.ROOT,
                "M %d, K %d, N %d, %d threads, %d rounds of %.2f s slices; %s%n",
                m,
                k,
                n,
                threads,
                rounds,
                slice,
                KernelSelection.current().decodeGemm());
        try (Parallel par = new Parallel(threads)) {
            for (String d : dtypes) {
                DType dt = DType.valueOf(d);
                double bytesPerWeight = dt == DType.BF16 ? 2 : dt == DType.F8_E4M3 ? 1 : 0.5 + 2.0 / 32;
                int copies = (int) Math.max(2, Math.ceil(64.0 * (1 << 20) / (bytesPerWeight * n * k)));
                Linear[] ws = weights(dir.resolve(d + ".safetensors"), dt, n, k, copies);
                double bytes = bytesPerWeight * n * k;
                List<double[]> rs = new ArrayList<>();
                for (int r = 0; r < rounds + 1; r++) { // round 0 warms both up
                    double[] gbs = new double[2];
                    for (int t = 0; t < 2; t++) {
                        boolean nat = (t == 0) == (r % 2 == 0);
                        gbs[nat ? 0 : 1] = bytes / secondsPerCall(x, m, ws, y, par, nat, slice) / 1e9;
                    }
                    if (r > 0) {
                        rs.add(new double[] {gbs[0], gbs[1], gbs[0] / gbs[1]});
                    }
                }
                double[] nat = rs.stream().mapToDouble(v -> v[0]).sorted().toArray();
                double[] java = rs.stream().mapToDouble(v -> v[1]).sorted().toArray();
                double[] ratio = rs.stream().mapToDouble(v -> v[2]).sorted().toArray();
                System.out.printf(
                        Locale.ROOT,
                        "%s: native %.2f GB/s, Java %.2f GB/s (medians), native / Java %.3f (median round; rounds %.3f-%.3f); "
                                + "load %s%n",
                        d,
                        nat[nat.length / 2],
                        java[java.length / 2],
                        ratio[ratio.length / 2],
                        ratio[0],
                        ratio[ratio.length - 1],
                        Files.readString(Path.of("/proc/loadavg")).split(" ")[0]);
            }
        }
    }

    /** Median seconds per call over one slice of calls, cycling through the weights. */
    private static double secondsPerCall(
            float[] x, int m, Linear[] ws, float[] y, Parallel par, boolean nat, double slice) {
        float[][] xs = {x};
        int[] ms = {m};
        float[][] ys = {y};
        Linear[] w1 = new Linear[1];
        List<Long> times = new ArrayList<>();
        long end = System.nanoTime() + (long) (slice * 1e9);
        int c = 0;
        while (System.nanoTime() < end || times.size() < 3) {
            w1[0] = ws[c++ % ws.length];
            long t0 = System.nanoTime();
            RowDotGemm.matmulGroup(xs, ms, w1, ys, par, RowDotGemm.BLOCK_4X4, nat);
            times.add(System.nanoTime() - t0);
        }
        long[] t = times.stream().mapToLong(Long::longValue).sorted().toArray();
        return t[t.length / 2] / 1e9;
    }

    private static Linear[] weights(Path f, DType dt, int n, int k, int copies) throws Exception {
        float[] w = GemmTest.randn(n * k, 42);
        SafetensorsWriter sw = new SafetensorsWriter();
        for (int c = 0; c < copies; c++) {
            if (dt == DType.F8_E4M3) {
                Fp8Blocks q = Fp8Blocks.quantize(w, n, k, 128, 128);
                sw.add("w" + c, DType.F8_E4M3, new long[] {n, k}, q.codes());
                sw.addFloats("s" + c, DType.F32, new long[] {q.scaleRows(), q.scaleCols()}, q.scaleInv());
            } else if (dt == DType.I32) {
                Int4Groups q = Int4Groups.quantize(w, n, k, 32);
                sw.add("w" + c + "_packed", DType.I32, new long[] {n, (k + 7) / 8}, q.packedBytes());
                sw.addFloats("w" + c + "_scale", DType.BF16, new long[] {n, (k + 31) / 32}, q.scales());
            } else {
                sw.addFloats("w" + c, dt, new long[] {n, k}, w);
            }
        }
        sw.write(f);
        SafetensorsFile sf = SafetensorsFile.open(f);
        Linear[] ws = new Linear[copies];
        for (int c = 0; c < copies; c++) {
            ws[c] = dt == DType.F8_E4M3
                    ? new Linear(sf.tensor("w" + c), sf.tensor("s" + c), 128, 128)
                    : dt == DType.I32
                            ? Linear.int4(
                                    "w" + c, sf.tensor("w" + c + "_packed"), sf.tensor("w" + c + "_scale"), n, k, 32)
                            : new Linear(sf.tensor("w" + c));
        }
        return ws;
    }
}
