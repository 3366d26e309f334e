package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.engine.testing.DemoModels;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * A row's scores depend only on the row: bit-identical whatever its batch mates, padding, order or thread
 * count; and the fast path agrees with the reference path on every model variant.
 */
class InvarianceTest {

    static List<int[]> prompts(int vocab, long seed, int... lengths) {
        Random r = new Random(seed);
        List<int[]> out = new ArrayList<>();
        for (int len : lengths) {
            int[] t = new int[len];
            for (int i = 0; i < len; i++) {
                t[i] = r.nextInt(vocab);
            }
            out.add(t);
        }
        return out;
    }

    static List<SequenceScore> score(DeepseekV3Model m, CpuOps ops, List<int[]> seqs) {
        List<ScoreRequest> reqs = new ArrayList<>();
        for (int[] s : seqs) {
            reqs.add(new ScoreRequest(s, 1, 4, LogitsMode.LAST));
        }
        return new Scorer(m.on(ops)).score(reqs);
    }

    static void assertSameBits(SequenceScore a, SequenceScore b, String what) {
        assertArrayEquals(a.tokenLogprobs(), b.tokenLogprobs(), what + ": token log-probs");
        assertArrayEquals(a.logits()[0], b.logits()[0], what + ": last logits");
        for (int k = 1; k < a.tokenLogprobs().length; k++) {
            assertArrayEquals(a.topIds()[k], b.topIds()[k], what + ": top ids at " + k);
            assertArrayEquals(a.topLogprobs()[k], b.topLogprobs()[k], what + ": top log-probs at " + k);
        }
    }

    @Test
    void batchMatesOrderAndThreadsDoNotChangeBits() {
        batchMatesOrderAndThreadsDoNotChangeBits(DemoModels.tinyBf16());
    }

    /** As for BF16, with the routed experts in compressed-tensors INT4 groups (and wrapped as K2.5). */
    @Test
    void batchMatesOrderAndThreadsDoNotChangeBitsInt4() {
        batchMatesOrderAndThreadsDoNotChangeBits(DemoModels.tinyInt4());
        batchMatesOrderAndThreadsDoNotChangeBits(DemoModels.tinyInt4K25());
    }

    static void batchMatesOrderAndThreadsDoNotChangeBits(Path dir) {
        DeepseekV3Model m = DeepseekV3Model.load(dir);
        // 543 rows: short and long sequences (the 300-token one spans several attention tiles and GEMM blocks) in one
        // batch; reversed, the other way round.
        List<int[]> seqs = prompts(m.vocabSize(), 7, 1, 5, 37, 70, 130, 300);
        List<SequenceScore> alone = new ArrayList<>();
        try (CpuOps one = new CpuOps(1)) {
            for (int[] s : seqs) {
                alone.add(score(m, one, List.of(s)).get(0));
            }
        }
        for (int threads : new int[] {1, 2, 3}) {
            try (CpuOps ops = new CpuOps(threads)) {
                List<SequenceScore> batched = score(m, ops, seqs);
                List<int[]> reversed = new ArrayList<>(seqs);
                java.util.Collections.reverse(reversed);
                List<SequenceScore> rev = score(m, ops, reversed);
                for (int i = 0; i < seqs.size(); i++) {
                    assertSameBits(alone.get(i), batched.get(i), threads + " threads, batched, sequence " + i);
                    assertSameBits(
                            alone.get(i), rev.get(seqs.size() - 1 - i), threads + " threads, reversed, sequence " + i);
                }
            }
        }
    }

    /**
     * A scorer keeps its workspace from batch to batch: scoring a large batch, then smaller ones, then the large one
     * again gives every row the bits of a fresh scorer, so no buffer left by an earlier batch leaks into a result.
     */
    @Test
    void aReusedScorerGivesTheBitsOfAFreshOne() {
        for (Path dir : List.of(DemoModels.tinyBf16(), DemoModels.tinyNoQLora(), DemoModels.tinyInt4())) {
            DeepseekV3Model m = DeepseekV3Model.load(dir);
            List<int[]> seqs = prompts(m.vocabSize(), 5, 90, 3, 41, 17);
            try (CpuOps ops = new CpuOps(2)) {
                List<SequenceScore> fresh = new ArrayList<>();
                for (int[] s : seqs) {
                    fresh.add(score(m, ops, List.of(s)).get(0));
                }
                Scorer reused = new Scorer(m.on(ops));
                List<List<int[]>> batches =
                        List.of(seqs, List.of(seqs.get(1)), List.of(seqs.get(3), seqs.get(2)), seqs);
                for (List<int[]> batch : batches) {
                    List<ScoreRequest> reqs = new ArrayList<>();
                    for (int[] s : batch) {
                        reqs.add(new ScoreRequest(s, 1, 4, LogitsMode.LAST));
                    }
                    List<SequenceScore> got = reused.score(reqs);
                    for (int i = 0; i < batch.size(); i++) {
                        assertSameBits(
                                fresh.get(seqs.indexOf(batch.get(i))),
                                got.get(i),
                                dir.getFileName() + ", batch of " + batch.size() + ", row " + i);
                    }
                }
            }
        }
    }

