package dev.scorch.jobs.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.bench.CpuPeak;
import dev.scorch.engine.bench.DecodeBenchmark;
import dev.scorch.engine.bench.DevicePeak;
import dev.scorch.engine.bench.FullModelEstimate;
import dev.scorch.engine.bench.LayerBenchmark;
import dev.scorch.engine.bench.LayerFlops;
import dev.scorch.engine.bench.Mfu;
import dev.scorch.engine.bench.PrefillBenchmark;
import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.cuda.CudaDevice;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.udfs.api.Bounds;
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
            "max), model GFLOP/s, peak RSS, and one JSON line with the same figures.",
            "--mode layers: per-layer prefill tokens/s (each layer's share of a forward pass), a decode step, MFU",
            "against the device's peak, and the full model extrapolated from the layers (see docs/performance.md)."
        },
        footer = {
            "",
            "Examples:",
            "  bin/scorch make-demo-model --out models/demo-small --preset small",
            "  bin/scorch bench --model models/demo-small --mode prefill --batch 8 --seq 256 --threads 2",
            "  bin/scorch bench --model models/demo-small --mode prefill --batch 1 --seq 1024 --runs 5",
            "  bin/scorch bench --model models/demo-small --mode prefill --cpu-precision bf16x3",
            "  bin/scorch bench --model models/demo-small --mode decode --batch 8 --seq 64 --steps 32",
            "  bin/scorch make-demo-model --out /tmp/k2 --preset k2-layers --layers 2 --experts 8 --fp8",
            "  bin/scorch bench --model /tmp/k2 --mode layers --batch 1 --seq 64 --runs 3 --warmup 1 --steps 4",
            "  bin/scorch bench --model /tmp/k2 --mode layers --backend cuda --gpu-precision bf16 --batch 8 --seq 2048"
        })
public final class BenchCommand implements Callable<Integer> {
    @Option(names = "--model", required = true, description = "Checkpoint folder.")
    Path model;

    @Option(
            names = "--mode",
            defaultValue = "prefill",
            description = "prefill, or decode (greedy steps over the MLA latent cache"
                    + " after a --seq-token prefill), or layers (per-layer prefill, a decode step of --decode-batch"
                    + " sequences, MFU, the full model extrapolated). Default: ${DEFAULT-VALUE}.")
    String mode;

    @Option(
            names = "--backend",
            defaultValue = "cpu",
            description = "layers mode: cpu (the CPU engine), host (the GPU model on HostDevice, the CUDA backend's"
                    + " plain-Java twin) or cuda (the GPU model on CUDA device 0). Default: ${DEFAULT-VALUE}.")
    String backend;

    @Option(
            names = "--gpu-precision",
            defaultValue = "bf16",
            description = "layers mode on host or cuda: the GEMM precision (fp32, bf16x3, bf16x2, bf16)."
                    + " Default: ${DEFAULT-VALUE}.")
    String gpuPrecision;

    @Option(
            names = "--decode-batch",
            defaultValue = "1",
            description = "layers mode: sequences of the timed decode steps (--steps of them; 0 steps: none)."
                    + " Default: ${DEFAULT-VALUE}.")
    int decodeBatch;

    @Option(
            names = "--peak-tflops",
            description = "layers mode: the device's peak in TFLOP/s for the MFU. Default: the datasheet's for a"
                    + " known GPU (H100 SXM, H200 SXM), the measured fp32 FMA peak on the CPU.")
    Double peakTflops;

    @Option(
            names = "--full-layers",
            defaultValue = "" + FullModelEstimate.K2_LAYERS,
            description = "layers mode: the extrapolated model's layers. Default: ${DEFAULT-VALUE} (Kimi K2).")
    int fullLayers;

    @Option(
            names = "--full-dense-layers",
            defaultValue = "" + FullModelEstimate.K2_DENSE_LAYERS,
            description = "layers mode: its first_k_dense_replace. Default: ${DEFAULT-VALUE} (Kimi K2; DeepSeek-V3"
                    + " has 3).")
    int fullDenseLayers;

