package dev.scorch.engine.bench;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.generation.DecodingModel;
import dev.scorch.engine.generation.StageDecodingModel;
import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.model.GpuStages;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.IntConsumer;

/**
 * Where a prefill's time goes layer by layer, and a decode step's time, on any {@link GpuStages} (the CPU engine's
 * {@code DeepseekV3Model.on}, a {@code GpuModel}, a pipeline): timed scoring passes of a {@link Scorer} (as {@link
 * PrefillBenchmark}), then timed forward passes with a clock at every layer boundary (each boundary waits for the
 * device to finish the layer before it reads the clock), then greedy decode steps of a batch through a {@link
 * StageDecodingModel}. The medians over the runs are the result; the time outside the layers (embedding, final norm, lm_head,
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

    /** Accumulates each layer's time from boundary to boundary (the forward waits for its device before each call). */
    static final class LayerClock implements IntConsumer {
        final long[] nanos;
        private long last;

        LayerClock(int layers) {
            nanos = new long[layers];
        }

        @Override
        public void accept(int boundary) {
            long now = System.nanoTime();
            if (boundary > 0) {
                nanos[boundary - 1] += now - last;
            }
            last = now;
        }
    }

    private LayerBenchmark() {}

    public static Result run(
            GpuStages model, int batch, int seq, int warmup, int runs, int decodeBatch, int decodeSteps, long seed) {
        ModelConfig c = model.config();
        Scorer scorer = new Scorer(model);
        BatchScores scores = new BatchScores();
        List<ScoreRequest> reqs = PrefillBenchmark.randomRequests(c.vocabSize(), batch, seq, seed);
        List<int[]> seqs = new ArrayList<>();
        for (ScoreRequest r : reqs) {
            seqs.add(r.tokens());
        }
        PackedBatch packed = PackedBatch.of(seqs);
        for (int i = 0; i < warmup; i++) {
            scorer.score(reqs, scores);
        }
        double[] score = new double[runs];
        double[][] layers = new double[c.numHiddenLayers()][runs];
        for (int i = 0; i < runs; i++) {
            long t0 = System.nanoTime();
            scorer.score(reqs, scores);
            score[i] = (System.nanoTime() - t0) / 1e9;
        }
        for (int i = 0; i < runs; i++) {
            LayerClock clock = new LayerClock(c.numHiddenLayers());
            model.run(List.of(new GpuStages.Micro(packed, null, null, clock)), (micro, last, pass, hidden) -> {});
            for (int l = 0; l < layers.length; l++) {
                layers[l][i] = clock.nanos[l] / 1e9;
            }
        }
        double[] layerMedians = new double[layers.length];
        for (int l = 0; l < layers.length; l++) {
            layerMedians[l] = median(layers[l]);
        }
        double step = decodeSteps > 0
                ? decodeStepSeconds(new StageDecodingModel(model), decodeBatch, seq, decodeSteps, seed + 1)
                : Double.NaN;
        return new Result(batch, seq, median(score), layerMedians, decodeBatch, step);
    }

    /** The median of xs (the mean of the middle two for an even count); xs is left as it is. */
    public static double median(double[] xs) {
        double[] s = xs.clone();
        Arrays.sort(s);
        int n = s.length;
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    /** The median time of one greedy decode step of batch sequences after prompt-token random prompts. */
    public static double decodeStepSeconds(DecodingModel decoding, int batch, int prompt, int steps, long seed) {
        int vocab = decoding.config().vocabSize();
        List<int[]> prompts = new ArrayList<>();
        List<DecodingModel.Cache> caches = new ArrayList<>();
        try {
            for (ScoreRequest r : PrefillBenchmark.randomRequests(vocab, batch, prompt, seed)) {
                prompts.add(r.tokens());
                caches.add(decoding.newCache(prompt + steps));
            }
            DecodingModel.Cache[] cacheArray = caches.toArray(new DecodingModel.Cache[0]);
            float[] logits = decoding.prefill(prompts, caches);
            int[] next = new int[batch];
            double[] secs = new double[steps];
            for (int s = 0; s < steps; s++) {
                for (int b = 0; b < batch; b++) {
                    next[b] = LogSoftmax.argmax(logits, b * vocab, vocab);
                }
                long t0 = System.nanoTime();
                logits = decoding.decode(next, cacheArray);
                secs[s] = (System.nanoTime() - t0) / 1e9;
            }
            return median(secs);
        } finally {
            for (DecodingModel.Cache k : caches) {
                k.close();
            }
        }
    }
}
