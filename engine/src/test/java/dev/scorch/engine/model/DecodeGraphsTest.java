package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.DeviceGraph;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.MlaShape;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.diagnostics.GpuConformance;
import dev.scorch.engine.diagnostics.GraphTwin;
import dev.scorch.engine.generation.Completion;
import dev.scorch.engine.generation.DecodingModel;
import dev.scorch.engine.generation.GenerationRequest;
import dev.scorch.engine.generation.Generator;
import dev.scorch.engine.generation.StageDecodingModel;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.testing.DemoModels;
import dev.scorch.engine.testing.TestModels;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Decode steps as device graphs ({@link DecodeGraphs}) through {@link GraphTwin}, the CPU twin of CUDA graph capture,
 * over {@link HostDevice}: generation with graphs gives the bits of generation without, over many steps in which every
 * cache grows, sequences finish (the batch shrinks) and new ones join; and the twin catches a step that is not safe to
 * capture.
 */
class DecodeGraphsTest {
    /** The golden prompts, each with its own budget so that sequences finish at different steps. */
    private static List<GenerationRequest> goldenRequests(JsonNode golden) {
        List<GenerationRequest> reqs = new ArrayList<>();
        int i = 0;
        for (JsonNode p : golden.get("prompts")) {
            reqs.add(new GenerationRequest(
                    GpuConformance.ints(p.get("token_ids")),
                    SamplingParams.greedy(),
                    16 - (i++ % 4) * 3,
                    Set.of(),
                    List.of(),
                    1,
                    0));
        }
        return reqs;
    }

    private static List<List<Completion>> generate(
            Path model, Device dev, GemmPrecision p, boolean graphs, List<GenerationRequest> reqs, int batch) {
        try (GpuModel m = GpuModel.load(ModelWeights.open(model), dev, p)) {
            return new Generator(
                            new StageDecodingModel(m, graphs),
                            new Generator.Limits(Long.MAX_VALUE, 1 << 20, batch),
                            null)
                    .generate(reqs);
        }
    }

    private static void assertSameCompletions(List<List<Completion>> want, List<List<Completion>> got) {
        assertEquals(want.size(), got.size());
        for (int q = 0; q < want.size(); q++) {
            Completion a = want.get(q).get(0);
            Completion b = got.get(q).get(0);
            assertArrayEquals(a.tokenIds(), b.tokenIds(), "request " + q + " tokens");
            assertArrayEquals(a.logprobs(), b.logprobs(), "request " + q + " logprobs");
        }
    }

    /**
     * The conformance model (MoE layers), four sequences at a time over the twelve golden prompts with budgets of 16,
     * 13, 10 and 7 tokens: graphs on equal graphs off bit for bit (tokens and logprobs), the greedy tokens are the
     * golden continuations' prefixes, and steps ran as graph launches, a graph per batch size seen.
     */
    @Test
    void greedyGenerationWithGraphsEqualsWithoutBitwise() throws IOException {
        JsonNode golden =
                new ObjectMapper().readTree(TestModels.conformanceGolden().toFile());
        List<GenerationRequest> reqs = goldenRequests(golden);
        GraphTwin twin = new GraphTwin(new HostDevice());
        List<List<Completion>> got =
                generate(TestModels.conformanceModel(), twin.device(), GemmPrecision.BF16X3, true, reqs, 4);
        List<List<Completion>> want =
                generate(TestModels.conformanceModel(), new HostDevice(), GemmPrecision.BF16X3, false, reqs, 4);
        assertSameCompletions(want, got);
        int i = 0;
        for (JsonNode p : golden.get("prompts")) {
            int[] gold = GpuConformance.ints(p.get("greedy_continuation"));
            int[] tokens = got.get(i).get(0).tokenIds();
            assertArrayEquals(Arrays.copyOf(gold, tokens.length), tokens, "golden prompt " + i++);
        }
        assertTrue(twin.captures() >= 2, "graphs captured: " + twin.captures()); // the batch shrank at the end
        assertTrue(twin.launches() > 5 * twin.captures(), twin.launches() + " launches of " + twin.captures());
    }

