package dev.scorch.engine.demo;

/** Shapes of the built-in demo models. {@code small} is the benchmark model every speed figure uses. */
public record DemoPreset(
        String name,
        int vocabSize,
        int hiddenSize,
        int numHiddenLayers,
        int firstKDenseReplace,
        int numAttentionHeads,
        int qLoraRank,
        int kvLoraRank,
        int qkNopeHeadDim,
        int qkRopeHeadDim,
        int vHeadDim,
        int intermediateSize,
        int nRoutedExperts,
        int numExpertsPerTok,
        int moeIntermediateSize,
        int nSharedExperts,
        int nGroup,
        int topkGroup,
        double ropeFactor,
        int originalMaxPositionEmbeddings,
        int maxPositionEmbeddings,
        long maxShardBytes) {

    /** Fast tests: dims above and below 128 so FP8 has whole and partial blocks; two expert groups. */
    public static final DemoPreset TINY =
            new DemoPreset("tiny", 512, 192, 3, 1, 4, 64, 32, 16, 8, 16, 320, 8, 2, 96, 1, 2, 1, 32, 64, 2048, 600_000);

    /** The benchmark model (about 281M parameters, 0.56 GB in BF16). */
    public static final DemoPreset SMALL = new DemoPreset(
            "small",
            32768,
            1024,
            8,
            1,
            16,
            384,
            256,
            64,
            32,
            64,
            2816,
            32,
            4,
            256,
            1,
            1,
            1,
            32,
            4096,
            131072,
            200L << 20);

    /** Kimi K2's widths with {@link #K2_LAYERS_DEFAULT_LAYERS} layers and {@link #K2_LAYERS_DEFAULT_EXPERTS} experts. */
    public static final int K2_LAYERS_DEFAULT_LAYERS = 3;

    public static final int K2_LAYERS_DEFAULT_EXPERTS = 16;

    /**
     * Kimi K2's exact widths (Kimi-K2-Instruct's config.json: hidden 7168, 64 heads, q_lora_rank 1536, kv_lora_rank 512,
     * qk_nope 128, qk_rope 64, v_head 128, intermediate 18432, moe_intermediate 2048, top-8 of one group, one shared
     * expert, vocab 163840, YaRN factor 32 over 4096) with layers layers (the first dense, the rest MoE) and experts routed
     * experts instead of 61 and 384: every GEMM keeps its real shape, the model fits one machine.
     */
    public static DemoPreset k2Layers(int layers, int experts) {
        if (layers < 2 || layers > 61) {
            throw new IllegalArgumentException(
                    "k2-layers: --layers " + layers + " must be 2 to 61 (one dense layer, then MoE layers)");
        }
        if (experts < 8 || experts > 384) {
            throw new IllegalArgumentException(
                    "k2-layers: --experts " + experts + " must be 8 (top-8 routing) to 384 (Kimi K2's)");
        }
        return new DemoPreset(
                "k2-layers",
                163840,
                7168,
                layers,
                1,
                64,
                1536,
                512,
                128,
                64,
                128,
                18432,
                experts,
                8,
                2048,
                1,
                1,
                1,
                32,
                4096,
                131072,
                2L << 30);
    }

    public static DemoPreset named(String name) {
        return switch (name) {
            case "tiny" -> TINY;
            case "small" -> SMALL;
            case "k2-layers" -> k2Layers(K2_LAYERS_DEFAULT_LAYERS, K2_LAYERS_DEFAULT_EXPERTS);
            default -> throw new IllegalArgumentException("unknown preset '" + name + "' (tiny, small, k2-layers)");
        };
    }

    /**
     * BOS: the vocabulary's second-to-last id, or 65536 past that. The demo tokenizer holds a few hundred tokens, and a
     * tokenizer file may name ids only up to 65536 past its token count (Tokenizers' bound on hostile files): at Kimi K2's
     * 163840 the last ids would be refused.
     */
    public int bosTokenId() {
        return Math.min(vocabSize - 2, 65_536);
    }

    /** EOS: the id after {@link #bosTokenId}. */
    public int eosTokenId() {
        return bosTokenId() + 1;
    }
}
