package dev.scorch.engine.gpu;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.model.WeightLayout;
import dev.scorch.engine.runtime.PackedBatch;

/**
 * DeepseekV3ForCausalLM on a {@link Device}: the same forward pass as {@code DeepseekV3Model} (its blocks'
 * parts in {@link GpuAttention}, {@link GpuMlp} and {@link GpuMoe}), with the weights
 * resident on the device (linears and the embedding table in the {@link GemmPrecision}'s dtype, the router gate
 * always in fp32 so expert choice matches the CPU's) and activations kept there between kernels. YaRN cos/sin
 * come from the CPU's {@link Rope}.
 *
 * <p>One forward runs at a time per model (the device has one stream and one scratch arena): callers on
 * several threads (Spark tasks sharing an executor's GPU) take turns.
 */
public final class GpuModel implements AutoCloseable {
    private final ModelConfig config;
    private final Device dev;
    private final GemmPrecision precision;
    private final DeviceWeights weights;
    private final Buf embedTokens; // [vocab, hidden]: rows are looked up (gathered), never multiplied
    private final Layer[] layers;
    private final Buf norm; // [hidden]
    private final Buf lmHead; // [vocab, hidden]
    private final Rope rope;
    private final long weightBytes;
    private final Arena floats;
    private final Arena ints;
    private final GpuPass pass;
    private Buf cosSin; // [positions, qk_rope_head_dim]
    private int cosSinPositions;

    /** One block: input RMSNorm → MLA → residual → post-attention RMSNorm → dense MLP or MoE → residual. */
    private record Layer(
            Buf inputLayernorm, GpuAttention selfAttn, Buf postAttentionLayernorm, GpuMlp mlp, GpuMoe moe) {}

    private GpuModel(ModelWeights w, Device dev, GemmPrecision precision) {
        this.config = w.config();
        this.dev = dev;
        this.precision = precision;
        long before = dev.freeBytes();
        weights = new DeviceWeights(w, dev, precision);
        embedTokens = weights.table("model.embed_tokens.weight");
        layers = new Layer[config.numHiddenLayers()];
        for (int i = 0; i < layers.length; i++) {
            String p = WeightLayout.layer(i);
            layers[i] = new Layer(
                    weights.vector(p + "input_layernorm.weight"),
                    new GpuAttention(weights, config, p + "self_attn.", i),
                    weights.vector(p + "post_attention_layernorm.weight"),
                    config.isMoeLayer(i) ? null : GpuMlp.load(weights, p + "mlp.", config.hiddenSize()),
                    config.isMoeLayer(i) ? new GpuMoe(weights, config, p + "mlp.") : null);
        }
        norm = weights.vector("model.norm.weight");
        lmHead = weights.linear("lm_head.weight");
        weightBytes = before - dev.freeBytes();
        rope = new Rope(config);
        floats = new Arena(dev, Buf.Kind.F32, 1 << 20);
        ints = new Arena(dev, Buf.Kind.I32, 1 << 16);
        pass = new GpuPass(dev, precision, floats, ints);
    }

    /** Uploads the model's weights to dev. */
    public static GpuModel load(ModelWeights w, Device dev, GemmPrecision precision) {
        return new GpuModel(w, dev, precision);
    }

    public ModelConfig config() {
        return config;
    }

    public Device device() {
        return dev;
    }

    public GemmPrecision precision() {
        return precision;
    }

    /** Device bytes the weights took. */
    public long weightBytes() {
        return weightBytes;
    }

    /** Device bytes of the scratch arenas now. */
    public long scratchBytes() {
        return floats.bytes() + ints.bytes();
    }

    /** A KV cache for one sequence of up to capacity tokens. */
    public GpuKvCache newCache(int capacity) {
        return new GpuKvCache(dev, config.numHiddenLayers(), capacity, config.kvLoraRank() + config.qkRopeHeadDim());
    }

    /**
     * Runs the decoder over batch and passes the final-normed hidden states [T, hidden] (device scratch, valid
     * until the next call) to then. caches, when not null, holds one cache per sequence, positions numbered from
     * its length; every token's latent and k_pe are appended, and a sequence whose cache held tokens attends over
     * all of it in the absorbed form ({@link GpuAttention}).
     * routes, when not null, is [moe layer][T * top_k] and receives each token's experts.
     */
    public <R> R forward(
            PackedBatch batch, GpuKvCache[] caches, int[][] routes, java.util.function.Function<Buf, R> then) {
        return forward(batch, caches, routes, then, null);
    }

