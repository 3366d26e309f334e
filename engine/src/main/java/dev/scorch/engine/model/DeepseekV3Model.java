package dev.scorch.engine.model;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.CheckpointValidator;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.DecodeRows;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.cpu.CpuDevice;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;
import java.nio.file.Path;
import java.util.function.IntConsumer;

/**
 * DeepseekV3ForCausalLM (Kimi K2, DeepSeek-V3/R1) on the CPU: embed_tokens → num_hidden_layers decoder layers → norm
 * → lm_head, logits in fp32. The block is {@link DecoderStage}'s, the one written for every device, here on a
 * {@link CpuDevice} over the caller's {@link Ops}; weights stay memory-mapped in their checkpoint dtype. A shard that
 * shrinks under its mapping fails the pass with a {@link dev.scorch.engine.checkpoint.CheckpointException} naming it
 * (the JVM's InternalError for a read past its new end, caught at each entry point here).
 */
public final class DeepseekV3Model {
    private static final Workspace.Slot<Buffers> BUFFERS = new Workspace.Slot<>(Buffers::new);

    /** A workspace's device and pass over one Ops, and decode's buffers. */
    private static final class Buffers extends Workspace.Buffers {
        private CpuDevice dev;
        private Pass pass;
        private float[] logits; // [B, vocab], exactly: decode returns it
        private PackedBatch decodeBatch; // a decode step's, one token per sequence, refilled while B stays the same

        Buffers(Workspace ws) {
            super(ws);
        }

        @Override
        protected long otherBytes() {
            return dev == null ? 0 : pass.bytes() + dev.scratchBytes();
        }

        Pass on(Ops ops) {
            if (dev == null || dev.ops() != ops) {
                dev = new CpuDevice(ops);
                pass = new Pass(dev);
            }
            return pass;
        }
    }

    private final ModelConfig config;
    private final Checkpoint checkpoint; // its mappings hold the weights: a fault reading them names the shard
    private final DecoderStage block; // every layer, with embed_tokens, model.norm and lm_head, weights as mapped
    private final Linear lmHead; // [vocab, hidden]

    public DeepseekV3Model(ModelWeights w) {
        config = w.config();
        checkpoint = w.checkpoint();
        // The weights are the checkpoint's tensors whatever device holds them: any CPU device loads them.
        block = DecoderStage.load(w, new CpuDevice(null), GemmPrecision.FP32, 0, config.numHiddenLayers());
        lmHead = w.linear("lm_head.weight");
    }

    /** Opens, validates (failing on the first problems, named) and builds the model in {@code dir}. */
    public static DeepseekV3Model load(Path dir) {
        ModelConfig config = ModelConfig.read(dir.resolve("config.json"));
        Checkpoint ckpt = Checkpoint.open(dir);
        CheckpointValidator.validate(config, ckpt).orThrow();
        return new DeepseekV3Model(new ModelWeights(ckpt, config));
    }

    public ModelConfig config() {
        return config;
    }

    public int vocabSize() {
        return config.vocabSize();
    }

    public int numMoeLayers() {
        int n = 0;
        for (int l = 0; l < config.numHiddenLayers(); l++) {
            n += config.isMoeLayer(l) ? 1 : 0;
        }
        return n;
    }

    /**
     * Scoring: runs the decoder over a packed batch and returns the final-normed hidden states [T, hidden].
     * routes, when not null, is [moe layer][T * top_k] and receives each token's experts. Every activation lives in
     * ws: the result is ws's buffer (at least [T, hidden]), valid until ws's next pass.
     */
    public float[] forward(PackedBatch batch, Ops ops, int[][] routes, Workspace ws) {
        try {
            return forward(batch, ops, routes, null, ws, null);
        } catch (InternalError e) {
            throw checkpoint.readFault(e);
        }
    }

    /**
     * As {@link #forward(PackedBatch, Ops, int[][], Workspace)}, calling boundary with l before layer l runs and with
     * num_hidden_layers after the last: the benchmark's per-layer clock.
     */
    public float[] forward(PackedBatch batch, Ops ops, Workspace ws, IntConsumer boundary) {
        try {
            return forward(batch, ops, null, null, ws, boundary);
        } catch (InternalError e) {
            throw checkpoint.readFault(e);
        }
    }

    /**
     * Prefill with a KV cache: runs the decoder over batch, writing every token's latent and rotated k_pe into
     * caches[s] (one distinct cache per sequence s), and returns the final-normed hidden states [T, hidden]. Sequence
     * s's positions must be caches[s].length(), +1, ... (see {@link KvCache#pack}). A sequence whose cache is empty
     * attends as scoring does (same bits as {@link #forward(PackedBatch, Ops, int[][], Workspace)}); one with cached
     * tokens attends in the absorbed form over them, its linears through {@link Ops#matmulDecode} (see
     * {@link DecodeRows}). Each cache's length advances by its sequence's tokens once every layer is written; when some
     * cache lacks room, nothing is written and it fails. Every activation lives in ws: the result (at least
     * [T, hidden]) is ws's, valid until its next pass.
     */
    public float[] prefill(PackedBatch batch, KvCache[] caches, Ops ops, Workspace ws) {
        try {
            return prefill(batch, caches, ops, null, ws);
        } catch (InternalError e) {
            throw checkpoint.readFault(e);
        }
    }

