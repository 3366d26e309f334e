package dev.scorch.engine.bench;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.GpuKvCache;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.IntConsumer;

/**
 * Where a prefill's time goes layer by layer, and a decode step's time, on the CPU engine or a {@link GpuModel}: timed
 * scoring passes (as {@link PrefillBenchmark}), then timed forward passes with a clock at every layer boundary (on a
 * device, each boundary waits for the device to finish the layer before it reads the clock), then greedy decode steps
 * of a batch. The medians over the runs are the result; the time outside the layers (embedding, final norm, lm_head,
 * log-softmax) is the scoring pass's median less the layers' medians.
 */
public final class LayerBenchmark {

    /**
     * @param scoreSeconds       the median scoring pass
     * @param layerSeconds       each layer's median share of a forward pass
     * @param decodeStepSeconds  the median decode step of decodeBatch sequences
     */
    public record Result(
            int batch, int seq, double scoreSeconds, double[] layerSeconds, int decodeBatch, double decodeStepSeconds) {

        /** The scoring pass's time outside the layers; 0 where noise makes the layers' sum the larger. */
        public double restSeconds() {
            return Math.max(0, scoreSeconds - Arrays.stream(layerSeconds).sum());
        }

        /** The mean over the layers that are (moe) or are not (!moe) MoE layers of config; NaN where there are none. */
        public double meanLayerSeconds(ModelConfig c, boolean moe) {
            double sum = 0;
            int n = 0;
            for (int l = 0; l < layerSeconds.length; l++) {
                if (c.isMoeLayer(l) == moe) {
                    sum += layerSeconds[l];
                    n++;
                }
            }
            return n == 0 ? Double.NaN : sum / n;
        }
    }

    /** What is benchmarked: the CPU engine or a GPU model. */
    public interface Target {
        ModelConfig config();

        /** One scoring pass of reqs. */
        void score(List<ScoreRequest> reqs);

        /** One forward pass of batch, boundary called at every layer boundary once the work before it is done. */
        void forward(PackedBatch batch, IntConsumer boundary);

        /** The median time of one greedy decode step of batch sequences after prompt-token prompts. */
        double decodeStepSeconds(int batch, int prompt, int steps, long seed);
    }

    /** Accumulates each layer's time from boundary to boundary; sync runs before each reading (a device's wait). */
    static final class LayerClock implements IntConsumer {
        final long[] nanos;
        private final Runnable sync;
        private long last;

        LayerClock(int layers, Runnable sync) {
            nanos = new long[layers];
            this.sync = sync;
        }

        @Override
        public void accept(int boundary) {
            sync.run();
            long now = System.nanoTime();
            if (boundary > 0) {
                nanos[boundary - 1] += now - last;
            }
            last = now;
        }
    }

    private LayerBenchmark() {}

    public static Result run(
            Target target, int batch, int seq, int warmup, int runs, int decodeBatch, int decodeSteps, long seed) {
        ModelConfig c = target.config();
        List<ScoreRequest> reqs = PrefillBenchmark.randomRequests(c.vocabSize(), batch, seq, seed);
        List<int[]> seqs = new ArrayList<>();
        for (ScoreRequest r : reqs) {
            seqs.add(r.tokens());
        }
        PackedBatch packed = PackedBatch.of(seqs);
        for (int i = 0; i < warmup; i++) {
            target.score(reqs);
        }
        double[] score = new double[runs];
        double[][] layers = new double[c.numHiddenLayers()][runs];
        for (int i = 0; i < runs; i++) {
            long t0 = System.nanoTime();
            target.score(reqs);
            score[i] = (System.nanoTime() - t0) / 1e9;
        }
        for (int i = 0; i < runs; i++) {
            LayerClock clock = new LayerClock(c.numHiddenLayers(), target instanceof Gpu g ? g.sync() : () -> {});
            target.forward(packed, clock);
            for (int l = 0; l < layers.length; l++) {
                layers[l][i] = clock.nanos[l] / 1e9;
            }
        }
        double[] layerMedians = new double[layers.length];
        for (int l = 0; l < layers.length; l++) {
            layerMedians[l] = median(layers[l]);
        }
        double step = decodeSteps > 0 ? target.decodeStepSeconds(decodeBatch, seq, decodeSteps, seed + 1) : Double.NaN;
        return new Result(batch, seq, median(score), layerMedians, decodeBatch, step);
    }

    /** The median of xs (the mean of the middle two for an even count); xs is left as it is. */
    public static double median(double[] xs) {
        double[] s = xs.clone();
        Arrays.sort(s);
        int n = s.length;
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    /** The CPU engine: {@link Scorer} for scoring, {@link DecodeBenchmark}'s steps for decode. */
    public record Cpu(DeepseekV3Model model, Ops ops, Workspace ws, Scorer scorer, BatchScores scores)
            implements Target {
        public Cpu(DeepseekV3Model model, Ops ops) {
            this(model, ops, new Workspace(), new Scorer(model.on(ops)), new BatchScores());
        }

        @Override
        public ModelConfig config() {
            return model.config();
        }

        @Override
        public void score(List<ScoreRequest> reqs) {
            scorer.score(reqs, scores);
        }

        @Override
        public void forward(PackedBatch batch, IntConsumer boundary) {
            model.forward(batch, ops, ws, boundary);
        }

        @Override
        public double decodeStepSeconds(int batch, int prompt, int steps, long seed) {
            return DecodeBenchmark.run(model, ops, batch, prompt, steps, 0, 1, seed, spec -> spec.numel() * 2)
                    .medianStepSeconds();
        }
    }

    /** A {@link GpuModel} (on a CUDA device, or on HostDevice, its plain-Java twin): {@link Scorer}, nextTokenLogits. */
    public record Gpu(GpuModel model, Scorer scorer) implements Target {
        public Gpu(GpuModel model) {
            this(model, new Scorer(model));
        }

        Runnable sync() {
            return model.device()::synchronize;
        }

        @Override
        public ModelConfig config() {
            return model.config();
        }

        @Override
        public void score(List<ScoreRequest> reqs) {
            scorer.score(reqs, new BatchScores());
        }

        @Override
        public void forward(PackedBatch batch, IntConsumer boundary) {
            model.forward(batch, null, null, hidden -> null, boundary);
        }

        @Override
        public double decodeStepSeconds(int batch, int prompt, int steps, long seed) {
            ModelConfig c = model.config();
            List<ScoreRequest> ps = PrefillBenchmark.randomRequests(c.vocabSize(), batch, prompt, seed);
            GpuKvCache[] caches = new GpuKvCache[batch];
            List<int[]> seqs = new ArrayList<>();
            for (int b = 0; b < batch; b++) {
                caches[b] = model.newCache(prompt + steps);
                seqs.add(ps.get(b).tokens());
            }
            try {
                float[] logits = model.nextTokenLogits(PackedBatch.of(seqs), caches);
                double[] secs = new double[steps];
                for (int s = 0; s < steps; s++) {
                    PackedBatch step = GpuKvCache.greedyStep(logits, c.vocabSize(), caches);
                    long t0 = System.nanoTime();
                    logits = model.nextTokenLogits(step, caches);
                    secs[s] = (System.nanoTime() - t0) / 1e9;
                }
                return median(secs);
            } finally {
                for (GpuKvCache k : caches) {
                    k.close();
                }
            }
        }
    }
}
