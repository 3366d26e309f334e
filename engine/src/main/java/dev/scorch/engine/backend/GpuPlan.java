package dev.scorch.engine.backend;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.model.KvCache;
import dev.scorch.engine.model.ModelWeights;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Where a model's layers go on GPU nodes, from config.json alone, before anyone rents the GPUs: contiguous layer ranges,
 * one per GPU, the embedding on the first GPU and the final norm + lm_head on the last, weights as the checkpoint stores
 * them ({@link CheckpointBytes}).
 *
 * <p>Each GPU holds, out of its memory: the CUDA context and cuBLAS reserve ({@link
 * GpuMemoryBudget#DEFAULT_RESERVE_BYTES}) plus a margin ({@link Settings#reserveBytes}, spark.rapids.memory.gpu.reserve);
 * on the first GPU of each node (the one the RAPIDS plugin uses: it runs on one GPU per executor) the RAPIDS pool; the
 * scratch of one forward of {@link Settings#batchTokens} tokens ({@link GpuMemoryBudget#activationBytes}, the whole
 * model's pass: an upper bound for a stage); its weights; the rest is KV cache, (kv_lora_rank + qk_rope_head_dim) fp32
 * values per token per layer ({@link KvCache#bytesPerToken}, as GpuKvCache holds it).
 *
 * <p>The plan: the fewest GPUs that hold the weights (packed in order, each GPU filled before the next), the nodes
 * those need, and over all the GPUs of those nodes the split that leaves the most KV-cache tokens (every stage caches
 * every token for its own layers, so the pipeline holds what its tightest GPU holds), then among those the fewest
 * layers on the busiest GPU (the pipeline runs at its slowest stage's pace).
 *
 * @param settings    the GPUs and the margins planned with
 * @param weights     the checkpoint's bytes
 * @param gpusNeeded  the fewest GPUs that hold the weights beside the margins and scratch
 * @param nodes       nodes of {@link Settings#gpusPerNode} GPUs that gpusNeeded take
 * @param stages      the split over nodes x gpusPerNode GPUs, in pipeline order (a GPU with no layers is left out)
 * @param kvTokens    KV-cache tokens every stage holds beside its weights and a batch's scratch (the pipeline's)
 * @param batchCap    the largest scoring batch (no KV cache) whose scratch fits every stage beside its weights
 */
public record GpuPlan(
        Settings settings,
        CheckpointBytes weights,
        long kvBytesPerTokenLayer,
        long scratchBytes,
        int gpusNeeded,
        int nodes,
        List<Stage> stages,
        long kvTokens,
        int batchCap) {

    /**
     * @param gpuBytes      one GPU's memory
     * @param gpusPerNode   GPUs of one node (one executor, one task owning them all)
     * @param rmmFraction   spark.rapids.memory.gpu.allocFraction: the RAPIDS pool's share of the node's first GPU
     * @param reserveBytes  spark.rapids.memory.gpu.reserve: a margin kept on every GPU for CUDA contexts
     * @param batchTokens   tokens of one micro-batch, whose scratch every GPU keeps
     */
    public record Settings(long gpuBytes, int gpusPerNode, double rmmFraction, long reserveBytes, int batchTokens) {
        public Settings {
            if (gpuBytes <= 0 || gpusPerNode <= 0 || rmmFraction < 0 || rmmFraction >= 1 || reserveBytes < 0) {
                throw new IllegalArgumentException("bad GPU plan settings: " + this);
            }
        }

        /** The RAPIDS pool on GPU gpu (global index): on the first GPU of each node. */
        public long poolBytes(int gpu) {
            return gpu % gpusPerNode == 0 ? (long) (rmmFraction * gpuBytes) : 0;
        }

        /** What GPU gpu leaves to the engine: its memory less the pool and both reserves. */
        public long engineBytes(int gpu) {
            return gpuBytes - poolBytes(gpu) - reserveBytes - GpuMemoryBudget.DEFAULT_RESERVE_BYTES;
        }
    }

    /**
     * One GPU's part.
     *
     * @param gpu          global index: node x gpusPerNode + the GPU's index on its node
     * @param firstLayer   its first layer
     * @param endLayer     one past its last (firstLayer when it holds none)
     * @param embedding    whether it holds model.embed_tokens
     * @param head         whether it holds model.norm and lm_head
     * @param weightBytes  its weights
     * @param engineBytes  what the GPU leaves to the engine (less the pool on a node's first GPU and the reserves)
     * @param kvTokens     KV-cache tokens it holds for its layers beside weights and scratch
     */
    public record Stage(
            int gpu,
            int node,
            int firstLayer,
            int endLayer,
            boolean embedding,
            boolean head,
            long weightBytes,
            long engineBytes,
            long kvTokens) {
        public int layers() {
            return endLayer - firstLayer;
        }
    }

    /**
     * Layers per device for one node of settings' GPUs ({@link GpuPlan.Settings#gpusPerNode} of them), as {@link GpuPlan}
     * places them: weights as the checkpoint stores them, the margins and a micro-batch's scratch on every GPU, the rest
     * KV cache; the split that leaves the most KV tokens, then the fewest layers on the busiest GPU. GPUs the plan leaves
     * empty get no layers. Throws when one node's GPUs do not hold the model.
     */
    public static int[] planSplit(ModelConfig c, GemmPrecision precision, GpuPlan.Settings settings) {
        GpuPlan plan = GpuPlan.of(c, precision, settings);
        if (plan.nodes() > 1) {
            throw new IllegalArgumentException(String.format(
                    "the model needs %d devices of %.1f GB; %d given",
                    plan.gpusNeeded(), settings.gpuBytes() / 1e9, settings.gpusPerNode()));
        }
        int[] layers = new int[settings.gpusPerNode()];
        for (GpuPlan.Stage s : plan.stages()) {
            layers[s.gpu()] = s.layers();
        }
        return layers;
    }

    /**
     * Layers per device of devs, for {@link GpuPipeline#load(ModelWeights, List, GemmPrecision, int[])}: placed as
     * {@link #planSplit(ModelConfig, GemmPrecision, Settings)} places them as if every device had the smallest one's
     * memory, for micro-batches of up to {@link GpuPipeline#MICRO_BATCH_TOKENS} tokens.
     */
    public static int[] planSplit(ModelConfig c, GemmPrecision precision, List<Device> devs) {
        long smallest = Long.MAX_VALUE;
        for (Device d : devs) {
            smallest = Math.min(smallest, d.totalBytes());
        }
        GpuPlan.Settings s = new GpuPlan.Settings(smallest, devs.size(), 0, 0, GpuPipeline.MICRO_BATCH_TOKENS);
        return planSplit(c, precision, s);
    }

    /** The plan for c's checkpoint on settings' GPUs, the scratch counted at precision; throws when no GPU count holds it. */
    public static GpuPlan of(ModelConfig c, GemmPrecision precision, Settings s) {
        CheckpointBytes w = CheckpointBytes.of(c);
        GpuMemoryBudget budget = GpuMemoryBudget.of(c, precision, false);
        long scratch = budget.activationBytes(s.batchTokens());
        long kv = KvCache.bytesPerToken(1, c.kvLoraRank(), c.qkRopeHeadDim());
        int n = c.numHiddenLayers();

        Packing least = pack(w, s, scratch, kv, 0, n, n + 2);
        if (least == null) {
            throw new IllegalArgumentException(String.format(
                    "no GPU of %.1f GB holds even one stage: the largest layer is %.2f GB, the embedding %.2f GB,"
                            + " lm_head %.2f GB, beside %.2f GB of scratch for %d batch tokens and %.2f GB reserved",
                    s.gpuBytes() / 1e9,
                    Arrays.stream(w.layers()).max().orElse(0) / 1e9,
                    w.embedding() / 1e9,
                    w.head() / 1e9,
                    scratch / 1e9,
                    s.batchTokens(),
                    (s.gpuBytes() - s.engineBytes(0)) / 1e9));
        }
        int needed = least.gpus();
        int nodes = (needed + s.gpusPerNode() - 1) / s.gpusPerNode();
        int gpus = nodes * s.gpusPerNode();

        // The most KV tokens every stage holds over all the nodes' GPUs, then the fewest layers on the busiest GPU.
        long lo = 0; // fits
        long hi = maxEngineBytes(s, gpus) / kv + 1; // does not: no GPU holds one layer's cache of hi tokens
        while (hi - lo > 1) {
            long mid = (lo + hi) >>> 1;
            if (pack(w, s, scratch, kv, mid, n, gpus) != null) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        long tokens = lo;
        int fewest = (n + gpus - 1) / gpus;
        while (pack(w, s, scratch, kv, tokens, fewest, gpus) == null) {
            fewest++;
        }
        Packing p = pack(w, s, scratch, kv, tokens, fewest, gpus);

        List<Stage> stages = new ArrayList<>();
        long kvTokens = Long.MAX_VALUE;
        int batchCap = Integer.MAX_VALUE;
        for (int g = 0; g < p.gpus(); g++) {
            int first = p.starts[g];
            int end = p.starts[g + 1];
            boolean embedding = g == 0;
            boolean head = g == p.gpus() - 1;
            long bytes = w.layers(first, end) + (embedding ? w.embedding() : 0) + (head ? w.head() : 0);
            long engine = s.engineBytes(g);
            long stageTokens = end > first ? (engine - scratch - bytes) / (kv * (end - first)) : Long.MAX_VALUE;
            stages.add(new Stage(g, g / s.gpusPerNode(), first, end, embedding, head, bytes, engine, stageTokens));
            kvTokens = Math.min(kvTokens, stageTokens);
            batchCap = Math.min(batchCap, budget.largest(engine - bytes));
        }
        return new GpuPlan(s, w, kv, scratch, needed, nodes, List.copyOf(stages), kvTokens, batchCap);
    }

    /** GPUs in the split (those that hold something; at most nodes x gpusPerNode). */
    public int gpus() {
        return stages.size();
    }

    /** Each GPU's layers, "embed+0-3", "4-7", ..., "57-60+head", in pipeline order. */
    public List<String> split() {
        List<String> out = new ArrayList<>();
        for (Stage st : stages) {
            String layers = st.layers() == 0
                    ? ""
                    : st.layers() == 1 ? "" + st.firstLayer() : st.firstLayer() + "-" + (st.endLayer() - 1);
            String label = (st.embedding() ? "embed" : "")
                    + (st.embedding() && !layers.isEmpty() ? "+" : "")
                    + layers
                    + (st.head() && !(layers.isEmpty() && !st.embedding()) ? "+" : "")
                    + (st.head() ? "head" : "");
            out.add(label);
        }
        return out;
    }

    /** Layer boundaries of a packing: GPU g holds layers [starts[g], starts[g + 1]). */
    private record Packing(int[] starts) {
        int gpus() {
            return starts.length - 1;
        }
    }

    /**
     * Packs the embedding, the layers in order and the head into at most maxGpus GPUs, each filled before the next (so
     * the fewest GPUs: moving a layer to a later GPU never frees room for one after it), each layer costing its weights
     * and kvTokens of cache, at most maxLayers a GPU; null when they do not fit. The GPUs past the last used are not
     * in the packing.
     */
    private static Packing pack(
            CheckpointBytes w, Settings s, long scratch, long kv, long kvTokens, int maxLayers, int maxGpus) {
        int n = w.layers().length;
        List<Integer> starts = new ArrayList<>();
        starts.add(0);
        int g = 0;
        long room = s.engineBytes(0) - scratch - w.embedding(); // the embedding goes on the first GPU
        if (room < 0) {
            return null;
        }
        int onGpu = 0;
        for (int l = 0; l < n; l++) {
            long cost = w.layers()[l] + kvTokens * kv;
            if (cost > room || onGpu == maxLayers) {
                if ((onGpu == 0 && g > 0) || ++g >= maxGpus) {
                    return null; // a layer no empty GPU holds, or out of GPUs
                }
                starts.add(l);
                room = s.engineBytes(g) - scratch;
                onGpu = 0;
                if (cost > room) {
                    return null;
                }
            }
            room -= cost;
            onGpu++;
        }
        if (w.head() > room) { // lm_head on a GPU of its own
            if (++g >= maxGpus || w.head() > s.engineBytes(g) - scratch) {
                return null;
            }
            starts.add(n);
        }
        starts.add(n);
        return new Packing(starts.stream().mapToInt(Integer::intValue).toArray());
    }

    private static long maxEngineBytes(Settings s, int gpus) {
        long m = 0;
        for (int g = 0; g < gpus; g++) {
            m = Math.max(m, s.engineBytes(g));
        }
        return m;
    }
}
