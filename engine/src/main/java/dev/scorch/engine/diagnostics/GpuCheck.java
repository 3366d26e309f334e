package dev.scorch.engine.diagnostics;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.bench.LayerBenchmark;
import dev.scorch.engine.bench.PrefillBenchmark;
import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.cuda.Cuda;
import dev.scorch.engine.device.cuda.CudaDevice;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.generation.DecodingModel;
import dev.scorch.engine.generation.StageDecodingModel;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * The device check (bin/gpu-check runs it on a GPU machine): the CUDA path against the golden file and the CPU
 * engine, then prefill and decode speed on the {@code small} demo model; then INT4 (routed experts kept packed): the
 * tiny INT4 demo against the CPU engine in every precision, and the small INT4 demo's scores and speed (written beside
 * SMALL_DIR as SMALL_DIR-int4).
 *
 * <pre>GpuCheck CONFORMANCE_DIR SMALL_DIR OUT_JSON [cpu-threads]</pre>
 * CONFORMANCE_DIR holds model/ and golden.json; SMALL_DIR is written (demo preset small, seed 0) when it holds no
 * config.json. Prints a report and writes every figure to OUT_JSON.
 */
public final class GpuCheck {
    /** The H200's dense BF16 matrix rate measured here (KINDS.md: 8192³ torch.matmul on random data). */
    static final double PEAK_BF16_FLOPS = 790e12;

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final java.util.function.Supplier<Device> GPU = () -> new CudaDevice(0);

    public static void main(String[] args) throws Exception {
        Path conformance = Path.of(args[0]);
        Path small = Path.of(args[1]);
        Path outJson = Path.of(args[2]);
        int cpuThreads = args.length > 3
                ? Integer.parseInt(args[3])
                : Runtime.getRuntime().availableProcessors();
        ObjectNode out = JSON.createObjectNode();
        Cuda.Availability a = Cuda.probe();
        System.out.println("CUDA: " + a);
        out.put("cuda", a.toString());
        if (!a.available()) {
            JSON.writerWithDefaultPrettyPrinter().writeValue(outJson.toFile(), out);
            System.exit(2);
        }
        try (CudaDevice dev = new CudaDevice(0)) {
            System.out.println("device: " + dev.describe());
            out.put("device", dev.describe());
            // 0. Every kernel against its Java twin on random inputs.
            putDiffs(
                    KernelTwins.compare(dev, new HostDevice()),
                    "  kernel %-20s max |cuda - host| %.3g%n",
                    out.putObject("kernel_twins_max_abs_diff"));
            // 0b. INT4 weights kept packed vs the same weights dequantised and uploaded, and vs fp64, per precision.
            putDiffs(Int4Equivalence.measure(dev), "  INT4 %-40s %.3g%n", out.putObject("int4_gemm_max_abs_diff"));
            // 0c. FP8 block weights kept as codes vs the same weights dequantised and uploaded, and vs fp64.
            putDiffs(Fp8Equivalence.measure(dev), "  FP8 %-50s %.3g%n", out.putObject("fp8_gemm_max_abs_diff"));
        } catch (RuntimeException e) {
            e.printStackTrace(System.out);
            out.put("kernel_twins", "FAILED: " + e);
        }
        flush(out, outJson);

        // 1. Conformance on the golden file's model, in each precision.
        JsonNode golden = JSON.readTree(conformance.resolve("golden.json").toFile());
        ModelWeights tiny = ModelWeights.open(conformance.resolve("model"));
        ObjectNode conf = out.putObject("conformance");
        for (GemmPrecision p : GemmPrecision.values()) {
            try (GpuModel m = GpuModel.load(tiny, new CudaDevice(0), p)) {
                GpuConformance.Report r = GpuConformance.check(m, golden);
                System.out.println("conformance " + p + ": " + r);
                conf.set(p.name(), JSON.valueToTree(r));
                greedyWithGraphs(m, golden, conf.putObject(p.name() + "_decode_graphs"));
            } catch (RuntimeException e) {
                e.printStackTrace(System.out);
                conf.put(p.name(), "FAILED: " + e);
            }
            flush(out, outJson);
        }

        // 1b. INT4 (the Kimi-K2-Thinking-style demo: routed experts in compressed-tensors INT4 groups of 32, kept
        // packed on the GPU), then 1c. FP8 (DeepSeek's quant_method fp8: every linear F8_E4M3 with 128 x 128 fp32
        // scales, kept as codes on the GPU): the tiny demo against the CPU engine in every precision.
        for (DemoModelWriter.Weights w : List.of(DemoModelWriter.Weights.INT4, DemoModelWriter.Weights.FP8)) {
            String name = "tiny_" + w.name().toLowerCase(java.util.Locale.ROOT);
            Path dir = Files.createTempDirectory("scorch-" + name.replace('_', '-'));
            write(new DemoModelWriter(DemoPreset.TINY, w, true, false, 1234), dir);
            modelVsCpu(
                    dir,
                    cpuThreads,
                    List.of(GemmPrecision.values()),
                    false,
                    out.putObject(name),
                    null,
                    out,
                    outJson,
                    GPU);
        }

        // 1d. Hidden states handed device to device (cudaMemcpyPeerAsync; GPU 1 when there is one, else a second
        // device on GPU 0): a copy's bits, and a 2-stage pipeline's scores against the same pipeline handing on
        // through the host.
        ObjectNode peer = out.putObject("peer_copy");
        try {
            peerCopy(tiny, golden, a.devices() > 1 ? 1 : 0, peer);
        } catch (RuntimeException e) {
            e.printStackTrace(System.out);
            peer.put("error", "FAILED: " + e);
        }
        flush(out, outJson);

        // 2. The small model: GPU vs CPU scores, then speed.
        if (!Files.isRegularFile(small.resolve("config.json"))) {
            write(new DemoModelWriter(DemoPreset.SMALL, false, true, 0), small);
        }
        ModelWeights sw = ModelWeights.open(small);
        List<GemmPrecision> precisions = precisions( // e.g. BF16X3,FP32
                System.getenv("GPU_CHECK_PRECISIONS"), GemmPrecision.BF16X3, GemmPrecision.BF16, GemmPrecision.FP32);
        modelVsCpu(
                small,
                cpuThreads,
                precisions,
                true,
                out.putObject("small"),
                outJson.resolveSibling("small_prompts.json"),
                out,
                outJson,
                GPU);
        profile(sw, out.putObject("profile_BF16X3"));
        flush(out, outJson);

        // 3. The small INT4 demo's scores and speed (GPU_CHECK_INT4_PRECISIONS, default BF16X3 and FP32; "none" skips
        // it).
        String int4Only = System.getenv("GPU_CHECK_INT4_PRECISIONS");
        if (!"none".equals(int4Only)) {
            Path smallInt4 = Path.of(small + "-int4");
            if (!Files.isRegularFile(smallInt4.resolve("config.json"))) {
                write(new DemoModelWriter(DemoPreset.SMALL, DemoModelWriter.Weights.INT4, true, false, 0), smallInt4);
            }
            List<GemmPrecision> int4Precisions = precisions(int4Only, GemmPrecision.BF16X3, GemmPrecision.FP32);
            modelVsCpu(
                    smallInt4, cpuThreads, int4Precisions, true, out.putObject("small_int4"), null, out, outJson, GPU);
        }
    }

