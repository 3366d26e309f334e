package dev.scorch.engine.bench;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.kernels.CpuOps;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Scorch's GEMM timed in slices on command, so that bin/openblas-sgemm.py --paired can alternate it with numpy's
 * sgemm slice by slice: on a shared machine whose speed drifts over tens of seconds, a ratio of neighbouring
 * slices measures the kernels, not the neighbours. One command per line on stdin, one answer per line on stdout:
 * <pre>
 *   info                →  the JVM's name and version
 *   shape M K N DTYPE   →  ok                          (W [N, K] in DTYPE, fp32 x [M, K]; see GemmFixture)
 *   time SECONDS        →  MEDIAN_CALL_SECONDS CALLS   (matmul calls for about SECONDS, at least 3)
 *   quit
 * </pre>
 * Run through bin/jmh --main dev.scorch.engine.bench.GemmPairs THREADS (the JMH class path, Scorch's JVM flags).
 */
public final class GemmPairs {
  private GemmPairs() {}

  public static void main(String[] args) throws IOException {
    int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
    serve(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)),
        new PrintStream(System.out, true, StandardCharsets.UTF_8), threads);
  }

  /** Answers the commands of in on out until quit or the end of in. */
  static void serve(BufferedReader in, PrintStream out, int threads) throws IOException {
    GemmFixture gemm = null;
    try (CpuOps ops = new CpuOps(threads)) {
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        String[] cmd = line.trim().split("\\s+");
        switch (cmd[0]) {
          case "info" -> out.println(System.getProperty("java.vm.name") + " " + System.getProperty("java.vm.version"));
          case "shape" -> {
            if (gemm != null) {
              gemm.close();
            }
            gemm = new GemmFixture(Integer.parseInt(cmd[1]), Integer.parseInt(cmd[2]), Integer.parseInt(cmd[3]), DType.valueOf(cmd[4]));
            out.println("ok");
          }
          case "time" -> out.println(time(ops, gemm, Double.parseDouble(cmd[1])));
          case "quit" -> {
            return;
          }
          default -> throw new IllegalArgumentException("unknown command: " + line);
        }
      }
    } finally {
      if (gemm != null) {
        gemm.close();
      }
    }
  }

  /** "median_seconds calls": every call timed for about seconds (at least 3 calls). */
  private static String time(CpuOps ops, GemmFixture gemm, double seconds) {
    if (gemm == null) {
      throw new IllegalStateException("time before shape");
    }
    double[] calls = new double[64];
    int n = 0;
    long start = System.nanoTime();
    long budget = (long) (seconds * 1e9);
    while (n < 3 || System.nanoTime() - start < budget) {
      long t0 = System.nanoTime();
      ops.matmul(gemm.x, gemm.m, gemm.w, gemm.y);
      if (n == calls.length) {
        calls = Arrays.copyOf(calls, 2 * n);
      }
      calls[n++] = (System.nanoTime() - t0) * 1e-9;
    }
    double[] sorted = Arrays.copyOf(calls, n);
    Arrays.sort(sorted);
    return sorted[n / 2] + " " + n;
  }
}
