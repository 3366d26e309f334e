package dev.scorch.jobs.cli;

import dev.scorch.engine.backend.GpuMemoryBudget;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.gpu.GemmPrecision;
import java.nio.file.Files;
import java.nio.file.Path;
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
            "so it works before any weights are downloaded. Exits 1 when it does not fit."
        },
        footer = {
            "",
            "Examples:",
            "  bin/scorch gpu-budget --model conf/examples/deepseekv3-16b --gpu-gb 80",
            "  bin/scorch gpu-budget --model models/demo-small --gpu-gb 141 --rmm-fraction 0.3 --batch-tokens 16384"
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
            defaultValue = "16384",
            description = "Tokens of one engine batch. Default: ${DEFAULT-VALUE}.")
    int batchTokens;

    @Option(
            names = "--gpu-gb",
            defaultValue = "80",
            description = "The GPU's memory in GB (10^9 bytes). Default: ${DEFAULT-VALUE}.")
    double gpuGb;

    @Option(
            names = "--rmm-fraction",
            defaultValue = "0.30",
            description =
                    "spark.rapids.memory.gpu.allocFraction (= maxAllocFraction): the RAPIDS pool's share. Default: ${DEFAULT-VALUE}.")
    double rmmFraction;

    @Option(
            names = "--reserve-gb",
            defaultValue = "1",
            description = "spark.rapids.memory.gpu.reserve, in GB: kept outside the pool. Default: ${DEFAULT-VALUE}.")
    double reserveGb;

    @Override
    public Integer call() {
        Path config = Files.isDirectory(model) ? model.resolve("config.json") : model;
        ModelConfig c = ModelConfig.read(config);
        GemmPrecision p = GemmPrecision.parse(precision);
        GpuMemoryBudget b = GpuMemoryBudget.of(c, p, false);
        long total = (long) (gpuGb * 1e9);
        long pool = (long) (rmmFraction * total);
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

    private static final double GIB = 1024.0 * 1024 * 1024;
}
