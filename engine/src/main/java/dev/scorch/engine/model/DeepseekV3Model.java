package dev.scorch.engine.model;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.CheckpointValidator;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.DecodeRows;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.device.cpu.CpuDevice;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;

/**
 * DeepseekV3ForCausalLM (Kimi K2, DeepSeek-V3/R1) on the CPU: embed_tokens → num_hidden_layers decoder layers → norm
 * → lm_head, logits in fp32. The block is {@link DecoderStage}'s, the one written for every device, here on a
 * {@link CpuDevice} over the caller's {@link CpuOps}; weights stay memory-mapped in their checkpoint dtype. A shard that
 * shrinks under its mapping fails the pass with a {@link dev.scorch.engine.checkpoint.CheckpointException} naming it
 * (the JVM's InternalError for a read past its new end, caught at each entry point here).
 */
public final class DeepseekV3Model {
    private static final Workspace.Slot<Buffers> BUFFERS = new Workspace.Slot<>(Buffers::new);

    /** A workspace's device and pass over one CpuOps. */
    private static final class Buffers extends Workspace.Buffers {
        private CpuDevice dev;
        private Pass pass;

        Buffers(Workspace ws) {
            super(ws);
        }

        @Override
        protected long otherBytes() {
            return dev == null ? 0 : pass.bytes() + dev.scratchBytes();
        }

        Pass on(CpuOps ops) {
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
    private final List<DecoderStage> stages;

    public DeepseekV3Model(ModelWeights w) {
        config = w.config();
        checkpoint = w.checkpoint();
        // The weights are the checkpoint's tensors whatever device holds them: any CPU device loads them.
        block = DecoderStage.load(w, new CpuDevice(null), GemmPrecision.FP32, 0, config.numHiddenLayers());
        stages = List.of(block);
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

    private void checkCaches(PackedBatch batch, LatentCache[] caches) {
        int n = batch.numSequences();
        if (caches == null || caches.length != n) {
            throw new IllegalArgumentException(
                    n + " sequences but " + (caches == null ? "no" : caches.length) + " caches");
        }
        for (int s = 0; s < n; s++) {
            LatentCache c = caches[s];
            for (int r = 0; r < s; r++) { // pairwise (B² identity checks are nothing beside a step): no map per step
                if (caches[r] == c) {
                    throw new IllegalArgumentException(
                            "sequence " + s + " shares its KV cache with an earlier sequence");
                }
            }
            int width = config.kvLoraRank() + config.qkRopeHeadDim();
            if (c.layers() != config.numHiddenLayers() || c.width() != width) {
                throw new IllegalArgumentException("KV cache of sequence " + s + " is shaped [" + c.layers()
                        + " layers, " + c.width() + "], the model needs [" + config.numHiddenLayers() + ", "
                        + config.kvLoraRank() + " + " + config.qkRopeHeadDim() + "]");
            }
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
     * This model on the CPU device over ops, as one stage of every layer ({@link GpuStages}): what a scorer or a decoding
     * model runs on. Its KV caches are {@link KvCache}s, one distinct cache of every layer per sequence (checked before
     * each micro-batch runs): a sequence whose cache is empty attends as scoring does, bit for bit; one with cached
     * tokens attends in the absorbed form over them, its linears as {@link DecodeRows} says. Each call runs on a
     * workspace of its own (passes on several threads at once share the weights): the one kept between calls, or a
     * fresh one while another thread has it.
     */
    public GpuStages on(CpuOps ops) {
        return new GpuStages() {
            private final AtomicReference<Workspace> idle = new AtomicReference<>(new Workspace());

            @Override
            public List<DecoderStage> stages() {
                return stages;
            }

            /** 32 MiB: 256 rows at vocab 32768, one row block of the packed GEMM, which decodes each lm_head row once per block. */
            @Override
            public int logitsChunkFloats() {
                return 8 << 20;
            }

            @Override
            public LatentCache[] newCaches(int capacity) {
                return new LatentCache[] {new KvCache(config, capacity)};
            }

            @Override
            public long scratchBytes() {
                Workspace ws = idle.get();
                return ws == null ? 0 : ws.bytes();
            }

            @Override
            public void run(List<Micro> micro, Finish finish) {
                Workspace ws = idle.getAndSet(null);
                if (ws == null) {
                    ws = new Workspace();
                }
                try {
                    for (int i = 0; i < micro.size(); i++) {
                        Micro m = micro.get(i);
                        if (m.caches() != null) {
                            checkCaches(m.batch(), m.stage(0));
                        }
                        // a shard cut short since the last pass fails here, named, before any read of it faults
                        checkpoint.checkMapped();
                        Pass pass = ws.get(BUFFERS).on(ops);
                        finish.apply(i, block, pass, block.forward(pass, m.at(0, null, null), Function.identity()));
                    }
                } catch (InternalError e) {
                    throw checkpoint.readFault(e);
                } finally {
                    idle.set(ws);
                }
            }
        };
    }
}