    @Option(
            names = "--full-experts",
            defaultValue = "" + FullModelEstimate.K2_EXPERTS,
            description = "layers mode: its n_routed_experts. Default: ${DEFAULT-VALUE} (Kimi K2).")
    int fullExperts;

    @Option(names = "--batch", defaultValue = "8", description = "Sequences per batch. Default: ${DEFAULT-VALUE}.")
    int batch;

    @Option(names = "--seq", defaultValue = "256", description = "Tokens per sequence. Default: ${DEFAULT-VALUE}.")
    int seq;

    @Option(names = "--threads", description = "Engine threads. Default: available processors.")
    Integer threads;

    @Option(names = "--runs", defaultValue = "5", description = "Timed runs. Default: ${DEFAULT-VALUE}.")
    int runs;

    @Option(
            names = "--warmup",
            defaultValue = "2",
            description = "Untimed warm-up runs; decode: at least these, then more until the JIT compilers are quiet"
                    + " (3 runs in a row under 1%% of their time compiling, at most 100). Default: ${DEFAULT-VALUE}.")
    int warmup;

    @Option(
            names = "--steps",
            defaultValue = "32",
            description = "Decode steps per run (decode mode). Default: ${DEFAULT-VALUE}.")
    int steps;

    @Option(
            names = "--cpu-precision",
            description = "GEMMs (prefill's, and decode's over BF16 weights): fp32, or bf16x3, bf16x2, bf16 (bf16"
                    + " parts on AVX512-BF16; fp32, with the reason, where the CPU lacks it). Default:"
                    + " -Dscorch.cpu.precision, else fp32.")
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
        if (!mode.equals("prefill") && !mode.equals("decode") && !mode.equals("layers")) {
            throw new IllegalArgumentException("--mode " + mode + ": expected prefill, decode or layers");
        }
        Bounds.BATCH_SEQUENCES.check("--batch", batch);
        Bounds.MAX_NEW_TOKENS.check("--seq", seq);
        new Bounds.Ints(1, 10_000).check("--runs", runs);
        new Bounds.Ints(0, 10_000).check("--warmup", warmup);
        new Bounds.Ints(0, 1 << 20).check("--steps", steps);
        Bounds.BATCH_SEQUENCES.check("--decode-batch", decodeBatch);
        if (threads != null) {
            Bounds.THREADS.check("--threads", threads);
        }
        if (cpuPrecision != null) {
            CpuPrecision.parse(cpuPrecision); // a name that is no mode fails here, not as fp32
        }
        int n = threads == null ? Runtime.getRuntime().availableProcessors() : threads;
        if (mode.equals("layers")) {
            return layers(n);
        }
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

