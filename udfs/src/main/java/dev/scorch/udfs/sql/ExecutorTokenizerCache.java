package dev.scorch.udfs.sql;

import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.TokenizerException;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.udfs.model.ExecutorModelCache;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One loaded tokenizer per JVM and content hash, shared by every task, stage and SQL function that runs
 * there: the first task writes the broadcast files into {@code <cache root>/tokenizers/<hash>} and loads
 * them, concurrent tasks wait for it and reuse the result. The cache root is the model cache's
 * ({@link ExecutorModelCache#cacheRoot()}: $SCORCH_MODEL_CACHE, else java.io.tmpdir/scorch-model-cache).
 */
public final class ExecutorTokenizerCache {
    private static final Map<String, Tokenizer> TOKENIZERS = new ConcurrentHashMap<>();
    private static final AtomicInteger LOADS = new AtomicInteger();

    private ExecutorTokenizerCache() {}

    /** The tokenizer of {@code shipment}, materialised and loaded on first use in this JVM. */
    public static Tokenizer tokenizer(TokenizerShipment shipment) {
        Tokenizer t = TOKENIZERS.get(shipment.contentHash());
        if (t != null) {
            return t;
        }
        return TOKENIZERS.computeIfAbsent(shipment.contentHash(), h -> {
            Path dir = shipment.materialize(ExecutorModelCache.cacheRoot());
            Tokenizer loaded = load(dir, shipment.origin());
            LOADS.incrementAndGet();
            return loaded;
        });
    }

    /**
     * Loads the driver's own folder (at registration, to fail early on a broken file) and caches it under
     * {@code contentHash}: in local mode the tasks then find it already loaded.
     */
    static Tokenizer preload(String contentHash, Path dir) {
        return TOKENIZERS.computeIfAbsent(contentHash, h -> {
            // the driver's own folder: loaded with its check for links out of it
            Tokenizer loaded =
                    Tokenizers.load(dir).orElseThrow(() -> new TokenizerException(dir + ": no tokenizer file"));
            LOADS.incrementAndGet();
            return loaded;
        });
    }

    private static Tokenizer load(Path dir, String origin) {
        return Tokenizers.loadVerified(dir) // shipped files, checked against the driver's manifest
                .orElseThrow(() -> new TokenizerException(dir + ": no tokenizer file (shipped from " + origin + ")"));
    }

    /** Drops the tokenizer with this content hash; the next task loads it again. Returns whether it was cached. */
    public static boolean evict(String contentHash) {
        return TOKENIZERS.remove(contentHash) != null;
    }

    /** Tokenizers loaded by this JVM so far (a test hook, and a figure for logs). */
    public static int loads() {
        return LOADS.get();
    }
}