    /**
     * Checks {@link CudaDevice#peerCopy} from cuda:0 to cuda:other: random floats keep their bits, and GpuPipeline
     * over the two (split 1 | 2 layers) gives the golden prompts the scores the same pipeline gives handing on through
     * the host (its devices without {@link Device#copyTo}). The pipeline copies device to device only with
     * -Dscorch.cuda.peer-copy=true (bin/gpu-check sets it); "pipeline_peer" says whether it did.
     */
    private static void peerCopy(ModelWeights tiny, JsonNode golden, int other, ObjectNode into) {
        float[] v = new float[100_003];
        java.util.Random r = new java.util.Random(5);
        for (int i = 0; i < v.length; i++) {
            v[i] = (float) r.nextGaussian();
        }
        try (CudaDevice a = new CudaDevice(0);
                CudaDevice b = new CudaDevice(other)) {
            Buf src = a.upload(v);
            Buf dst = b.alloc(Buf.Kind.F32, v.length);
            a.peerCopy(src, b, dst, v.length);
            float[] back = new float[v.length];
            b.read(dst, back, 0, back.length);
            boolean same = Arrays.equals(v, back);
            System.out.printf("peer copy cuda:0 -> cuda:%d, %d floats: bits equal %b%n", other, v.length, same);
            into.put("copy_bits_equal", same);
            a.free(src);
            b.free(dst);
        }
        List<ScoreRequest> reqs = new ArrayList<>();
        for (JsonNode p : golden.get("prompts")) {
            int[] ids = new int[p.get("token_ids").size()];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = p.get("token_ids").get(i).asInt();
            }
            reqs.add(new ScoreRequest(ids, 1, 3, LogitsMode.LAST));
        }
        boolean same = handOffKeepsBits(tiny, reqs, () -> new CudaDevice(0), () -> new CudaDevice(other));
        System.out.printf(
                "pipeline cuda:0 | cuda:%d hand-off %s vs through the host: scores bits equal %b%n",
                other, CudaDevice.PEER_COPY ? "peer" : "through the host (peer copy off)", same);
        into.put("pipeline_peer", CudaDevice.PEER_COPY);
        into.put("pipeline_bits_equal", same);
    }

    /**
     * Whether GpuPipeline over devices from first and second (split 1 | the rest) scores reqs with the same bits handing
     * hidden states on device to device ({@link Device#copyTo}, where the devices have it) as through the host.
     */
    static boolean handOffKeepsBits(
            ModelWeights w,
            List<ScoreRequest> reqs,
            java.util.function.Supplier<Device> first,
            java.util.function.Supplier<Device> second) {
        List<SequenceScore> direct;
        List<SequenceScore> viaHost;
        int[] split = {1, w.config().numHiddenLayers() - 1};
        GemmPrecision p = GemmPrecision.BF16X3;
        try (GpuPipeline pipe = GpuPipeline.load(w, List.of(first.get(), second.get()), p, split)) {
            direct = new Scorer(pipe).score(reqs);
        }
        try (GpuPipeline pipe =
                GpuPipeline.load(w, List.of(withoutCopyTo(first.get()), withoutCopyTo(second.get())), p, split)) {
            viaHost = new Scorer(pipe).score(reqs);
        }
        boolean same = direct.size() == viaHost.size();
        for (int i = 0; same && i < direct.size(); i++) {
            SequenceScore x = direct.get(i);
            SequenceScore y = viaHost.get(i);
            same = Arrays.equals(x.tokenLogprobs(), y.tokenLogprobs())
                    && Arrays.equals(x.argmax(), y.argmax())
                    && Arrays.deepEquals(x.topIds(), y.topIds())
                    && Arrays.deepEquals(x.topLogprobs(), y.topLogprobs())
                    && Arrays.deepEquals(x.logits(), y.logits());
        }
        return same;
    }

    /** dev with no device-to-device path ({@link Device#copyTo} always false): a pipeline hands on through the host. */
    private static Device withoutCopyTo(Device dev) {
        return (Device) java.lang.reflect.Proxy.newProxyInstance(
                Device.class.getClassLoader(), new Class<?>[] {Device.class}, (proxy, m, args) -> {
                    if (m.getName().equals("copyTo")) {
                        return false;
                    }
                    try {
                        return m.invoke(dev, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    /** The precisions a comma-separated setting names, or dflt when it is unset or blank. */
    private static List<GemmPrecision> precisions(String setting, GemmPrecision... dflt) {
        return setting == null || setting.isBlank()
                ? List.of(dflt)
                : Arrays.stream(setting.split(","))
                        .map(String::trim)
                        .map(GemmPrecision::parse)
                        .toList();
    }

    /** Prints each of diffs with format (name, value) and puts it into into. */
    private static void putDiffs(Map<String, Double> diffs, String format, ObjectNode into) {
        for (Map.Entry<String, Double> e : diffs.entrySet()) {
            System.out.printf(format, e.getKey(), e.getValue());
            into.put(e.getKey(), e.getValue());
        }
    }

    private static void write(DemoModelWriter writer, Path dir) throws java.io.IOException {
        long t0 = System.nanoTime();
        writer.write(dir);
        System.out.printf("wrote the demo model %s in %.1f s%n", dir, (System.nanoTime() - t0) / 1e9);
    }

    /**
     * The model in dir on the devices devices makes (the GPU; a test runs it on HostDevice) in each precision against the
     * CPU engine's scores of 4 random 200-token prompts (log-probs, argmax, expert sets), its weight bytes, and with
     * speed its prefill and decode rates; each precision into its own object of into, flushed to outJson as it goes.
     * prompts, when not null, receives the prompts and CPU log-probs.
     */
    static void modelVsCpu(
            Path dir,
            int cpuThreads,
            List<GemmPrecision> precisions,
            boolean speed,
            ObjectNode into,
            Path prompts,
            ObjectNode out,
            Path outJson,
            java.util.function.Supplier<Device> devices)
            throws java.io.IOException {
        ModelWeights sw = ModelWeights.open(dir);
        ModelConfig c = sw.config();
        List<ScoreRequest> cmp = PrefillBenchmark.randomRequests(c.vocabSize(), 4, 200, 11);
        List<SequenceScore> cpuScores;
        DeepseekV3Model cpuModel = DeepseekV3Model.load(dir);
        int[][] cpuRoutes = new int[cpuModel.numMoeLayers()][];
        try (CpuOps ops = new CpuOps(cpuThreads)) {
            long t0 = System.nanoTime();
            cpuScores = new Scorer(cpuModel.on(ops)).score(cmp, cpuRoutes);
            System.out.printf(
                    "%s: CPU (%d threads) scored 4 x 200 tokens in %.2f s%n",
                    dir.getFileName(), cpuThreads, (System.nanoTime() - t0) / 1e9);
        }
        if (prompts != null) {
            writePrompts(cmp, cpuScores, prompts);
        }
        into.put("active_parameters", WeightLayout.activeParameters(c));
        into.put(
                "quantization",
                c.quantization() == null ? "none" : c.quantization().describe());
        for (GemmPrecision p : precisions) {
            ObjectNode s = into.putObject(p.name());
            try (GpuModel m = GpuModel.load(sw, devices.get(), p)) {
                Scorer scorer = new Scorer(m);
                int[][] gpuRoutes = new int[cpuRoutes.length][];
                List<SequenceScore> gpu = scorer.score(cmp, gpuRoutes);
                int routeDiff = 0;
                int topK = c.numExpertsPerTok();
                for (int l = 0; l < cpuRoutes.length; l++) {
                    for (int i = 0; i < cpuRoutes[l].length / topK; i++) {
                        int[] x = Arrays.copyOfRange(cpuRoutes[l], i * topK, (i + 1) * topK);
                        int[] y = Arrays.copyOfRange(gpuRoutes[l], i * topK, (i + 1) * topK);
                        Arrays.sort(x);
                        Arrays.sort(y);
                        routeDiff += Arrays.equals(x, y) ? 0 : 1;
                    }
                }
                s.put("route_mismatches_vs_cpu", routeDiff);
                double d = 0;
                int argmaxDiff = 0;
                for (int i = 0; i < cmp.size(); i++) {
                    d = Math.max(
                            d,
                            GpuConformance.maxDiff(
                                    cpuScores.get(i).tokenLogprobs(), gpu.get(i).tokenLogprobs()));
                    argmaxDiff +=
                            Arrays.equals(cpuScores.get(i).argmax(), gpu.get(i).argmax()) ? 0 : 1;
                }
                double batchDiff = 0;
                for (int i = 0; i < cmp.size(); i++) {
                    batchDiff = Math.max(
                            batchDiff,
                            GpuConformance.maxDiff(
                                    scorer.score(List.of(cmp.get(i))).get(0).tokenLogprobs(),
                                    gpu.get(i).tokenLogprobs()));
                }
                s.put("max_abs_dlogprob_vs_cpu", d);
                s.put("sequences_with_argmax_diff_vs_cpu", argmaxDiff);
                s.put("max_abs_dlogprob_batched_vs_alone", batchDiff);
                s.put("weight_bytes", m.stage().weightBytes());
                if (m.device() instanceof CudaDevice cd) {
                    s.put("dequant_scratch_bytes", cd.dequantScratchBytes());
                }
                System.out.printf(
                        "%s %s: weights %.1f MiB on the GPU; vs CPU max |dlogprob| %.3g, sequences with an argmax difference %d/%d, "
                                + "(token, layer) expert sets differing %d/%d; batched vs alone %.3g%n",
                        dir.getFileName(),
                        p,
                        m.stage().weightBytes() / 1048576.0,
                        d,
                        argmaxDiff,
                        cmp.size(),
                        routeDiff,
                        cpuRoutes.length * cpuRoutes[0].length / topK,
                        batchDiff);
                if (speed) {
                    prefill(scorer, c, 8, 256, s);
                    prefill(scorer, c, 1, 1024, s);
                    prefill(scorer, c, 32, 512, s);
                    decode(m, c, 1, 128, 128, s);
                    decode(m, c, 16, 128, 64, s);
                    decodeGraphs(m, c, 1, 128, 128, s);
                    decodeGraphs(m, c, 16, 128, 64, s);
                }
            } catch (RuntimeException e) {
                e.printStackTrace(System.out);
                s.put("error", e.toString());
            }
            flush(out, outJson);
        }
    }

    /** Where one 8 x 256 scoring prefill and one batch-1 decode step spend their time, per device operation. */
    private static void profile(ModelWeights sw, ObjectNode into) {
        ModelConfig c = sw.config();
        ProfilingDevice prof = new ProfilingDevice(new CudaDevice(0));
        try (GpuModel m = GpuModel.load(sw, prof.device(), GemmPrecision.BF16X3)) {
            Scorer scorer = new Scorer(m);
            List<ScoreRequest> reqs = PrefillBenchmark.randomRequests(c.vocabSize(), 8, 256, 5);
            long t0;
            for (int[] shape : new int[][] {{8, 256}, {32, 512}}) {
                List<ScoreRequest> rs = PrefillBenchmark.randomRequests(c.vocabSize(), shape[0], shape[1], 5);
                scorer.score(rs);
                scorer.score(rs);
                prof.reset();
                t0 = System.nanoTime();
                scorer.score(rs);
                report(
                        "prefill " + shape[0] + " x " + shape[1],
                        prof,
                        System.nanoTime() - t0,
                        into.putObject("prefill_" + shape[0] + "x" + shape[1]));
            }
            StageDecodingModel d = new StageDecodingModel(m, false);
            try (DecodingModel.Cache cache = d.newCache(300)) {
                DecodingModel.Cache[] caches = {cache};
                d.prefill(List.of(reqs.get(0).tokens()), List.of(cache));
                d.decode(new int[] {1}, caches);
                prof.reset();
                t0 = System.nanoTime();
                d.decode(new int[] {2}, caches);
                report("decode step, batch 1", prof, System.nanoTime() - t0, into.putObject("decode_b1_step"));
            }
        } catch (RuntimeException e) {
            e.printStackTrace(System.out);
            into.put("error", e.toString());
        }
    }

    private static void report(String what, ProfilingDevice prof, long wallNanos, ObjectNode into) {
        System.out.printf("  profile of one %s (each call synchronised): %.2f ms in all%n", what, wallNanos / 1e6);
        into.put("wall_ms", wallNanos / 1e6);
        prof.stats().entrySet().stream()
                .sorted((a, b) -> Long.compare(b.getValue().nanos, a.getValue().nanos))
                .forEach(e -> {
                    System.out.printf(
                            "    %-16s %6d calls %9.3f ms%n", e.getKey(), e.getValue().calls, e.getValue().nanos / 1e6);
                    ObjectNode o = into.putObject(e.getKey());
                    o.put("calls", e.getValue().calls);
                    o.put("ms", e.getValue().nanos / 1e6);
                });
    }

    private static void prefill(Scorer scorer, ModelConfig c, int batch, int seq, ObjectNode into) {
        List<ScoreRequest> reqs = PrefillBenchmark.randomRequests(c.vocabSize(), batch, seq, 5);
        for (int i = 0; i < 3; i++) {
            scorer.score(reqs);
        }
        double[] secs = new double[7];
        for (int i = 0; i < secs.length; i++) {
            long t0 = System.nanoTime();
            scorer.score(reqs);
            secs[i] = (System.nanoTime() - t0) / 1e9;
        }
        double median = LayerBenchmark.median(secs);
        double tokens = (double) batch * seq;
        double flops = PrefillBenchmark.modelFlops(c, batch, seq);
        ObjectNode r = into.putObject("prefill_" + batch + "x" + seq);
        r.put("tokens_per_s", tokens / median);
        r.put("median_s", median);
        r.put("model_tflops", flops / median / 1e12);
        r.put("mfu", flops / median / PEAK_BF16_FLOPS);
        System.out.printf(
                "  prefill %d x %d (scoring, log-probs of every token): %.0f tokens/s, median %.2f ms, %.1f TFLOP/s, MFU %.3f%n",
                batch, seq, tokens / median, median * 1e3, flops / median / 1e12, flops / median / PEAK_BF16_FLOPS);
    }

    private static void decode(GpuModel m, ModelConfig c, int batch, int prompt, int steps, ObjectNode into) {
        double step = LayerBenchmark.decodeStepSeconds(new StageDecodingModel(m, false), batch, prompt, steps, 9);
        ObjectNode r = into.putObject("decode_b" + batch);
        r.put("tokens_per_s", batch / step);
        r.put("ms_per_step", step * 1e3);
        System.out.printf(
                "  decode batch %d (prompt %d, %d steps, greedy, logits to the host each step): %.0f tokens/s, %.2f ms/step%n",
                batch, prompt, steps, batch / step, step * 1e3);
    }

    /** The golden prompts' greedy continuations with decode steps as CUDA graphs ({@link GpuConformance#withGraphs}). */
    private static void greedyWithGraphs(GpuModel m, JsonNode golden, ObjectNode into) {
        try {
            GpuConformance.GraphsReport r = GpuConformance.withGraphs(m, golden);
            into.put("greedy_golden_with_graphs", r.greedyEqual() + "/" + r.prompts());
            into.put("same_bits_as_without_graphs", r.sameBits() + "/" + r.prompts());
            System.out.println("  decode graphs: " + r);
        } catch (RuntimeException e) {
            e.printStackTrace(System.out);
            into.put("error", e.toString());
        }
    }

    /**
     * Greedy decode steps of batch sequences with CUDA graphs (one launch a step) and without, from the same prompts:
     * ms per step each way, whether every step's tokens agree and the largest logit difference.
     */
    static void decodeGraphs(GpuModel m, ModelConfig c, int batch, int prompt, int steps, ObjectNode into) {
        ObjectNode r = into.putObject("decode_graphs_b" + batch);
        try {
            List<ScoreRequest> ps = PrefillBenchmark.randomRequests(c.vocabSize(), batch, prompt, 9);
            int[][][] tokens = new int[2][steps][];
            float[][] last = new float[2][];
            double[] ms = new double[2];
            for (int graphs = 0; graphs < 2; graphs++) {
                StageDecodingModel d = new StageDecodingModel(m, graphs == 1);
                DecodingModel.Cache[] caches = new DecodingModel.Cache[batch];
                List<int[]> seqs = new ArrayList<>();
                for (int b = 0; b < batch; b++) {
                    caches[b] = d.newCache(prompt + steps + 1);
                    seqs.add(ps.get(b).tokens());
                }
                float[] logits = d.prefill(seqs, Arrays.asList(caches));
                long t0 = 0;
                for (int s = 0; s < steps; s++) {
                    if (s == 1) {
                        t0 = System.nanoTime(); // after the first step, which captures the graph
                    }
                    int[] next = tokens[graphs][s] = new int[batch];
                    for (int b = 0; b < batch; b++) {
                        next[b] = LogSoftmax.argmax(logits, b * c.vocabSize(), c.vocabSize());
                    }
                    logits = d.decode(next, caches);
                }
                ms[graphs] = (System.nanoTime() - t0) / 1e6 / (steps - 1);
                last[graphs] = logits;
                for (DecodingModel.Cache k : caches) {
                    k.close();
                }
            }
            boolean same = Arrays.deepEquals(tokens[0], tokens[1]);
            double d = GpuConformance.maxDiff(last[0], last[1]);
            r.put("cuda_graphs", CudaDevice.GRAPHS); // else the device reruns the step: the same bits, no graph
            r.put("ms_per_step_without", ms[0]);
            r.put("ms_per_step_with", ms[1]);
            r.put("greedy_tokens_equal", same);
            r.put("last_step_max_abs_dlogit", d);
            System.out.printf(
                    "  decode batch %d with CUDA graphs: %.2f ms/step (without %.2f), greedy tokens equal %b, last step max"
                            + " |dlogit| %.3g%n",
                    batch, ms[1], ms[0], same, d);
        } catch (RuntimeException e) {
            e.printStackTrace(System.out);
            r.put("error", e.toString());
        }
    }

    private static void writePrompts(List<ScoreRequest> reqs, List<SequenceScore> cpu, Path file)
            throws java.io.IOException {
        ArrayNode arr = JSON.createArrayNode();
        for (int i = 0; i < reqs.size(); i++) {
            ObjectNode o = arr.addObject();
            ArrayNode ids = o.putArray("token_ids");
            for (int t : reqs.get(i).tokens()) {
                ids.add(t);
            }
            ArrayNode lps = o.putArray("cpu_logprobs");
            float[] lp = cpu.get(i).tokenLogprobs();
            for (int k = 1; k < lp.length; k++) {
                lps.add(lp[k]);
            }
        }
        JSON.writeValue(file.toFile(), arr);
    }

    private static void flush(ObjectNode out, Path file) throws java.io.IOException {
        JSON.writerWithDefaultPrettyPrinter().writeValue(file.toFile(), out);
    }
}