    /** --mode layers: the per-layer prefill, a decode step, MFU and the full model, on --backend. */
    private int layers(int n) throws Exception {
        if (!backend.equals("cpu") && !backend.equals("host") && !backend.equals("cuda")) {
            throw new IllegalArgumentException("--backend " + backend + ": expected cpu, host or cuda");
        }
        if (steps < 0 || decodeBatch < 1) {
            throw new IllegalArgumentException("--steps must be >= 0 and --decode-batch >= 1");
        }
        ModelWeights weights = ModelWeights.open(model);
        ModelConfig c = weights.config();
        new FullModelEstimate(c, fullLayers, fullDenseLayers, fullExperts, 1, seq, 0, 0, 0); // checks the counts now
        quantization = c.isInt4() ? "int4" : c.isFp8() ? "fp8" : "none";
        bytesOnDisk = weights.checkpoint().bytesOnDisk();
        LayerBenchmark.Result r;
        String on;
        DevicePeak peak;
        if (backend.equals("cpu")) {
            KernelSelection kernels = kernels();
            DeepseekV3Model m = DeepseekV3Model.load(model);
            try (CpuOps ops = new CpuOps(n, kernels.cpuPrecision())) {
                on = "CPU engine, " + n + " thread(s), GEMM "
                        + kernels.prefillGemm().kernel() + " "
                        + kernels.cpuPrecision().id();
                peak = cpuPeak(n);
                r = LayerBenchmark.run(m.on(ops), batch, seq, warmup, runs, decodeBatch, steps, seed);
            }
        } else {
            GemmPrecision p = GemmPrecision.parse(gpuPrecision);
            Device dev = backend.equals("cuda") ? new CudaDevice(0) : new HostDevice();
            try (GpuModel g = GpuModel.load(weights, dev, p)) {
                on = g.device().describe() + ", " + p.name().toLowerCase(java.util.Locale.ROOT) + " GEMMs";
                if (peakTflops != null) {
                    peak = DevicePeak.stated(g.device().describe(), peakTflops);
                } else if (backend.equals("cuda")) {
                    peak = DevicePeak.ofCudaName(g.device().describe()).orElse(null);
                } else {
                    peak = cpuPeak(1); // HostDevice runs on the calling thread
                }
                r = LayerBenchmark.run(g, batch, seq, warmup, runs, decodeBatch, steps, seed);
            }
        }
        double tokens = (double) batch * seq;
        double keys = LayerFlops.meanKeys(seq);
        System.out.printf(
                "layers: %s on %s; prefill %d x %d tokens, median of %d runs after %d warm-up%n",
                model, on, batch, seq, runs, warmup);
        System.out.println(
                peak == null
                        ? "peak: unknown for this device (not in DevicePeak's table): pass --peak-tflops for the MFU"
                        : "peak: " + peak.describe());
        ObjectNode j = header(n);
        j.put("backend", backend);
        j.put("seq", seq);
        j.put("runs", runs);
        j.put("device", on);
        if (peak != null) {
            j.put("peak_name", peak.name());
            j.put("peak_bf16_flops", peak.bf16Flops());
            j.put("peak_fp8_flops", peak.fp8Flops());
            j.put("peak_source", peak.source());
        }
        com.fasterxml.jackson.databind.node.ArrayNode layersJson = j.putArray("layers");
        for (int l = 0; l < c.numHiddenLayers(); l++) {
            double secs = r.layerSeconds()[l];
            double flops = LayerFlops.layer(c, l, keys);
            System.out.printf(
                    "  layer %d (%s): %.4f s a pass, %.1f tokens/s; %.1f MFLOP/token -> %s%s%n",
                    l,
                    c.isMoeLayer(l) ? "MoE, " + c.nRoutedExperts() + " experts, top-" + c.numExpertsPerTok() : "dense",
                    secs,
                    tokens / secs,
                    flops / 1e6,
                    DevicePeak.rate(flops * tokens / secs),
                    peak == null ? "" : "; " + Mfu.describe(peak, flops * tokens / secs));
            ObjectNode o = layersJson.addObject();
            o.put("layer", l);
            o.put("moe", c.isMoeLayer(l));
            o.put("seconds", secs);
            o.put("tokens_per_s", tokens / secs);
            o.put("flops_per_token", flops);
            if (peak != null) {
                o.put("mfu_bf16", peak.mfuBf16(flops * tokens / secs));
            }
        }
        System.out.printf(
                "  outside the layers (embedding, final norm, lm_head %.1f MFLOP/token, log-softmax): %.4f s a pass%n",
                LayerFlops.head(c) / 1e6, r.restSeconds());
        double modelFlops = LayerFlops.model(c, keys) * tokens / r.scoreSeconds();
        System.out.printf(
                "  scoring pass: %.4f s, %.1f tokens/s, %s%s%n",
                r.scoreSeconds(),
                tokens / r.scoreSeconds(),
                DevicePeak.rate(modelFlops),
                peak == null ? "" : "; " + Mfu.describe(peak, modelFlops));
        if (steps > 0) {
            System.out.printf(
                    "decode: %.2f ms a step of %d sequence(s) after %d-token prompts (median of %d steps)%n",
                    r.decodeStepSeconds() * 1e3, decodeBatch, seq, steps);
        }
        j.put("rest_seconds", r.restSeconds());
        j.put("score_seconds", r.scoreSeconds());
        j.put("decode_batch", decodeBatch);
        j.put("decode_step_seconds", r.decodeStepSeconds());
        double dense = r.meanLayerSeconds(c, false);
        double moe = r.meanLayerSeconds(c, true);
        if (Double.isNaN(dense) || Double.isNaN(moe)) {
            System.out.println("full model: not extrapolated (the checkpoint needs a dense and a MoE layer)");
        } else {
            FullModelEstimate e = new FullModelEstimate(
                    c, fullLayers, fullDenseLayers, fullExperts, (long) tokens, seq, dense, moe, r.restSeconds());
            e.lines(peak).forEach(System.out::println);
            ObjectNode f = j.putObject("full_model");
            f.put("layers", fullLayers);
            f.put("dense_layers", fullDenseLayers);
            f.put("experts", fullExperts);
            f.put("flops_per_token", e.fullFlopsPerToken());
            f.put("seconds_per_pass", e.fullSeconds());
            f.put("tokens_per_s", e.tokensPerSecond());
            if (peak != null) {
                f.put("mfu_bf16", peak.mfuBf16(e.flopsPerSecond()));
            }
        }
        System.out.println(new ObjectMapper().writeValueAsString(j));
        return 0;
    }

