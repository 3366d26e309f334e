package dev.scorch.engine.device;

/**
 * The MLA latent KV cache of one sequence as the block writes and reads it: per layer [capacity, kv_lora_rank +
 * qk_rope_head_dim], a token's normed latent then its rotated k_pe, on the device the block runs on ({@code GpuKvCache}
 * on a GPU, {@code KvCache} on the CPU device).
 */
public interface LatentCache extends AutoCloseable {
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

    /**
     * Whether the rows that extend this cache multiply as prefill rows do ({@code CpuOps.matmul}) rather than as decode rows
     * ({@code CpuOps.matmulDecode}, see {@link DecodeRows}): a prompt extended a chunk at a time, where decode's row-dot
     * would read the weights again every few rows. Either way the rows attend over the cache in the absorbed form. A
     * property of the sequence, so a row's bits still do not depend on its batch mates.
     */
    default boolean extendsAsPrefill() {
        return false;
    }

    /** Makes this empty cache a copy of src's cached tokens, src being of the same kind and shape (samples of one prompt share its prefill). */
    void copyFrom(LatentCache src);

    /** Gives its memory back (a device's; a heap cache leaves it to the garbage collector). */
    @Override
    default void close() {}
}