    /**
     * The tiny demo models, INT4 experts (kv_b_proj's absorbed form in fp32) and FP8 linears, random prompts, three at
     * a time with ragged budgets: graphs on equal graphs off bit for bit.
     */
    @Test
    void packedWeightModelsGenerateTheSameWithGraphs() {
        for (Path model : new Path[] {DemoModels.tinyInt4(), DemoModels.tinyFp8()}) {
            int vocab = ModelWeights.open(model).config().vocabSize();
            java.util.Random r = new java.util.Random(28);
            List<GenerationRequest> reqs = new ArrayList<>();
            for (int q = 0; q < 5; q++) {
                int[] prompt = new int[1 + r.nextInt(30)];
                for (int k = 0; k < prompt.length; k++) {
                    prompt[k] = r.nextInt(vocab);
                }
                reqs.add(new GenerationRequest(prompt, SamplingParams.greedy(), 4 + 3 * q, Set.of(), List.of(), 1, 0));
            }
            GraphTwin twin = new GraphTwin(new HostDevice());
            List<List<Completion>> got = generate(model, twin.device(), GemmPrecision.BF16X3, true, reqs, 3);
            List<List<Completion>> want = generate(model, new HostDevice(), GemmPrecision.BF16X3, false, reqs, 3);
            assertSameCompletions(want, got);
            assertTrue(twin.launches() > 0, model + ": no graph launched");
        }
    }

    /**
     * The small preset (8 layers at the benchmark model's widths), fp32 GEMMs to keep the plain-loop device's time
     * down: three prompts two at a time with budgets of 5, 3 and 4 tokens, graphs on equal graphs off bit for bit.
     */
    @Test
    void smallPresetGeneratesTheSameWithGraphs(@TempDir Path dir) throws IOException {
        ModelConfig c = new DemoModelWriter(DemoPreset.SMALL, false, true, 28).write(dir);
        java.util.Random r = new java.util.Random(28);
        List<GenerationRequest> reqs = new ArrayList<>();
        int[] budgets = {5, 3, 4};
        for (int q = 0; q < budgets.length; q++) {
            reqs.add(new GenerationRequest(
                    r.ints(2 + 3 * q, 0, c.vocabSize()).toArray(),
                    SamplingParams.greedy(),
                    budgets[q],
                    Set.of(),
                    List.of(),
                    1,
                    0));
        }
        GraphTwin twin = new GraphTwin(new HostDevice());
        List<List<Completion>> got = generate(dir, twin.device(), GemmPrecision.FP32, true, reqs, 2);
        List<List<Completion>> want = generate(dir, new HostDevice(), GemmPrecision.FP32, false, reqs, 2);
        assertSameCompletions(want, got);
        assertTrue(twin.launches() > 0, "no graph launched");
    }

    /** The device check's graph line (GpuConformance.withGraphs) through the twin: 12/12 golden, 12/12 same bits. */
    @Test
    void theDeviceChecksGraphLineOnTheTwin() throws IOException {
        JsonNode golden =
                new ObjectMapper().readTree(TestModels.conformanceGolden().toFile());
        try (GpuModel m = GpuModel.load(
                ModelWeights.open(TestModels.conformanceModel()),
                new GraphTwin(new HostDevice()).device(),
                GemmPrecision.BF16X3)) {
            GpuConformance.GraphsReport r = GpuConformance.withGraphs(m, golden);
            assertEquals(new GpuConformance.GraphsReport(12, 12, 12), r, r.toString());
        }
    }

    /**
     * A batch of one, then three (the shared buffers and scratch grow: the first graph's addresses move), then one
     * again (its graph must be captured again): every step's logits with graphs equal those without, bit for bit.
     */
    @Test
    void graphsAreCapturedAgainWhenTheirAddressesMove() {
        int[][] prompts = {{5, 9, 300, 4}, {17}, {480, 1, 44, 2, 2, 7}};
        int[][] batches = {{0}, {0}, {0, 1, 2}, {0, 1, 2}, {0}, {0}, {2, 1}, {2, 1}, {0}};
        List<float[]> want = steps(new HostDevice(), false, prompts, batches);
        GraphTwin twin = new GraphTwin(new HostDevice());
        List<float[]> got = steps(twin.device(), true, prompts, batches);
        for (int k = 0; k < want.size(); k++) {
            assertArrayEquals(want.get(k), got.get(k), "step " + k);
        }
        assertTrue(twin.captures() >= 4, "captures " + twin.captures()); // 1, 3, 1 again, 2
        assertTrue(twin.launches() >= 4, "launches " + twin.launches());
    }

    /** Prefills prompts, then decodes the batches of sequences (indices) in turn; each step's logits. */
    private static List<float[]> steps(Device dev, boolean graphs, int[][] prompts, int[][] batches) {
        List<float[]> out = new ArrayList<>();
        try (GpuModel m = GpuModel.load(ModelWeights.open(TestModels.conformanceModel()), dev, GemmPrecision.BF16X3)) {
            StageDecodingModel d = new StageDecodingModel(m, graphs);
            List<DecodingModel.Cache> caches = new ArrayList<>();
            for (int[] p : prompts) {
                caches.add(d.newCache(64));
            }
            d.prefill(Arrays.asList(prompts), caches);
            for (int k = 0; k < batches.length; k++) {
                int[] b = batches[k];
                int[] tokens = new int[b.length];
                DecodingModel.Cache[] cs = new DecodingModel.Cache[b.length];
                for (int i = 0; i < b.length; i++) {
                    tokens[i] = (7 * k + 3 * b[i]) % m.config().vocabSize();
                    cs[i] = caches.get(b[i]);
                }
                out.add(d.decode(tokens, cs).clone()); // valid until the next call
            }
            caches.forEach(DecodingModel.Cache::close);
        }
        return out;
    }

