package dev.scorch.engine.bench;

import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.generation.DecodingModel;
import dev.scorch.engine.generation.StageDecodingModel;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.KvCache;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.runtime.HeapAllocation;
import dev.scorch.engine.runtime.ProcessMemory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.ToLongFunction;

/**
 * Times greedy decoding with the MLA latent cache: prompts of {@code prompt} random tokens are prefilled,
 * then {@code steps} decode steps of the whole batch are timed per run. Reports decode tokens/s (median, min,
 * max over runs), the bytes of weights one step reads, the cache's bytes per token and the heap the timed steps
 * allocate per token, over all runs and in the median run (each run's caches take their whole storage before its prefill, as
 * a pooled cache would).
 *
 * <p>Weight bytes per step: every tensor but the embedding (looked up, not read whole) as the checkpoint stores it
 * ({@link #checkpointBytes}: BF16 values, FP8 codes and their scales, INT4 packed words and their group scales) —
 * attention (kv_b_proj too: the absorbed attention decodes it head by head from the checkpoint every step), dense MLPs,
 * shared experts, routers, norms, lm_head — plus the routed experts the step's tokens actually hit, averaged over the timed
 * steps: top_k per MoE layer at batch 1, up to all experts as the batch grows. The routed experts' share is reported
 * on its own ({@link Result#expertBytesPerStep}): the part that INT4 shrinks.
 */
public final class DecodeBenchmark {

    public record Result(
            int batch,
            int prompt,
            int steps,
            int threads,
            double medianTokensPerSec,
            double minTokensPerSec,
            double maxTokensPerSec,
            double medianStepSeconds,
            long weightBytesPerStep,
            long expertBytesPerStep,
            long cacheBytesPerToken,
            long peakRssBytes,
            double heapBytesPerToken,
            double heapBytesPerTokenMedianRun,
            int warmupRuns) {

        /** Weight bytes read per second at the median step time (batch 1: the memory-bandwidth use). */
        public double weightBytesPerSecond() {
            return weightBytesPerStep / medianStepSeconds;
        }
    }

    private DecodeBenchmark() {}

    /** Distinct (layer, expert) pairs of one step, counted without allocating (the timed loop measures the engine's heap). */
    static long distinctExperts(int[][] routes, boolean[] seen) {
        long hit = 0;
        for (int[] r : routes) {
            Arrays.fill(seen, false);
            for (int e : r) {
                hit += seen[e] ? 0 : 1;
                seen[e] = true;
            }
        }
        return hit;
    }

    /** The bytes one pass over each tensor reads as the model's checkpoint stores it (see the class comment). */
    public static ToLongFunction<WeightLayout.Spec> checkpointBytes(ModelWeights weights) {
        return spec -> spec.linearClass()
                ? weights.linear(spec.name()).weightBytes()
                : weights.tensor(spec.name()).info().byteSize();
    }

    /**
     * Times the decode steps; bytesOf gives the bytes a pass over a tensor reads ({@link #checkpointBytes}). With
     * untilJitQuiet, warm-up goes on past warmup runs until the JIT has gone quiet ({@link JitQuiet}): on a machine of
     * two cores, a compiler thread still working takes a share of the engine's cores from the timed steps; without it,
     * exactly warmup runs (dev/AbBench's slices, whose pairs share one JVM's warm-up).
     */
    public static Result run(
            DeepseekV3Model model,
            CpuOps ops,
            int batch,
            int prompt,
            int steps,
            int warmup,
            int runs,
            long seed,
            ToLongFunction<WeightLayout.Spec> bytesOf,
            boolean untilJitQuiet) {
        SplittableRandom rnd = new SplittableRandom(seed);
        long expertsHit = 0; // distinct (MoE layer, expert) pairs over the timed steps
        double[] secs = new double[runs];
        long heapBytes = 0; // allocated during the timed steps
        long[] runHeap = new long[runs]; // each run's
        // activations, kept from step to step as a generator keeps them
        StageDecodingModel decoding = new StageDecodingModel(model.on(ops));
        // filled by each step; one array for every run, as a generator keeps its step state from call to call
        int[][] routes = new int[model.numMoeLayers()][batch * model.config().numExpertsPerTok()];
        boolean[] seen = new boolean[model.config().nRoutedExperts()];
        JitQuiet jit = new JitQuiet();
        int warmupRuns = 0;
        boolean warm = false;
        for (int run = 0; run < runs; ) {
            warm = warm || (warmupRuns >= warmup && (!untilJitQuiet || jit.quiet()));
            List<int[]> prompts = new ArrayList<>();
            List<DecodingModel.Cache> caches = new ArrayList<>();
            for (int b = 0; b < batch; b++) {
                int[] t = new int[prompt];
                for (int i = 0; i < prompt; i++) {
                    t[i] = rnd.nextInt(model.vocabSize());
                }
                prompts.add(t);
                StageDecodingModel.StageCache cache =
                        (StageDecodingModel.StageCache) decoding.newCache(prompt + steps + 1);
                cache.kv()[0].reserve(prompt + steps + 1); // all its storage now: the timed steps allocate none of it
                caches.add(cache);
            }
            DecodingModel.Cache[] cacheArray = caches.toArray(new DecodingModel.Cache[0]);
            decoding.prefill(prompts, caches);
            int[] next = new int[batch];
            Arrays.fill(next, 1);
            long hit = 0;
            jit.begin();
            long heap0 = HeapAllocation.allocatedBytes();
            long t0 = System.nanoTime();
            for (int s = 0; s < steps; s++) {
                float[] logits = decoding.decode(next, cacheArray, routes); // [batch, vocab]
                hit += distinctExperts(routes, seen); // in warm-up runs too: the timed runs compile nothing new
                for (int b = 0; b < batch; b++) {
                    next[b] = LogSoftmax.argmax(logits, b * model.vocabSize(), model.vocabSize());
                }
            }
            long nanos = System.nanoTime() - t0;
            long heap = HeapAllocation.since(heap0);
            jit.end(nanos);
            if (warm) {
                secs[run] = nanos / 1e9;
                runHeap[run] = heap;
                heapBytes += heap;
                expertsHit += hit;
                run++;
            } else {
                warmupRuns++;
            }
        }
        Arrays.sort(secs);
        double median = runs % 2 == 1 ? secs[runs / 2] : (secs[runs / 2 - 1] + secs[runs / 2]) / 2;
        double tokens = (double) batch * steps;
        long weightBytes = 0;
        long expertBytes = 0; // one routed expert of one layer
        for (WeightLayout.Spec spec : WeightLayout.of(model.config())) {
            if (spec.kind() == WeightLayout.Kind.EMBEDDING) {
                continue;
            }
            long bytes = bytesOf.applyAsLong(spec);
            if (!spec.routedExpert()) {
                weightBytes += bytes;
            } else if (spec.name().contains(".experts.0.")) {
                expertBytes += bytes;
            }
        }
        expertBytes /= Math.max(1, model.numMoeLayers());
        long expertBytesPerStep = Math.round((double) expertsHit / ((double) runs * steps) * expertBytes);
        weightBytes += expertBytesPerStep;
        return new Result(
                batch,
                prompt,
                steps,
                ops.threads(),
                tokens / median,
                tokens / secs[runs - 1],
                tokens / secs[0],
                median / steps,
                weightBytes,
                expertBytesPerStep,
                KvCache.bytesPerToken(model.config()),
                ProcessMemory.peakRssBytes(),
                heapBytes / (tokens * runs),
                HeapAllocation.medianRun(runHeap) / tokens,
                warmupRuns);
    }
}
