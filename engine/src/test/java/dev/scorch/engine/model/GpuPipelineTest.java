package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.backend.GpuPlan;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.diagnostics.GpuConformance;
import dev.scorch.engine.diagnostics.ProfilingDevice;
import dev.scorch.engine.generation.Completion;
import dev.scorch.engine.generation.GenerationRequest;
import dev.scorch.engine.generation.Generator;
import dev.scorch.engine.generation.StageDecodingModel;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.engine.testing.TestModels;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link GpuPipeline} on {@link HostDevice}s against the one-device {@link GpuModel}: pipelines of 2, 3 and 4 stages,
 * even and uneven layer splits (a stage may hold the embedding or lm_head alone), give the same bits for scoring
 * (log-probs, argmax, top-k, logits rows, routed experts and the final hidden states) and for greedy generation through
 * the stages' KV caches; the stages work at once, and a failing stage fails the call with its cause.
 */
class GpuPipelineTest {
    private static final GemmPrecision P = GemmPrecision.BF16X3;

    @Test
    void conformanceModelGivesOneDevicesBitsOverTwoThreeAndFourStages() throws IOException {
        ModelWeights w = ModelWeights.open(TestModels.conformanceModel());
        List<int[]> prompts = goldenPrompts();
        List<ScoreRequest> reqs = requests(prompts);
        Reference ref = reference(w, P, reqs, prompts, 12);
        // 3 layers: every split of 2 stages, even and uneven ones of 3, and 4 stages with lm_head or the embedding
        // alone
        for (int[] split : List.of(
                new int[] {1, 2},
                new int[] {2, 1},
                new int[] {1, 1, 1},
                new int[] {0, 2, 1},
                new int[] {1, 1, 1, 0},
                new int[] {0, 1, 1, 1})) {
            check(w, P, split, reqs, prompts, ref, 12);
        }
    }

    @Test
    void smallPresetGivesOneDevicesBitsOverTwoThreeAndFourStages(@TempDir Path dir) throws IOException {
        ModelConfig c = new DemoModelWriter(DemoPreset.SMALL, false, true, 29).write(dir);
        assertEquals(8, c.numHiddenLayers());
        ModelWeights w = ModelWeights.open(dir);
        Random rnd = new Random(29);
        List<int[]> prompts = new ArrayList<>();
        for (int len : new int[] {6, 1, 9, 3}) {
            prompts.add(rnd.ints(len, 0, c.vocabSize()).toArray());
        }
        List<ScoreRequest> reqs = requests(prompts);
        // fp32 GEMMs (one per linear, not BF16X3's three) keep the plain-loop device's time down at these widths
        Reference ref = reference(w, GemmPrecision.FP32, reqs, prompts, 3);
        for (int[] split : List.of(new int[] {3, 5}, new int[] {1, 4, 3}, new int[] {2, 2, 2, 2})) {
            check(w, GemmPrecision.FP32, split, reqs, prompts, ref, 3);
        }
    }

    @Test
    void theBudgetPlacesLayersAsGpuPlanDoes() throws IOException {
        // DeepSeek-V3 (FP8) over one node of 8 H200s as docs/multi-gpu.md's table has it (GpuBudgetPlanTest checks
        // the arithmetic): 8/8/8/8/8/8/8/5 layers; 8 H100s do not hold it (12 needed)
        ModelConfig v3 = ModelConfig.read(Path.of("..", "conf", "examples", "deepseek-v3", "config.json"));
        assertArrayEquals(
                new int[] {8, 8, 8, 8, 8, 8, 8, 5},
                GpuPlan.planSplit(v3, P, new GpuPlan.Settings(141_000_000_000L, 8, 0.05, 1_000_000_000L, 4096)));
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> GpuPlan.planSplit(v3, P, new GpuPlan.Settings(80_000_000_000L, 8, 0.05, 1_000_000_000L, 4096)));
        assertEquals("the model needs 12 devices of 80.0 GB; 8 given", e.getMessage());