    /** As {@link #forward(PackedBatch, GpuKvCache[], int[][], java.util.function.Function)}, calling boundary with l before layer l and with the layer count after the last (the benchmark's per-layer clock). */
    public synchronized <R> R forward(
            PackedBatch batch,
            GpuKvCache[] caches,
            int[][] routes,
            java.util.function.Function<Buf, R> then,
            java.util.function.IntConsumer boundary) {
        floats.reset();
        ints.reset();
        int t = batch.numTokens();
        int hidden = config.hiddenSize();
        // x [T, hidden] = embed_tokens[tokens]
        for (int i = 0; i < t; i++) {
            int id = batch.tokens()[i];
            if (id < 0 || id >= config.vocabSize()) {
                throw new IllegalArgumentException(
                        "token id " + id + " is outside the vocabulary [0, " + config.vocabSize() + ")");
            }
        }
        Buf tokens = ints.take(t);
        dev.write(tokens, batch.tokens(), 0, t);
        Buf x = floats.take((long) t * hidden);
        dev.gatherRows(embedTokens, tokens, t, hidden, x);
        AttentionBatch b = batch(batch, caches);
        int moeIndex = 0;
        for (int l = 0; l < layers.length; l++) {
            if (boundary != null) {
                boundary.accept(l);
            }
            Layer layer = layers[l];
            long floatMark = floats.mark(); // this layer's scratch goes back once its output is in x
            long intMark = ints.mark();
            // h = input_layernorm(x); x += self_attn(h)
            Buf h = floats.take((long) t * hidden);
            dev.rmsNorm(x, t, hidden, 0, hidden, layer.inputLayernorm(), (float) config.rmsNormEps(), h);
            dev.add(x, layer.selfAttn().forward(pass, h, b, caches, cosSin), (long) t * hidden);
            // h = post_attention_layernorm(x); x += mlp(h) or moe(h)
            dev.rmsNorm(x, t, hidden, 0, hidden, layer.postAttentionLayernorm(), (float) config.rmsNormEps(), h);
            Buf m;
            if (layer.moe() != null) {
                int[] r = routes == null ? null : (routes[moeIndex] = new int[t * config.numExpertsPerTok()]);
                m = layer.moe().forward(pass, h, t, r);
                moeIndex++;
            } else {
                m = layer.mlp().forward(pass, h, t);
            }
            dev.add(x, m, (long) t * hidden);
            floats.release(floatMark);
            ints.release(intMark);
        }
        if (boundary != null) {
            boundary.accept(layers.length);
        }
        if (caches != null) {
            for (int s = 0; s < caches.length; s++) {
                caches[s].advance(batch.seqLen()[s]);
            }
        }
        Buf out = floats.take((long) t * hidden);
        dev.rmsNorm(x, t, hidden, 0, hidden, norm, (float) config.rmsNormEps(), out);
        return then.apply(out);
    }

