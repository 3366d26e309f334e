package dev.scorch.engine.model;

import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.DecodeRows;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.device.Mlp;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.function.Function;
import java.util.function.IntConsumer;

/**
 * Decoder layers [first, end) of DeepseekV3ForCausalLM on one {@link Device}: the forward pass, written once for every
 * device (its blocks' parts in {@link MlaAttention}, {@link Mlp} and {@link Moe}). On a GPU the weights are
 * resident on the device (linears and the embedding table in the {@link GemmPrecision}'s dtype, the router gate always
 * in fp32 so expert choice matches the CPU's) and activations stay there between kernels; on a {@code CpuDevice} the
 * weights are the checkpoint's mapped tensors. YaRN cos/sin come from {@link Rope}. The first stage (from layer 0)
 * holds embed_tokens and starts from token ids; the last (to the last layer) holds model.norm and lm_head and hands on
 * final-normed hidden states. The CPU's {@code DeepseekV3Model} and a GPU's {@link GpuModel} are the one stage of all
 * the layers; a {@link GpuPipeline} chains stages on several devices.
 *
 * <p>The forward without a {@link Pass} runs one at a time per stage (a GPU has one stream and this stage's one pass):
 * callers on several threads take turns. The CPU model passes each workspace's own.
 */
public final class DecoderStage implements AutoCloseable {
    private final ModelConfig config;
    private final Device dev;
    private final GemmPrecision precision;
    private final int first;
    private final int end;
    private final int firstMoe; // MoE layers before first: this stage's first MoE layer's index in routes
    private final DeviceWeights weights;
    private final Buf embedTokens; // [vocab, hidden], first stage only: rows are looked up (gathered), never multiplied
    private final Layer[] layers;
    private final Buf norm; // [hidden], last stage only
    private final Buf lmHead; // [vocab, hidden], last stage only
    private final Rope rope;
    private final long weightBytes;
    private final Pass own; // the pass of the forward without a Pass of its own
    private DecodeGraphs graphs; // decode steps as device graphs, once asked for

    /** One block: input RMSNorm → MLA → residual → post-attention RMSNorm → dense MLP or MoE → residual. */
    private record Layer(Buf inputLayernorm, MlaAttention selfAttn, Buf postAttentionLayernorm, Mlp mlp, Moe moe) {}

    private DecoderStage(
            ModelWeights w, Device dev, GemmPrecision precision, int first, int end, boolean embedding, boolean head) {
        this.config = w.config();
        int n = config.numHiddenLayers();
        if ((embedding && first != 0) || (head && end != n)) {
            throw new IllegalArgumentException(
                    "layers [" + first + ", " + end + ") of " + n + ": only a stage from layer 0"
                            + " holds embed_tokens and only a stage to the last layer model.norm and lm_head");
        }
        if (first < 0 || end > n || first > end) {
            throw new IllegalArgumentException("a stage holds layers [first, end) with 0 <= first <= end <= " + n
                    + ", got [" + first + ", " + end + ")");
        }
        this.dev = dev;
        this.precision = precision;
        this.first = first;
        this.end = end;
        int moe = 0;
        for (int l = 0; l < first; l++) {
            moe += config.isMoeLayer(l) ? 1 : 0;
        }
        firstMoe = moe;
        long before = dev.freeBytes();
        weights = new DeviceWeights(w, dev, precision);
        try {
            embedTokens = embedding ? weights.table("model.embed_tokens.weight") : null;
            layers = new Layer[end - first];
            for (int i = first; i < end; i++) {
                String p = WeightLayout.layer(i);
                layers[i - first] = new Layer(
                        weights.vector(p + "input_layernorm.weight"),
                        new MlaAttention(weights, config, p + "self_attn.", i - first), // cache layer i - first
                        weights.vector(p + "post_attention_layernorm.weight"),
                        config.isMoeLayer(i) ? null : weights.mlp(p + "mlp.", config.hiddenSize()),
                        config.isMoeLayer(i) ? new Moe(weights, config, p + "mlp.") : null);
            }
            norm = head ? weights.vector("model.norm.weight") : null;
            lmHead = head ? weights.linear("lm_head.weight") : null;
        } catch (RuntimeException | Error e) {
            weights.free();
            throw e;
        }
        weightBytes = before - dev.freeBytes();
        rope = new Rope(config);
        own = new Pass(dev);
    }

