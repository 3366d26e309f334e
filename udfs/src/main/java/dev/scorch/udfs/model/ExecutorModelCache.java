package dev.scorch.udfs.model;

import dev.scorch.engine.gpu.Device;
import dev.scorch.engine.gpu.GemmPrecision;
import dev.scorch.engine.gpu.GpuModel;
import dev.scorch.engine.gpu.GpuScorer;
import dev.scorch.engine.gpu.cuda.CudaDevice;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.tokenizer.Tokenizers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;
import org.apache.spark.SparkEnv;
import org.apache.spark.network.util.JavaUtils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One loaded model per executor JVM and content hash, shared by every task and stage that runs there:
 * the first task materialises and loads it, the others wait for and reuse it. Engine thread pools are
 * shared the same way, one per thread count. On GPU executors each (content hash, GPU ordinal, GEMM precision)
 * gets one model uploaded to that GPU, shared the same way by the tasks that run on it (its forward passes take
 * turns: one stream, one scratch arena per model).
 */
public final class ExecutorModelCache {
    private static final Logger LOG = LoggerFactory.getLogger(ExecutorModelCache.class);
    /** Whether this JVM has logged its kernel selection (once, with its first model). */
    private static final AtomicBoolean KERNELS_LOGGED = new AtomicBoolean();

    private static final Map<String, LoadedModel> MODELS = new ConcurrentHashMap<>();
    private static final Map<Integer, Ops> OPS = new ConcurrentHashMap<>();
    private static final AtomicInteger LOADS = new AtomicInteger();
    private static final Map<GpuKey, GpuScorer> GPU = new ConcurrentHashMap<>();
    private static final AtomicInteger GPU_LOADS = new AtomicInteger();

    private record GpuKey(String contentHash, int ordinal, GemmPrecision precision) {}

    private ExecutorModelCache() {}

    /**
     * Spark setting naming the folder where executors keep copies of shipped weights (--weights broadcast, and shared-path
     * from a remote file system). Executors read the application's settings, so it reaches them from the job config or
     * --conf. Give an absolute path on a local disk with room for the model; it wins over {@link #DIR_ENV}.
     */
    public static final String DIR_CONF = "spark.scorch.modelCache.dir";
    /** Environment variable naming the model cache folder (e.g. set in a Worker's or a pod's environment). */
    public static final String DIR_ENV = "SCORCH_MODEL_CACHE";
    /**
     * Spark setting: how long a copy no running application uses stays for the next one to reuse (a Spark duration:
     * 30min, 1h, 0 removes it at the exit of its last user). Copies are also removed, least recently used first, when a
     * new copy needs their room.
     */
    public static final String MAX_UNUSED_AGE_CONF = "spark.scorch.modelCache.maxUnusedAge";

    static final String MAX_UNUSED_AGE_DEFAULT = "1h";

    /**
     * This JVM's model cache folder: the application's {@value #DIR_CONF}, else $SCORCH_MODEL_CACHE, else
     * scorch-model-cache under java.io.tmpdir.
     */
    public static Path cacheRoot() {
        SparkEnv env = SparkEnv.get();
        String dir = env == null ? null : env.conf().get(DIR_CONF, null);
        if (dir == null || dir.isEmpty()) {
            dir = System.getenv(DIR_ENV);
        }
        return dir != null && !dir.isEmpty()
                ? Path.of(dir)
                : Path.of(System.getProperty("java.io.tmpdir"), "scorch-model-cache");
    }

    /** The application's {@value #MAX_UNUSED_AGE_CONF} (default {@value #MAX_UNUSED_AGE_DEFAULT}). */
    static Duration maxUnusedAge() {
        SparkEnv env = SparkEnv.get();
        long s = env == null
                ? JavaUtils.timeStringAsSec(MAX_UNUSED_AGE_DEFAULT)
                : env.conf().getTimeAsSeconds(MAX_UNUSED_AGE_CONF, MAX_UNUSED_AGE_DEFAULT);
        if (s < 0) {
            throw new IllegalArgumentException(MAX_UNUSED_AGE_CONF + " must not be negative, got "
                    + env.conf().get(MAX_UNUSED_AGE_CONF));
        }
        return Duration.ofSeconds(s);
    }

    /** The model (and tokenizer) of this source, loaded by the first task that asks and shared with every later one. */
    public static LoadedModel load(ModelSource source) {
        if (KERNELS_LOGGED.compareAndSet(false, true)) {
            LOG.info("scorch kernels: {}", KernelSelection.current().describe());
        }
        return MODELS.computeIfAbsent(source.manifest().contentHash(), h -> {
            Path dir = source.materialize(cacheRoot());
            LoadedModel m = new LoadedModel(DeepseekV3Model.load(dir), Tokenizers.load(dir), dir);
            LOADS.incrementAndGet();
            return m;
        });
    }

    public static DeepseekV3Model model(ModelSource source) {
        return load(source).model();
    }

    /**
     * A scorer on this source's model uploaded to CUDA device ordinal in precision, loaded by the first task that asks
     * (from the folder {@link #load} materialised) and shared with every later task of this JVM on that GPU.
     */
    public static GpuScorer gpuScorer(ModelSource source, int ordinal, GemmPrecision precision) {
        return gpuScorer(source, ordinal, precision, CudaDevice::new);
    }

    /** As {@link #gpuScorer(ModelSource, int, GemmPrecision)}, with the device opened by devices (tests pass a HostDevice). */
    static GpuScorer gpuScorer(
            ModelSource source, int ordinal, GemmPrecision precision, IntFunction<? extends Device> devices) {
        LoadedModel cpu = load(source);
        return GPU.computeIfAbsent(new GpuKey(source.manifest().contentHash(), ordinal, precision), k -> {
            Path dir = cpu.folder();
            ModelWeights w = ModelWeights.open(dir);
            Device dev = devices.apply(ordinal);
            try {
                GpuScorer s = new GpuScorer(GpuModel.load(w, dev, precision));
                GPU_LOADS.incrementAndGet();
                return s;
            } catch (RuntimeException | Error e) {
                dev.close();
                throw e;
            }
        });
    }

    public static Ops ops(int threads) {
        return OPS.computeIfAbsent(threads, CpuOps::new);
    }

    /**
     * Drops the model with this content hash from the cache (its memory maps go once nothing uses it); the next
     * task that asks loads it again. Its GPU copies are closed, freeing their device memory: call this only when no
     * task is scoring with it. Returns whether the CPU model was cached.
     */
    public static boolean evict(String contentHash) {
        for (GpuKey k : GPU.keySet()) {
            if (k.contentHash().equals(contentHash)) {
                GpuScorer s = GPU.remove(k);
                if (s != null) {
                    s.model().close();
                }
            }
        }
        return MODELS.remove(contentHash) != null;
    }

    /** Models loaded by this JVM so far (a test hook, and a figure for logs). */
    public static int loads() {
        return LOADS.get();
    }

    /** GPU models loaded by this JVM so far. */
    public static int gpuLoads() {
        return GPU_LOADS.get();
    }
}
