package dev.scorch.engine.generation;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.DeviceGraph;
import dev.scorch.engine.model.DecoderStage;
import dev.scorch.engine.model.GpuKvCache;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.model.GpuStages;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.ArrayList;
import java.util.List;

/**
 * {@link DecodingModel} on a {@link GpuModel} or a {@link GpuPipeline}: prefill and decode through device KV caches
 * (one per stage per sequence), a pipeline's sequences in micro-batches that flow through its stages at once.
 */
public final class GpuDecodingModel implements DecodingModel {
    private final GpuStages model;
    private final boolean graphs;

    /**
     * Decoding on a {@link GpuModel}, a {@link GpuPipeline} or another chain of stages; graphs as {@link
     * DeviceGraph#GRAPHS}.
     */
    public GpuDecodingModel(GpuStages model) {
        this(model, Boolean.getBoolean(DeviceGraph.GRAPHS));
    }

    /**
     * graphs: decode steps of a model on one device (one stage) as device graphs ({@link DecoderStage#decodeGraphed}),
     * one per batch size, when every sequence of the step has cached tokens; the same bits as without.
     */
    public GpuDecodingModel(GpuStages model, boolean graphs) {
        this.model = model;
        this.graphs = graphs && model.stages().size() == 1;
    }

    /** A sequence's device KV caches, one per stage (the stage's layers, on its device). */
    private record DeviceCache(GpuKvCache[] kv) implements Cache {
        @Override
        public int length() {
            return kv[0].length();
        }

        @Override
        public void copyFrom(Cache src) {
            GpuKvCache[] from = ((DeviceCache) src).kv;
            for (int k = 0; k < kv.length; k++) {
                kv[k].copyFrom(from[k]);
            }
        }

        @Override
        public void close() {
            for (GpuKvCache c : kv) {
                c.close();
            }
        }
    }

    @Override
    public ModelConfig config() {
        return model.config();
    }

    @Override
    public Cache newCache(int maxTokens) {
        return new DeviceCache(model.newCaches(maxTokens));
    }

    @Override
    public float[] prefill(List<int[]> prompts, List<Cache> caches) {
        return nextTokenLogits(prompts, caches.toArray(new Cache[0]));
    }

    @Override
    public float[] decode(int[] tokens, Cache[] caches) {
        if (graphs && tokens.length > 0 && java.util.Arrays.stream(caches).allMatch(c -> c.length() > 0)) {
            GpuKvCache[] kv = new GpuKvCache[caches.length];
            for (int s = 0; s < kv.length; s++) {
                kv[s] = kv(caches[s]);
            }
            return model.stages().get(0).decodeGraphed(tokens, kv);
        }
        List<int[]> one = new ArrayList<>(tokens.length);
        for (int token : tokens) {
            one.add(new int[] {token});
        }
        return nextTokenLogits(one, caches);
    }

    /**
     * Runs seqs (sequence s continuing caches[s] from its length) in micro-batches of consecutive sequences and returns
     * each sequence's next-token logits [sequences, vocab].
     */
    private float[] nextTokenLogits(List<int[]> seqs, Cache[] caches) {
        int n = seqs.size();
        int vocab = model.config().vocabSize();
        if (n == 0) {
            return new float[0];
        }
        int[] lengths = new int[n];
        for (int s = 0; s < n; s++) {
            lengths[s] = seqs.get(s).length;
        }
        int[] cut = GpuStages.cuts(lengths, model.microBatches(n));
        List<GpuStages.Micro> micro = new ArrayList<>();
        for (int p = 0; p + 1 < cut.length; p++) {
            int m = cut[p + 1] - cut[p];
            GpuKvCache[][] kv = new GpuKvCache[m][];
            int tokens = 0;
            for (int s = 0; s < m; s++) {
                kv[s] = ((DeviceCache) caches[cut[p] + s]).kv;
                tokens += lengths[cut[p] + s];
            }
            int[] ids = new int[tokens];
            int[] pos = new int[tokens];
            int[] start = new int[m];
            int[] len = new int[m];
            for (int s = 0, row = 0; s < m; s++) {
                int[] seq = seqs.get(cut[p] + s);
                int past = kv[s][0].length();
                start[s] = row;
                len[s] = seq.length;
                for (int i = 0; i < seq.length; i++, row++) {
                    ids[row] = seq[i];
                    pos[row] = past + i;
                }
            }
            micro.add(new GpuStages.Micro(new PackedBatch(ids, pos, start, len), kv, null));
        }
        List<float[]> parts = model.run(
                micro, (p, last, hidden) -> last.lastTokenLogits(micro.get(p).batch(), hidden));
        float[] out = new float[n * vocab];
        for (int p = 0; p < parts.size(); p++) {
            System.arraycopy(parts.get(p), 0, out, cut[p] * vocab, parts.get(p).length);
        }
        return out;
    }

    /** The device cache of one of this model's caches (a one-stage model's). */
    static GpuKvCache kv(Cache cache) {
        return ((DeviceCache) cache).kv[0];
    }
}