    /**
     * Uploads layers [first, end) of the model to dev, with embed_tokens when first is 0 and model.norm and lm_head when
     * end is num_hidden_layers.
     */
    public static DecoderStage load(ModelWeights w, Device dev, GemmPrecision precision, int first, int end) {
        return load(w, dev, precision, first, end, first == 0, end == w.config().numHiddenLayers());
    }

    /**
     * Uploads layers [first, end) of the model to dev, with embed_tokens when embedding (first must be 0) and model.norm
     * and lm_head when head (end must be num_hidden_layers): a stage of no layers next to one that starts at layer 0 or
     * ends at the last layer holds the embedding or the head alone.
     */
    public static DecoderStage load(
            ModelWeights w, Device dev, GemmPrecision precision, int first, int end, boolean embedding, boolean head) {
        return new DecoderStage(w, dev, precision, first, end, embedding, head);
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

    /** The first layer this stage holds. */
    public int first() {
        return first;
    }

    /** One past the last layer this stage holds. */
    public int end() {
        return end;
    }

    /** Whether this stage starts from token ids (holds embed_tokens). */
    public boolean isFirst() {
        return embedTokens != null;
    }

    /** Whether this stage ends the model (holds model.norm and lm_head). */
    public boolean isLast() {
        return lmHead != null;
    }

    /** Device bytes the weights took. */
    public long weightBytes() {
        return weightBytes;
    }

    /** Device bytes of the scratch arenas now. */
    public long scratchBytes() {
        return own.bytes() + (graphs == null ? 0 : graphs.bytes());
    }

    /** A KV cache of this stage's layers for one sequence of up to capacity tokens. */
    public GpuKvCache newCache(int capacity) {
        return new GpuKvCache(dev, end - first, capacity, config.kvLoraRank() + config.qkRopeHeadDim());
    }

    /**
     * What one forward runs: this stage's layers over batch. caches, when not null, holds one cache of this stage's
     * layers per sequence ({@link #newCache}), positions numbered from its length; every token's latent and k_pe are
     * appended, and a sequence whose cache held tokens attends over all of it in the absorbed form ({@link
     * MlaAttention}). routes, when not null, is [model's MoE layer][T * top_k] and receives each token's experts in this
     * stage's MoE layers' rows (a pipeline's stages fill one routes array between them). The incoming hidden states [T,
     * hidden] come from the stage before, in fp32 from the host (in) or, handed, a buffer on this stage's device ({@link
     * Device#copyTo}): at most one of them, none at the first stage (which starts from batch's token ids). boundary,
     * when not null, is called with the model's layer index l before layer l and with end after the last, each time
     * once the device has finished the work before it (the benchmark's per-layer clock).
     */
    public record Request(
            PackedBatch batch, LatentCache[] caches, int[][] routes, float[] in, Buf handed, IntConsumer boundary) {
        /** No hidden states handed on this stage's device, and no clock. */
        public Request(PackedBatch batch, LatentCache[] caches, int[][] routes, float[] in) {
            this(batch, caches, routes, in, null, null);
        }
    }

    /** hidden [T, hidden] (a forward's output on this device) read back to the host. */
    public float[] read(Buf hidden) {
        float[] out = new float[Math.toIntExact(hidden.length())];
        dev.read(hidden, out, 0, out.length);
        return out;
    }

    /** {@link #forward(Pass, Request, Function)} on this stage's own pass, one call at a time. */
    public synchronized <R> R forward(Request r, Function<Buf, R> then) {
        return forward(own, r, then);
    }

    /**
     * Runs r on pass's device with its arenas (the caller's: one forward at a time per pass) and passes the outgoing
     * hidden states [T, hidden] (pass's scratch, valid until its next forward; final-normed at the last stage) to then,
     * which runs before any other forward on pass can start. A stage's weights serve several passes at once only where
     * they are host memory (the CPU device's).
     */
    public <R> R forward(Pass pass, Request r, Function<Buf, R> then) {
        PackedBatch batch = r.batch();
        LatentCache[] caches = r.caches();
        float[] in = r.in();
        Buf handed = r.handed();
        Device dev = pass.dev;
        Arena floats = pass.floats;
        Arena ints = pass.ints;
        floats.reset();
        ints.reset();
        int t = batch.numTokens();
        int hidden = config.hiddenSize();
        Buf x = floats.take((long) t * hidden);
        if (embedTokens != null) {
            if (in != null || handed != null) {
                throw new IllegalArgumentException("the first stage starts from token ids, not hidden states");
            }
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
            dev.gatherRows(embedTokens, tokens, t, hidden, x);
        } else {
            long got = in != null ? in.length : handed != null ? handed.length() : -1;
            if (got != (long) t * hidden || (in != null && handed != null)) {
                throw new IllegalArgumentException("stage of layers [" + first + ", " + end + ") needs hidden states ["
                        + t + ", " + hidden + "], got " + (got < 0 ? "none" : got + " floats"));
            }
            if (in != null) {
                dev.write(x, in, 0, in.length);
            } else {
                dev.copyCols(handed, t, hidden, 0, hidden, x, hidden, 0); // x is this pass's to change; handed is not
            }
        }
        begin(pass, batch, caches);
        x = layers(pass, x, t, caches, r.routes(), r.boundary());
        if (caches != null) {
            for (int s = 0; s < caches.length; s++) {
                caches[s].advance(batch.seqLen()[s]);
            }
        }
        if (norm == null) {
            return then.apply(x);
        }
        Buf out = floats.take((long) t * hidden);
        dev.rmsNorm(x, t, hidden, 0, hidden, norm, config.rmsNormEps(), out);
        return then.apply(out);
    }

    /**
     * The blocks over x [T, hidden] (pass's batch set): returns x with every layer's residuals added; caches, routes
     * and boundary as a {@link Request}'s.
     */
    private Buf layers(Pass pass, Buf x, int t, LatentCache[] caches, int[][] routes, IntConsumer boundary) {
        Device dev = pass.dev;
        Arena floats = pass.floats;
        Arena ints = pass.ints;
        int hidden = config.hiddenSize();
        double eps = config.rmsNormEps();
        int moeIndex = firstMoe;
        for (int l = 0; l < layers.length; l++) {
            if (boundary != null) {
                dev.synchronize();
                boundary.accept(first + l);
            }
            Layer layer = layers[l];
            long floatMark = floats.mark(); // this layer's scratch goes back once its output is in x
            long intMark = ints.mark();
            // h = input_layernorm(x); x += self_attn(h)
            Buf h = floats.take((long) t * hidden);
            dev.rmsNorm(x, t, hidden, 0, hidden, layer.inputLayernorm(), eps, h);
            dev.add(x, layer.selfAttn().forward(pass, h, caches), (long) t * hidden);
            // h = post_attention_layernorm(x); x += mlp(h) or moe(h)
            dev.rmsNorm(x, t, hidden, 0, hidden, layer.postAttentionLayernorm(), eps, h);
            Buf m;
            if (layer.moe() != null) {
                int[] r = null;
                if (routes != null) {
                    r = routes[moeIndex];
                    if (r == null || r.length != t * config.numExpertsPerTok()) {
                        r = routes[moeIndex] = new int[t * config.numExpertsPerTok()];
                    }
                }
                m = layer.moe().forward(pass, h, t, r);
                moeIndex++;
            } else {
                m = pass.mlp(layer.mlp(), h, t);
            }
            dev.add(x, m, (long) t * hidden);
            floats.release(floatMark);
            ints.release(intMark);
        }
        if (boundary != null) {
            dev.synchronize();
            boundary.accept(end);
        }
        return x;
    }

    /**
     * A decode step of a whole model (the first and last stage), one token per row, everything that changes between
     * steps read from device buffers so that the device may capture it as a graph ({@link Device#capture}): logits
     * [rows, vocab] = lm_head(model.norm(layers(embed_tokens[tokens]))), each row's latent and k_pe appended to its
     * caches at its length (the caller advances the caches after). pass serves decode steps alone (a graph holds its
     * scratch's addresses); its cos/sin table must cover every position. The tokens must be in the vocabulary (the
     * device does not check them).
     *
     * @param tokens [rows] I32
     * @param in     the rows' lengths and caches ({@link Pass.DecodeInputs}), positions being the lengths
     * @param shape  a batch of rows one-token sequences (its ids and positions are not read)
     * @param logits [rows, vocab]
     */
    void decodeStep(Pass pass, Buf tokens, Pass.DecodeInputs in, PackedBatch shape, Buf logits) {
        if (embedTokens == null || lmHead == null) {
            throw new IllegalStateException("a decode step runs on a stage of the whole model");
        }
        Device dev = pass.dev;
        int t = in.rows();
        int hidden = config.hiddenSize();
        pass.floats.reset();
        pass.ints.reset();
        pass.packed = shape;
        pass.past = null;
        pass.cached = null;
        pass.rules(precision, DecodeRows.ALL);
        pass.positions(in.lengths());
        pass.keys = null;
        pass.decode = in;
        Buf x = pass.floats.take((long) t * hidden);
        dev.gatherRows(embedTokens, tokens, t, hidden, x);
        x = layers(pass, x, t, null, null, null);
        Buf out = pass.floats.take((long) t * hidden);
        dev.rmsNorm(x, t, hidden, 0, hidden, norm, config.rmsNormEps(), out);
        dev.gemm(out, t, hidden, lmHead, config.vocabSize(), logits, precision);
    }

    /**
     * Sets pass's batch: positions, each query's key range among the batch's own tokens and the prefill form's query
     * tiles (sequences without cached tokens), on the device; the sequences with cached tokens (the absorbed form), and
     * the rows' rule.
     */
    private void begin(Pass pass, PackedBatch batch, LatentCache[] caches) {
        Device dev = pass.dev;
        int t = batch.numTokens();
        int n = batch.numSequences();
        if (caches != null && caches.length != n) {
            throw new IllegalArgumentException(n + " sequences but " + caches.length + " caches");
        }
        int[] keyStart = pass.hostKeyStart = Pass.grow(pass.hostKeyStart, t);
        int[] keyLen = pass.hostKeyLen = Pass.grow(pass.hostKeyLen, t);
        int[] past = caches == null ? null : (pass.hostPast = Pass.grow(pass.hostPast, n));
        int cached = 0;
        int maxPos = 0;
        for (int s = 0; s < n; s++) {
            if (caches != null) {
                past[s] = caches[s].length();
                cached += past[s] > 0 ? 1 : 0;
                if (caches[s].layers() != layers.length) {
                    throw new IllegalArgumentException("sequence " + s + "'s cache holds " + caches[s].layers()
                            + " layers; this stage has " + layers.length);
                }
            }
            int p0 = past == null ? 0 : past[s];
            for (int i = 0; i < batch.seqLen()[s]; i++) {
                int row = batch.seqStart()[s] + i;
                int pos = batch.positions()[row];
                if (pos != p0 + i) {
                    throw new IllegalArgumentException(
                            "sequence " + s + " token " + i + " has position " + pos + ", expected " + (p0 + i));
                }
                keyStart[row] = batch.seqStart()[s];
                keyLen[row] = i + 1; // causal, in the prefill form (only sequences without cached tokens use it)
                maxPos = Math.max(maxPos, pos);
            }
            if (caches != null) {
                caches[s].reserve(batch.seqLen()[s]);
            }
        }
        pass.packed = batch;
        pass.decode = null;
        pass.past = past;
        pass.rules(precision, DecodeRows.of(batch, past, caches));
        pass.cosSin(rope, maxPos + 1);
        Buf positions = pass.ints.take(t);
        dev.write(positions, batch.positions(), 0, t);
        pass.positions(positions);
        Buf keyStartBuf = pass.ints.take(t);
        dev.write(keyStartBuf, keyStart, 0, t);
        Buf keyLenBuf = pass.ints.take(t);
        dev.write(keyLenBuf, keyLen, 0, t);
        // Prefill-form tiles: runs of up to ATTENTION_TILE consecutive queries of one sequence without cached tokens.
        int[] tiles = pass.hostTiles = Pass.grow(pass.hostTiles, 2 * (t + n));
        int numTiles = 0;
        Pass.Cached c = pass.cached = pass.cachedByCount.get(cached);
        for (int s = 0, j = 0; s < n; s++) {
            if (past != null && past[s] > 0) {
                c.seq[j] = s;
                c.rowStart[j] = batch.seqStart()[s];
                c.rows[j] = batch.seqLen()[s];
                c.past[j++] = past[s];
                continue;
            }
            for (int i = 0; i < batch.seqLen()[s]; i += Device.ATTENTION_TILE) {
                tiles[2 * numTiles] = batch.seqStart()[s] + i;
                tiles[2 * numTiles++ + 1] = Math.min(Device.ATTENTION_TILE, batch.seqLen()[s] - i);
            }
        }
        Buf tilesBuf = pass.ints.take(2L * numTiles);
        dev.write(tilesBuf, tiles, 0, 2 * numTiles);
        pass.keys(t, keyStartBuf, keyLenBuf, tilesBuf, numTiles);
    }

    /**
     * A decode step of a whole model through device graphs ({@link DecodeGraphs}): appends tokens[r] to caches[r], each
     * holding tokens already, and returns the next-token logits [rows, vocab], the bits of {@link #forward} on the same
     * step.
     */
    public synchronized float[] decodeGraphed(int[] tokens, GpuKvCache[] caches) {
        if (graphs == null) {
            graphs = new DecodeGraphs(this);
        }
        return graphs.decode(tokens, caches);
    }

    /**
     * logits [rows, vocab] = lm_head(hidden rows[j]) for rows rowIds[0 .. rows) of hidden [T, hidden], the last stage's
     * output of pass's forward, as pass's scratch: each row multiplied by the pass's rule for it (a decode row as decode
     * rows are, see {@link DecodeRows}). Give it back ({@link Pass#mark}, {@link Pass#release}) once read.
     */
    public Buf logits(Pass pass, Buf hidden, int[] rowIds, int rows) {
        if (lmHead == null) {
            throw new IllegalStateException("only the last stage holds lm_head");
        }
        int h = config.hiddenSize();
        Buf x = hidden;
        boolean identity = hidden.length() == (long) rows * h;
        for (int j = 0; j < rows && identity; j++) {
            identity = rowIds[j] == j;
        }
        if (!identity) { // the rows gathered; every row of hidden in order is multiplied in place
            Buf idx = pass.ints.take(rows);
            pass.dev.write(idx, rowIds, 0, rows);
            x = pass.floats.take((long) rows * h);
            pass.dev.gatherRows(hidden, idx, rows, h, x);
        }
        Buf logits = pass.floats.take((long) rows * config.vocabSize());
        pass.dev.gemm(
                x,
                rows,
                h,
                lmHead,
                config.vocabSize(),
                logits,
                precision,
                pass.rows().rows(rowIds, rows));
        return logits;
    }

    /**
     * The log-softmax stats of logits [rows, vocab] ({@link #logits}) against targets[0 .. rows) (-1: none) into out
     * [3 · rows] on the host, as {@link Device#logSoftmaxStats(Buf, int, int, Buf, Buf, double[])} gives them.
     */
    public void stats(Pass pass, Buf logits, int rows, int[] targets, double[] out) {
        Buf tg = pass.ints.take(rows);
        pass.dev.write(tg, targets, 0, rows);
        pass.dev.logSoftmaxStats(logits, rows, config.vocabSize(), tg, pass.floats.take(3L * rows), out);
    }

    /**
     * The next-token logits of each sequence's last token of batch into out [sequences, vocab] from outOff, from hidden,
     * the last stage's output of pass's forward.
     */
    public void lastTokenLogits(Pass pass, PackedBatch batch, Buf hidden, float[] out, int outOff) {
        int n = batch.numSequences();
        int[] last = pass.hostRows = Pass.grow(pass.hostRows, n);
        for (int s = 0; s < n; s++) {
            last[s] = batch.seqStart()[s] + batch.seqLen()[s] - 1;
        }
        pass.mark();
        pass.dev.read(logits(pass, hidden, last, n), out, outOff, n * config.vocabSize());
        pass.release();
    }

    /** The pass of the forward without a Pass of its own. */
    Pass own() {
        return own;
    }

    /** Frees the weights and scratch; the device stays open (it belongs to whoever made it). */
    @Override
    public synchronized void close() {
        if (graphs != null) {
            graphs.close();
        }
        weights.free();
        own.close();
    }
}
