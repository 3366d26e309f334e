package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.generation.DecodingModel;
import dev.scorch.engine.generation.StageDecodingModel;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.testing.DemoModels;
import dev.scorch.engine.testing.TestModels;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/** Prefill into the MLA latent KV cache, then decode in the absorbed form. */
class DecodeTest {

    /** Prefills each prompt into a fresh cache and returns the logits of its last token [B, vocab]. */
    static float[] prefill(DeepseekV3Model m, CpuOps ops, List<int[]> prompts, KvCache[] caches) {
        return new StageDecodingModel(m.on(ops)).prefill(prompts, Arrays.asList(wrap(caches)));
    }

    /** One decode step on a decoding model of its own (a workspace of its own). */
    static float[] decode(DeepseekV3Model m, CpuOps ops, int[] tokens, KvCache[] caches) {
        return new StageDecodingModel(m.on(ops)).decode(tokens, wrap(caches));
    }

    /** The CPU caches as a decoding model's. */
    static DecodingModel.Cache[] wrap(KvCache[] caches) {
        DecodingModel.Cache[] out = new DecodingModel.Cache[caches.length];
        for (int s = 0; s < out.length; s++) {
            out[s] = new StageDecodingModel.StageCache(new LatentCache[] {caches[s]});
        }
        return out;
    }

    static float[] fullLastLogits(DeepseekV3Model m, CpuOps ops, int[] tokens) {
        return new Scorer(m.on(ops))
                .score(List.of(new ScoreRequest(tokens, tokens.length, 0, LogitsMode.LAST)))
                .get(0)
                .logits()[0];
    }

    @Test
    void greedyDecodeWithCacheMatchesGoldenContinuation() throws IOException {
        DeepseekV3Model m = DeepseekV3Model.load(TestModels.conformanceModel());
        JsonNode golden =
                new ObjectMapper().readTree(TestModels.conformanceGolden().toFile());
        int vocab = m.vocabSize();
        List<Supplier<CpuOps>> paths = List.of(() -> new CpuOps(2), () -> new CpuOps(2, false));
        for (Supplier<CpuOps> path : paths) {
            try (CpuOps ops = path.get()) {
                for (JsonNode p : golden.get("prompts")) {
                    int[] prompt = ConformanceTest.ints(p.get("token_ids"));
                    int[] expected = ConformanceTest.ints(p.get("greedy_continuation"));
                    KvCache cache = new KvCache(m.config(), prompt.length + expected.length);
                    KvCache[] caches = {cache};
                    int[] got = new int[expected.length];
                    float[] logits = prefill(m, ops, List.of(prompt), caches);
                    for (int step = 0; step < expected.length; step++) {
                        got[step] = LogSoftmax.argmax(logits, 0, vocab);
                        if (step + 1 < expected.length) {
                            logits = decode(m, ops, new int[] {got[step]}, caches);
                        }
                    }
                    assertArrayEquals(
                            expected, got, ops + ": greedy continuation of a " + prompt.length + "-token prompt");
                    assertEquals(prompt.length + expected.length - 1, cache.length());
                }
            }
        }
    }

    /** Decode logits at every position up to 100 (past YaRN's 64) vs full recomputation of the same prefix. */
    static void decodeMatchesRecomputation(Path dir) {
        double maxD = decodeVsRecomputation(dir, KernelSelection.current().cpuPrecision());
        assertTrue(maxD <= 1e-4, dir.getFileName() + ": decode vs recomputation max |d logit| " + maxD);
    }

