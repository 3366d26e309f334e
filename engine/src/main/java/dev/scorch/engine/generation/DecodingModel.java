package dev.scorch.engine.generation;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.model.KvCache;
import java.util.List;

/**
 * The model a {@link Generator} drives: prompts prefilled into fresh KV caches, then one token per sequence per
 * step: {@link StageDecodingModel}, on any device.
 */
public interface DecodingModel {
    ModelConfig config();

    /**
     * KV cache bytes one cached token takes (what the generator's cache limit counts): CPU and device caches alike hold
     * fp32 [latent | k_pe] per layer.
     */
    default long cacheBytesPerToken() {
        return KvCache.bytesPerToken(config());
    }

    /** An empty cache for one sequence of up to maxTokens tokens. */
    Cache newCache(int maxTokens);

    /** Prefills each prompt into its empty cache and returns each prompt's next-token logits [prompts, vocab], fp32. */
    float[] prefill(List<int[]> prompts, List<Cache> caches);

    /**
     * Appends tokens[s] to caches[s] and returns the next-token logits [sequences, vocab], fp32, valid until the next
     * call (a step of the same batch size reuses the array).
     */
    float[] decode(int[] tokens, Cache[] caches);

    /** One sequence's KV cache. */
    interface Cache extends AutoCloseable {
        /** Tokens cached. */
        int length();

        /** Makes this empty cache a copy of src (samples of one prompt share its prefill). */
        void copyFrom(Cache src);

        /** Gives its memory back. */
        @Override
        void close();
    }
}