    /**
     * Positions, each query's key range among the batch's own tokens and the prefill form's query tiles (sequences
     * without cached tokens), on the device.
     */
    private AttentionBatch batch(PackedBatch batch, GpuKvCache[] caches) {
        int t = batch.numTokens();
        int n = batch.numSequences();
        if (caches != null && caches.length != n) {
            throw new IllegalArgumentException(n + " sequences but " + caches.length + " caches");
        }
        int[] keyStart = new int[t];
        int[] keyLen = new int[t];
        int maxPos = 0;
        for (int s = 0; s < n; s++) {
            int past = caches == null ? 0 : caches[s].length();
            if (caches != null) {
                caches[s].checkRoom(batch.seqLen()[s]);
            }
            for (int i = 0; i < batch.seqLen()[s]; i++) {
                int row = batch.seqStart()[s] + i;
                int pos = batch.positions()[row];
                if (pos != past + i) {
                    throw new IllegalArgumentException(
                            "sequence " + s + " token " + i + " has position " + pos + ", expected " + (past + i));
                }
                keyStart[row] = batch.seqStart()[s];
                keyLen[row] = i + 1; // causal, in the prefill form (only sequences without cached tokens use it)
                maxPos = Math.max(maxPos, pos);
            }
        }
        ensureCosSin(maxPos + 1);
        Buf positions = ints.take(t);
        dev.write(positions, batch.positions(), 0, t);
        Buf ks = ints.take(t);
        dev.write(ks, keyStart, 0, t);
        Buf kl = ints.take(t);
        dev.write(kl, keyLen, 0, t);
        // Prefill-form tiles: runs of up to ATTENTION_TILE consecutive queries of one sequence without cached tokens.
        int[] tiles = new int[2 * (t + n)];
        int numTiles = 0;
        for (int s = 0; s < n; s++) {
            if (caches != null && caches[s].length() > 0) {
                continue;
            }
            for (int i = 0; i < batch.seqLen()[s]; i += Device.ATTENTION_TILE) {
                tiles[2 * numTiles] = batch.seqStart()[s] + i;
                tiles[2 * numTiles++ + 1] = Math.min(Device.ATTENTION_TILE, batch.seqLen()[s] - i);
            }
        }
        Buf tb = ints.take(2L * numTiles);
        dev.write(tb, tiles, 0, 2 * numTiles);
        return new AttentionBatch(batch, positions, ks, kl, tb, numTiles);
    }

    private void ensureCosSin(int positions) {
        if (positions <= cosSinPositions) {
            return;
        }
        int n = Math.max(positions, Math.max(4096, 2 * cosSinPositions));
        int dim = config.qkRopeHeadDim();
        float[] table = new float[n * dim];
        float[] cs = new float[dim];
        for (int p = 0; p < n; p++) {
            rope.cosSin(p, cs);
            System.arraycopy(cs, 0, table, p * dim, dim);
        }
        if (cosSin != null) {
            dev.free(cosSin);
        }
        cosSin = dev.upload(table);
        cosSinPositions = n;
    }

    /** A scratch mark: {@link #releaseScratch} gives back what was taken after it (a logits chunk once read). */
    long[] markScratch() {
        return new long[] {floats.mark(), ints.mark()};
    }

    void releaseScratch(long[] mark) {
        floats.release(mark[0]);
        ints.release(mark[1]);
    }

    /**
     * logits [rows, vocab] = lm_head(hidden rows[j]) and their log-softmax stats ({@link Device#logSoftmaxStats})
     * for the given rows of hidden [T, hidden], as device scratch of the current forward.
     */
    Buf[] logits(Buf hidden, int[] rowIds, int[] targets) {
        int rows = rowIds.length;
        int h = config.hiddenSize();
        int vocab = config.vocabSize();
        Buf idx = ints.take(rows);
        dev.write(idx, rowIds, 0, rows);
        Buf tg = ints.take(rows);
        dev.write(tg, targets, 0, rows);
        Buf x = floats.take((long) rows * h);
        dev.gatherRows(hidden, idx, rows, h, x);
        Buf logits = floats.take((long) rows * vocab);
        dev.gemm(x, rows, h, lmHead, vocab, logits, precision);
        Buf stats = floats.take(3L * rows);
        dev.logSoftmaxStats(logits, rows, vocab, tg, stats);
        return new Buf[] {logits, stats};
    }

    /**
     * Prefill or decode with caches: runs batch (positions from each cache's length), appends to the caches, and
     * returns the next-token logits [sequences, vocab] of each sequence's last token, in fp32.
     */
    public synchronized float[] nextTokenLogits(PackedBatch batch, GpuKvCache[] caches) {
        int n = batch.numSequences();
        int vocab = config.vocabSize();
        return forward(batch, caches, null, hidden -> {
            int[] last = new int[n];
            int[] none = new int[n];
            for (int s = 0; s < n; s++) {
                last[s] = batch.seqStart()[s] + batch.seqLen()[s] - 1;
                none[s] = -1;
            }
            Buf logits = logits(hidden, last, none)[0];
            float[] out = new float[n * vocab];
            dev.read(logits, out, 0, out.length);
            return out;
        });
    }

    /** Frees the weights and scratch, then closes the device. */
    @Override
    public synchronized void close() {
        weights.free();
        if (cosSin != null) {
            dev.free(cosSin);
        }
        floats.close();
        ints.close();
        dev.close();
    }
}