        ModelWeights w = ModelWeights.open(TestModels.conformanceModel());
        List<int[]> prompts = goldenPrompts();
        List<Device> devs = devices(2);
        try (GpuModel one = GpuModel.load(w, new HostDevice(), P);
                GpuPipeline two = GpuPipeline.load(w, devs, P, GpuPlan.planSplit(w.config(), P, devs))) {
            assertEquals(3, Arrays.stream(two.split()).sum());
            assertEquals(2, two.stages().size());
            assertScores(
                    new Scorer(one).score(requests(prompts)), new Scorer(two).score(requests(prompts)), "budget split");
        }
    }

    @Test
    void stagesWorkAtOnce() throws IOException {
        ModelWeights w = ModelWeights.open(TestModels.conformanceModel());
        try (GpuPipeline p = GpuPipeline.load(w, devices(3), P, new int[] {1, 1, 1})) {
            new Scorer(p).score(requests(goldenPrompts()));
            assertTrue(p.maxConcurrentStages() >= 2, "at most " + p.maxConcurrentStages() + " stage(s) ran at once");
        }
    }

    @Test
    void hiddenStatesGoDeviceToDeviceNotThroughTheHost() throws IOException {
        ModelWeights w = ModelWeights.open(TestModels.conformanceModel());
        List<int[]> prompts = goldenPrompts();
        List<ScoreRequest> reqs = requests(prompts);
        // The same pipeline twice, its devices counting what they do: hand-offs device to device, and (devices without
        // copyTo) through the host
        List<ProfilingDevice> direct = profiled(3);
        List<ProfilingDevice> viaHost = profiled(3);
        List<Device> noCopy = new ArrayList<>();
        for (ProfilingDevice d : viaHost) {
            noCopy.add(withoutCopyTo(d.device()));
        }
        try (GpuPipeline p = GpuPipeline.load(
                        w, direct.stream().map(ProfilingDevice::device).toList(), P, new int[] {1, 1, 1});
                GpuPipeline q = GpuPipeline.load(w, noCopy, P, new int[] {1, 1, 1})) {
            int micro = p.microBatches(prompts.size());
            assertTrue(micro > 1, micro + " micro-batch(es)");
            assertScores(new Scorer(q).score(reqs), new Scorer(p).score(reqs), "scoring");
            handedDeviceToDevice(direct, viaHost, micro, "scoring");
            List<List<Completion>> a = greedy(new StageDecodingModel(p), prompts, 3);
            List<List<Completion>> b = greedy(new StageDecodingModel(q), prompts, 3);
            for (int i = 0; i < prompts.size(); i++) {
                assertArrayEquals(b.get(i).get(0).tokenIds(), a.get(i).get(0).tokenIds(), "greedy tokens " + i);
                assertArrayEquals(b.get(i).get(0).logprobs(), a.get(i).get(0).logprobs(), "greedy log-probs " + i);
            }
            handedDeviceToDevice(direct, viaHost, -1, "greedy generation");
        }
    }

    /**
     * Each stage but the last copied each micro-batch's output device to device (micro of them; -1: as many as the first
     * stage did) and read no floats back, where the host hand-off read one array a micro-batch; each stage after the
     * first wrote one float array a micro-batch fewer than there.
     */
    private static void handedDeviceToDevice(
            List<ProfilingDevice> direct, List<ProfilingDevice> viaHost, int micro, String what) {
        long handoffs = calls(direct.get(0), "copyTo");
        assertTrue(handoffs > 0 && (micro < 0 || handoffs == micro), what + ": " + handoffs + " copies");
        for (int k = 0; k < direct.size(); k++) {
            ProfilingDevice d = direct.get(k);
            ProfilingDevice h = viaHost.get(k);
            boolean first = k == 0;
            boolean last = k == direct.size() - 1;
            String at = what + " stage " + k;
            assertEquals(last ? 0 : handoffs, calls(d, "copyTo"), at + " device-to-device copies");
            assertEquals(first ? 0 : handoffs, calls(h, "write") - calls(d, "write"), at + " float writes saved");
            assertEquals(last ? 0 : handoffs, calls(h, "read") - calls(d, "read"), at + " float reads saved");
            if (!last) {
                assertEquals(0, calls(d, "read"), at + " float reads");
            }
            d.reset();
            h.reset();
        }
    }

    private static long calls(ProfilingDevice d, String op) {
        ProfilingDevice.Stat s = d.stats().get(op);
        return s == null ? 0 : s.calls;
    }

    private static List<ProfilingDevice> profiled(int n) {
        List<ProfilingDevice> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(new ProfilingDevice(new HostDevice()));
        }
        return out;
    }

    /** dev with no device-to-device path: a pipeline over such devices hands hidden states on through the host. */
    private static Device withoutCopyTo(Device dev) {
        return (Device) Proxy.newProxyInstance(
                Device.class.getClassLoader(), new Class<?>[] {Device.class}, (proxy, m, args) -> {
                    if (m.getName().equals("copyTo")) {
                        return false;
                    }
                    try {
                        return m.invoke(dev, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    @Test
    void aFailingStageFailsTheCallWithItsCauseAndTheNextCallRuns() throws IOException {
        ModelWeights w = ModelWeights.open(TestModels.conformanceModel());
        List<ScoreRequest> reqs = requests(goldenPrompts());
        AtomicInteger gemmsLeft = new AtomicInteger(Integer.MAX_VALUE);
        IllegalStateException boom = new IllegalStateException("injected device fault");
        List<SequenceScore> want;
        try (GpuModel one = GpuModel.load(w, new HostDevice(), P)) {
            want = new Scorer(one).score(reqs);
        }
        List<Device> devs = List.of(new HostDevice(), failing(new HostDevice(), gemmsLeft, boom), new HostDevice());
        try (GpuPipeline p = GpuPipeline.load(w, devs, P, new int[] {1, 1, 1})) {
            Scorer scorer = new Scorer(p);
            gemmsLeft.set(12); // the middle stage fails a few micro-batches in (5 GEMM calls a micro-batch)
            GpuPipeline.PipelineFailure e = assertTimeoutPreemptively(
                    Duration.ofSeconds(60),
                    () -> assertThrows(GpuPipeline.PipelineFailure.class, () -> scorer.score(reqs)));
            assertSame(boom, e.getCause());
            assertTrue(e.getMessage().contains("stage 1 (layers [1, 2)"), e.getMessage());
            gemmsLeft.set(Integer.MAX_VALUE);
            assertScores(want, scorer.score(reqs), "after a failed call");
        }
    }

    @Test
    void aStageChecksWhatItHoldsAndWhatItIsGiven() {
        ModelWeights w = ModelWeights.open(TestModels.conformanceModel());
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class, () -> DecoderStage.load(w, new HostDevice(), P, 1, 2, true, false));
        assertTrue(e.getMessage().startsWith("layers [1, 2) of 3: only a stage from layer 0"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> DecoderStage.load(w, new HostDevice(), P, 2, 1));
        assertThrows(IllegalArgumentException.class, () -> DecoderStage.load(w, new HostDevice(), P, 0, 4));
        PackedBatch batch = PackedBatch.of(List.of(new int[] {1, 2, 3}));
        try (DecoderStage first = DecoderStage.load(w, new HostDevice(), P, 0, 1);
                DecoderStage rest = DecoderStage.load(w, new HostDevice(), P, 1, 3)) {
            assertTrue(first.isFirst() && !first.isLast() && !rest.isFirst() && rest.isLast());
            e = assertThrows(IllegalArgumentException.class, () -> forward(rest, batch, null, null));
            assertEquals("stage of layers [1, 3) needs hidden states [3, 64], got none", e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> forward(first, batch, null, new float[3 * 64]));
            assertEquals("the first stage starts from token ids, not hidden states", e.getMessage());
            try (GpuKvCache wrong = first.newCache(8)) {
                e = assertThrows(
                        IllegalArgumentException.class,
                        () -> forward(rest, batch, new GpuKvCache[] {wrong}, new float[3 * 64]));
                assertEquals("sequence 0's cache holds 1 layers; this stage has 2", e.getMessage());
            }
            assertEquals(3 * 64, forward(rest, batch, null, forward(first, batch, null, null)).length);
        }
    }

    /** s's outgoing hidden states of batch on the host, in from the stage before (null at the first stage). */
    private static float[] forward(DecoderStage s, PackedBatch batch, LatentCache[] caches, float[] in) {
        return s.forward(new DecoderStage.Request(batch, caches, null, in), s::read);
    }

    /** One device's scores, routes, final hidden states and greedy continuations. */
    private record Reference(
            List<SequenceScore> scores, int[][] routes, float[] hidden, List<List<Completion>> greedy) {}

    private static Reference reference(
            ModelWeights w, GemmPrecision p, List<ScoreRequest> reqs, List<int[]> prompts, int newTokens) {
        try (GpuModel m = GpuModel.load(w, new HostDevice(), p)) {
            int[][] routes = new int[moeLayers(m.config())][];
            List<SequenceScore> scores = new Scorer(m).score(reqs, routes);
            float[] hidden = forward(m.stage(), PackedBatch.of(prompts), null, null);
            return new Reference(scores, routes, hidden, greedy(new StageDecodingModel(m), prompts, newTokens));
        }
    }

    private static void check(
            ModelWeights w,
            GemmPrecision precision,
            int[] split,
            List<ScoreRequest> reqs,
            List<int[]> prompts,
            Reference ref,
            int newTokens) {
        String what = Arrays.toString(split);
        try (GpuPipeline p = GpuPipeline.load(w, devices(split.length), precision, split)) {
            assertArrayEquals(split, p.split(), what);
            int[][] routes = new int[ref.routes().length][];
            assertScores(ref.scores(), new Scorer(p).score(reqs, routes), what);
            for (int l = 0; l < routes.length; l++) {
                assertArrayEquals(ref.routes()[l], routes[l], what + " routes of MoE layer " + l);
            }
            // The stage API by hand: the whole batch through each stage in turn, hidden states through the host
            float[] hidden = null;
            PackedBatch batch = PackedBatch.of(prompts);
            for (DecoderStage s : p.stages()) {
                hidden = forward(s, batch, null, hidden);
            }
            assertArrayEquals(ref.hidden(), hidden, what + " final hidden states");
            List<List<Completion>> got = greedy(new StageDecodingModel(p), prompts, newTokens);
            for (int i = 0; i < prompts.size(); i++) {
                Completion a = ref.greedy().get(i).get(0);
                Completion b = got.get(i).get(0);
                assertArrayEquals(a.tokenIds(), b.tokenIds(), what + " greedy tokens of prompt " + i);
                assertArrayEquals(a.logprobs(), b.logprobs(), what + " greedy log-probs of prompt " + i);
            }
        }
    }

    private static List<List<Completion>> greedy(StageDecodingModel m, List<int[]> prompts, int newTokens) {
        List<GenerationRequest> reqs = new ArrayList<>();
        for (int[] p : prompts) {
            reqs.add(new GenerationRequest(p, SamplingParams.greedy(), newTokens, Set.of(), List.of(), 1, 0));
        }
        // 5 sequences at a time: decode steps of several sequences, split into micro-batches on a pipeline
        return new Generator(m, new Generator.Limits(Long.MAX_VALUE, 1 << 20, 5), null).generate(reqs);
    }

    private static void assertScores(List<SequenceScore> want, List<SequenceScore> got, String what) {
        assertEquals(want.size(), got.size(), what);
        for (int s = 0; s < want.size(); s++) {
            SequenceScore a = want.get(s);
            SequenceScore b = got.get(s);
            String at = what + " sequence " + s;
            assertArrayEquals(a.tokenLogprobs(), b.tokenLogprobs(), at + " log-probs");
            assertArrayEquals(a.argmax(), b.argmax(), at + " argmax");
            assertEquals(a.sumLogprob(), b.sumLogprob(), 0.0, at + " sum");
            assertEquals(a.topIds() == null, b.topIds() == null, at + " top-k");
            if (a.topIds() != null) {
                for (int i = 0; i < a.topIds().length; i++) {
                    assertArrayEquals(a.topIds()[i], b.topIds()[i], at + " top ids " + i);
                    assertArrayEquals(a.topLogprobs()[i], b.topLogprobs()[i], at + " top log-probs " + i);
                }
            }
            assertEquals(a.logits() == null, b.logits() == null, at + " logits");
            if (a.logits() != null) {
                for (int i = 0; i < a.logits().length; i++) {
                    assertArrayEquals(a.logits()[i], b.logits()[i], at + " logits row " + i);
                }
            }
        }
    }

    /** Every prompt scored; every third keeps its last logits row and every other one its top 3. */
    private static List<ScoreRequest> requests(List<int[]> prompts) {
        List<ScoreRequest> out = new ArrayList<>();
        for (int i = 0; i < prompts.size(); i++) {
            out.add(new ScoreRequest(
                    prompts.get(i), 1, i % 2 == 0 ? 3 : 0, i % 3 == 0 ? LogitsMode.LAST : LogitsMode.NONE));
        }
        return out;
    }

    private static List<int[]> goldenPrompts() throws IOException {
        JsonNode golden =
                new ObjectMapper().readTree(TestModels.conformanceGolden().toFile());
        List<int[]> out = new ArrayList<>();
        for (JsonNode p : golden.get("prompts")) {
            out.add(GpuConformance.ints(p.get("token_ids")));
        }
        return out;
    }

    private static int moeLayers(ModelConfig c) {
        int n = 0;
        for (int l = 0; l < c.numHiddenLayers(); l++) {
            n += c.isMoeLayer(l) ? 1 : 0;
        }
        return n;
    }

    private static List<Device> devices(int n) {
        List<Device> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(new HostDevice());
        }
        return out;
    }

    /** dev, whose gemm throws fault once gemmsLeft calls have run. */
    private static Device failing(HostDevice dev, AtomicInteger gemmsLeft, RuntimeException fault) {
        return (Device) Proxy.newProxyInstance(
                Device.class.getClassLoader(), new Class<?>[] {Device.class}, (proxy, m, args) -> {
                    if (m.getName().equals("gemm") && gemmsLeft.getAndDecrement() <= 0) {
                        throw fault;
                    }
                    try {
                        return m.invoke(dev, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }
}
