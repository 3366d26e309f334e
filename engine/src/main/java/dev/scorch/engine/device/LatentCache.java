package dev.scorch.engine.device;

/**
 * The MLA latent KV cache of one sequence as the block writes and reads it: per layer [capacity, kv_lora_rank +
 * qk_rope_head_dim], a token's normed latent then its rotated k_pe, on the device the block runs on ({@link GpuKvCache}
 * on a GPU, {@link KvCache} on the CPU device).
 */
public interface LatentCache {
    /** Layers held. */
    int layers();

    /** Tokens cached (every layer written): the position of the next token. */
    int length();

    /** kv_lora_rank + qk_rope_head_dim. */
    int width();

    /** Layer l's cache [capacity, width], valid for this pass. */
    Buf layer(int l);

    /** Makes room for tokens more, or fails changing nothing. */
    void reserve(int tokens);

    /** Marks tokens more as cached, once every layer holds them. */
    void advance(int tokens);
}
