package dev.scorch.jobs.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.bench.DecodeBenchmark;
import dev.scorch.engine.bench.PrefillBenchmark;
import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.ModelWeights;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

@Command(
        name = "bench",
        mixinStandardHelpOptions = true,
        description = {
            "Benchmarks the engine on one machine, without Spark: warm-up, then timed runs of batched",
            "prefill scoring on random token ids. Prints which kernels run and why, tokens/s (median, min,",
            "max), model GFLOP/s, peak RSS, and one JSON line with the same figures."
        },
        footer = {
            "",
            "Examples:",
            "  bin/scorch make-demo-model --out models/demo-small --preset small",
            "  bin/scorch bench --model models/demo-small --mode prefill --batch 8 --seq 256 --threads 2",
            "  bin/scorch bench --model models/demo-small --mode prefill --batch 1 --seq 1024 --runs 5",
            "  bin/scorch bench --model models/demo-small --mode prefill --cpu-precision bf16x3",
            "  bin/scorch bench --model models/demo-small --mode decode --batch 8 --seq 64 --steps 32"
        })
public final class BenchCommand implements Callable<Integer> {
    @Option(names = "--model", required = true, description = "Checkpoint folder.")
    Path model;

    @Option(
            names = "--mode",
            defaultValue = "prefill",
            description = "prefill, or decode (greedy steps over the MLA latent cache"
                    + " after a --seq-token prefill). Default: ${DEFAULT-VALUE}.")
    String mode;

    @Option(names = "--batch", defaultValue = "8", description = "Sequences per batch. Default: ${DEFAULT-VALUE}.")
    int batch;

    @Option(names = "--seq", defaultValue = "256", description = "Tokens per sequence. Default: ${DEFAULT-VALUE}.")
    int seq;

    @Option(names = "--threads", description = "Engine threads. Default: available processors.")
    Integer threads;

    @Option(names = "--runs", defaultValue = "5", description = "Timed runs. Default: ${DEFAULT-VALUE}.")
    int runs;

    @Option(names = "--warmup", defaultValue = "2", description = "Untimed warm-up runs. Default: ${DEFAULT-VALUE}.")
    int warmup;

    @Option(
            names = "--steps",
            defaultValue = "32",
            description = "Decode steps per run (decode mode). Default: ${DEFAULT-VALUE}.")
    int steps;

    @Option(
            names = "--cpu-precision",
            description = "Prefill GEMMs: fp32, or bf16x3, bf16x2, bf16 (bf16 parts on AVX512-BF16; fp32, with the"
                    + " reason, where the CPU lacks it). Default: -Dscorch.cpu.precision, else fp32.")
    String cpuPrecision;

    @Option(
            names = "--seed",
            defaultValue = "0",
            description = "Seed of the random token ids. Default: ${DEFAULT-VALUE}.")
    long seed;

    /** The loaded model's weight format and shard bytes, for the JSON lines. */
    private String quantization;

    private long bytesOnDisk;

    @Override
    public Integer call() throws Exception {
        if (!mode.equals("prefill") && !mode.equals("decode")) {
            throw new IllegalArgumentException("--mode " + mode + ": expected prefill or decode");
        }
        if (batch < 1 || seq < 1 || runs < 1 || warmup < 0) {
            throw new IllegalArgumentException("--batch, --seq and --runs must be >= 1, --warmup >= 0");
        }
        if (cpuPrecision != null) {
            CpuPrecision.parse(cpuPrecision); // a name that is no mode fails here, not as fp32
        }
        int n = threads == null ? Runtime.getRuntime().availableProcessors() : threads;
        DeepseekV3Model m = DeepseekV3Model.load(model);
        quantization = m.config().isInt4() ? "int4" : m.config().isFp8() ? "fp8" : "none";
        bytesOnDisk = Checkpoint.open(model).bytesOnDisk();
        if (mode.equals("decode")) {
            return decode(m, n);
        }
        KernelSelection kernels = kernels();
        System.out.println("kernels: " + kernels.describe());
        try (CpuOps ops = new CpuOps(n, kernels.cpuPrecision())) {
            PrefillBenchmark.Result r = PrefillBenchmark.run(m, ops, batch, seq, warmup, runs, seed);
            System.out.printf(
                    "prefill %d x %d, %d threads (%s), java %s: %.1f tokens/s median (min %.1f, max %.1f) over %d runs;"
                            + " %.1f model GFLOP/s; %,.1f heap bytes allocated per token (median run %,.1f); activation workspace %.1f MiB;"
                            + " peak RSS %.0f MiB%n",
                    batch,
                    seq,
                    n,
                    "GEMM " + kernels.prefillGemm().kernel() + ", "
                            + kernels.cpuPrecision().id(),
                    Runtime.version().feature(),
                    r.medianTokensPerSec(),
                    r.minTokensPerSec(),
                    r.maxTokensPerSec(),
                    runs,
                    r.modelGflopPerSec(),
                    r.heapBytesPerToken(),
                    r.heapBytesPerTokenMedianRun(),
                    r.workspaceBytes() / 1048576.0,
                    r.peakRssBytes() / 1048576.0);
            ObjectNode j = header(n);
            j.put("seq", seq);
            j.put("simd", ops.simd());
            j.put("gemm_kernel", kernels.prefillGemm().toString());
            j.put("cpu_precision", kernels.cpuPrecision().id());
            j.put("runs", runs);
            j.put("tokens_per_s_median", r.medianTokensPerSec());
            j.put("tokens_per_s_min", r.minTokensPerSec());
            j.put("tokens_per_s_max", r.maxTokensPerSec());
            j.put("seconds_median", r.medianSeconds());
            j.put("model_gflop_per_s", r.modelGflopPerSec());
            j.put("heap_bytes_per_token", r.heapBytesPerToken());
            j.put("heap_bytes_per_token_median_run", r.heapBytesPerTokenMedianRun());
            j.put("workspace_bytes", r.workspaceBytes());
            j.put("peak_rss_bytes", r.peakRssBytes());
            j.set("kernels", kernels.toJson());
            System.out.println(new ObjectMapper().writeValueAsString(j));
        }
        return 0;
    }

