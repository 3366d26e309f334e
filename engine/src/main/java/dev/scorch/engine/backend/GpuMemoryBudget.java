package dev.scorch.engine.backend;

import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.QuantizationConfig;
import dev.scorch.engine.device.DequantPlan;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.model.KvCache;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.function.Predicate;
import java.util.function.ToIntFunction;

/**
 * GPU memory of one scoring {@code GpuModel}, counted from the code that allocates it, so a task can size its
 * batches to the device and a cluster config can be checked before a job runs. All figures are bytes.
 *
 * <p><b>Weights</b>: every tensor of {@link WeightLayout} as {@code GpuModel.load} uploads it: linears, lm_head and
 * the token embedding table [vocab, hidden] in the precision's dtype ({@link GemmPrecision#weightBytes}); the MoE
 * router gate always fp32; norms and the router bias fp32. INT4 linears (a checkpoint's compressed-tensors groups;
 * the routed experts of Kimi K2) stay packed ({@code PackedInt4}): 4 bits a weight in int32 words, ceil(in / 8) a
 * row, plus one scale per group, counted as BF16 (2 bytes: published checkpoints' scales; F16 or F32 scales that are
 * not BF16 values are held in fp32, 2 bytes more each). A stacked pair (gate_proj with up_proj, q_a_proj with
 * kv_a_proj_with_mqa) stays packed only when both are INT4 of one group size, else both are decoded. FP8 block
 * linears stay as their codes ({@code PackedFp8}): 1 byte a weight (rounded up to whole 4-byte words per weight), one
 * fp32 scale per block (ceil(out / blockRows) x ceil(in / blockCols), an upper bound: rows whose scales equal the row
 * before's share them) and a 4-byte scale-row index per row; a stack stays packed only when both are FP8. Which linears
 * are FP8 is config.json's say: compressed-tensors' targets, and under DeepSeek's quant_method fp8 every linear of the
 * decoder layers (as DeepSeek-V3/R1 and Kimi-K2-Instruct publish them; the router gate, embedding and lm_head BF16).
 * A packed kv_b_proj (INT4 or FP8) is held a second time in fp32 for the absorbed decode ({@code MlaAttention}).
 *
 * <p><b>Scratch</b> of one scoring forward ({@code GpuModel.forward} then {@code Scorer}'s logits, no KV cache):
 * <ul>
 *   <li>Arena floats and ints per batch token, counted take by take: what the whole pass holds (the residual stream,
 *       the batch's indices, the final norm) plus the largest layer's scratch, since each layer's goes back once its
 *       output is added in. Attention keys are the batch's own tokens. Logits rows: one chunk of
 *       {@link #LOGITS_CHUNK_FLOATS} at a time ({@code Scorer} gives each back once read).</li>
 *   <li>{@link #ARENA_GROWTH} times that: a pass that outgrows the arena's block keeps it while it adds blocks, and
 *       only the next forward merges them into one.</li>
 *   <li>The arena's first blocks (held from load), 64-element alignment of every take, and the YaRN cos/sin table
 *       (it doubles as positions grow: at most 2 x max_position_embeddings rows).</li>
 *   <li>MoE expert rows: one per (token, choice), or up to twice that when the device batches the experts' GEMMs
 *       (their groups are padded to a uniform stride).</li>
 *   <li>CUDA's BF16 GEMM input scratch: the precision's BF16 parts ({@link GemmPrecision#inputParts}) of the largest
 *       GEMM input [rows, k], grown by doubling (so up to twice that); and the batched GEMMs' pointer arrays.</li>
 * </ul>
 * <p><b>Dequantisation scratch</b> (one buffer, grown to the largest need): one GEMM tile of the largest packed weight
 * (stacked), at most {@code DequantPlan.TILE_ELEMS} weights. INT4: 4 bytes a weight (fp32, or BF16 hi and lo), 2 in
 * BF16 mode. FP8: 4 in FP32 and BF16X2, 2 in BF16, 6 in BF16X3 (three BF16 parts: fp32 scales; BF16 scales need 4).
 * <p><b>Reserve</b>: the CUDA context and cuBLAS workspaces, which no allocation of ours shows ({@link #DEFAULT_RESERVE_BYTES}).
 *
 * <p>KV caches are not used when scoring; {@link #kvBytesPerToken} is there for generation.
 *
 * @param precision               the GEMM precision the model is loaded in
 * @param weightBytes             device bytes of every weight, the embedding table included
 * @param embeddingBytes          the token embedding table's part of weightBytes
 * @param kvBytesPerToken         one cached token's bytes over all layers ({@link KvCache#bytesPerToken(ModelConfig)})
 * @param arenaBytesPerToken      arena floats and ints one batch token holds at the pass's peak (before {@link #ARENA_GROWTH})
 * @param logitsBytesPerRow       arena bytes of one logits row: gathered hidden row, logits, stats, row id and target
 * @param gemmInputBytesPerToken  CUDA's BF16 GEMM input scratch per token of the largest GEMM input (growth included)
 * @param arenaTakes              arena takes held at the peak, a logits chunk's excepted (each may waste up to 64 elements)
 * @param fixedBytes              the arenas' first blocks, the cos/sin table's largest size, batched GEMM pointer arrays
 * @param logitsChunkRows         logits rows the Scorer computes per chunk (5 more arena takes per chunk)
 * @param dequantScratchBytes     the INT4 and FP8 dequantisation scratch (0 without packed weights)
 */
