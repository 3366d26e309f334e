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

    public static DemoPreset named(String name) {
        return switch (name) {
            case "tiny" -> TINY;
            case "small" -> SMALL;
            default -> throw new IllegalArgumentException("unknown preset '" + name + "' (tiny, small)");
        };
    }
}
