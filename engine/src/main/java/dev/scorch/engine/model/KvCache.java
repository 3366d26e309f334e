package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.Arrays;
import java.util.List;

/**
 * The MLA latent KV cache of ONE sequence on the CPU device: per layer and per past token only the compressed latent
 * after kv_a_layernorm (kv_lora_rank floats) and the rotated k_pe (qk_rope_head_dim floats), never per-head keys or
 * values. A layer is one row per token, [latent | k_pe] ({@link #width()} floats), the layout of {@link GpuKvCache},
 * so one attention block reads either. Storage grows by doubling up to maxTokens, fixed
 * at creation; appending past it fails.
 *
 * <p>A forward writes layer by layer at positions {@code length() ..} (into {@link #layer} after {@link #reserve})
 * and calls {@link #advance} once every layer has been written, so a forward that fails half way leaves the cache at
 * its old length.
 */
public final class KvCache implements LatentCache {
    private final int layers;
    private final int kvLoraRank;
    private final int qkRope;
    private final int maxTokens;
    private final int width; // kv_lora_rank + qk_rope
    private final float[][] rows; // [layer][capacity * width]: token j = [latent | k_pe] at j * width
    private final Buf[] views; // rows[l] as the CPU device's buffer
    private int capacity;
    private int length;
    private boolean extendsAsPrefill;

    public KvCache(int layers, int kvLoraRank, int qkRopeHeadDim, int maxTokens) {
        if (layers <= 0 || kvLoraRank <= 0 || qkRopeHeadDim <= 0 || maxTokens <= 0) {
            throw new IllegalArgumentException(
                    "KV cache needs positive layers, kv_lora_rank, qk_rope_head_dim and max tokens, got " + layers
                            + ", " + kvLoraRank + ", " + qkRopeHeadDim + ", " + maxTokens);
        }
        this.layers = layers;
        this.kvLoraRank = kvLoraRank;
        this.qkRope = qkRopeHeadDim;
        this.maxTokens = maxTokens;
        this.width = kvLoraRank + qkRopeHeadDim;
        this.rows = new float[layers][0];
        this.views = new Buf[layers];
        for (int l = 0; l < layers; l++) {
            views[l] = new Buf(rows[l], Buf.Kind.F32, 0, 0);
        }
    }

    /** A cache shaped for {@code config} holding at most maxTokens tokens of one sequence. */
    public KvCache(ModelConfig config, int maxTokens) {
        this(config.numHiddenLayers(), config.kvLoraRank(), config.qkRopeHeadDim(), maxTokens);
    }

    /** layers × (kv_lora_rank + qk_rope_head_dim) × 4 bytes (fp32). */
    public static long bytesPerToken(int layers, int kvLoraRank, int qkRopeHeadDim) {
        return (long) layers * (kvLoraRank + qkRopeHeadDim) * Float.BYTES;
    }

    public static long bytesPerToken(ModelConfig config) {
        return bytesPerToken(config.numHiddenLayers(), config.kvLoraRank(), config.qkRopeHeadDim());
    }

    public long bytesPerToken() {
        return bytesPerToken(layers, kvLoraRank, qkRope);
    }

    /** Bytes allocated now (capacity × bytesPerToken); at most maxTokens × bytesPerToken. */
    public long allocatedBytes() {
        return capacity * bytesPerToken();
    }

    @Override
    public int layers() {
        return layers;
    }

    public int kvLoraRank() {
        return kvLoraRank;
    }

    public int qkRopeHeadDim() {
        return qkRope;
    }

    /** Floats per token and layer: kv_lora_rank + qk_rope_head_dim. */
    @Override
    public int width() {
        return width;
    }

    /** Tokens cached (every layer written): the position of the next token. */
    @Override
    public int length() {
        return length;
    }

    /** Makes room for n more tokens, failing (and changing nothing) when length + n would pass maxTokens. */
    @Override
    public void reserve(int n) {
        if (n < 0) {
            throw new IllegalArgumentException("cannot reserve " + n + " tokens");
        }
        if (n > maxTokens - length) {
            throw new IllegalStateException(
                    "KV cache is full: " + length + " cached + " + n + " new tokens > max " + maxTokens + " tokens");
        }
        int need = length + n;
        if (need <= capacity) {
            return;
        }
        int cap = Math.max(need, Math.min(maxTokens, Math.max(16, capacity * 2)));
        for (int l = 0; l < layers; l++) {
            rows[l] = Arrays.copyOf(rows[l], Math.multiplyExact(cap, width));
            views[l] = new Buf(rows[l], Buf.Kind.F32, 0, rows[l].length);
        }
        capacity = cap;
    }

    /**
     * Layer l's rows [capacity, width]: token j's latent at j * width, its rotated k_pe at j * width + kv_lora_rank.
     * Valid until the next reserve.
     */
    public float[] rows(int layer) {
        return rows[layer];
    }

    /** {@link #rows} as the CPU device's buffer. */
    @Override
    public Buf layer(int layer) {
        return views[layer];
    }

    /** Marks n more tokens as cached, once every layer holds them. */
    @Override
    public void advance(int n) {
        if (n < 0 || length + n > capacity) {
            throw new IllegalStateException(
                    "cannot advance the KV cache by " + n + " from " + length + " (reserved " + capacity + ")");
        }
        length += n;
    }

    /** Makes the rows that extend this cache multiply as prefill rows do (see {@link LatentCache#extendsAsPrefill}). */
    public KvCache extendAsPrefill() {
        extendsAsPrefill = true;
        return this;
    }

    @Override
    public boolean extendsAsPrefill() {
        return extendsAsPrefill;
    }

    @Override
    public void copyFrom(LatentCache other) {
        KvCache src = (KvCache) other;
        if (length != 0 || src.layers != layers || src.kvLoraRank != kvLoraRank || src.qkRope != qkRope) {
            throw new IllegalArgumentException("copy needs an empty cache of the same shape");
        }
        reserve(src.length);
        for (int l = 0; l < layers; l++) {
            System.arraycopy(src.rows[l], 0, rows[l], 0, src.length * width);
        }
        advance(src.length);
    }

    /**
     * Packs new tokens of each sequence with positions numbered from its cache's length (the form
     * {@code DeepseekV3Model.prefill} and {@code decode} expect).
     */
    public static PackedBatch pack(List<int[]> sequences, List<? extends LatentCache> caches) {
        if (sequences.size() != caches.size()) {
            throw new IllegalArgumentException(sequences.size() + " sequences but " + caches.size() + " caches");
        }
        PackedBatch b = PackedBatch.of(sequences);
        int[] pos = b.positions();
        for (int s = 0; s < sequences.size(); s++) {
            for (int i = 0; i < b.seqLen()[s]; i++) {
                pos[b.seqStart()[s] + i] = caches.get(s).length() + i;
            }
        }
        return b;
    }
}
