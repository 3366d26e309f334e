package dev.scorch.engine.generation;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.DeviceGraph;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.model.DecoderStage;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.GpuKvCache;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.model.GpuStages;
import dev.scorch.engine.model.KvCache;
import dev.scorch.engine.model.Pass;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * {@link DecodingModel} on any {@link GpuStages}: the CPU model ({@link DeepseekV3Model#on}), a {@link GpuModel} or a
 * {@link GpuPipeline}. Prefill and decode run through each sequence's KV caches (one per stage, on its device), a
 * pipeline's sequences in micro-batches that flow through its stages at once; a sequence's next-token logits are
 * lm_head of its last row, multiplied by the pass's rule for that row (a decode row as decode rows are). A decode step
 * on one micro-batch reuses its batch, micro-batch and logits from the step before while the batch size stays the same,
 * so on the CPU it allocates nothing. It serves one generator (one thread) at a time, and the logits {@link #decode}
 * returns are valid until the next call.
 */
public final class StageDecodingModel implements DecodingModel, GpuStages.Finish {
    private final GpuStages model;
    private final boolean graphs;
    private static final int[] ONE = {0, 1};
    // The call's: its micro-batches, the first sequence of each, and the logits [sequences, vocab] they go to.
    private final List<GpuStages.Micro> micro = new ArrayList<>();
    private int[] firstSeq;
    private float[] into;
    // A one-micro-batch decode step's, refilled while the batch size stays the same: its batch, caches and logits.
    private PackedBatch step;
    private LatentCache[][] stepCaches;
    private float[] stepLogits;
    private GpuStages.Micro stepMicro;

    /** Decoding on model; graphs as {@link DeviceGraph#GRAPHS}. */
    public StageDecodingModel(GpuStages model) {
        this(model, Boolean.getBoolean(DeviceGraph.GRAPHS));
    }

    /**
     * graphs: decode steps of a model on one device (one stage) as device graphs ({@link DecoderStage#decodeGraphed}),
     * one per batch size, when every sequence of the step has cached tokens on the device; the same bits as without.
     */
    public StageDecodingModel(GpuStages model, boolean graphs) {
        this.model = model;
        this.graphs = graphs && model.stages().size() == 1;
    }

    /** A sequence's KV caches, one per stage (the stage's layers, on its device). */
    public record StageCache(LatentCache[] kv) implements Cache {
        @Override
        public int length() {
            return kv[0].length();
        }

        @Override
        public void copyFrom(Cache src) {
            LatentCache[] from = ((StageCache) src).kv;
            for (int k = 0; k < kv.length; k++) {
                kv[k].copyFrom(from[k]);
            }
        }

        @Override
        public void close() {
            for (LatentCache c : kv) {
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
        return new StageCache(model.newCaches(maxTokens));
    }

    @Override
    public float[] prefill(List<int[]> prompts, List<Cache> caches) {
        return nextTokenLogits(prompts, caches.toArray(new Cache[0]));
    }

    @Override
    public float[] decode(int[] tokens, Cache[] caches) {
        return decode(tokens, caches, null);
    }

    /** As {@link #decode(int[], Cache[])}; routes ([moe layer][B * top_k]) receives each token's experts when not null. */
    public float[] decode(int[] tokens, Cache[] caches, int[][] routes) {
        int b = tokens.length;
        if (caches.length != b) {
            throw new IllegalArgumentException(b + " tokens but " + caches.length + " caches");
        }
        if (graphs && routes == null && b > 0 && onDevice(caches)) {
            GpuKvCache[] kv = new GpuKvCache[b];
            for (int s = 0; s < b; s++) {
                kv[s] = (GpuKvCache) ((StageCache) caches[s]).kv[0];
            }
            return model.stages().get(0).decodeGraphed(tokens, kv);
        }
        if (b == 0 || model.microBatches(b) > 1) {
            List<int[]> one = new ArrayList<>(b);
            for (int token : tokens) {
                one.add(new int[] {token});
            }
            return nextTokenLogits(one, caches);
        }
        if (step == null || step.numSequences() != b) {
            step = new PackedBatch(new int[b], new int[b], new int[b], new int[b]);
            stepCaches = new LatentCache[model.stages().size()][b];
            stepLogits = new float[b * config().vocabSize()];
        }
        for (int s = 0; s < b; s++) { // one token per sequence
            LatentCache[] kv = ((StageCache) caches[s]).kv;
            for (int k = 0; k < kv.length; k++) {
                stepCaches[k][s] = kv[k];
            }
            step.tokens()[s] = tokens[s];
            step.positions()[s] = kv[0].length();
            step.seqStart()[s] = s;
            step.seqLen()[s] = 1;
        }
        if (stepMicro == null || stepMicro.batch() != step || stepMicro.routes() != routes) {
            stepMicro = new GpuStages.Micro(step, stepCaches, routes);
        }
        micro.clear();
        micro.add(stepMicro);
        firstSeq = ONE;
        into = stepLogits;
        try {
            model.run(micro, this);
        } finally {
            micro.clear();
            for (LatentCache[] k : stepCaches) {
                Arrays.fill(k, null); // a finished sequence's cache is not kept alive here
            }
        }
        return stepLogits;
    }

    private static boolean onDevice(Cache[] caches) {
        for (Cache c : caches) {
            if (c.length() == 0 || !(((StageCache) c).kv[0] instanceof GpuKvCache)) {
                return false;
            }
        }
        return true;
    }

    /**
     * Runs seqs (sequence s continuing caches[s] from its length) in micro-batches of consecutive sequences and returns
     * each sequence's next-token logits [sequences, vocab].
     */
    private float[] nextTokenLogits(List<int[]> seqs, Cache[] caches) {
        int n = seqs.size();
        if (n == 0) {
            return new float[0];
        }
        int[] lengths = new int[n];
        for (int s = 0; s < n; s++) {
            lengths[s] = seqs.get(s).length;
        }
        int[] cut = GpuStages.cuts(lengths, model.microBatches(n));
        int stages = model.stages().size();
        micro.clear();
        for (int p = 0; p + 1 < cut.length; p++) {
            int m = cut[p + 1] - cut[p];
            LatentCache[][] kv = new LatentCache[stages][m];
            List<int[]> part = seqs.subList(cut[p], cut[p + 1]);
            for (int s = 0; s < m; s++) {
                LatentCache[] c = ((StageCache) caches[cut[p] + s]).kv;
                for (int k = 0; k < stages; k++) {
                    kv[k][s] = c[k];
                }
            }
            micro.add(new GpuStages.Micro(KvCache.pack(part, Arrays.asList(kv[0])), kv, null));
        }
        firstSeq = cut;
        float[] out = into = new float[n * config().vocabSize()];
        try {
            model.run(micro, this);
        } finally {
            micro.clear();
        }
        return out;
    }

    /** Micro-batch p's next-token logits into the call's. */
    @Override
    public void apply(int p, DecoderStage last, Pass pass, Buf hidden) {
        last.lastTokenLogits(pass, micro.get(p).batch(), hidden, into, firstSeq[p] * config().vocabSize());
    }
}
