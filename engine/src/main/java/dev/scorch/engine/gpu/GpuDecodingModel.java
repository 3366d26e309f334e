package dev.scorch.engine.gpu;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.generation.DecodingModel;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.List;

/** {@link DecodingModel} on a {@link GpuModel}: prefill and decode through device KV caches. */
public final class GpuDecodingModel implements DecodingModel {
    private final GpuModel model;

    public GpuDecodingModel(GpuModel model) {
        this.model = model;
    }

    /** A device KV cache. */
    private record DeviceCache(GpuKvCache kv) implements Cache {
        @Override
        public int length() {
            return kv.length();
        }

        @Override
        public void copyFrom(Cache src) {
            kv.copyFrom(((DeviceCache) src).kv);
        }

        @Override
        public void close() {
            kv.close();
        }
    }

    @Override
    public ModelConfig config() {
        return model.config();
    }

    @Override
    public long cacheBytesPerToken() {
        ModelConfig c = model.config();
        return GpuKvCache.bytesPerToken(c.numHiddenLayers(), c.kvLoraRank(), c.qkRopeHeadDim());
    }

    @Override
    public Cache newCache(int maxTokens) {
        return new DeviceCache(model.newCache(maxTokens));
    }

    @Override
    public float[] prefill(List<int[]> prompts, List<Cache> caches) {
        return model.nextTokenLogits(PackedBatch.of(prompts), kv(caches.toArray(new Cache[0])));
    }

    @Override
    public float[] decode(int[] tokens, Cache[] caches) {
        int b = tokens.length;
        int[] pos = new int[b];
        int[] start = new int[b];
        int[] len = new int[b];
        for (int s = 0; s < b; s++) {
            pos[s] = caches[s].length();
            start[s] = s;
            len[s] = 1;
        }
        return model.nextTokenLogits(new PackedBatch(tokens.clone(), pos, start, len), kv(caches));
    }

    private static GpuKvCache[] kv(Cache[] caches) {
        GpuKvCache[] kv = new GpuKvCache[caches.length];
        for (int i = 0; i < caches.length; i++) {
            kv[i] = kv(caches[i]);
        }
        return kv;
    }

    /** The device cache of one of this model's caches. */
    static GpuKvCache kv(Cache cache) {
        return ((DeviceCache) cache).kv;
    }
}
