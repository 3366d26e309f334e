package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** A layer of the cache is one row per token, [latent | k_pe], the device cache's layout; growing keeps the rows. */
class KvCacheTest {
    @Test
    void aLayerHoldsEachTokensLatentThenItsKPe() {
        KvCache cache = new KvCache(2, 3, 2, 40); // kv_lora_rank 3, qk_rope 2
        assertEquals(5, cache.width());
        float[] lat = {1, 2, 3, 4, 5, 6}; // two tokens' latents
        float[] pe = {-1, -2, -3, -4};
        cache.reserve(2);
        for (int l = 0; l < 2; l++) {
            for (int t = 0; t < 2; t++) { // as the block writes a token: its latent, then its k_pe, one row
                System.arraycopy(lat, t * 3, cache.rows(l), t * 5, 3);
                System.arraycopy(pe, t * 2, cache.rows(l), t * 5 + 3, 2);
            }
        }
        cache.advance(2);
        float[] want = {1, 2, 3, -1, -2, 4, 5, 6, -3, -4};
        assertArrayEquals(want, Arrays.copyOf(cache.rows(1), 10));
        assertEquals(16 * 5, cache.rows(0).length, "the first reservation holds 16 tokens");

        cache.reserve(20); // 22 tokens: the capacity doubles to 32, the rows written stay
        assertEquals(32 * 5, cache.rows(0).length);
        assertArrayEquals(want, Arrays.copyOf(cache.rows(0), 10));
        assertEquals(32 * 5 * 2 * 4, cache.allocatedBytes());

        KvCache copy = new KvCache(2, 3, 2, 40);
        copy.copyFrom(cache);
        assertEquals(2, copy.length());
        assertArrayEquals(want, Arrays.copyOf(copy.rows(1), 10));

        IllegalStateException e = assertThrows(IllegalStateException.class, () -> copy.reserve(39));
        assertEquals("KV cache is full: 2 cached + 39 new tokens > max 40 tokens", e.getMessage());
    }
}
