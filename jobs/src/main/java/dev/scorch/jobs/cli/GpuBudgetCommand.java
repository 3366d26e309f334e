package dev.scorch.jobs.cli;

import dev.scorch.engine.backend.GpuMemoryBudget;
import dev.scorch.engine.backend.GpuPlan;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.GemmPrecision;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

@Command(
        name = "gpu-budget",
        mixinStandardHelpOptions = true,
        description = {
            "The GPU memory a model needs on the CUDA backend (GpuMemoryBudget: weights as uploaded, scratch for a batch,",
            "a context/cuBLAS reserve) next to what a GPU leaves beside the RAPIDS memory pool; reads only config.json,",
            "so it works before any weights are downloaded. Exits 1 when it does not fit.",
            "With --plan: the layers split over GPU nodes (weights as the checkpoint stores them: FP8 blocks, INT4 groups,",
            "BF16), the GPUs and nodes needed, KV-cache tokens left, the batch cap and the Spark settings to paste",
            "(docs/multi-gpu.md)."
        },
        footer = {
            "",
            "Examples:",
            "  bin/scorch gpu-budget --model conf/examples/deepseekv3-16b --gpu-gb 80",
            "  bin/scorch gpu-budget --model models/demo-small --gpu-gb 141 --rmm-fraction 0.3 --batch-tokens 16384",
            "  bin/scorch gpu-budget --model conf/examples/kimi-k2-instruct --plan --gpu h200 --gpus-per-node 8"
        })
public final class GpuBudgetCommand implements Callable<Integer> {
    @Option(names = "--model", required = true, description = "Checkpoint folder (or any folder) holding config.json.")
    Path model;

    @Option(
            names = "--gpu-precision",
            defaultValue = "bf16x3",
            description = "bf16, bf16x2, bf16x3 or fp32. Default: ${DEFAULT-VALUE}.")
    String precision;

    @Option(
            names = "--batch-tokens",
            description = "Tokens of one engine batch (with --plan: one micro-batch, whose scratch every GPU keeps)."
                    + " Default: 16384, with --plan " + PLAN_BATCH_TOKENS + ".")
    Integer batchTokensOption;

    @Option(
            names = "--gpu-gb",
            defaultValue = "80",
            description = "The GPU's memory in GB (10^9 bytes). Default: ${DEFAULT-VALUE}.")
    double gpuGb;

    @Option(names = "--gpu", description = "h100 (80 GB), h200 (141 GB) or the GPU's memory in GB; replaces --gpu-gb.")
    String gpu;

    @Option(
            names = "--rmm-fraction",
            description =
                    "spark.rapids.memory.gpu.allocFraction (= maxAllocFraction): the RAPIDS pool's share of the GPU"
                            + " (with --plan: of each node's first GPU, the one the plugin uses). Default: 0.30, with --plan "
                            + PLAN_RMM_FRACTION
                            + ".")
    Double rmmFraction;

    @Option(
            names = "--plan",
            description =
                    "Split the model's layers over GPU nodes (one task per node owning all its GPUs) and print the"
                            + " plan and its Spark settings.")
    boolean plan;

    @Option(
            names = "--gpus-per-node",
            defaultValue = "8",
            description = "GPUs of one node, with --plan. Default: ${DEFAULT-VALUE}.")
    int gpusPerNode;

    @Option(
            names = "--reserve-gb",
            defaultValue = "1",
            description = "spark.rapids.memory.gpu.reserve, in GB: kept outside the pool. Default: ${DEFAULT-VALUE}.")
    double reserveGb;

    /** The RAPIDS pool's share of a node's first GPU in a plan: the model needs the memory more than Spark SQL does. */
    static final double PLAN_RMM_FRACTION = 0.05;

    /** A pipeline's micro-batch: several flow through the stages at once, each a fraction of a one-GPU batch. */
    static final int PLAN_BATCH_TOKENS = 4096;

    @Override
    public Integer call() {
        Path config = Files.isDirectory(model) ? model.resolve("config.json") : model;
        ModelConfig c = ModelConfig.read(config);
        GemmPrecision p = GemmPrecision.parse(precision);
        double gb = gpu == null ? gpuGb : gpuGb(gpu);
        if (plan) {
            return plan(config, c, p, gb);
        }
        double rmm = rmmFraction == null ? 0.30 : rmmFraction;
        int batchTokens = batchTokensOption == null ? 16384 : batchTokensOption;
        GpuMemoryBudget b = GpuMemoryBudget.of(c, p, false);
        long total = (long) (gb * 1e9);
        long pool = (long) (rmm * total);
        long reserve = (long) (reserveGb * 1e9);
        GpuMemoryBudget.Report r = new GpuMemoryBudget.Report(
                b.weightBytes(),
                b.activationBytes(batchTokens),
                batchTokens,
                GpuMemoryBudget.DEFAULT_RESERVE_BYTES + reserve,
                total,
                pool);
        System.out.printf(
                Locale.ROOT,
                "%s at %s: weights %.2f GiB (embedding %.2f GiB), scratch %.1f KiB per batch token, KV cache %.1f KiB per"
                        + " cached token%n",
                config,
                p.name().toLowerCase(Locale.ROOT),
                b.weightBytes() / GIB,
                b.embeddingBytes() / GIB,
                (b.activationBytes(batchTokens) - b.activationBytes(0)) / 1024.0 / Math.max(1, batchTokens),
                b.kvBytesPerToken() / 1024.0);
        System.out.println(r.line() + " (reserve = the engine's " + GpuMemoryBudget.DEFAULT_RESERVE_BYTES / (1 << 20)
                + " MiB + the pool's reserve)");
        int fit = b.maxBatchTokens(total - pool - reserve);
        System.out.printf(Locale.ROOT, "largest batch that fits: %,d tokens%n", fit);
        return r.fits() ? 0 : 1;
    }