    /** The largest |Δ logit| of {@link #decodeMatchesRecomputation}'s comparisons, everything in precision p. */
    static double decodeVsRecomputation(Path dir, CpuPrecision p) {
        DeepseekV3Model m = DeepseekV3Model.load(dir);
        int[] seq = InvarianceTest.prompts(m.vocabSize(), 13, 100).get(0);
        double maxD = 0;
        try (CpuOps ops = new CpuOps(2, p)) {
            for (int prefillLen : new int[] {1, 40}) {
                KvCache[] caches = {new KvCache(m.config(), seq.length)};
                float[] logits = prefill(m, ops, List.of(Arrays.copyOf(seq, prefillLen)), caches);
                for (int n = prefillLen; ; n++) {
                    float[] full = fullLastLogits(m, ops, Arrays.copyOf(seq, n));
                    for (int v = 0; v < full.length; v++) {
                        maxD = Math.max(maxD, Math.abs(full[v] - logits[v]));
                    }
                    if (n == seq.length) {
                        break;
                    }
                    logits = decode(m, ops, new int[] {seq[n]}, caches);
                }
                assertEquals(seq.length, caches[0].length());
            }
            // A multi-token extension of a non-empty cache attends in the absorbed form too.
            KvCache[] caches = {new KvCache(m.config(), seq.length)};
            prefill(m, ops, List.of(Arrays.copyOf(seq, 30)), caches);
            float[] ext = prefill(m, ops, List.of(Arrays.copyOfRange(seq, 30, 90)), caches);
            float[] full = fullLastLogits(m, ops, Arrays.copyOf(seq, 90));
            for (int v = 0; v < full.length; v++) {
                maxD = Math.max(maxD, Math.abs(full[v] - ext[v]));
            }
        }
        System.out.printf("decode vs recomputation %s, %s: max |dlogit| %.3g%n", dir.getFileName(), p.id(), maxD);
        return maxD;
    }

    @Test
    void decodeMatchesRecomputationBf16() {
        decodeMatchesRecomputation(DemoModels.tinyBf16());
    }

    @Test
    void decodeMatchesRecomputationFp8() {
        decodeMatchesRecomputation(DemoModels.tinyFp8());
    }

    @Test
    void decodeMatchesRecomputationInt4() {
        decodeMatchesRecomputation(DemoModels.tinyInt4());
    }

    @Test
    void decodeMatchesRecomputationWithoutQLora() {
        decodeMatchesRecomputation(DemoModels.tinyNoQLora());
    }