public record GpuMemoryBudget(
        GemmPrecision precision,
        long weightBytes,
        long embeddingBytes,
        long kvBytesPerToken,
        long arenaBytesPerToken,
        long logitsBytesPerRow,
        long gemmInputBytesPerToken,
        long arenaTakes,
        long fixedBytes,
        int logitsChunkRows,
        long dequantScratchBytes) {

    /** Device bytes of one INT4 group scale (BF16, as published checkpoints store them). */
    static final long INT4_SCALE_BYTES = 2;

    /** Device bytes of one FP8 block scale and of one row's scale-row index. */
    static final long FP8_SCALE_BYTES = 4;

    static final long FP8_SCALE_ROW_BYTES = 4;

    /** CUDA context, cuBLAS handle and workspaces, and allocator slack: memory the engine uses but never allocates itself. */
    public static final long DEFAULT_RESERVE_BYTES = 512L << 20;

    /** As {@code GpuStages.LOGITS_CHUNK_FLOATS} (package-private there; a test in dev.scorch.engine.device keeps them equal). */
    public static final int LOGITS_CHUNK_FLOATS = 64 << 20;

    /** The arena's worst growth over one pass: its old block plus new ones until the next forward merges them. */
    public static final int ARENA_GROWTH = 2;

    /** As GpuModel's arenas: their first blocks (floats, ints) and the alignment of every slice, in elements. */
    static final long ARENA_FIRST_FLOATS = 1 << 20;

    static final long ARENA_FIRST_INTS = 1 << 16;
    static final long ARENA_ALIGN = 64;
    /** As GpuModel.ensureCosSin: the smallest cos/sin table, in positions. */
    static final int COS_SIN_MIN_POSITIONS = 4096;

    private static final long F = Float.BYTES; // every activation and index element is 4 bytes
    private static final double GIB = 1024.0 * 1024 * 1024;

    /**
     * The budget of config's model loaded in precision on a device whose {@code Device.batchesGroups()} is
     * batchesGroups: such a device gets the routed experts' rows padded to a uniform stride, up to twice the
     * (token, expert) pairs.
     */
    public static GpuMemoryBudget of(ModelConfig c, GemmPrecision precision, boolean batchesGroups) {
        return of(c, precision, batchesGroups, int4GroupSizes(c), fp8Linears(c));
    }

    /**
     * Which linear weights of config's checkpoint are FP8 blocks, by name: under compressed-tensors float-quantized the
     * modules its group quantizes (the validator holds the checkpoint to it); under DeepSeek's quant_method fp8, whose
     * FP8 linears are known by their dtype only, every linear of the decoder layers (as published checkpoints have them;
     * a checkpoint with BF16 ones among them holds more than this budget counts).
     */
    static Predicate<String> fp8Linears(ModelConfig c) {
        QuantizationConfig q = c.quantization();
        if (q == null || q.scheme() != QuantizationConfig.Scheme.FP8_BLOCK) {
            return name -> false;
        }
        if (!q.compressedTensors()) {
            Map<String, WeightLayout.Kind> kinds = new HashMap<>();
            for (WeightLayout.Spec s : WeightLayout.of(c)) {
                kinds.put(s.name(), s.kind());
            }
            return name -> kinds.get(name) == WeightLayout.Kind.LINEAR;
        }
        return name -> {
            String module = name.endsWith(".weight") ? name.substring(0, name.length() - ".weight".length()) : name;
            return q.quantizes(c.checkpointName(module), true);
        };
    }

    /**
     * Which linear weights of config's checkpoint are INT4 groups, by name: their group size, else 0. They are the
     * modules config.json's compressed-tensors pack-quantized group quantizes (the validator holds the checkpoint to it).
     */
    static ToIntFunction<String> int4GroupSizes(ModelConfig c) {
        if (!c.isInt4()) {
            return name -> 0;
        }
        QuantizationConfig q = c.quantization();
        return name -> {
            String module = name.endsWith(".weight") ? name.substring(0, name.length() - ".weight".length()) : name;
            return q.quantizes(c.checkpointName(module), true) ? q.groupSize() : 0;
        };
    }

    /**
     * As {@link #of(ModelConfig, GemmPrecision, boolean)} for a checkpoint whose INT4 and FP8 linear weights are named
     * otherwise than by its config.json: int4GroupSize gives the group size of a weight by its name (X.weight), 0 for
     * weights that are not INT4; fp8 says which are FP8 blocks of config.json's block size.
     */
    public static GpuMemoryBudget of(
            ModelConfig c,
            GemmPrecision precision,
            boolean batchesGroups,
            ToIntFunction<String> int4GroupSize,
            Predicate<String> fp8) {
        QuantizationConfig q = c.quantization();
        long blockRows = q != null && q.scheme() == QuantizationConfig.Scheme.FP8_BLOCK ? q.blockRows() : 128;
        long blockCols = q != null && q.scheme() == QuantizationConfig.Scheme.FP8_BLOCK ? q.blockCols() : 128;
        // Weights, tensor by tensor, as GpuModel uploads them (stacked projections hold the same elements).
        long weights = 0;
        long embedding = 0;
        long int4Tile = 0;
        long fp8Tile = 0;
        Map<String, WeightLayout.Spec> byName = new HashMap<>();
        for (WeightLayout.Spec s : WeightLayout.of(c)) {
            byName.put(s.name(), s);
        }
        for (WeightLayout.Spec s : WeightLayout.of(c)) {
            boolean linear = s.kind() == WeightLayout.Kind.LINEAR || s.kind() == WeightLayout.Kind.LM_HEAD;
            int group = linear ? int4GroupSize.applyAsInt(s.name()) : 0;
            boolean isFp8 = linear && group == 0 && fp8.test(s.name());
            String partner = stackPartner(s.name(), byName.keySet());
            long stackRows = s.shape()[0];
            if (partner != null) {
                stackRows += byName.get(partner).shape()[0];
                if (int4GroupSize.applyAsInt(partner) != group) {
                    group = 0; // a stack that is not all INT4 of one group size is decoded whole
                }
                if (int4GroupSize.applyAsInt(partner) != 0 || !fp8.test(partner)) {
                    isFp8 = false; // and one that is not all FP8
                }
            }
            long bytes;
            long out = s.shape()[0];
            long in = s.shape()[s.shape().length - 1];
            long tile =
                    Math.min(stackRows, DequantPlan.tileRows((int) Math.min(Integer.MAX_VALUE, stackRows), in)) * in;
            if (group > 0) {
                bytes = out * ((in + 7) / 8) * Integer.BYTES + out * ((in + group - 1) / group) * INT4_SCALE_BYTES;
                int4Tile = Math.max(int4Tile, tile);
            } else if (isFp8) {
                bytes = (out * in + 3) / 4 * Integer.BYTES
                        + (out + blockRows - 1) / blockRows * ((in + blockCols - 1) / blockCols) * FP8_SCALE_BYTES
                        + out * FP8_SCALE_ROW_BYTES;
                fp8Tile = Math.max(fp8Tile, tile);
            } else {
                bytes = s.numel()
                        * switch (s.kind()) {
                            case EMBEDDING, LINEAR, LM_HEAD -> precision.weightBytes();
                            case ROUTER, NORM, ROUTER_BIAS ->
                                Float.BYTES; // the gate is uploaded in fp32; vectors are fp32
                        };
            }
            if ((group > 0 || isFp8) && s.name().endsWith(".kv_b_proj.weight")) {
                bytes += s.numel() * Float.BYTES; // its fp32 copy for the absorbed decode
            }
            weights += bytes;
            if (s.kind() == WeightLayout.Kind.EMBEDDING) {
                embedding = bytes;
            }
        }

        // Arena floats and ints per batch token, and takes per forward (GpuModel.forward / batch / attention / mlp /
        // moe).
        long hidden = c.hiddenSize();
        long heads = c.numAttentionHeads();
        long qHead = c.qHeadDim();
        long qOut = c.hasQLora() ? c.qLoraRank() : heads * qHead; // the q part of the stacked q_a | kv_a GEMM
        long topK = c.numExpertsPerTok();
        long slots = (batchesGroups ? 2 : 1) * topK; // expert rows per token: (token, choice) pairs, padded up to 2x
        long moeInter = c.moeIntermediateSize();
        long sharedInter = moeInter * c.nSharedExperts();
        long floats = 2 * hidden; // x (embedding rows), the final norm's output: held for the whole pass
        long ints =
                4 + 2; // token ids, positions, key starts, key lengths; attention tiles (2 ints each, at most one per
        // token)
        long takes = 2 + 5;
        // attention: qkvA [q_a | latent | k_pe], q, [q_a normed], latent, k_pe, kv of every key (the batch's own
        // tokens),
        // attention out, o_proj out
        long attention = qOut
                + c.kvLoraRank()
                + c.qkRopeHeadDim()
                + heads * qHead
                + (c.hasQLora() ? c.qLoraRank() : 0)
                + c.kvLoraRank()
                + c.qkRopeHeadDim()
                + heads * (c.qkNopeHeadDim() + c.vHeadDim())
                + heads * c.vHeadDim()
                + hidden;
        long attentionTakes = c.hasQLora() ? 8 : 7;
        // A layer's scratch goes back once its output is in x (GpuModel marks and releases the arenas per layer): the
        // pass holds the largest layer's at most.
        long layerFloats = 0;
        long layerInts = 0;
        long layerTakes = 0;
        for (int l = 0; l < c.numHiddenLayers(); l++) {
            long lf = hidden + attention; // h (input norm out, reused for the post-attention norm), attention
            long li = 0;
            long lt = 1 + attentionTakes;
            if (c.isMoeLayer(l)) {
                // router logits, weights, y; per expert row: gathered x, gate | up, activation, down out; shared
                // experts' MLP
                lf += c.nRoutedExperts() + topK + hidden + slots * (2 * hidden + 3 * moeInter);
                li += topK + slots + topK; // experts, token of each slot, slot of each (token, choice)
                lt += 10;
                if (c.nSharedExperts() > 0) {
                    lf += 3 * sharedInter + hidden;
                    lt += 3;
                }
            } else {
                lf += 3L * c.intermediateSize() + hidden; // gate | up, activation, down out
                lt += 3;
            }
            layerFloats = Math.max(layerFloats, lf);
            layerInts = Math.max(layerInts, li);
            layerTakes = Math.max(layerTakes, lt);
        }
        floats += layerFloats;
        ints += layerInts;
        takes += layerTakes;
        long arenaPerToken = (floats + ints) * F;
        long logitsPerRow = (hidden + c.vocabSize() + 3 + 2) * F; // gathered row, logits, stats; row id, target

        // CUDA's BF16 scratch: the precision's parts of the largest GEMM input [m, k]; m is at most the batch's tokens,
        // or
        // its expert rows when the experts' GEMMs run batched over them all.
        long perTokenK = Math.max(
                Math.max(hidden, heads * c.vHeadDim()), Math.max(c.kvLoraRank(), c.hasQLora() ? c.qLoraRank() : 0));
        perTokenK = Math.max(perTokenK, Math.max(c.intermediateSize(), Math.max(moeInter, sharedInter)));
        if (batchesGroups && c.nRoutedExperts() > 0) {
            perTokenK = Math.max(perTokenK, slots * Math.max(hidden, moeInter));
        }
        long gemmInput = 2L * precision.inputParts() * perTokenK * 2; // x2: the scratch grows by doubling
        long batchedPointers = batchesGroups ? 2L * 3 * c.nRoutedExperts() * precision.inputParts() * Long.BYTES : 0;

        long cosSin = (long) Math.max(COS_SIN_MIN_POSITIONS, 2L * c.maxPositionEmbeddings()) * c.qkRopeHeadDim() * F;
        long fixed = (ARENA_FIRST_FLOATS + ARENA_FIRST_INTS) * F + cosSin + batchedPointers;
        int chunkRows = Math.max(1, LOGITS_CHUNK_FLOATS / c.vocabSize());
        long dequantScratch = Math.max(
                int4Tile * (precision == GemmPrecision.BF16 ? 2 : 4), // BF16: hi only; else fp32, or hi and lo
                fp8Tile
                        * switch (precision) {
                            case BF16 -> 2;
                            case BF16X2, FP32 -> 4;
                            case BF16X3 -> 6; // three BF16 parts of W (fp32 scales)
                        });
        return new GpuMemoryBudget(
                precision,
                weights,
                embedding,
                KvCache.bytesPerToken(c),
                arenaPerToken,
                logitsPerRow,
                gemmInput,
                takes,
                fixed,
                chunkRows,
                dequantScratch);
    }

    /** The weight among names that a GPU model stacks name with into one GEMM (Mlp, MlaAttention), or null. */
    static String stackPartner(String name, java.util.Set<String> names) {
        String[][] pairs = {
            {"gate_proj.weight", "up_proj.weight"},
            {"q_a_proj.weight", "kv_a_proj_with_mqa.weight"},
            {"q_proj.weight", "kv_a_proj_with_mqa.weight"}
        };
        for (String[] p : pairs) {
            for (int i = 0; i < 2; i++) {
                if (name.endsWith("." + p[i])) {
                    String partner = name.substring(0, name.length() - p[i].length()) + p[1 - i];
                    if (names.contains(partner)) {
                        return partner;
                    }
                }
            }
        }
        return null;
    }

    /** Device bytes of scratch for scoring batches of up to maxBatchTokens tokens (see the class comment). */
    public long activationBytes(int maxBatchTokens) {
        long t = Math.max(0, maxBatchTokens);
        long chunkRows = Math.min(t, logitsChunkRows); // one logits chunk at a time: each goes back once read
        long arena = t * arenaBytesPerToken + chunkRows * logitsBytesPerRow + (arenaTakes + 5) * ARENA_ALIGN * F;
        return ARENA_GROWTH * arena + t * gemmInputBytesPerToken + fixedBytes + dequantScratchBytes;
    }

    /** Weights, scratch for maxBatchTokens and {@link #DEFAULT_RESERVE_BYTES}. */
    public long totalBytes(int maxBatchTokens) {
        return weightBytes + activationBytes(maxBatchTokens) + DEFAULT_RESERVE_BYTES;
    }

    /**
     * The largest max batch tokens whose {@link #totalBytes} fits in freeBytes (the model not yet loaded); 0 when not
     * even one token's does.
     */
    public int maxBatchTokens(long freeBytes) {
        return largest(freeBytes - weightBytes - DEFAULT_RESERVE_BYTES);
    }

    /**
     * The largest max batch tokens whose scratch and reserve fit in freeBytes beside weights already on the device (a
     * loaded model: pass the device's free bytes plus the scratch the model already holds, which a forward reuses);
     * 0 when not even one token's does.
     */
    public int maxBatchTokensBesideWeights(long freeBytes) {
        return largest(freeBytes - DEFAULT_RESERVE_BYTES);
    }

    /** The largest batch whose scratch fits in bytesForScratch; 0 when not one token's does. */
    int largest(long bytesForScratch) {
        if (activationBytes(1) > bytesForScratch) {
            return 0;
        }
        int lo = 1; // fits
        int hi = Integer.MAX_VALUE;
        if (activationBytes(hi) <= bytesForScratch) {
            return hi;
        }
        while (hi - lo > 1) { // activationBytes(lo) fits, activationBytes(hi) does not
            int mid = (int) (((long) lo + hi) >>> 1);
            if (activationBytes(mid) <= bytesForScratch) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    /** The engine's needs next to what a GPU leaves it (bin/scorch gpu-budget). */
    public record Report(
            long weightBytes,
            long activationBytes,
            int maxBatchTokens,
            long reserveBytes,
            long deviceTotalBytes,
            long rmmPoolBytes) {
        public long neededBytes() {
            return weightBytes + activationBytes + reserveBytes;
        }

        public long availableBytes() {
            return deviceTotalBytes - rmmPoolBytes;
        }

        /** Available minus needed: negative when it does not fit. */
        public long headroomBytes() {
            return availableBytes() - neededBytes();
        }

        public boolean fits() {
            return headroomBytes() >= 0;
        }

        /** The arithmetic, in GiB. */
        public String line() {
            String needs = String.format(
                    Locale.ROOT,
                    "engine needs %s weights + %s activations (%d tokens) + %s reserve = %s; the GPU has %s,"
                            + " the RAPIDS pool takes %s",
                    gib(weightBytes),
                    gib(activationBytes),
                    maxBatchTokens,
                    gib(reserveBytes),
                    gib(neededBytes()),
                    gib(deviceTotalBytes),
                    gib(rmmPoolBytes));
            return needs + (fits() ? ": " + gib(headroomBytes()) + " to spare" : ": short by " + gib(-headroomBytes()));
        }

        @Override
        public String toString() {
            return line();
        }
    }

    static String gib(long bytes) {
        return String.format(Locale.ROOT, "%.2f GiB", bytes / GIB);
    }
}
