package dev.scorch.udfs.model;

import dev.scorch.engine.backend.BackendChoice;
import dev.scorch.engine.backend.GpuPlan;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.model.GpuStages;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.tokenizer.Tokenizers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.network.util.JavaUtils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One loaded model per executor JVM and content hash, shared by every task and stage that runs there:
 * the first task materialises and loads it, the others wait for and reuse it. Engine thread pools are
 * shared the same way, one per thread count. On GPU executors each (content hash, set of GPU ordinals, GEMM
 * precision) gets one model uploaded to those GPUs (one GPU: a GpuModel; a task owning several: a GpuPipeline over
 * them), shared the same way by the tasks that run on them (their forward passes take turns: one stream and one
 * scratch arena per device).
 */
public final class ExecutorModelCache {
    private static final Logger LOG = LoggerFactory.getLogger(ExecutorModelCache.class);
    /** Whether this JVM has logged its kernel selection (once, with its first model). */
    private static final AtomicBoolean KERNELS_LOGGED = new AtomicBoolean();

    private static final Map<String, LoadedModel> MODELS = new ConcurrentHashMap<>();
    private static final AtomicInteger LOADS = new AtomicInteger();
    private static final Map<GpuKey, Scorer> GPU = new ConcurrentHashMap<>();
    private static final AtomicInteger GPU_LOADS = new AtomicInteger();