    @Test
    void leftAndRightPaddingGiveTheSameBits() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        List<int[]> seqs = prompts(m.vocabSize(), 11, 3, 20, 9);
        int width = 24;
        int[][] ids = new int[seqs.size()][width];
        int[][] left = new int[seqs.size()][width];
        int[][] idsR = new int[seqs.size()][width];
        int[][] right = new int[seqs.size()][width];
        for (int b = 0; b < seqs.size(); b++) {
            int[] s = seqs.get(b);
            int pad = width - s.length;
            for (int t = 0; t < s.length; t++) {
                ids[b][pad + t] = s[t];
                left[b][pad + t] = 1;
                idsR[b][t] = s[t];
                right[b][t] = 1;
            }
            // Padding slots hold a real token id: it must be masked out, not merely be a harmless id.
            for (int t = 0; t < pad; t++) {
                ids[b][t] = 5;
                idsR[b][s.length + t] = 5;
            }
        }
        PackedBatch l = fromPadded(ids, left);
        PackedBatch r = fromPadded(idsR, right);
        assertArrayEquals(l.tokens(), r.tokens());
        assertArrayEquals(l.positions(), r.positions());
        try (CpuOps ops = new CpuOps(2)) {
            float[] hl = hidden(m, ops, l, null);
            float[] hr = hidden(m, ops, r, null);
            assertArrayEquals(hl, hr);
            float[] alone = hidden(m, ops, PackedBatch.of(List.of(seqs.get(1))), null);
            int h = m.config().hiddenSize();
            float[] inBatch = java.util.Arrays.copyOfRange(hl, l.seqStart()[1] * h, (l.seqStart()[1] + 20) * h);
            assertArrayEquals(alone, inBatch, "sequence 1 padded in a batch vs alone");
        }
    }

    static void fastAgreesWithReference(Path dir) {
        DeepseekV3Model m = DeepseekV3Model.load(dir);
        // 100 tokens: positions past original_max_position_embeddings (64) so YaRN's blend matters; with the 200-token
        // one, 318 rows: more than a GEMM block (256 rows) of keys and values expanded from the latents.
        List<int[]> seqs = prompts(m.vocabSize(), 3, 1, 17, 100, 200);
        List<SequenceScore> fast;
        List<SequenceScore> ref;
        try (CpuOps ops = new CpuOps(2)) {
            fast = score(m, ops, seqs);
        }
        // the plain loops of HostDevice, which hold the weights as it loads them, not through CpuDevice's kernels
        try (GpuModel plain = GpuModel.load(ModelWeights.open(dir), new HostDevice(), GemmPrecision.FP32)) {
            List<ScoreRequest> reqs = new ArrayList<>();
            for (int[] s : seqs) {
                reqs.add(new ScoreRequest(s, 1, 4, LogitsMode.LAST));
            }
            ref = new Scorer(plain).score(reqs);
        }
        double maxD = 0;
        for (int i = 0; i < seqs.size(); i++) {
            float[] a = fast.get(i).tokenLogprobs();
            float[] b = ref.get(i).tokenLogprobs();
            for (int k = 1; k < a.length; k++) {
                maxD = Math.max(maxD, Math.abs(a[k] - b[k]));
            }
            float[] la = fast.get(i).logits()[0];
            float[] lb = ref.get(i).logits()[0];
            for (int v = 0; v < la.length; v++) {
                maxD = Math.max(maxD, Math.abs(la[v] - lb[v]));
            }
            assertArrayEquals(ref.get(i).argmax(), fast.get(i).argmax(), dir.getFileName() + ": argmax, sequence " + i);
        }
        assertTrue(maxD < 1e-4, dir.getFileName() + ": fast vs reference max |d| " + maxD);
    }

    @Test
    void fastAgreesWithReferenceBf16() {
        fastAgreesWithReference(DemoModels.tinyBf16());
    }

    @Test
    void fastAgreesWithReferenceWithoutQLora() {
        fastAgreesWithReference(DemoModels.tinyNoQLora());
    }

    @Test
    void fastAgreesWithReferenceFp8() {
        fastAgreesWithReference(DemoModels.tinyFp8());
    }

    @Test
    void fastAgreesWithReferenceInt4() {
        fastAgreesWithReference(DemoModels.tinyInt4());
    }

    @Test
    void fastAgreesWithReferenceFp8CompressedTensors() {
        fastAgreesWithReference(DemoModels.tinyFp8Ct());
    }

    /** Same seed, FP8 vs BF16: the FP8 model is a close but not identical quantisation of the same weights. */
    @Test
    void fp8ModelIsAQuantisationOfTheBf16One() {
        DeepseekV3Model bf16 = DeepseekV3Model.load(DemoModels.tinyBf16());
        DeepseekV3Model fp8 = DeepseekV3Model.load(DemoModels.tinyFp8());
        List<int[]> seqs = prompts(bf16.vocabSize(), 5, 12);
        try (CpuOps ops = new CpuOps(2)) {
            float[] a = score(bf16, ops, seqs).get(0).logits()[0];
            float[] b = score(fp8, ops, seqs).get(0).logits()[0];
            double dot = 0;
            double na = 0;
            double nb = 0;
            for (int v = 0; v < a.length; v++) {
                dot += a[v] * b[v];
                na += a[v] * a[v];
                nb += b[v] * b[v];
            }
            double cosine = dot / Math.sqrt(na * nb);
            assertTrue(cosine > 0.95, "logit cosine " + cosine);
            assertNotEquals(a[0], b[0]);
        }
    }

    @Test
    void lengthOnePromptHasNoScoredTokenButHasLogits() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        try (CpuOps ops = new CpuOps(2)) {
            SequenceScore s = new Scorer(m.on(ops))
                    .score(List.of(new ScoreRequest(new int[] {42}, 1, 2, LogitsMode.LAST)))
                    .get(0);
            assertEquals(0, s.numScored());
            assertTrue(Double.isNaN(s.perplexity()));
            assertEquals(m.vocabSize(), s.logits()[0].length);
            assertTrue(Float.isNaN(s.tokenLogprobs()[0]));
        }
    }

    @Test
    void continuationScoresOnlyItsTokensAndMatchesFullScoring() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        List<int[]> seqs = prompts(m.vocabSize(), 21, 10, 6);
        try (CpuOps ops = new CpuOps(2)) {
            Scorer scorer = new Scorer(m.on(ops));
            SequenceScore cont = scorer.score(
                            List.of(ScoreRequest.continuation(seqs.get(0), seqs.get(1), 0, LogitsMode.NONE)))
                    .get(0);
            int[] all = new int[16];
            System.arraycopy(seqs.get(0), 0, all, 0, 10);
            System.arraycopy(seqs.get(1), 0, all, 10, 6);
            SequenceScore full = scorer.score(List.of(ScoreRequest.of(all))).get(0);
            assertEquals(6, cont.numScored());
            double sum = 0;
            for (int k = 0; k < 16; k++) {
                if (k < 10) {
                    assertTrue(Float.isNaN(cont.tokenLogprobs()[k]), "prompt token " + k + " is not scored");
                } else {
                    assertEquals(full.tokenLogprobs()[k], cont.tokenLogprobs()[k], 0f);
                    sum += full.tokenLogprobs()[k];
                }
            }
            assertEquals(sum, cont.sumLogprob(), 1e-5); // the sum is of the unrounded (double) log-probs
            assertEquals(Math.exp(-sum / 6), cont.perplexity(), cont.perplexity() * 1e-6);
        }
    }

    @Test
    void tokenOutsideVocabularyIsRejected() {
        DeepseekV3Model m = DeepseekV3Model.load(DemoModels.tinyBf16());
        try (CpuOps ops = new CpuOps(1)) {
            IllegalArgumentException e = assertThrows(
                    IllegalArgumentException.class,
                    () -> hidden(m, ops, PackedBatch.of(List.of(new int[] {1, m.vocabSize()})), null));
            assertTrue(e.getMessage().contains("outside the vocabulary"), e.getMessage());
        }
    }

    /**
     * From a padded [B, T] batch with an attention mask (1 = token, 0 = padding), left or right padded as
     * Hugging Face batches are: padding is dropped and positions count real tokens only.
     */
    private static PackedBatch fromPadded(int[][] inputIds, int[][] attentionMask) {
        List<int[]> seqs = new ArrayList<>();
        for (int b = 0; b < inputIds.length; b++) {
            int n = 0;
            for (int m : attentionMask[b]) {
                n += m;
            }
            int[] s = new int[n];
            int k = 0;
            for (int t = 0; t < inputIds[b].length; t++) {
                if (attentionMask[b][t] != 0) {
                    s[k++] = inputIds[b][t];
                }
            }
            seqs.add(s);
        }
        return PackedBatch.of(seqs);
    }

    /**
     * The final-normed hidden states [T, hidden] of batch on the CPU model, appending to caches (one per sequence, its
     * positions from the cache's length) when not null.
     */
    static float[] hidden(DeepseekV3Model m, CpuOps ops, PackedBatch batch, LatentCache[] caches) {
        float[] out = new float[batch.numTokens() * m.config().hiddenSize()];
        m.on(ops)
                .run(
                        List.of(new GpuStages.Micro(batch, caches == null ? null : new LatentCache[][] {caches}, null)),
                        (micro, last, pass, h) -> last.device().read(h, out, 0, out.length));
        return out;
    }
}