    /** --gpu: a name's memory in GB (10^9 bytes, as the GPUs are sold), or a number of GB. */
    static double gpuGb(String gpu) {
        return switch (gpu.toLowerCase(Locale.ROOT)) {
            case "h100" -> 80;
            case "h200" -> 141;
            default -> {
                try {
                    yield Double.parseDouble(gpu);
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException("--gpu " + gpu + ": h100, h200 or the GPU's memory in GB");
                }
            }
        };
    }

    private int plan(Path config, ModelConfig c, GemmPrecision p, double gb) {
        double rmm = rmmFraction == null ? PLAN_RMM_FRACTION : rmmFraction;
        int batchTokens = batchTokensOption == null ? PLAN_BATCH_TOKENS : batchTokensOption;
        GpuPlan.Settings s =
                new GpuPlan.Settings((long) (gb * 1e9), gpusPerNode, rmm, (long) (reserveGb * 1e9), batchTokens);
        GpuPlan plan;
        try {
            plan = GpuPlan.of(c, p, s);
        } catch (IllegalArgumentException e) {
            System.out.println(config + ": " + e.getMessage());
            return 1;
        }
        for (String line : lines(config, c, plan, gpu == null ? gb + " GB" : gpu)) {
            System.out.println(line);
        }
        return 0;
    }

    /** The plan as printed: a summary, one line per GPU, the KV cache and batch cap, the Spark settings. */
    static List<String> lines(Path config, ModelConfig c, GpuPlan plan, String gpuName) {
        GpuPlan.Settings s = plan.settings();
        List<String> out = new java.util.ArrayList<>();
        String precision = c.quantization() == null
                ? c.torchDtype()
                : c.quantization().describe() + ", the rest " + c.torchDtype();
        out.add(String.format(
                Locale.ROOT,
                "%s: %d layers, %s: weights %.1f GB as stored (embedding %.2f GB, norm + lm_head %.2f GB);"
                        + " KV cache %,d bytes a token a layer",
                config,
                c.numHiddenLayers(),
                precision,
                plan.weights().total() / 1e9,
                plan.weights().embedding() / 1e9,
                plan.weights().head() / 1e9,
                plan.kvBytesPerTokenLayer()));
        out.add(String.format(
                Locale.ROOT,
                "%d x %s (%.0f GB) a node: %d GPU%s needed, %d node%s; layers over %d GPUs (one task a node owns its %d)",
                s.gpusPerNode(),
                gpuName,
                s.gpuBytes() / 1e9,
                plan.gpusNeeded(),
                plan.gpusNeeded() == 1 ? "" : "s",
                plan.nodes(),
                plan.nodes() == 1 ? "" : "s",
                plan.gpus(),
                s.gpusPerNode()));
        out.add(String.format(
                Locale.ROOT,
                "each GPU: %.2f GB CUDA context and reserve, %.2f GB scratch (%,d batch tokens); a node's first GPU also"
                        + " the RAPIDS pool, %.2f GB",
                (s.reserveBytes() + GpuMemoryBudget.DEFAULT_RESERVE_BYTES) / 1e9,
                plan.scratchBytes() / 1e9,
                s.batchTokens(),
                s.poolBytes(0) / 1e9));
        if (plan.gpusNeeded() == 1) {
            out.add(
                    "(one GPU holds the model: conf/gpu-cluster.conf, a copy per GPU, scores more rows than a pipeline)");
        }
        out.add("node gpu  layers            weights GB  KV tokens");
        for (GpuPlan.Stage st : plan.stages()) {
            out.add(String.format(
                    Locale.ROOT,
                    "%4d %3d  %-16s %11.2f  %s",
                    st.node(),
                    st.gpu() % s.gpusPerNode(),
                    plan.split().get(st.gpu()),
                    st.weightBytes() / 1e9,
                    st.layers() == 0 ? "-" : String.format(Locale.ROOT, "%,d", st.kvTokens())));
        }
        out.add(String.format(
                Locale.ROOT,
                "KV-cache tokens left: %,d (every GPU caches each token for its layers: the fewest any holds)",
                plan.kvTokens()));
        out.add(String.format(
                Locale.ROOT,
                "batch cap: %,d tokens (scoring: the largest batch whose scratch every GPU holds beside its weights)",
                plan.batchCap()));
        out.add("Spark settings (conf/gpu-cluster-" + (plan.nodes() == 1 ? "1node" : "2node") + ".conf has the rest):");
        out.addAll(sparkSettings(plan));
        return out;
    }

    /** The Spark and Scorch settings a plan needs: one executor a node, one task owning the node's GPUs. */
    static List<String> sparkSettings(GpuPlan plan) {
        GpuPlan.Settings s = plan.settings();
        String fraction = String.format(Locale.ROOT, "%.2f", s.rmmFraction());
        return List.of(
                "spark.executor.instances = " + plan.nodes(),
                "spark.executor.resource.gpu.amount = " + s.gpusPerNode(),
                "spark.task.resource.gpu.amount = " + s.gpusPerNode(),
                "spark.rapids.memory.gpu.allocFraction = " + fraction,
                "spark.rapids.memory.gpu.maxAllocFraction = " + fraction,
                "spark.rapids.memory.gpu.minAllocFraction = " + fraction,
                "spark.rapids.memory.gpu.reserve = " + Math.round(s.reserveBytes() / 1e6) + "m",
                "scorch.max-batch-tokens = " + s.batchTokens());
    }

    private static final double GIB = 1024.0 * 1024 * 1024;
}