    /** This JVM's kernels, with --cpu-precision's precision where it is given. */
    private KernelSelection kernels() {
        KernelSelection k = KernelSelection.current();
        return cpuPrecision == null ? k : k.withPrecision(cpuPrecision);
    }

    /** The fields both modes' JSON lines start with. */
    private ObjectNode header(int threads) {
        ObjectNode j = new ObjectMapper().createObjectNode();
        j.put("mode", mode);
        j.put("model", model.toString());
        j.put("batch", batch);
        j.put("threads", threads);
        j.put("java", Runtime.version().feature());
        j.put("quantization", quantization);
        j.put("bytes_on_disk", bytesOnDisk);
        return j;
    }

    private int decode(DeepseekV3Model m, int n) throws Exception {
        // Weight bytes as the checkpoint stores each tensor (BF16, FP8 codes and scales, INT4 words and group scales).
        ModelWeights weights = ModelWeights.open(model);
        KernelSelection kernels = kernels();
        System.out.println("kernels: " + kernels.describe());
        try (CpuOps ops = new CpuOps(n, kernels.cpuPrecision())) {
            DecodeBenchmark.Result r = DecodeBenchmark.run(
                    m, ops, batch, seq, steps, warmup, runs, seed, DecodeBenchmark.checkpointBytes(weights));
            System.out.printf(
                    "decode batch %d after %d-token prompts, %d steps, %d threads (%s), java %s: %.1f tokens/s median (min %.1f, max %.1f);"
                            + " %.2f ms per step; %.2f GB/s of weights (%,d bytes per step, %,d of them routed experts); cache %,d bytes per token;"
                            + " %,.1f heap bytes allocated per token (median run %,.1f); peak RSS %.0f MiB%n",
                    batch,
                    seq,
                    steps,
                    n,
                    kernels.decodeGemm().kernel(),
                    Runtime.version().feature(),
                    r.medianTokensPerSec(),
                    r.minTokensPerSec(),
                    r.maxTokensPerSec(),
                    r.medianStepSeconds() * 1e3,
                    r.weightBytesPerSecond() / 1e9,
                    r.weightBytesPerStep(),
                    r.expertBytesPerStep(),
                    r.cacheBytesPerToken(),
                    r.heapBytesPerToken(),
                    r.heapBytesPerTokenMedianRun(),
                    r.peakRssBytes() / 1048576.0);
            ObjectNode j = header(n);
            j.put("prompt", seq);
            j.put("steps", steps);
            j.put("tokens_per_s_median", r.medianTokensPerSec());
            j.put("tokens_per_s_min", r.minTokensPerSec());
            j.put("tokens_per_s_max", r.maxTokensPerSec());
            j.put("step_seconds_median", r.medianStepSeconds());
            j.put("decode_kernel", kernels.decodeGemm().toString());
            j.put("weight_bytes_per_step", r.weightBytesPerStep());
            j.put("expert_bytes_per_step", r.expertBytesPerStep());
            j.put("weight_bytes_per_s", r.weightBytesPerSecond());
            j.put("cache_bytes_per_token", r.cacheBytesPerToken());
            j.put("heap_bytes_per_token", r.heapBytesPerToken());
            j.put("heap_bytes_per_token_median_run", r.heapBytesPerTokenMedianRun());
            j.put("peak_rss_bytes", r.peakRssBytes());
            j.set("kernels", kernels.toJson());
            System.out.println(new ObjectMapper().writeValueAsString(j));
        }
        return 0;
    }
}
