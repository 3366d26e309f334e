package dev.scorch.engine.bench;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.runtime.HeapAllocation;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/**
 * Scorch's GEMM, or one prefill of a model, timed on command, so that dev/gemm-paired and dev/prefill-paired can
 * alternate it with numpy's sgemm slice by slice: on a shared machine whose speed drifts over tens of seconds, a ratio
 * of neighbouring slices measures the engine, not the neighbours. One command per line on stdin, one answer per line
 * on stdout:
 * <pre>
 *   info                       →  the JVM's name and version, and the GEMM kernel it runs
 *   shape M K N DTYPE          →  ok                          (W [N, K] in DTYPE, fp32 x [M, K]; see GemmFixture)
 *   time SECONDS               →  MEDIAN_CALL_SECONDS CALLS   (matmul calls for about SECONDS, at least 3)
 *   decode SECONDS             →  MEDIAN_CALL_SECONDS CALLS   (as time, of matmulDecode: decode steps' GEMM)
 *   prefill MODEL BATCH SEQ    →  ok MODEL_FLOPS              (BATCH random sequences of SEQ tokens, as bench scores them)
 *   run                        →  SECONDS HEAP_BYTES          (one prefill, scored into a kept BatchScores)
 *   prop KEY VALUE             →  ok                          (a system property: A/B runs of a setting the code
 *                                                                 under test reads per call, alternating in one JVM)
 *   precision MODE             →  ok                          (GEMMs and prefills from now on in CpuPrecision MODE:
 *                                                                 fp32, bf16x3, bf16x2, bf16)
 *   quit
 * </pre>
 * Run through dev/jmh --main dev.scorch.engine.bench.EnginePairs THREADS (the JMH class path, Scorch's JVM flags).
 */
public final class EnginePairs {
    private EnginePairs() {}

    public static void main(String[] args) throws IOException {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        serve(
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)),
                new PrintStream(System.out, true, StandardCharsets.UTF_8),
                threads);
    }

    /** Answers the commands of in on out until quit or the end of in. */
    static void serve(BufferedReader in, PrintStream out, int threads) throws IOException {
        GemmFixture gemm = null;
        Prefill prefill = null;
        CpuOps ops = new CpuOps(threads);
        try {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                String[] cmd = line.trim().split("\\s+");
                switch (cmd[0]) {
                    case "info" ->
                        out.println(System.getProperty("java.vm.name") + " " + System.getProperty("java.vm.version")
                                + ", GEMM " + KernelSelection.current().prefillGemm());
                    case "shape" -> {
                        if (gemm != null) {
                            gemm.close();
                        }
                        gemm = new GemmFixture(
                                Integer.parseInt(cmd[1]),
                                Integer.parseInt(cmd[2]),
                                Integer.parseInt(cmd[3]),
                                DType.valueOf(cmd[4]));
                        out.println("ok");
                    }
                    case "prop" -> {
                        System.setProperty(cmd[1], cmd[2]);
                        out.println("ok");
                    }
                    case "precision" -> {
                        ops.close();
                        ops = new CpuOps(threads, CpuPrecision.parse(cmd[1]));
                        if (prefill != null) {
                            prefill = new Prefill(prefill.model, ops, prefill.batch, prefill.seq);
                        }
                        out.println("ok");
                    }
                    case "time" -> out.println(time(ops, gemm, Double.parseDouble(cmd[1]), false));
                    case "decode" -> out.println(time(ops, gemm, Double.parseDouble(cmd[1]), true));
                    case "prefill" -> {
                        prefill = new Prefill(
                                DeepseekV3Model.load(Path.of(cmd[1])),
                                ops,
                                Integer.parseInt(cmd[2]),
                                Integer.parseInt(cmd[3]));
                        out.println("ok " + prefill.flops);
                    }
                    case "run" -> {
                        if (prefill == null) {
                            throw new IllegalStateException("run before prefill");
                        }
                        out.println(prefill.run());
                    }
                    case "quit" -> {
                        return;
                    }
                    default -> throw new IllegalArgumentException("unknown command: " + line);
                }
            }
        } finally {
            ops.close();
            if (gemm != null) {
                gemm.close();
            }
        }
    }

    /** "median_seconds calls": every call (matmul, or matmulDecode) timed for about seconds (at least 3 calls). */
    private static String time(CpuOps ops, GemmFixture gemm, double seconds, boolean decode) {
        if (gemm == null) {
            throw new IllegalStateException("time before shape");
        }
        double[] calls = new double[64];
        int n = 0;
        long start = System.nanoTime();
        long budget = (long) (seconds * 1e9);
        while (n < 3 || System.nanoTime() - start < budget) {
            long t0 = System.nanoTime();
            if (decode) {
                ops.matmulDecode(gemm.x, gemm.m, gemm.w, gemm.y);
            } else {
                ops.matmul(gemm.x, gemm.m, gemm.w, gemm.y);
            }
            if (n == calls.length) {
                calls = Arrays.copyOf(calls, 2 * n);
            }
            calls[n++] = (System.nanoTime() - t0) * 1e-9;
        }
        double[] sorted = Arrays.copyOf(calls, n);
        Arrays.sort(sorted);
        return sorted[n / 2] + " " + n;
    }

    /** One prefill of batch × seq random tokens, as {@link PrefillBenchmark} times it: a kept scorer and BatchScores. */
    private static final class Prefill {
        final DeepseekV3Model model;
        final int batch;
        final int seq;
        final Scorer scorer;
        final List<ScoreRequest> requests;
        final BatchScores scores = new BatchScores();
        final double flops;

        Prefill(DeepseekV3Model model, CpuOps ops, int batch, int seq) {
            this.model = model;
            this.batch = batch;
            this.seq = seq;
            scorer = new Scorer(model.on(ops));
            requests = PrefillBenchmark.randomRequests(model.vocabSize(), batch, seq, 0);
            flops = PrefillBenchmark.modelFlops(model.config(), batch, seq);
        }

        /** "seconds heap_bytes" of one prefill. */
        String run() {
            long heap0 = HeapAllocation.allocatedBytes();
            long t0 = System.nanoTime();
            scorer.score(requests, scores);
            double secs = (System.nanoTime() - t0) * 1e-9;
            return secs + " " + HeapAllocation.since(heap0);
        }
    }
}