    /** The CPU's measured fp32 FMA peak over threads threads, or --peak-tflops. */
    private DevicePeak cpuPeak(int threads) {
        if (peakTflops != null) {
            return DevicePeak.stated("CPU", peakTflops);
        }
        double flops = CpuPeak.measure(threads, 20_000_000L);
        return new DevicePeak(
                "CPU measured peak",
                flops,
                Double.NaN,
                "measured here: " + CpuPeak.describe(threads) + ", not a datasheet figure");
    }

    private int decode(DeepseekV3Model m, int n) throws Exception {
        // Weight bytes as the checkpoint stores each tensor (BF16, FP8 codes and scales, INT4 words and group scales).
        ModelWeights weights = ModelWeights.open(model);
        KernelSelection kernels = kernels();
        System.out.println("kernels: " + kernels.describe());
        try (CpuOps ops = new CpuOps(n, kernels.cpuPrecision())) {
            DecodeBenchmark.Result r = DecodeBenchmark.run(
                    m, ops, batch, seq, steps, warmup, runs, seed, DecodeBenchmark.checkpointBytes(weights), true);
            System.out.printf(
                    "decode batch %d after %d-token prompts, %d steps, %d threads (%s; BF16 weights in %s), java %s, %d warm-up runs: %.1f tokens/s median (min %.1f, max %.1f);"
                            + " %.2f ms per step; %.2f GB/s of weights (%,d bytes per step, %,d of them routed experts); cache %,d bytes per token;"
                            + " %,.1f heap bytes allocated per token (median run %,.1f); peak RSS %.0f MiB%n",
                    batch,
                    seq,
                    steps,
                    n,
                    kernels.decodeGemm().kernel(),
                    ops.decodePrecision().id(),
                    Runtime.version().feature(),
                    r.warmupRuns(),
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
            j.put("warmup_runs", r.warmupRuns());
            j.put("tokens_per_s_median", r.medianTokensPerSec());
            j.put("tokens_per_s_min", r.minTokensPerSec());
            j.put("tokens_per_s_max", r.maxTokensPerSec());
            j.put("step_seconds_median", r.medianStepSeconds());
            j.put("decode_kernel", kernels.decodeGemm().toString());
            j.put("decode_precision", ops.decodePrecision().id());
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