    /** Graphs are given back with the model: device bytes after equal bytes before. */
    @Test
    void graphsGoBackWithTheModel() {
        HostDevice host = new HostDevice();
        long before = host.freeBytes();
        generate(
                TestModels.conformanceModel(),
                new GraphTwin(host).device(),
                GemmPrecision.BF16X3,
                true,
                List.of(new GenerationRequest(
                        new int[] {5, 6, 7}, SamplingParams.greedy(), 6, Set.of(), List.of(), 2, 0)),
                2);
        assertEquals(before, host.freeBytes());
    }

    /** One sequence's absorbed attention with its cache length passed as a host integer, as the pre-graph step did. */
    private static final class HostLengthStep {
        final int heads = 2;
        final int nope = 8;
        final int rope = 4;
        final int v = 8;
        final int rank = 16;
        final Device dev;
        final Buf q;
        final Buf cache;
        final Buf kvB;
        final Buf out;
        int past = 3;

        HostLengthStep(Device dev) {
            this.dev = dev;
            java.util.Random r = new java.util.Random(3);
            float[] qs = new float[heads * (nope + rope)];
            float[] cs = new float[20 * (rank + rope)];
            float[] ws = new float[heads * (nope + v) * rank];
            for (float[] a : new float[][] {qs, cs, ws}) {
                for (int i = 0; i < a.length; i++) {
                    a[i] = (float) r.nextGaussian();
                }
            }
            q = dev.upload(qs);
            cache = dev.upload(cs);
            kvB = dev.upload(ws);
            out = dev.alloc(Buf.Kind.F32, heads * v);
        }

        void run() {
            dev.mlaDecode(q, 1, cache, past, kvB, new MlaShape(heads, 0, nope, rope, v, rank, 0.1f), out);
        }

        float[] out() {
            float[] o = new float[heads * v];
            dev.read(out, o, 0, o.length);
            return o;
        }
    }

    /**
     * A step that passes its cache length as a host integer: the checking twin's launch fails naming the call and the
     * argument; a replaying twin (as a CUDA graph) runs the baked length, and its output is not the step's.
     */
    @Test
    void aHostLengthInACapturedStepIsCaught() {
        HostLengthStep s = new HostLengthStep(new GraphTwin(new HostDevice()).device());
        DeviceGraph g = s.dev.capture(s::run);
        g.launch(); // the same length: fine
        s.past = 4;
        IllegalStateException e = assertThrows(IllegalStateException.class, g::launch);
        assertTrue(
                e.getMessage().contains("mlaDecode") && e.getMessage().contains("was 3 at capture, is 4 now"),
                e.getMessage());

        HostLengthStep baked = new HostLengthStep(new GraphTwin(new HostDevice(), false).device());
        DeviceGraph b = baked.dev.capture(baked::run);
        baked.past = 4;
        b.launch();
        float[] replayed = baked.out();
        baked.run();
        assertFalse(Arrays.equals(replayed, baked.out()), "the replay ran the baked length 3, not 4");
    }

    /** Host reads, writes, allocations and synchronisation inside a capture are refused; freed buffers are caught. */
    @Test
    void hostOperationsInACaptureAreRefused() {
        Device dev = new GraphTwin(new HostDevice()).device();
        Buf b = dev.alloc(Buf.Kind.F32, 4);
        Runnable[] hostOps = {
            () -> dev.read(b, new float[4], 0, 4),
            () -> dev.write(b, new float[4], 0, 4),
            () -> dev.alloc(Buf.Kind.F32, 4),
            dev::synchronize,
        };
        for (Runnable op : hostOps) {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> dev.capture(op));
            assertTrue(e.getMessage().contains("while capturing a device graph"), e.getMessage());
        }
        Buf y = dev.alloc(Buf.Kind.F32, 4);
        DeviceGraph g = dev.capture(() -> dev.add(y, b, 4));
        g.launch();
        dev.free(b);
        IllegalStateException e = assertThrows(IllegalStateException.class, g::launch);
        assertTrue(e.getMessage().contains("freed after capture"), e.getMessage());
    }
}
