package dev.scorch.engine.model;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.LatentCache;

/**
 * One sequence's MLA cache on the device: per layer and position the normed latent and the rotated k_pe,
 * [layers, capacity, kv_lora_rank + qk_rope_head_dim] (the same content as the CPU's {@code KvCache}).
 */
public final class GpuKvCache implements LatentCache, AutoCloseable {
    private final Device dev;
    private final Buf rows;
    private final int layers;
    private final int capacity;
    private final int width; // kv_lora_rank + qk_rope_head_dim
    private int length;

    GpuKvCache(Device dev, int layers, int capacity, int width) {
        this.dev = dev;
        this.layers = layers;
        this.capacity = capacity;
        this.width = width;
        this.rows = dev.alloc(Buf.Kind.F32, (long) layers * capacity * width);
    }

    @Override
    public int length() {
        return length;
    }

    /** Layer l's rows [capacity, width]. */
    @Override
    public Buf layer(int l) {
        return rows.slice((long) l * capacity * width, (long) capacity * width);
    }

    @Override
    public int width() {
        return width;
    }

    @Override
    public void copyFrom(LatentCache other) {
        GpuKvCache src = (GpuKvCache) other;
        if (length != 0 || src.layers != layers || src.width != width || src.length > capacity) {
            throw new IllegalArgumentException(
                    "copy needs an empty cache of the same shape with room for " + src.length + " tokens");
        }
        for (int l = 0; l < layers; l++) {
            dev.copyCols(src.layer(l), src.length, width, 0, width, layer(l), width, 0);
        }
        length = src.length;
    }

    @Override
    public void reserve(int tokens) {
        if (length + tokens > capacity) {
            throw new IllegalStateException("GPU KV cache holds " + capacity + " tokens; " + length + " cached + "
                    + tokens + " new do not fit");
        }
    }

    @Override
    public void advance(int tokens) {
        length += tokens;
    }

    @Override
    public void close() {
        dev.free(rows);
    }

    @Override
    public int layers() {
        return layers;
    }
}
