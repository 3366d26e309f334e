package dev.scorch.udfs.model;

import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.tokenizer.Tokenizers;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One loaded model per executor JVM and content hash, shared by every task and stage that runs there:
 * the first task materialises and loads it, the others wait for and reuse it. Engine thread pools are
 * shared the same way, one per thread count.
 */
public final class ExecutorModelCache {
  private static final Map<String, LoadedModel> MODELS = new ConcurrentHashMap<>();
  private static final Map<Integer, Ops> OPS = new ConcurrentHashMap<>();
  private static final AtomicInteger LOADS = new AtomicInteger();

  private ExecutorModelCache() {}

  /** This JVM's model cache folder: $SCORCH_MODEL_CACHE, else scorch-model-cache under java.io.tmpdir. */
  public static Path cacheRoot() {
    String env = System.getenv("SCORCH_MODEL_CACHE");
    return env != null && !env.isEmpty() ? Path.of(env) : Path.of(System.getProperty("java.io.tmpdir"), "scorch-model-cache");
  }

  /** The model (and tokenizer) of this source, loaded by the first task that asks and shared with every later one. */
  public static LoadedModel load(ModelSource source) {
    return MODELS.computeIfAbsent(source.manifest().contentHash(), h -> {
      Path dir = source.materialize(cacheRoot());
      LoadedModel m = new LoadedModel(DeepseekV3Model.load(dir), Tokenizers.load(dir));
      LOADS.incrementAndGet();
      return m;
    });
  }

  public static DeepseekV3Model model(ModelSource source) {
    return load(source).model();
  }

  public static Ops ops(int threads) {
    return OPS.computeIfAbsent(threads, CpuOps::new);
  }

  /**
   * Drops the model with this content hash from the cache (its memory maps go once nothing uses it); the next
   * task that asks loads it again. Returns whether it was cached.
   */
  public static boolean evict(String contentHash) {
    return MODELS.remove(contentHash) != null;
  }

  /** Models loaded by this JVM so far (a test hook, and a figure for logs). */
  public static int loads() {
    return LOADS.get();
  }
}
