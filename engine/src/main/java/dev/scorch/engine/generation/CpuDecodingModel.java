package dev.scorch.engine.generation;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.KvCache;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;
import java.util.List;

/**
 * {@link DecodingModel} on the CPU engine: {@link DeepseekV3Model}'s prefill and decode over {@link KvCache}s. Its
 * activations live in one workspace kept from step to step, so it serves one generator (one thread) at a time, and
 * the logits {@link #decode} returns are valid until the next call.
 */
final class CpuDecodingModel implements DecodingModel {
    private final DeepseekV3Model model;
    private final Ops ops;
    private final Workspace ws = new Workspace();

    CpuDecodingModel(DeepseekV3Model model, Ops ops) {
        this.model = model;
        this.ops = ops;
    }

    /** A CPU KV cache. */
    private record CpuCache(KvCache kv) implements Cache {
        @Override
        public int length() {
            return kv.length();
        }

        @Override
        public void copyFrom(Cache src) {
            kv.copyOf(((CpuCache) src).kv);
        }

        @Override
        public void close() {}
    }

    @Override
    public ModelConfig config() {
        return model.config();
    }

    @Override
    public Cache newCache(int maxTokens) {
        return new CpuCache(new KvCache(model.config(), maxTokens));
    }

    @Override
    public float[] prefill(List<int[]> prompts, List<Cache> caches) {
        KvCache[] kv = kv(caches.toArray(new Cache[0]));
        PackedBatch batch = KvCache.pack(prompts, List.of(kv));
        float[] hidden = model.prefill(batch, kv, ops, ws); // [T, hidden]
        int h = model.config().hiddenSize();
        float[] last = new float[prompts.size() * h]; // [prompts, hidden]: each prompt's last position
        for (int i = 0; i < prompts.size(); i++) {
            int row = batch.seqStart()[i] + batch.seqLen()[i] - 1;
            System.arraycopy(hidden, row * h, last, i * h, h);
        }
        float[] logits = new float[prompts.size() * model.vocabSize()]; // [prompts, vocab]
        model.logits(last, prompts.size(), ops, logits);
        return logits;
    }

    @Override
    public float[] decode(int[] tokens, Cache[] caches) {
        return model.decode(tokens, kv(caches), ops, null, ws);
    }

    private static KvCache[] kv(Cache[] caches) {
        KvCache[] kv = new KvCache[caches.length];
        for (int i = 0; i < caches.length; i++) {
            kv[i] = ((CpuCache) caches[i]).kv;
        }
        return kv;
    }
}