    /** ordinals: the GPUs, ascending (one: a GpuModel; several: a GpuPipeline over them). */
    private record GpuKey(String contentHash, List<Integer> ordinals, GemmPrecision precision) {}

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
            LoadedModel m = new LoadedModel(DeepseekV3Model.load(dir), Tokenizers.loadVerified(dir), dir);
            LOADS.incrementAndGet();
            return m;
        });
    }

    public static DeepseekV3Model model(ModelSource source) {
        return load(source).model();
    }

    /**
     * A scorer on this source's model uploaded to the CUDA devices of these ordinals (a task's GPUs) in precision,
     * loaded by the first task that asks (from the folder {@link #load} materialised) and shared with every later task
     * of this JVM on the same set of GPUs. One GPU: a {@link GpuModel}. Several: a {@link GpuPipeline}, one stage per
     * GPU in ascending ordinal order, its layers split as {@link #pipelineSettings} says.
     */
    public static Scorer gpuScorer(ModelSource source, List<Integer> ordinals, GemmPrecision precision) {
        return gpuScorer(source, ordinals, precision, BackendChoice::cudaDevice);
    }

    /** As {@link #gpuScorer(ModelSource, List, GemmPrecision)} on one GPU, with the device opened by devices. */
    static Scorer gpuScorer(
            ModelSource source, int ordinal, GemmPrecision precision, IntFunction<? extends Device> devices) {
        return gpuScorer(source, List.of(ordinal), precision, devices);
    }

    /**
     * As {@link #gpuScorer(ModelSource, List, GemmPrecision)}, with the devices opened by devices (tests pass
     * HostDevices). A device that fails to open fails the call naming its ordinal, and the ones opened before it are
     * closed; so are all of them when the upload fails.
     */
    public static Scorer gpuScorer(
            ModelSource source,
            List<Integer> ordinals,
            GemmPrecision precision,
            IntFunction<? extends Device> devices) {
        if (ordinals.isEmpty()) {
            throw new IllegalArgumentException("a GPU model needs at least one GPU");
        }
        List<Integer> gpus =
                List.copyOf(new TreeSet<>(ordinals)); // the set: Spark's order of a task's addresses varies
        LoadedModel cpu = load(source);
        return GPU.computeIfAbsent(new GpuKey(source.manifest().contentHash(), gpus, precision), k -> {
            ModelWeights w = ModelWeights.open(cpu.folder());
            List<Device> devs = open(gpus, devices);
            try {
                GpuStages stages = devs.size() == 1
                        ? GpuModel.load(w, devs.get(0), precision)
                        : GpuPipeline.load(
                                w,
                                devs,
                                precision,
                                GpuPlan.planSplit(w.config(), precision, pipelineSettings(devs, sparkConf())));
                GPU_LOADS.incrementAndGet();
                return new Scorer(stages);
            } catch (RuntimeException | Error e) {
                closeAll(devs); // a failed load leaves the devices to us (GpuModel.load, GpuPipeline.load)
                throw e;
            }
        });
    }

    /** One device per ordinal, in order; when one fails to open, the others are closed and the failure names it. */
    private static List<Device> open(List<Integer> ordinals, IntFunction<? extends Device> devices) {
        List<Device> devs = new ArrayList<>(ordinals.size());
        for (int o : ordinals) {
            try {
                devs.add(devices.apply(o));
            } catch (RuntimeException | Error e) {
                closeAll(devs);
                throw new IllegalStateException(
                        "cannot open GPU " + o
                                + (ordinals.size() > 1 ? " (one of the task's GPUs " + ordinals + ")" : "") + ": "
                                + e.getMessage(),
                        e);
            }
        }
        return devs;
    }

    private static void closeAll(List<Device> devs) {
        for (Device d : devs) {
            try {
                d.close();
            } catch (RuntimeException e) {
                // closing what a failed load opened: the load's failure is the one to report
            }
        }
    }

    private static SparkConf sparkConf() {
        SparkEnv env = SparkEnv.get();
        return env == null ? null : env.conf();
    }

    /** The RAPIDS Accelerator's plugin class: with it in spark.plugins, its pool sits on the executor's first GPU. */
    static final String RAPIDS_PLUGIN = "com.nvidia.spark.SQLPlugin";

    /**
     * How a pipeline over devs places its layers: {@link GpuPlan#planSplit} with what {@code bin/scorch gpu-budget
     * --plan} counts, so the split that runs is the plan's for the same settings. Every GPU at the smallest device's
     * total memory, one node of devs.size() GPUs, micro-batches of {@link GpuPipeline#MICRO_BATCH_TOKENS}; with the
     * RAPIDS plugin in spark.plugins, its pool on the first GPU (spark.rapids.memory.gpu.allocFraction of it) and
     * spark.rapids.memory.gpu.reserve on every GPU, unset ones counted at gpu-budget's defaults (0.05, 1 GB);
     * without the plugin neither.
     */
    static GpuPlan.Settings pipelineSettings(List<Device> devs, SparkConf conf) {
        long smallest = Long.MAX_VALUE;
        for (Device d : devs) {
            smallest = Math.min(smallest, d.totalBytes());
        }
        return planSettings(smallest, devs.size(), GpuPipeline.MICRO_BATCH_TOKENS, conf);
    }

    /**
     * The plan's settings for gpus GPUs of gpuBytes each and batches of batchTokens: with the RAPIDS plugin in conf's
     * spark.plugins, its pool and reserve as {@link #pipelineSettings} counts them; without it (or conf null) neither.
     */
    public static GpuPlan.Settings planSettings(long gpuBytes, int gpus, int batchTokens, SparkConf conf) {
        double rmm = 0;
        long reserve = 0;
        if (conf != null
                && java.util.Arrays.asList(conf.get("spark.plugins", "").split(",")).stream()
                        .anyMatch(p -> p.trim().equals(RAPIDS_PLUGIN))) {
            rmm = conf.getDouble("spark.rapids.memory.gpu.allocFraction", 0.05);
            reserve = conf.contains("spark.rapids.memory.gpu.reserve")
                    ? conf.getSizeAsBytes("spark.rapids.memory.gpu.reserve")
                    : 1_000_000_000L;
        }
        return new GpuPlan.Settings(gpuBytes, gpus, rmm, reserve, batchTokens);
    }

    /** The CPU kernels of this executor for a task: threads engine threads in precision (null: the executor default). */
    public static CpuOps ops(int threads, dev.scorch.engine.kernels.CpuPrecision precision) {
        return BackendChoice.cpuOps(threads, precision);
    }

    /**
     * Drops the model with this content hash from the cache (its memory maps go once nothing uses it); the next
     * task that asks loads it again. Its GPU copies are closed, freeing their device memory: call this only when no
     * task is scoring with it. Returns whether the CPU model was cached.
     */
    public static boolean evict(String contentHash) {
        for (GpuKey k : GPU.keySet()) {
            if (k.contentHash().equals(contentHash)) {
                Scorer s = GPU.remove(k);
                if (s != null) {
                    if (s.stages() instanceof GpuPipeline p) {
                        p.close();
                    } else if (s.stages() instanceof GpuModel m) {
                        m.close();
                    }
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
