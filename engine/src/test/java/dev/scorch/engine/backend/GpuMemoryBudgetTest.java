package dev.scorch.engine.backend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.testing.DemoModels;
import dev.scorch.engine.testing.TestModels;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The GPU memory budget of the conformance model (shared/conformance/tiny-k2-bf16: vocab 512, hidden 64, 3 layers of
 * which 1 dense, 4 heads, q_lora 32, kv_lora 16, qk 16 + 8, v 16, intermediate 192, 8 experts of 32, top 2, 1 shared,
 * max positions 2048), computed by hand here, and checked against what {@link HostDevice} allocates for it.
 */
class GpuMemoryBudgetTest {
    static final Path MODEL = TestModels.conformanceModel();
    static final ModelConfig CONFIG = ModelConfig.read(MODEL.resolve("config.json"));

    // Elements by dtype on the device:
    //   embedding and lm_head: 512 x 64 = 32768 each
    //   attention linears per layer: q_a 32x64 = 2048, q_b 96x32 = 3072, kv_a 24x64 = 1536, kv_b 128x16 = 2048,
    //     o_proj 64x64 = 4096: 12800, x 3 layers = 38400
    //   dense MLP (layer 0): 3 x 192 x 64 = 36864; MoE (layers 1, 2): (8 + 1 shared) x 3 x 32 x 64 = 55296 each
    //   -> in the precision's dtype: 32768 + 32768 + 38400 + 36864 + 110592 = 251392
    //   fp32: norms 3 x (64 + 64 + 32 + 16) + 64 = 592; router gates 2 x 8 x 64 = 1024; router biases 2 x 8 = 16: 1632
    static final long PRECISION_ELEMS = 251_392;
    static final long FP32_BYTES = 1_632 * 4;
    static final long EMBEDDING_ELEMS = 32_768;

    @Test
    void weightsKvAndScratchOfTheConformanceModelByHand() {
        GpuMemoryBudget bf16 = GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16, true);
        assertEquals(PRECISION_ELEMS * 2 + FP32_BYTES, bf16.weightBytes()); // 509,312
        assertEquals(509_312, bf16.weightBytes());
        assertEquals(EMBEDDING_ELEMS * 2, bf16.embeddingBytes());
        GpuMemoryBudget fp32 = GpuMemoryBudget.of(CONFIG, GemmPrecision.FP32, true);
        assertEquals(1_012_096, fp32.weightBytes());
        assertEquals(EMBEDDING_ELEMS * 4, fp32.embeddingBytes());

        // KV cache: 3 layers x (kv_lora 16 + rope 8) floats
        assertEquals(288, bf16.kvBytesPerToken());

