package dev.scorch.engine.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * The CPU's fp32 FMA peak as this JVM reaches it, measured: each thread runs chains of independent Vector API
 * fused multiply-adds on registers (no memory traffic), the best of a few rounds. A CPU has no published peak the
 * benchmark could look up (vCPUs may share cores, clocks boost), so the CPU's MFU is stated against this measured
 * figure, labelled as such. The bf16 modes' AVX512-BF16 dot products can run above it.
 */
public final class CpuPeak {
    private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
    private static final int CHAINS = 12; // independent accumulators: enough to hide the FMA latency on 2 ports

    private CpuPeak() {}

    /** The measured peak over threads threads, each running iterations FMA rounds per try; FLOP/s. */
    public static double measure(int threads, long iterations) {
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            double best = 0;
            for (int round = 0; round < 4; round++) { // the first rounds compile the loop
                List<Callable<Float>> jobs = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    jobs.add(() -> fmaChains(iterations));
                }
                long t0 = System.nanoTime();
                float sink = 0;
                for (Future<Float> f : pool.invokeAll(jobs)) {
                    sink += f.get();
                }
                double secs = (System.nanoTime() - t0) / 1e9;
                if (sink == 42.0f) {
                    System.out.print(""); // keeps the results live
                }
                best = Math.max(best, flops(threads, iterations) / secs);
            }
            return best;
        } catch (Exception e) {
            throw new IllegalStateException("measuring the CPU peak: " + e, e);
        } finally {
            pool.shutdownNow();
        }
    }

    /** FLOPs of one try: threads x iterations x chains x lanes x 2 (a multiply and an add per lane). */
    static double flops(int threads, long iterations) {
        return 2.0 * threads * iterations * CHAINS * S.length();
    }

    /** "fp32 FMA, 16 lanes, 2 threads". */
    public static String describe(int threads) {
        return String.format(
                Locale.ROOT,
                "fp32 FMA, %d lanes (%d-bit Vector API), %d thread(s)",
                S.length(),
                S.vectorBitSize(),
                threads);
    }

    private static float fmaChains(long iterations) {
        FloatVector m = FloatVector.broadcast(S, 0.999999f);
        FloatVector a = FloatVector.broadcast(S, 1e-7f);
        FloatVector c0 = FloatVector.broadcast(S, 0.1f);
        FloatVector c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0;
        for (long i = 0; i < iterations; i++) {
            c0 = c0.fma(m, a);
            c1 = c1.fma(m, a);
            c2 = c2.fma(m, a);
            c3 = c3.fma(m, a);
            c4 = c4.fma(m, a);
            c5 = c5.fma(m, a);
            c6 = c6.fma(m, a);
            c7 = c7.fma(m, a);
            c8 = c8.fma(m, a);
            c9 = c9.fma(m, a);
            c10 = c10.fma(m, a);
            c11 = c11.fma(m, a);
        }
        return c0.add(c1)
                .add(c2)
                .add(c3)
                .add(c4)
                .add(c5)
                .add(c6)
                .add(c7)
                .add(c8)
                .add(c9)
                .add(c10)
                .add(c11)
                .reduceLanes(jdk.incubator.vector.VectorOperators.ADD);
    }
}