    /** Prefill's hidden states are scoring's, bit for bit, and the cache holds the same bits batched or alone. */
    @Test
    void prefillEqualsScoringForwardBitwise() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        List<int[]> seqs = InvarianceTest.prompts(m.vocabSize(), 5, 3, 70, 12);
        try (CpuOps ops = new CpuOps(2)) {
            KvCache[] caches = new KvCache[seqs.size()];
            for (int s = 0; s < caches.length; s++) {
                caches[s] = new KvCache(m.config(), 80);
            }
            float[] cached = InvarianceTest.hidden(m, ops, KvCache.pack(seqs, Arrays.asList(caches)), caches);
            assertArrayEquals(InvarianceTest.hidden(m, ops, PackedBatch.of(seqs), null), cached);
            KvCache alone = new KvCache(m.config(), 80);
            InvarianceTest.hidden(m, ops, KvCache.pack(List.of(seqs.get(1)), List.of(alone)), new KvCache[] {alone});
            for (int l = 0; l < m.config().numHiddenLayers(); l++) {
                assertArrayEquals(
                        Arrays.copyOf(alone.rows(l), 70 * alone.width()),
                        Arrays.copyOf(caches[1].rows(l), 70 * alone.width()),
                        "latents and k_pe of layer " + l);
            }
        }
    }

    /**
     * Sequences prefilled and decoded together give the bits each gives alone, at 1 and 2 threads; together they
     * share one workspace (as a generator does), so a buffer left over from a larger pass cannot leak into a result.
     */
    @Test
    void batchedDecodeEqualsAloneBitwise() {
        batchedDecodeEqualsAloneBitwise(DemoModels.tinyBf16());
    }

    /** As for BF16, with the routed experts in compressed-tensors INT4 groups. */
    @Test
    void batchedDecodeEqualsAloneBitwiseInt4() {
        batchedDecodeEqualsAloneBitwise(DemoModels.tinyInt4());
    }

    static void batchedDecodeEqualsAloneBitwise(Path dir) {
        batchedDecodeEqualsAloneBitwise(dir, KernelSelection.current().cpuPrecision());
    }

    /** As {@link #batchedDecodeEqualsAloneBitwise(Path)}, everything in precision p. */
    static void batchedDecodeEqualsAloneBitwise(Path dir, CpuPrecision p) {
        DeepseekV3Model m = DeepseekV3Model.load(dir);
        int vocab = m.vocabSize();
        List<int[]> prompts = InvarianceTest.prompts(vocab, 9, 1, 7, 66, 30);
        int steps = 8;
        // Alone, 1 thread: greedy tokens and the logits of every step.
        List<List<float[]>> aloneLogits = new ArrayList<>();
        List<int[]> aloneTokens = new ArrayList<>();
        try (CpuOps ops = new CpuOps(1, p)) {
            for (int[] prompt : prompts) {
                KvCache[] c = {new KvCache(m.config(), prompt.length + steps)};
                List<float[]> ls = new ArrayList<>();
                int[] toks = new int[steps];
                float[] logits = prefill(m, ops, List.of(prompt), c);
                for (int step = 0; step < steps; step++) {
                    ls.add(logits);
                    toks[step] = LogSoftmax.argmax(logits, 0, vocab);
                    logits = decode(m, ops, new int[] {toks[step]}, c);
                }
                ls.add(logits); // after the last step
                aloneLogits.add(ls);
                aloneTokens.add(toks);
            }
        }
        for (int threads : new int[] {1, 2}) {
            try (CpuOps ops = new CpuOps(threads, p)) {
                StageDecodingModel d = new StageDecodingModel(m.on(ops));
                int b = prompts.size();
                KvCache[] caches = new KvCache[b];
                for (int s = 0; s < b; s++) {
                    caches[s] = new KvCache(m.config(), prompts.get(s).length + steps);
                }
                float[] logits = d.prefill(prompts, Arrays.asList(wrap(caches)));
                for (int step = 0; step < steps; step++) {
                    int[] next = new int[b];
                    for (int s = 0; s < b; s++) {
                        assertArrayEquals(
                                aloneLogits.get(s).get(step),
                                Arrays.copyOfRange(logits, s * vocab, (s + 1) * vocab),
                                threads + " threads, sequence " + s + ", step " + step);
                        next[s] = aloneTokens.get(s)[step];
                    }
                    if (step + 1 < steps) {
                        logits = d.decode(next, wrap(caches));
                        continue;
                    }
                    // The last step decodes in one batch with a new prompt's prefill: every row as alone.
                    int[] fresh = prompts.get(2);
                    List<int[]> mixedSeqs = new ArrayList<>();
                    KvCache[] mixed = Arrays.copyOf(caches, b + 1);
                    for (int s = 0; s < b; s++) {
                        mixedSeqs.add(new int[] {next[s]});
                    }
                    mixedSeqs.add(fresh);
                    mixed[b] = new KvCache(m.config(), fresh.length);
                    // The decode rows' logits as decode computes them, the prefill row's as prefill does.
                    float[] mixedLogits = d.prefill(mixedSeqs, Arrays.asList(wrap(mixed)));
                    for (int s = 0; s < b; s++) {
                        assertArrayEquals(
                                aloneLogits.get(s).get(steps),
                                Arrays.copyOfRange(mixedLogits, s * vocab, (s + 1) * vocab),
                                threads + " threads, mixed batch, decoding sequence " + s);
                    }
                    assertArrayEquals(
                            aloneLogits.get(2).get(0),
                            Arrays.copyOfRange(mixedLogits, b * vocab, (b + 1) * vocab),
                            threads + " threads, mixed batch, prefill row");
                }
            }
        }
    }

    @Test
    void bytesPerTokenOfTheSmallPreset() {
        DemoPreset p = DemoPreset.SMALL;
        KvCache c = new KvCache(p.numHiddenLayers(), p.kvLoraRank(), p.qkRopeHeadDim(), 4096);
        assertEquals(8L * (256 + 32) * 4, c.bytesPerToken());
        assertEquals(
                8L * (256 + 32) * 4, KvCache.bytesPerToken(p.numHiddenLayers(), p.kvLoraRank(), p.qkRopeHeadDim()));
    }

    @Test
    void cacheFullFailsClearlyAndChangesNothing() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        try (CpuOps ops = new CpuOps(1)) {
            KvCache[] c = {new KvCache(m.config(), 5)};
            prefill(m, ops, List.of(new int[] {1, 2, 3, 4}), c);
            decode(m, ops, new int[] {5}, c);
            assertEquals(5, c[0].length());
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> decode(m, ops, new int[] {6}, c));
            assertTrue(e.getMessage().contains("KV cache is full"), e.getMessage());
            assertEquals(5, c[0].length());
            KvCache shared = new KvCache(m.config(), 8);
            assertThrows(
                    IllegalArgumentException.class,
                    () -> decode(m, ops, new int[] {1, 2}, new KvCache[] {shared, shared}));
            assertThrows(
                    IllegalArgumentException.class,
                    () -> InvarianceTest.hidden(m, ops, PackedBatch.of(List.of(new int[] {1})), new KvCache[] {c[0]
                    })); // position 0, cache at 5
        }
    }
}