        // Arena floats per token at the pass's peak (a device that runs one GEMM per expert: one expert row per
        // (token, choice)); each layer's scratch goes back once its output is in x, so only the largest layer's counts:
        //   x and the final norm 2 x 64 = 128, held all pass;
        //   per layer h 64 + attention: qkvA 32 + 16 + 8, q 96, q_a normed 32, latent 16, k_pe 8, kv 128, attn 64, out
        // 64
        //     = 528;
        //   dense: gate | up 384, activation 192, down 64 = 640 -> 1168;
        //   MoE: logits 8, weights 2, y 64, 2 expert rows x (x 64 + gate | up 64 + activation 32 + down 64) = 448,
        //     shared 64 + 32 + 64 = 160: 682 -> 1210, the largest.      Total 128 + 1210 = 1338 floats.
        //   ints: token ids, positions, key starts, key lengths, 2 for tiles = 6; an MoE layer's experts 2, slot rows
        // 2,
        //     slots 2 = 6.                                               Total 12.
        GpuMemoryBudget perExpert = GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16, false);
        assertEquals((1338 + 12) * 4, perExpert.arenaBytesPerToken());
        // A device that batches the experts' GEMMs pads their rows up to 2x: 4 expert rows per token, 4 slot rows.
        assertEquals((1338 + 2 * 224 + 12 + 2) * 4, bf16.arenaBytesPerToken());
        // A logits row: hidden 64 + vocab 512 + 3 stats floats, row id and target ints.
        assertEquals((64 + 512 + 3 + 2) * 4, bf16.logitsBytesPerRow());
        // Takes: x, final out, 5 index vectors = 7; the largest layer's: h + 8 attention + MoE 10 + 3 shared = 22. 29.
        assertEquals(29, bf16.arenaTakes());
        // BF16 GEMM inputs, x2 for growth: widest k per token is intermediate 192, or 4 padded expert rows x hidden 64
        // when
        // batched; parts 1 (bf16), 3 (bf16x3), 0 (fp32).
        assertEquals(2 * 1 * 192 * 2, perExpert.gemmInputBytesPerToken());
        assertEquals(2 * 1 * 256 * 2, bf16.gemmInputBytesPerToken());
        assertEquals(
                2 * 3 * 192 * 2,
                GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16X3, false).gemmInputBytesPerToken());
        assertEquals(0, fp32.gemmInputBytesPerToken());
        // First arena blocks 1Mi floats + 64Ki ints; cos/sin max(4096, 2 x 2048) positions x 8 floats; batched GEMM
        // pointers
        // 2 x 3 arrays x 8 experts x 1 part x 8 bytes.
        long firstBlocksAndCosSin = (1_048_576 + 65_536) * 4 + 4096 * 8 * 4;
        assertEquals(firstBlocksAndCosSin, perExpert.fixedBytes());
        assertEquals(firstBlocksAndCosSin + 384, bf16.fixedBytes());
        assertEquals(131_072, bf16.logitsChunkRows()); // 64Mi floats / 512

        // 1000 tokens, one GEMM per expert, bf16 (one logits chunk of 1000 rows):
        //   2 x (1000 x 5400 + 1000 x 2324 + (29 + 5 takes of a chunk) x 64 x 4) + 1000 x 768 + 4,587,520
        assertEquals(
                2 * (1000L * 5_400 + 1000L * 2_324 + 34 * 256) + 768_000 + 4_587_520, perExpert.activationBytes(1000));
        assertEquals(20_820_928, perExpert.activationBytes(1000));
        assertEquals(509_312 + 20_820_928 + (512L << 20), perExpert.totalBytes(1000));
    }

    /**
     * Routed experts in INT4 groups of 32 (as Kimi K2's): packed words and BF16 scales instead of the precision's dtype,
     * and one dequantised GEMM tile of scratch. Per expert: gate and up [32, 64] each 32 x 8 words x 4 + 32 x 2 scales x 2
     * = 1152 bytes, down [64, 32] 64 x 4 x 4 + 64 x 1 x 2 = 1152: 3456, x 8 experts x 2 layers = 55,296 bytes, where BF16
     * took 16 x 3 x 32 x 64 x 2 = 196,608. The largest tile is an expert's gate_up, 64 x 64 weights.
     */
    @Test
    void int4ExpertsArePackedWordsAndScalesPlusOneTileOfScratch() {
        java.util.function.ToIntFunction<String> experts = name -> name.contains(".experts.") ? 32 : 0;
        GpuMemoryBudget bf16 = GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16, false, experts, name -> false);
        assertEquals(509_312 - 196_608 + 55_296, bf16.weightBytes());
        assertEquals(64 * 64 * 2, bf16.dequantScratchBytes()); // BF16: hi only
        GpuMemoryBudget x3 = GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16X3, false, experts, name -> false);
        assertEquals(509_312 - 196_608 + 55_296, x3.weightBytes()); // packed whatever the precision
        assertEquals(64 * 64 * 4, x3.dequantScratchBytes()); // hi and lo
        GpuMemoryBudget fp32 = GpuMemoryBudget.of(CONFIG, GemmPrecision.FP32, false, experts, name -> false);
        assertEquals(1_012_096 - 2 * 196_608 + 55_296, fp32.weightBytes());
        assertEquals(64 * 64 * 4, fp32.dequantScratchBytes());
        GpuMemoryBudget plain = GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16X3, false);
        assertEquals(0, plain.dequantScratchBytes());
        assertEquals(plain.activationBytes(100) + 64 * 64 * 4, x3.activationBytes(100));

        // A stack that is not all INT4 of one group size is decoded whole: only down_proj stays packed.
        java.util.function.ToIntFunction<String> gateOnly =
                name -> name.contains(".experts.") && !name.endsWith("up_proj.weight") ? 32 : 0;
        java.util.function.ToIntFunction<String> twoGroups =
                name -> name.contains(".experts.") ? name.endsWith("up_proj.weight") ? 16 : 32 : 0;
        long downOnly = 509_312 - 16 * 32 * 64 * 2 + 16 * 1152;
        assertEquals(
                downOnly,
                GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16, false, gateOnly, name -> false)
                        .weightBytes());
        assertEquals(
                downOnly,
                GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16, false, twoGroups, name -> false)
                        .weightBytes());
        assertEquals(
                64 * 32 * 2,
                GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16, false, twoGroups, name -> false)
                        .dequantScratchBytes());
    }

    @Test
    void theLargestBatchThatFitsIsTheLastTokenCountWhoseTotalFits() {
        GpuMemoryBudget b = GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16, true);
        for (int t : new int[] {1, 7, 1000, 4096, 123_457}) {
            long exact = b.totalBytes(t);
            assertEquals(t, b.maxBatchTokens(exact), "exactly enough for " + t);
            assertEquals(t, b.maxBatchTokens(b.totalBytes(t + 1) - 1), "one byte short of " + (t + 1));
            assertEquals(t - 1, b.maxBatchTokens(exact - 1), "one byte short of " + t);
            long beside = exact - b.weightBytes();
            assertEquals(t, b.maxBatchTokensBesideWeights(beside), "beside loaded weights");
        }
        assertEquals(0, b.maxBatchTokens(b.weightBytes()), "weights alone leave nothing");
        assertEquals(0, b.maxBatchTokens(0));
        assertEquals(0, b.maxBatchTokensBesideWeights(GpuMemoryBudget.DEFAULT_RESERVE_BYTES));
        assertEquals(Integer.MAX_VALUE, b.maxBatchTokens(Long.MAX_VALUE));
    }

    /** A report as bin/scorch gpu-budget makes one: weights, scratch for the batch and reserve against the GPU. */
    private static GpuMemoryBudget.Report report(GpuMemoryBudget b, long total, long pool, long reserve, int tokens) {
        return new GpuMemoryBudget.Report(b.weightBytes(), b.activationBytes(tokens), tokens, reserve, total, pool);
    }

    @Test
    void reportStatesTheArithmeticAndWhetherItFits() {
        GpuMemoryBudget b = GpuMemoryBudget.of(CONFIG, GemmPrecision.FP32, true);
        long gib = 1L << 30;
        GpuMemoryBudget.Report ok = report(b, 80 * gib, 24 * gib, gib, 4096);
        assertTrue(ok.fits());
        assertEquals(80 * gib - 24 * gib - b.weightBytes() - b.activationBytes(4096) - gib, ok.headroomBytes());
        assertTrue(ok.line().startsWith("engine needs 0.00 GiB weights + "), ok.line());
        assertTrue(
                ok.line().contains("(4096 tokens) + 1.00 GiB reserve = ")
                        && ok.line().contains("the GPU has 80.00 GiB, the RAPIDS pool" + " takes 24.00 GiB: ")
                        && ok.line().endsWith(" GiB to spare"),
                ok.line());

        // 2,000,000 tokens need 2 x 2e6 x 7,200 + ... = about 27 GiB of scratch: more than 24 - 8 - 1 leaves.
        GpuMemoryBudget.Report shortBy = report(b, 24 * gib, 8 * gib, gib, 2_000_000);
        assertFalse(shortBy.fits());
        String want = String.format(
                java.util.Locale.ROOT,
                "%.2f GiB",
                (b.weightBytes() + b.activationBytes(2_000_000) + gib - 16.0 * gib) / gib);
        assertTrue(
                shortBy.line().contains("(2000000 tokens) + 1.00 GiB reserve = ")
                        && shortBy.line()
                                .contains(
                                        "the GPU has 24.00 GiB," + " the RAPIDS pool takes 8.00 GiB: short by " + want),
                shortBy.line());
    }

    /**
     * What HostDevice allocates when GpuModel.load runs: the budget's weights, or those less exactly the embedding table
     * for a GpuModel that keeps the table on the host (as it did before it was moved onto the device). Today's GpuModel
     * uploads the table, so the two are equal; both are accepted, nothing else.
     */
    @Test
    void weightsMatchWhatHostDeviceAllocates() {
        for (GemmPrecision p : GemmPrecision.values()) {
            HostDevice dev = new HostDevice();
            GpuMemoryBudget b = GpuMemoryBudget.of(CONFIG, p, dev.batchesGroups());
            long before = dev.totalBytes() - dev.freeBytes();
            try (GpuModel m = GpuModel.load(weights(), dev, p)) {
                long loaded = dev.totalBytes() - dev.freeBytes() - before;
                long measuredWeights =
                        loaded - m.stage().scratchBytes(); // the arenas' first blocks are scratch, not weights
                assertEquals(m.stage().weightBytes(), measuredWeights, p.name());
                long diff = b.weightBytes() - measuredWeights;
                assertTrue(
                        diff == 0 || diff == b.embeddingBytes(),
                        p + ": budget " + b.weightBytes() + ", HostDevice " + measuredWeights);
            }
        }
    }

    /**
     * The scratch HostDevice holds after scoring passes (arena blocks, held until the next forward, and the cos/sin
     * table) stays within the budget's activation bytes, also when a bigger batch follows a smaller one and the arena
     * grows. HostDevice has no BF16 GEMM input scratch; that part of the budget is CUDA's.
     */
    @Test
    void scratchOfRealPassesStaysWithinTheBudget() {
        scratchStaysWithinTheBudget(weights(), GemmPrecision.BF16);
    }

    /**
     * The INT4 demo (routed experts in INT4 groups, as config.json's quantization_config says): the budget counts them
     * packed, as HostDevice holds them, and its scratch includes the dequantised tile of the largest (an expert's
     * gate_up, 2 x 96 rows x 192).
     */
    @Test
    void int4ExpertsOfTheDemoAsConfigJsonDeclaresThem() {
        ModelWeights w = ModelWeights.open(DemoModels.tinyInt4());
        for (GemmPrecision p : new GemmPrecision[] {GemmPrecision.BF16, GemmPrecision.BF16X3}) {
            GpuMemoryBudget b = GpuMemoryBudget.of(w.config(), p, false);
            assertEquals(192 * 192 * (p == GemmPrecision.BF16 ? 2 : 4), b.dequantScratchBytes(), p.name());
            HostDevice dev = new HostDevice();
            try (GpuModel m = GpuModel.load(w, dev, p)) {
                assertEquals(b.weightBytes(), m.stage().weightBytes(), p.name());
            }
            scratchStaysWithinTheBudget(w, p);
        }
    }

    /**
     * Routed experts in FP8 128 x 128 blocks: codes (a byte a weight), one fp32 scale per block and a scale-row index per
     * row instead of the precision's dtype, and one dequantised GEMM tile of scratch. Per expert: gate and up [32, 64]
     * each 2048 + 1 x 4 + 32 x 4 = 2180 bytes, down [64, 32] 2048 + 4 + 64 x 4 = 2308: 6668, x 8 experts x 2 layers =
     * 106,688 bytes, where BF16 took 196,608. The largest tile is an expert's gate_up, 64 x 64 weights: 6 bytes a weight
     * in BF16X3 (three BF16 parts), 4 in FP32 and BF16X2, 2 in BF16.
     */
    @Test
    void fp8ExpertsAreCodesAndBlockScalesPlusOneTileOfScratch() {
        java.util.function.ToIntFunction<String> noInt4 = name -> 0;
        java.util.function.Predicate<String> experts = name -> name.contains(".experts.");
        for (GemmPrecision p : GemmPrecision.values()) {
            GpuMemoryBudget b = GpuMemoryBudget.of(CONFIG, p, false, noInt4, experts);
            long dense = p == GemmPrecision.FP32 ? 2 * 196_608 : 196_608;
            assertEquals(
                    GpuMemoryBudget.of(CONFIG, p, false).weightBytes() - dense + 106_688, b.weightBytes(), p.name());
            int perWeight = switch (p) {
                case BF16 -> 2;
                case BF16X2, FP32 -> 4;
                case BF16X3 -> 6;
            };
            assertEquals(64 * 64 * perWeight, b.dequantScratchBytes(), p.name());
        }
        // A stack that is not all FP8 is decoded whole: only down_proj stays as codes.
        java.util.function.Predicate<String> gateOnly =
                name -> name.contains(".experts.") && !name.endsWith("up_proj.weight");
        assertEquals(
                509_312 - 16 * 32 * 64 * 2 + 16 * 2308,
                GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16, false, noInt4, gateOnly)
                        .weightBytes());
        // An FP8 kv_b_proj [128, 16] is held a second time in fp32 for the absorbed decode.
        java.util.function.Predicate<String> kvB = name -> name.endsWith("kv_b_proj.weight");
        assertEquals(
                509_312 + 3 * (-2048 * 2 + 2048 + 4 + 128 * 4 + 2048 * 4),
                GpuMemoryBudget.of(CONFIG, GemmPrecision.BF16, false, noInt4, kvB)
                        .weightBytes());
    }

    /**
     * The FP8 demos (DeepSeek's quant_method fp8, every linear FP8; compressed-tensors float-quantized, q_a_proj and
     * kv_a_proj_with_mqa left BF16), as config.json declares them: the budget counts what HostDevice holds, and its
     * scratch includes the dequantised tile of the largest (the dense layer's gate_up, 2 x 320 rows x 192).
     */
    @Test
    void fp8LinearsOfTheDemosAsConfigJsonDeclaresThem() {
        for (Path dir : List.of(DemoModels.tinyFp8(), DemoModels.tinyFp8Ct())) {
            ModelWeights w = ModelWeights.open(dir);
            for (GemmPrecision p : new GemmPrecision[] {GemmPrecision.BF16, GemmPrecision.BF16X3, GemmPrecision.FP32}) {
                GpuMemoryBudget b = GpuMemoryBudget.of(w.config(), p, false);
                assertEquals(
                        640 * 192 * (p == GemmPrecision.BF16 ? 2 : p == GemmPrecision.BF16X3 ? 6 : 4),
                        b.dequantScratchBytes(),
                        dir + " " + p);
                HostDevice dev = new HostDevice();
                try (GpuModel m = GpuModel.load(w, dev, p)) {
                    assertEquals(b.weightBytes(), m.stage().weightBytes(), dir + " " + p);
                }
            }
            scratchStaysWithinTheBudget(w, GemmPrecision.BF16X3);
        }
    }

    static void scratchStaysWithinTheBudget(ModelWeights w, GemmPrecision p) {
        HostDevice dev = new HostDevice();
        GpuMemoryBudget b = GpuMemoryBudget.of(w.config(), p, dev.batchesGroups());
        try (GpuModel m = GpuModel.load(w, dev, p)) {
            Scorer scorer = new Scorer(m);
            Random r = new Random(7);
            long held = dev.totalBytes() - dev.freeBytes();
            for (int tokens : new int[] {300, 600, 1000}) {
                List<ScoreRequest> reqs = new ArrayList<>();
                for (int s = 0; s < tokens / 50; s++) {
                    int[] ids = new int[50];
                    for (int i = 0; i < ids.length; i++) {
                        ids[i] = r.nextInt(w.config().vocabSize());
                    }
                    reqs.add(new ScoreRequest(ids, 1, 0, LogitsMode.NONE));
                }
                scorer.score(reqs);
                long scratch = dev.totalBytes() - dev.freeBytes() - m.stage().weightBytes();
                long budget = b.activationBytes(tokens) - (long) tokens * b.gemmInputBytesPerToken();
                System.out.printf(
                        "HostDevice scratch after %d tokens: %,d bytes; budget %,d (%.2fx)%n",
                        tokens, scratch, budget, (double) budget / scratch);
                assertTrue(
                        scratch <= budget,
                        tokens + " tokens: HostDevice holds " + scratch + " bytes of scratch, budget " + budget);
                assertTrue(scratch >= held - m.stage().weightBytes(), "scratch never shrinks below the first blocks");
            }
        }
    }

    static ModelWeights weights() {
        return new ModelWeights(Checkpoint.open(MODEL), CONFIG);
    }
}