    private float[] prefill(PackedBatch batch, KvCache[] caches, Ops ops, int[][] routes, Workspace ws) {
        checkCaches(batch, caches);
        return forward(batch, ops, routes, caches, ws, null); // each cache grows, then advances once every layer is in
    }

    /**
     * One decode step: tokens[s] is sequence s's newest token (at position caches[s].length()); appends it to
     * caches[s] and returns the next-token logits [B, vocab] in fp32. The rows of sequences whose cache held
     * tokens take {@link Ops#matmulDecode} for every linear, lm_head included (see {@link DecodeRows}), so their
     * bits do not depend on B; a sequence started from an empty cache is computed as prefill is. routes, when not
     * null, is [moe layer][B * top_k] and receives each token's experts. Every activation lives in ws: the logits
     * returned (exactly [B, vocab]) are ws's, valid until its next pass.
     */
    public float[] decode(int[] tokens, KvCache[] caches, Ops ops, int[][] routes, Workspace ws) {
        int b = tokens.length;
        if (caches == null || caches.length != b) {
            throw new IllegalArgumentException(
                    b + " tokens but " + (caches == null ? "no" : caches.length) + " caches");
        }
        Buffers scratch = ws.get(BUFFERS);
        if (scratch.decodeBatch == null || scratch.decodeBatch.numSequences() != b) {
            scratch.decodeBatch = new PackedBatch(new int[b], new int[b], new int[b], new int[b]);
        }
        PackedBatch batch = scratch.decodeBatch; // one token per sequence
        for (int s = 0; s < b; s++) {
            batch.tokens()[s] = tokens[s];
            batch.positions()[s] = caches[s].length();
            batch.seqStart()[s] = s;
            batch.seqLen()[s] = 1;
        }
        try {
            float[] hidden = prefill(batch, caches, ops, routes, ws);
            float[] out = scratch.logits = scratch.exactFloats(scratch.logits, b * config.vocabSize());
            scratch.dev.matmul(hidden, b, lmHead, out, scratch.pass.rows()); // the pass's own rule for its rows
            return out;
        } catch (InternalError e) {
            throw checkpoint.readFault(e);
        }
    }

    private void checkCaches(PackedBatch batch, KvCache[] caches) {
        int n = batch.numSequences();
        if (caches == null || caches.length != n) {
            throw new IllegalArgumentException(
                    n + " sequences but " + (caches == null ? "no" : caches.length) + " caches");
        }
        for (int s = 0; s < n; s++) {
            KvCache c = caches[s];
            for (int r = 0; r < s; r++) { // pairwise (B² identity checks are nothing beside a step): no map per step
                if (caches[r] == c) {
                    throw new IllegalArgumentException(
                            "sequence " + s + " shares its KV cache with an earlier sequence");
                }
            }
            if (c.layers() != config.numHiddenLayers()
                    || c.kvLoraRank() != config.kvLoraRank()
                    || c.qkRopeHeadDim() != config.qkRopeHeadDim()) {
                throw new IllegalArgumentException(
                        "KV cache of sequence " + s + " is shaped [" + c.layers() + " layers, " + c.kvLoraRank() + " + "
                                + c.qkRopeHeadDim() + "], the model needs [" + config.numHiddenLayers() + ", "
                                + config.kvLoraRank() + " + "
                                + config.qkRopeHeadDim() + "]");
            }
        }
    }

    private float[] forward(
            PackedBatch batch, Ops ops, int[][] routes, KvCache[] caches, Workspace ws, IntConsumer boundary) {
        checkpoint
                .checkMapped(); // a shard cut short since the last pass fails here, named, before any read of it faults
        // The final-normed hidden states are a whole array of the workspace's scratch.
        return block.forward(
                ws.get(BUFFERS).on(ops), batch, caches, routes, null, h -> (float[]) h.storage(), boundary);
    }

    /** logits[rows, vocab] = lm_head(hidden rows), fp32, as scoring and prefill compute them ({@link Ops#matmul}). */
    public void logits(float[] hiddenRows, int rows, Ops ops, float[] out) {
        try {
            ops.matmul(hiddenRows, rows, lmHead, out);
        } catch (InternalError e) {
            throw checkpoint.readFault(e);
        }
    }

    /**
     * What an InternalError caught around a use of this model's weights means: the JVM's fault of a Java read of a shard
     * that shrank under its mapping, which it may deliver a little after the read, so callers that go on working with the
     * results (the scorer's log-softmax) catch it too. A {@link dev.scorch.engine.checkpoint.CheckpointException} naming
     * the shard where one has shrunk; else the error as it came.
     */
    public RuntimeException readFault(InternalError e) {
        return checkpoint.readFault(e);
    }

    /**
     * logits[rows, vocab] = lm_head(hidden rows) for decode rows (tokens that extended a non-empty KV cache):
     * {@link Ops#matmulDecode}, the logits {@link #decode} returns for such rows.
     */
    public void decodeLogits(float[] hiddenRows, int rows, Ops ops, float[] out) {
        try {
            ops.matmulDecode(hiddenRows, rows, lmHead, out);
        } catch (InternalError e) {
            throw checkpoint.readFault(e);
        }
    }
}
